#include "train/cli/analysis_input.h"

#include <filesystem>
#include <limits>

#include "train/errors.h"
#include "train/run_builder.h"

namespace headlab::cli {

AnalysisInput AnalysisInput::of_run(const train::Checkpoint& ck) {
  AnalysisInput in;
  in.session_ = std::make_unique<train::Session>(ck);
  train::check_analysable(in.batch(), in.task().name());
  return in;
}

AnalysisInput AnalysisInput::of_file(const train::Checkpoint& ck, const std::string& ck_path, const std::string& data,
                                     int64_t rows) {
  AnalysisInput in;
  // None of the run's training or held-out sets: the file, all of it (or
  // its first `rows` sequences), with the model's own sizes and classes.
  in.config_ = ck.info.config;
  in.config_.train_size = 0;
  in.config_.train_fraction = 0;
  in.config_.split_seed = -1;
  in.config_.eval_data.clear();
  in.config_.data = std::filesystem::absolute(data).lexically_normal().string();
  in.config_.model = ck.model;
  in.config_.eval_batch = rows > 0 ? rows : std::numeric_limits<int64_t>::max();
  in.task_ = train::make_task_for(in.config_);
  train::check_task_fits(*in.task_, ck.model);
  const int64_t n = in.task_->eval_rows(in.config_.eval_batch);
  train::check_sizes(ck.model, {{"--data", n}});
  in.config_.eval_batch = n;
  in.batch_ = in.task_->eval_batch(n, in.config_.seed);
  // The file's own lengths, not the model's seq-len, decide what can be analyzed.
  train::check_analysable(in.batch_, "--data " + data);
  in.model_ = train::load_model(ck, ck_path);
  in.model_->eval();
  return in;
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
