#include "train/cli/analysis_input.h"

#include <algorithm>
#include <filesystem>
#include <limits>
#include <utility>

#include "train/analysis_chunk.h"
#include "train/data_file.h"
#include "train/errors.h"
#include "train/fixed_sets.h"
#include "train/run_builder.h"
#include "train/run_data.h"

namespace headlab::cli {

AnalysisInput AnalysisInput::of_run(const train::Checkpoint& ck) {
  AnalysisInput in;
  in.session_ = std::make_unique<train::Session>(ck);
  train::check_analysable(in.batch(), in.task().name());
  in.rows_ = in.chunk_rows_ = in.batch().batch;
  in.lengths_ = in.batch().lengths;
  in.source_ = "the batch";
  return in;
}

AnalysisInput AnalysisInput::of_file(const train::Checkpoint& ck, const std::string& ck_path, const std::string& data,
                                     int64_t chunk_rows) {
  AnalysisInput in;
  // None of the run's training or held-out sets: the file, all of it, with
  // the model's own sizes and classes.
  in.config_ = ck.info.config;
  train::drop_fixed_sets(in.config_);
  in.config_.data = std::filesystem::absolute(data).lexically_normal().string();
  in.config_.model = ck.model;
  in.task_ = train::make_task_for(in.config_);
  train::check_task_fits(*in.task_, ck.model);
  in.rows_ = in.task_->eval_rows(std::numeric_limits<int64_t>::max());
  in.config_.eval_batch = in.rows_;
  in.source_ = "--data " + data;
  // A chunk at a time: memory is the chunk's, whatever the file's length.
  // By default as many rows as fit the chunk's memory budget: small models
  // get large chunks, whose fixed cost per chunk is then paid rarely.
  in.chunk_rows_ = std::min(in.rows_, chunk_rows > 0 ? chunk_rows : train::default_analysis_chunk(ck.model));
  try {
    train::check_sizes(ck.model, {{chunk_rows > 0 ? "--batch" : "the default chunk", in.chunk_rows_}});
  } catch (const train::UsageError& e) {
    if (chunk_rows > 0) throw;
    throw train::UsageError(std::string(e.what()) + "; give --batch N to analyze fewer sequences at a time");
  }
  // The file's own lengths, not the model's seq-len, decide what can be
  // analyzed: the lengths of all of it, a chunk at a time.
  train::Batch lengths{0, 0, {}, {}, {}};
  int64_t positions = 0;
  for (int64_t first = 0; first < in.rows_; first += in.chunk_rows_) {
    const train::Batch chunk = in.read(first, std::min(in.chunk_rows_, in.rows_ - first));
    lengths.lengths.insert(lengths.lengths.end(), chunk.lengths.begin(), chunk.lengths.end());
    lengths.lines.insert(lengths.lines.end(), chunk.lines.begin(), chunk.lines.end());
    lengths.batch += chunk.batch;
    positions += std::count_if(chunk.targets.begin(), chunk.targets.end(), [](int32_t t) { return t >= 0; });
  }
  train::check_analysable(lengths, in.source_, data);
  in.lengths_ = std::move(lengths.lengths);
  // What was read, for heads.json: a file appended to meanwhile, or a pipe
  // whose name (/dev/fd/63) says nothing afterwards, is known by these.
  std::error_code ec;
  const train::Task::Fingerprint bytes = in.task_->fingerprint().value_or(train::Task::Fingerprint{});
  in.data_record_ = {{"path", in.config_.data},   {"size", bytes.size},         {"hash", bytes.hash},
                     {"sequences", in.rows_},     {"positions", positions},
                     {"pipe", !std::filesystem::is_regular_file(data, ec)}};
  in.model_ = train::load_model(ck, ck_path);
  in.model_->eval();
  return in;
}

AnalysisInput AnalysisInput::of_task(const train::Checkpoint& ck, const std::string& ck_path, bool batch_given) {
  AnalysisInput in;
  // The config's model as stored (0: the task's default size), so that the
  // task keeps its own sizes; check_task_fits, not the run's session, then
  // says whether the checkpoint's model can read it.
  in.config_ = ck.info.config;
  train::drop_fixed_sets(in.config_);
  in.task_ = train::make_task_for(in.config_);
  train::check_task_fits(*in.task_, ck.model);
  in.rows_ = in.chunk_rows_ = in.task_->eval_rows(in.config_.eval_batch);
  train::check_sizes(ck.model, {{batch_given ? "--batch" : "the checkpoint's eval-batch", in.rows_}});
  in.batch_ = in.task_->eval_slice(0, in.rows_, in.config_.seed);
  in.task_->describe(in.batch_);
  train::check_analysable(in.batch_, in.task_->name());
  in.source_ = "the batch";
  in.lengths_ = in.batch_.lengths;
  in.model_ = train::load_model(ck, ck_path);
  in.model_->eval();
  return in;
}

train::Batch AnalysisInput::read(int64_t first, int64_t count) const {
  if (!session_ && batch_.batch == 0) {
    // Described as a run's session describes its evaluation batch: a data
    // file's "attend" patterns are its expected roles, as in the heads.json
    // of a run trained on the file.
    train::Batch rows = task_->eval_slice(first, count, config_.seed);
    task_->describe(rows);
    return rows;
  }
  const train::Batch& all = batch();
  if (first == 0 && count == all.batch) return all;
  if (first < 0 || count < 1 || first + count > all.batch)
    throw std::invalid_argument("AnalysisInput::read: rows " + std::to_string(first) + " .. " +
                                std::to_string(first + count - 1) + " of a batch of " + std::to_string(all.batch));
  const auto at = [&](const std::vector<int32_t>& v, int64_t per_row) {
    return std::vector<int32_t>(v.begin() + first * per_row, v.begin() + (first + count) * per_row);
  };
  train::Batch out{count, all.seq_len, at(all.tokens, all.seq_len), at(all.targets, all.seq_len),
                   all.lengths.empty() ? std::vector<int32_t>{} : at(all.lengths, 1)};
  for (const analysis::AttendPattern& p : all.attend) out.attend.push_back(analysis::attend_rows(p, first, count));
  out.roles = all.roles;
  out.sources = all.sources;
  if (!all.lines.empty()) out.lines.assign(all.lines.begin() + first, all.lines.begin() + first + count);
  return out;
}

std::string next_token_warning(const train::Checkpoint& ck, const std::string& ck_path, const train::Task& data) {
  const auto* file = dynamic_cast<const train::DataFile*>(&data);
  // Other classes than tokens: a file without "targets" does not fit the model at all.
  if (file == nullptr || file->lines_without_targets() == 0 || ck.model.classes != ck.model.vocab) return "";
  train::Batch own;
  std::string own_task;
  try {
    // The run's own analysis batch, as `headlab analyze RUN` reads it.
    train::TrainConfig config = ck.info.config;
    train::locate_run_data(ck.info, config, train::run_folder_of(ck_path), false);
    const auto task = train::make_task_for(config);
    own = task->eval_batch(config.eval_batch, config.seed);
    own_task = task->name();
  } catch (const std::exception&) {
    return "";  // no batch, no evidence either way
  }
  // Of its targets, those that are not the next token, and the positions the default would score without one.
  int64_t differing = 0, scored = 0, unscored = 0;
  for (int64_t b = 0; b < own.batch; ++b) {
    const int64_t length = own.lengths.empty() ? own.seq_len : own.lengths[static_cast<std::size_t>(b)];
    for (int64_t i = 0; i < own.seq_len; ++i) {
      const int32_t target = own.targets[static_cast<std::size_t>(b * own.seq_len + i)];
      const int32_t next = i + 1 < length ? own.tokens[static_cast<std::size_t>(b * own.seq_len + i + 1)] : -1;
      if (target >= 0) {
        ++scored;
        differing += target != next;
      } else {
        unscored += next >= 0;
      }
    }
  }
  if (differing == 0 && unscored == 0) return "";
  const std::string own_is =
      differing > 0 ? std::to_string(differing) + " of the " + std::to_string(scored) + " targets of this model's own "
                          "task (" + own_task + ") are not the next token, so the numbers measure a prediction it was "
                          "not trained for"
                    : "this model's own task (" + own_task + ") leaves " + std::to_string(unscored) + " of the " +
                          std::to_string(scored + unscored) + " positions the default scores without a target, "
                          "positions it was never trained to predict";
  return "--data " + file->path() + " has no \"targets\" on " + std::to_string(file->lines_without_targets()) +
         " of its " + std::to_string(file->size()) + " lines, which are scored on the next token, but " + own_is +
         "; give those lines their \"targets\" (the run's own are what it learned)";
}

void check_data_out(const std::string& data, const std::string& out) {
  if (data.empty()) return;
  if (out.empty())
    throw train::UsageError("--data " + data + " needs --out DIR: the analysis of the file's sequences goes to a "
                            "folder of its own, never over the run's heads.json (give --out RUN to replace it)");
  if (std::filesystem::exists(out) && !std::filesystem::is_directory(out))
    throw train::UsageError("--out " + out + " is a file; give a folder for heads.json and report.html");
}

}  // namespace headlab::cli
