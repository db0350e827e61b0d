// `headlab analyze RUN_DIR|CHECKPOINT`: the head analysis of a trained model
// on its run's evaluation batch (or another task, or a data file's sequences): the terminal table and
// heatmaps (--quiet: the verdict's first line), heads.json and report.html, in the run folder or in a
// folder named after the checkpoint file (a snapshot's included); another task or batch than the run's
// goes beside those (analysis-TASK/, analysis-batch-N/), never over them. With --patch, also the interventions:
// mean and resample ablation, and activation patching from the clean batch
// into the task's corrupted one (Task::corrupt), or into the user's own
// (--corrupted FILE, line b of it for line b of --data). A data file is analyzed
// --batch sequences at a time (analysis/analyze_model.h, analyze_chunks),
// with a progress bar on a terminal; a stop signal ends it with nothing written.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>

#include "analysis/attend.h"
#include "analysis/donors.h"
#include "analysis/heads_json.h"
#include "analysis/html_report.h"
#include "analysis/intervention_text.h"
#include "analysis/text_report.h"
#include "core/interrupt.h"
#include "core/shortest.h"
#include "core/threads.h"
#include "train/analysis_chunk.h"
#include "train/analysis_roles.h"
#include "train/checkpoint.h"
#include "train/cli/analysis_input.h"
#include "train/cli/cli.h"
#include "train/cli/progress_bar.h"
#include "train/errors.h"
#include "train/folder_kind.h"
#include "train/input_file.h"
#include "train/run_builder.h"
#include "train/run_folder.h"
#include "train/run_identity.h"
#include "train/patch_corruption.h"
#include "train/session.h"
#include "train/shell_word.h"
#include "train/signals.h"
#include "train/snapshots.h"
#include "train/trainer.h"

namespace headlab::cli {
namespace {

namespace fs = std::filesystem;

struct AnalyzeArgs {
  std::string target, task, out, data, corrupted;  // corrupted: --corrupted FILE
  std::vector<std::string> patterns;  // --pattern offset:K / position:K
  std::vector<std::string> scored_only;  // --scored-only NAME: "attend" patterns scored, not expected
  std::vector<std::string> expect;       // --expect NAME: patterns expected as roles besides the input's
  int64_t batch = 0, example = 0, step = 0;  // step: a snapshot's, if step_given
  int threads = 0;
  std::string gemm;  // empty: the checkpoint's backend
  bool json = false, no_color = false, batch_given = false, step_given = false, patch = false, quiet = false;
  analysis::LabelOptions labels;
};

// Each flag's range (analysis::kLabelFlags): a fraction in [0, 1], or a loss change, finite and 0 or more.
void check_label_options(const analysis::LabelOptions& o) {
  for (const analysis::LabelFlag& f : analysis::kLabelFlags) {
    const double value = o.*f.value;
    if (f.fraction && !(value >= 0 && value <= 1))
      throw train::UsageError(std::string(f.flag) + " must be between 0 and 1, got " + core::shortest(value));
    if (!f.fraction && !(std::isfinite(value) && value >= 0))
      throw train::UsageError(std::string(f.flag) + " must be 0 or more, got " + core::shortest(value));
  }
}

// What an analysis folder's heads.json analyzed: its checkpoint and what it
// read ("analyzed": the task, or "data:FILE").
struct AnalysisOf {
  std::string checkpoint, analyzed;
};

// The folder for heads.json and report.html, when it is not the analyzed
// run's own (--out, or the folder named after a checkpoint file): a new or
// empty one, or one an analysis of the same checkpoint and sequences wrote
// before (marked "analysis"). Never another run's folder, a sweep's, a
// folder of the user's files, or another checkpoint's or file's analysis
// (a loop of runs into one --out would keep only the last): their
// heads.json and report.html are not this analysis's to replace. Checked
// before the analysis runs. `named`: the folder as the messages name it;
// `of`: this analysis, or null when it goes beside `out` (analysis-TASK/).
void check_analysis_out(const std::string& out, const std::string& named, const AnalysisOf* of) {
  std::error_code ec;
  if (!fs::exists(out, ec)) return;
  if (!fs::is_directory(out, ec))
    throw train::UsageError(named + " is a file; give a folder for heads.json and report.html");
  const std::string kind = train::folder_marker(out);
  if (kind == "analysis") {
    if (of == nullptr) return;  // this analysis goes beside it, not into it
    // A heads.json from before these keys were recorded, or none, is replaced as before.
    const std::optional<std::string> text = train::read_regular_file_head((fs::path(out) / "heads.json").string(),
                                                                         std::size_t{1} << 30);
    const nlohmann::json heads = text ? nlohmann::json::parse(*text, nullptr, false) : nlohmann::json();
    const auto recorded = [&](const char* key) {
      return heads.is_object() && heads.contains(key) && heads[key].is_string() ? heads[key].get<std::string>() : "";
    };
    const std::string checkpoint = recorded("checkpoint"), analyzed = recorded("analyzed");
    std::string other;
    if (!checkpoint.empty() && checkpoint != of->checkpoint) other = "of another checkpoint, " + checkpoint;
    else if (!analyzed.empty() && analyzed != of->analyzed) other = "of this checkpoint on " + analyzed;
    if (!other.empty())
      throw train::UsageError(named + " holds the analysis " + other + " (its heads.json), which this one, on " +
                              of->analyzed + ", would replace: give a new folder (or remove " +
                              (fs::path(out) / "heads.json").string() + " to replace it)");
    return;
  }
  if (kind == "run" || fs::exists(fs::path(out) / "checkpoint.safetensors", ec))
    throw train::UsageError(named + " is another run's folder; its heads.json and report.html are its own "
                            "model's: give a new folder (or analyze that run)");
  if (kind == "sweep" || fs::exists(fs::path(out) / "sweep.json", ec))
    throw train::UsageError(named + " is a sweep's folder; give a new folder");
  if (!fs::is_empty(out, ec))
    throw train::UsageError(named + " holds files that are not a headlab analysis's (" +
                            fs::directory_iterator(out, ec)->path().filename().string() +
                            "); give an empty or new folder");
}

// `run_dir`'s checkpoint (at `ck_path`) must be the run's own: another run's
// is refused before anything is written. The file itself, analyzed into a
// folder of its own (--out), is still analyzed. No check without a run_dir.
void check_run_checkpoint(const train::Checkpoint& ck, const std::string& ck_path, const std::string& run_dir) {
  if (run_dir.empty()) return;
  train::check_checkpoint_is_the_folders(
      {run_dir, nullptr}, ck,
      {"", ck_path,
       "Its analysis is not the run's: put back the run's own checkpoint, or analyze the file into a folder of its "
       "own: headlab analyze " + train::shell_word(ck_path) + " --out NEW_FOLDER"});
}

// The rows of one chunk of the analysis, with what its views point into.
struct Chunk {
  train::Batch rows;
  std::vector<int32_t> corrupted;
};

// Appends `more`'s rows to `rows`: what a corruption that pairs each row
// with another one reads for the rows whose partner is beyond the chunk.
void append(train::Batch& rows, const train::Batch& more) {
  rows.batch += more.batch;
  rows.tokens.insert(rows.tokens.end(), more.tokens.begin(), more.tokens.end());
  rows.targets.insert(rows.targets.end(), more.targets.begin(), more.targets.end());
  if (!rows.lengths.empty()) rows.lengths.insert(rows.lengths.end(), more.lengths.begin(), more.lengths.end());
}

// The next-row corruption's donors (analysis/donors.h) of rows [first, first +
// count) that lie beyond them, in the set's order after them. Followed by
// these, the rows' donors within the batch are their donors in the set: a row
// between a row and its donor is shorter, wherever it is.
std::vector<int64_t> donors_beyond(const std::vector<int64_t>& donors, int64_t first, int64_t count) {
  const auto rows = static_cast<int64_t>(donors.size());
  std::vector<int64_t> out;
  for (int64_t b = first; b < first + count; ++b) {
    const int64_t d = donors[static_cast<std::size_t>(b)];
    if (d >= 0 && (d < first || d >= first + count)) out.push_back(d);
  }
  const auto after = [&](int64_t d) { return (d - first - count + rows) % rows; };
  std::sort(out.begin(), out.end(), [&](int64_t a, int64_t b) { return after(a) < after(b); });
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

// The chunks of `input` as the analysis reads them: each with the
// positional `patterns` over its rows, its expected roles as `roles` changes
// them, and, given `corruption`, the corrupted
// tokens for patching: the same rows of `own` (--corrupted's file) when
// given, else the task's corruption drawn from `corruption`.
analysis::ReadChunk chunk_reader(AnalysisInput& input, const std::vector<std::string>& patterns,
                                 const train::RoleChanges& roles, core::Generator* corruption, const AnalysisInput* own) {
  const std::vector<int64_t> donors =
      analysis::next_donors(input.lengths(), input.rows(), analysis::DonorRule::at_least_as_long);
  return [&input, &patterns, &roles, corruption, own, donors](int64_t first, int64_t count, bool corrupted) {
    auto chunk = std::make_shared<Chunk>();
    chunk->rows = input.read(first, count);
    train::Batch& rows = chunk->rows;
    train::change_roles(rows, roles);
    for (const std::string& spec : patterns)
      rows.attend.push_back(analysis::positional_pattern(spec, rows.batch, rows.seq_len, input.model().spec().causal,
                                                         rows.targets, rows.lengths));
    if (corrupted && own != nullptr) {
      chunk->corrupted = own->read(first, count).tokens;
    } else if (corrupted && corruption != nullptr) {
      // Rows that take another row's tokens take the set's, across chunks,
      // as a corruption of all of it at once would.
      train::Batch with = rows;
      for (int64_t d : donors_beyond(donors, first, count)) append(with, input.read(d, 1));
      chunk->corrupted = input.task().corrupt(with, *corruption);
      chunk->corrupted.resize(rows.tokens.size());
    }
    analysis::ExampleChunk views;
    views.examples = train::examples_of(chunk->rows);
    views.corrupted = chunk->corrupted;
    views.storage = chunk;
    return views;
  };
}

// Refuses a positional pattern that gives no query of the whole set a key
// (every sequence shorter than its key, or keys only where no target is): no
// head could be scored on it, as headlab.analyze says of such a pattern.
// A chunk without a key of it is fine: only the whole set counts.
void check_patterns_keyed(AnalysisInput& input, const std::vector<std::string>& patterns,
                          const std::string& sequences) {
  std::vector<bool> keyed(patterns.size(), false);
  for (int64_t first = 0; first < input.rows(); first += input.chunk_rows()) {
    const train::Batch rows = input.read(first, std::min(input.chunk_rows(), input.rows() - first));
    for (std::size_t i = 0; i < patterns.size(); ++i) {
      if (keyed[i]) continue;
      keyed[i] = analysis::positional_pattern(patterns[i], rows.batch, rows.seq_len, input.model().spec().causal,
                                              rows.targets, rows.lengths)
                     .keyed();
    }
  }
  for (std::size_t i = 0; i < patterns.size(); ++i)
    if (!keyed[i])
      throw train::UsageError("--pattern " + patterns[i] + " gives no query a key in the " +
                              std::to_string(input.rows()) + " " + sequences +
                              " (its key lies beyond every sequence, or before it, or only at queries without a "
                              "target), so no head could be scored on it; give another K or leave it out");
}

// --corrupted's file must pair with --data's line for line: as many
// sequences, each as long as its clean one (a corrupted row is real
// wherever its clean row is), as headlab.analyze(corrupted=...) requires.
void check_corrupted_rows(const AnalysisInput& clean, const AnalysisInput& corrupted, const std::string& data,
                          const std::string& file) {
  if (corrupted.rows() != clean.rows())
    throw train::UsageError("--corrupted " + file + " holds " + std::to_string(corrupted.rows()) +
                            " sequences and --data " + data + " " + std::to_string(clean.rows()) +
                            ": give one corrupted line per line of --data, in its order");
  for (int64_t b = 0; b < clean.rows(); ++b) {
    const auto at = static_cast<std::size_t>(b);
    if (corrupted.lengths()[at] == clean.lengths()[at]) continue;
    const auto line = [b](const AnalysisInput& in) { return std::to_string(in.read(b, 1).lines.at(0)); };
    throw train::UsageError("--corrupted " + file + ":" + line(corrupted) + " has " +
                            std::to_string(corrupted.lengths()[at]) + " tokens and its clean sequence, --data " +
                            data + ":" + line(clean) + ", " + std::to_string(clean.lengths()[at]) +
                            ": a corrupted sequence must be exactly as long as its clean one");
  }
}

int run_analyze(const AnalyzeArgs& args) {
  const bool is_dir = fs::is_directory(args.target);
  if (args.step_given && args.step < 0)
    throw train::UsageError("--step must be 0 or more, got " + std::to_string(args.step));
  if (args.step_given && !is_dir)
    throw train::UsageError("--step " + std::to_string(args.step) + " picks a snapshot of a run folder, but " +
                            args.target + " is not a folder");
  const std::string ck_path = args.step_given ? train::find_snapshot(args.target, args.step)
                              : is_dir       ? args.target + "/checkpoint.safetensors"
                                             : args.target;
  if (!fs::exists(ck_path))
    throw train::UsageError(
        train::no_checkpoint(args.target, "give a run folder, a checkpoint file, or a run folder with --step N"));
  // A snapshot's analysis goes beside it (snapshots/step-000500/), never over the run's own.
  const bool snapshot = train::snapshot_step(fs::path(ck_path).filename().string()) >= 0 &&
                        fs::path(ck_path).parent_path().filename() == "snapshots";
  if (args.threads < 0) throw train::UsageError("--threads must be 0 (picked from the model's size) or more");
  if (args.batch_given && args.batch < 1)
    throw train::UsageError("--batch must be at least 1, got " + std::to_string(args.batch));
  if (args.example < 0) throw train::UsageError("--example must be 0 or more, got " + std::to_string(args.example));
  check_label_options(args.labels);
  if (!args.data.empty() && !args.task.empty()) throw train::UsageError("give --task or --data, not both");
  if (!args.corrupted.empty() && args.data.empty())
    throw train::UsageError("--corrupted " + args.corrupted + " needs --data FILE: its line b is line b of that "
                            "file corrupted, as long as it (the run's own batch is corrupted by --patch)");
  check_data_out(args.data, args.out);
  if (!args.data.empty()) train::check_data_path("--data", args.data);
  if (!args.corrupted.empty()) train::check_data_path("--corrupted", args.corrupted);
  train::Checkpoint ck = train::read_checkpoint(ck_path);
  use_threads(args.threads, train_flops_per_step(ck.info.config, ck.model));  // 0: as the run's training would
  use_gemm_backend(args.gemm.empty() ? ck.info.config.gemm : args.gemm);
  // Another task than the run's: its files go beside the run's, never over them.
  const std::string trained_on =
      ck.info.config.data.empty() ? ck.info.config.task : "data:" + ck.info.config.data;
  const bool other_task = !args.task.empty() && args.task != trained_on;
  // So is another batch than the run's evaluation batch: the run's own
  // analysis (of all of it) is never replaced by one of fewer sequences.
  const int64_t run_batch = ck.info.config.eval_batch;
  bool other_batch = args.batch_given && args.data.empty() && args.batch != run_batch;
  // A held-out set smaller than a batch caps it (--eval-fraction, --eval-data):
  // what counts is the sequences read. A --batch that reads the run's own is
  // the run's own analysis; another is named by what it reads.
  int64_t batch_read = args.batch, run_read = run_batch;
  if (other_batch && !other_task) {
    const std::unique_ptr<train::Task> task = train::make_task_for(ck.info.config);
    batch_read = task->eval_rows(args.batch);
    run_read = task->eval_rows(run_batch);
    other_batch = batch_read != run_read;
  }
  // What the model trained with, before --task or --batch stand in for the run's
  // own: the report shows these settings, not the sequences read instead.
  const train::TrainConfig trained = ck.info.config;
  if (!args.task.empty()) {
    ck.info.config.task = args.task;
    ck.info.config.data.clear();
  }
  if (args.batch_given) {
    // Named as analyze's flag here: the run's session below would call it --eval-batch.
    train::check_token_count("--batch", args.batch, ck.model.max_seq_len);
    ck.info.config.eval_batch = args.batch;
  }
  // Their folder beside the run's files: RUN/analysis-TASK, RUN/analysis-batch-N, RUN/analysis-TASK-batch-N.
  std::string beside = other_task ? "analysis-" + args.task : "";
  if (other_batch) beside += (beside.empty() ? "analysis-batch-" : "-batch-") + std::to_string(batch_read);
  // A checkpoint file of its own (an edit saved from Python, a copy), neither
  // a run folder's checkpoint.safetensors nor a snapshot, is analyzed into a
  // folder named after it, beside it (edits/no-L1H0.safetensors:
  // edits/no-L1H0/), so that the analyses of two files in one folder never
  // replace each other. A snapshot's analysis goes into such a folder too
  // (snapshots/step-000500/), and so, as in a run folder, another task's or
  // batch's goes beside that one (snapshots/step-000500/analysis-TASK/).
  const fs::path ck_file(ck_path);
  const std::string named_after_file = (ck_file.parent_path() / ck_file.stem()).string();
  const bool own_file = !is_dir && !snapshot && ck_file.filename() != "checkpoint.safetensors";
  const bool named_folder = own_file || snapshot;  // the analysis's home is the folder named after the file
  const std::string home = named_folder ? named_after_file : is_dir ? args.target : ck_file.parent_path().string();
  const std::string picked = !beside.empty() ? (fs::path(home.empty() ? "." : home) / beside).string() : home;
  const std::string chosen = !args.out.empty() ? args.out : picked;
  const std::string out = chosen.empty() ? "." : chosen;
  std::error_code same_ec;
  // The folder named after a file is never one a run owns: it is checked as any --out.
  const bool own_folder = !named_folder && fs::equivalent(out, home.empty() ? "." : home, same_ec);
  // What this analysis reads, as its heads.json will name it: an analysis
  // folder holding another one's is never replaced by it.
  // As heads.json records them (a path not in UTF-8 with U+FFFD), which they are compared with.
  const AnalysisOf analysis_of{
      train::as_recorded(fs::absolute(ck_path).lexically_normal().string()),
      train::as_recorded(!args.data.empty() ? "data:" + fs::absolute(args.data).lexically_normal().string()
                                            : (!args.task.empty() ? args.task : trained_on))};
  // The folder named after the file is picked as --out is: refused when it
  // is another run's, a sweep's, or the user's.
  if (named_folder && args.out.empty())
    check_analysis_out(home, home + " (the folder named after " + ck_path +
                                 " for its analysis; --out DIR puts it elsewhere)",
                       beside.empty() ? &analysis_of : nullptr);
  // The run folder this analysis takes the checkpoint for the run's of: the
  // folder given as the run (its snapshots in the report), or the one whose
  // heads.json and report.html it replaces (beside the run's metrics).
  check_run_checkpoint(ck, ck_path,
                       is_dir && !args.step_given                                          ? args.target
                       : own_folder && train::folder_marker(out) == "run" ? out
                                                                              : "");
  // --out naming the run itself for what is not its own analysis (a
  // snapshot's, another task's or batch's): said as such, not as another run.
  if (!own_folder && !args.out.empty() && is_dir && fs::equivalent(out, args.target, same_ec))
    throw train::UsageError("--out " + out + " is the run's own folder, whose heads.json and report.html are its "
                            "final model's on its own batch: leave out --out (this analysis then goes to " + picked +
                            ") or give a new folder");
  // The folders analyze picks itself (a snapshot's, another task's) are its own.
  if (!own_folder && !args.out.empty()) check_analysis_out(out, "--out " + out, &analysis_of);
  // The run's own heads.json keeps the roles it trained with (its sweep and report count them).
  if ((!args.scored_only.empty() || !args.expect.empty()) && own_folder && train::folder_marker(out) == "run")
    throw train::UsageError((args.scored_only.empty() ? "--expect " + args.expect.front()
                                                      : "--scored-only " + args.scored_only.front()) +
                            " changes the roles the run's own heads.json expects (those it trained with, which its "
                            "sweep and report count): give --out NEW_FOLDER");
  // The run's training history (its metrics.jsonl: the analyses logged with
  // --analyze-every), for the emergence steps of the table and report.html,
  // wherever they go (--out too): only for the run's final checkpoint on its
  // own task's sequences, which that history measured. A snapshot (the history
  // runs past it), a checkpoint file of its own, --data or another --task has none.
  std::optional<std::vector<nlohmann::json>> history;
  if (!named_folder && !args.step_given && args.data.empty() && !other_task) {
    const train::RunFolder run_folder{home.empty() ? "." : home, nullptr};
    if (fs::is_regular_file(run_folder.metrics(), same_ec)) history = train::read_metrics(run_folder.metrics());
  }
  // The run's own folder is written as its trainer writes it: not while a
  // trainer holds it (its heads.json would be overwritten by the next one).
  std::unique_ptr<train::RunLock> lock;
  if (own_folder && train::folder_marker(out) == "run") lock = std::make_unique<train::RunLock>(out);
  // Another task than the run's is read as eval --task reads it, at its own
  // sizes: a task shorter than the model's positions fits it too.
  const int64_t chunk_rows = args.batch_given ? args.batch : 0;
  AnalysisInput input = !args.data.empty() ? AnalysisInput::of_file(ck, ck_path, args.data, chunk_rows)
                        : other_task       ? AnalysisInput::of_task(ck, ck_path, args.batch_given)
                                           : AnalysisInput::of_run(ck);
  // As headlab.analyze warns: a file without "targets" scores the next token, which this model may never have learned.
  if (!args.data.empty())
    if (const std::string warning = next_token_warning(ck, ck_path, input.task()); !warning.empty())
      std::cerr << "headlab analyze: warning: " << warning << '\n';
  const std::string sequences =
      args.data.empty() ? "sequences of the batch" : "sequences of --data " + args.data;
  // The user's own corrupted sequences: line b of the file corrupts line b of --data.
  std::optional<AnalysisInput> own_corrupted;
  if (!args.corrupted.empty()) {
    try {
      own_corrupted.emplace(AnalysisInput::of_file(ck, ck_path, args.corrupted, input.chunk_rows()));
    } catch (const train::UsageError& e) {
      // Read as a data file, whose rules (a target somewhere, keys in every pattern) are not this file's purpose.
      throw train::UsageError("--corrupted " + args.corrupted + " is read as a --data file, of which only the tokens "
                              "are used (leave out \"targets\" and \"attend\"): " + e.what());
    }
    check_corrupted_rows(input, *own_corrupted, args.data, args.corrupted);
  }
  if (args.example >= input.rows())
    throw train::UsageError("--example " + std::to_string(args.example) + " is beyond the " +
                            std::to_string(input.rows()) + " " + sequences);
  if ((args.patch || !args.corrupted.empty()) && input.rows() < 2)
    throw train::UsageError("--patch needs at least 2 sequences (resample ablation takes another sequence's head "
                            "outputs); " + (args.data.empty() ? std::string("give --batch 2 or more")
                                                              : "--data " + args.data + " holds 1"));
  // Every positional pattern over one row, to refuse a bad one before any work.
  const train::Batch first_row = input.read(0, 1);
  for (std::size_t i = 0; i < args.patterns.size(); ++i) {
    try {
      (void)analysis::positional_pattern(args.patterns[i], 1, first_row.seq_len, input.model().spec().causal,
                                         first_row.targets, first_row.lengths);
    } catch (const std::invalid_argument& e) {
      throw train::UsageError(e.what());
    }
    for (std::size_t j = 0; j < i; ++j)
      if (args.patterns[j] == args.patterns[i]) throw train::UsageError("--pattern " + args.patterns[i] + " is given twice");
    for (const analysis::AttendPattern& p : first_row.attend)
      if (p.name == args.patterns[i])
        throw train::UsageError("--pattern " + args.patterns[i] + " is also an \"attend\" pattern of " +
                                input.source() + "; drop one of them");
  }
  check_patterns_keyed(input, args.patterns, sequences);
  const train::RoleChanges roles{args.scored_only, args.expect};
  {
    // The --pattern's are the rows' patterns too, as the chunks will hold them.
    train::Batch row = first_row;
    for (const std::string& spec : args.patterns)
      row.attend.push_back(analysis::positional_pattern(spec, row.batch, row.seq_len, input.model().spec().causal,
                                                        row.targets, row.lengths));
    train::check_role_changes(roles, row, input.source());
  }
  analysis::AnalysisOptions options;
  options.labels = args.labels;
  options.example = args.example;
  const bool patch = args.patch || own_corrupted.has_value();
  options.interventions = patch;
  if (own_corrupted)
    options.corruption_text = "the user's corrupted sequences of --corrupted " + args.corrupted +
                              ", line for line in place of those of --data " + args.data + ".";
  else if (patch)
    options.corruption_text = input.task().corruption();
  options.chunk_rows = input.chunk_rows();
  AnalysisProgressBar bar(stderr_is_terminal());
  options.progress = [&bar](const analysis::AnalysisProgress& p) { bar.show(p); };
  core::Generator corruption_gen = train::patch_corruption_stream(input.config().seed);
  const analysis::ReadChunk read = chunk_reader(input, args.patterns, roles, patch ? &corruption_gen : nullptr,
                                                own_corrupted ? &*own_corrupted : nullptr);
  // Ctrl-C ends the analysis between two forward passes; nothing is written.
  train::install_stop_handlers();
  const core::InterruptScope stoppable(train::throw_if_stopped);
  analysis::RunAnalysis run = [&] {
    try {
      return analysis::analyze_chunks(input.model(), input.rows(), input.lengths(), read, options);
    } catch (...) {
      bar.clear();
      throw;
    }
  }();
  bar.clear();
  run.analyzed = input.task().name();
  run.step = ck.info.step;

  if (!beside.empty() && args.out.empty()) {
    const std::string of_batch =
        !other_batch               ? ""
        : batch_read < args.batch ? " of " + std::to_string(batch_read) + " sequences (all the run holds out; --batch " +
                                        std::to_string(args.batch) + " asks for more)"
                                   : " of " + std::to_string(batch_read) + " sequences";
    std::cerr << "analyze: "
              << (other_task ? "the run trained on " + trained_on + "; its analysis on " + args.task + of_batch
                             : "the run's own analysis reads its eval batch of " + std::to_string(run_read) +
                                   " sequences; this one" + of_batch)
              << " goes to " << out << " (the " << (snapshot ? "snapshot's" : own_file ? "file's" : "run's")
              << " own heads.json and report.html in " << (home.empty() ? "." : home) << " are kept; --out "
              << (home.empty() ? "." : home) << " replaces them)\n";
  }
  std::error_code ec;
  fs::create_directories(out, ec);
  if (ec) throw train::UsageError("cannot create --out " + out + ": " + ec.message());
  if (!own_folder && train::folder_marker(out).empty()) train::write_folder_marker(out, "analysis");
  // The file's own folder too, when its analysis went beside its heads.json (analysis-TASK/).
  if (named_folder && args.out.empty() && train::folder_marker(home).empty())
    train::write_folder_marker(home, "analysis");
  train::RunFolder folder{out, nullptr};
  train::AnalysisSource source;
  source.history = history;
  // A run folder's report steps through its snapshots as the trainer's does
  // (on the run's own batch: a --data analysis has no snapshots to show).
  if (is_dir && !args.step_given && args.data.empty())
    source.snapshots = train::snapshot_views(args.target, input.batch(), args.example);
  source.edited = ck.info.edited;
  source.checkpoint = fs::absolute(ck_file).lexically_normal().string();
  source.data_file = input.data_record();
  // What the corrupted run read, as the clean file is recorded: its path, size and hash.
  if (own_corrupted) source.data_file["corrupted"] = own_corrupted->data_record();
  // Two files of one folder are told apart by their names, not their folder's ("edits").
  if (own_file) source.title = (fs::absolute(ck_file).parent_path().filename() / ck_file.filename()).string();
  // The run's own sequences (its data files where they were found, for a moved
  // run) at its own eval-batch; another task or file leaves the run's config as
  // its checkpoint recorded it, and the title says what was analyzed instead.
  train::TrainConfig shown = args.data.empty() && !other_task ? input.config() : trained;
  shown.eval_batch = trained.eval_batch;
  source.run_config = train::to_json(shown);
  train::write_analysis_files(folder, run, train::to_json(input.config()), source);
  if (args.json) {
    // heads.json as written, every key of it ("data", "data_file", "checkpoint", ...).
    std::cout << train::read_input(folder.heads(), "the heads.json just written", std::size_t{1} << 30);
  } else {
    analysis::TextOptions text;
    text.color = stdout_is_terminal() && !args.no_color;
    // When each head's label emerged in training, as train's table says (none without a history).
    if (history) text.emerged = analysis::logged_emergence_steps(*history, run);
    if (args.quiet) {
      // The verdict's first line and where everything is.
      const std::string verdict = analysis::verdict_text(run, text);
      std::cout << verdict.substr(0, verdict.find('\n')) << "\nreport: " << folder.report() << "\nheads:  "
                << folder.heads() << '\n';
      return 0;
    }
    std::cout << analysis::text_report(run, text);
    if (patch) std::cout << '\n' << analysis::intervention_table(run);
    std::cout << "\nreport: " << folder.report() << "\nheads:  " << folder.heads() << '\n';
  }
  return 0;
}

}  // namespace

Command add_analyze(CLI::App& app) {
  auto args = std::make_shared<AnalyzeArgs>();
  app.add_option("target", args->target, "a run folder, or a checkpoint file (a snapshot, an edit saved from Python)")
      ->required();
  app.add_option("--step", args->step,
                 "analyze the run's snapshot of this step (train --snapshot-every); the files go to "
                 "RUN/snapshots/step-NNNNNN/ (another --task or --batch: into analysis-TASK/ or analysis-batch-N/ "
                 "there)")
      ->check(in_range<int64_t>())
      ->each([args](const std::string&) { args->step_given = true; });
  app.add_option("--task", args->task,
                 "analyze on this task's batch (default: the run's task); another task than the run's writes into "
                 "RUN/analysis-TASK/ unless --out says where");
  app.add_option("--data", args->data,
                 "analyze on every sequence of this JSONL file (as eval --data reads it), --batch at a time, "
                 "instead; needs --out");
  app.add_option("--pattern", args->patterns,
                 "also score every head on a positional pattern: offset:K (attention on q - K) or position:K "
                 "(attention on position K), at the queries with a target; repeatable");
  app.add_option("--batch", args->batch,
                 "sequences in the analysis batch (default: the run's eval batch; another size writes into "
                 "RUN/analysis-batch-N/ unless --out says where); with --data, sequences analyzed at a time (the "
                 "whole file is, a chunk at a time; default: as many as fit " +
                     std::to_string(static_cast<int>(train::kAnalysisChunkBytes / (1 << 20))) +
                     " MiB by an estimate of what a row holds -- the model's attention, logits and head outputs -- "
                     "at least 1)")
      ->check(in_range<int64_t>())
      ->each([args](const std::string&) { args->batch_given = true; });
  app.add_option("--example", args->example, "which sequence the heatmaps show")
      ->default_val(0)
      ->check(in_range<int64_t>());
  app.add_option("--out", args->out,
                 "where heads.json and report.html go (default: the run folder; for a snapshot "
                 "RUN/snapshots/step-NNNNNN/; for another checkpoint file, a folder named after it beside it: "
                 "edits/no-L1H0/ for edits/no-L1H0.safetensors)");
  app.add_option("--threads", args->threads, "threads (0: picked from the model's size, as train does)")
      ->check(in_range<int>());
  app.add_option("--gemm", args->gemm, "GEMM backend, onednn or openblas (default: the run's)");
  app.add_flag("--json", args->json, "print heads.json instead of the table");
  app.add_flag("--quiet", args->quiet,
               "print only the verdict's first line and where report.html and heads.json are (they hold "
               "everything)");
  app.add_flag("--patch", args->patch,
               "also intervene: mean and resample ablation of each head, and activation patching of each head's "
               "output from the clean batch into the task's corrupted batch (see `headlab tasks`), with the share "
               "of the loss gap it restores");
  app.add_option("--scored-only", args->scored_only,
                 "an \"attend\" pattern of the data file that is scored and may label heads but is no expected role "
                 "(a hypothesis to test, not one the verdict counts); repeatable; needs --out unless the analysis "
                 "is not the run's own");
  app.add_option("--expect", args->expect,
                 "also expect this pattern as a role (a built-in one such as previous-token, an \"attend\" pattern "
                 "of the data, or a --pattern): the verdict says whether a head carries it; repeatable; needs --out "
                 "unless the analysis is not the run's own");
  app.add_option("--corrupted", args->corrupted,
                 "with --data: patch into these sequences instead (line b of this JSONL file is line b of --data "
                 "corrupted, exactly as long; only its tokens are used); implies --patch");
  app.add_flag("--no-color", args->no_color, "no ANSI colours");
  for (const analysis::LabelFlag& f : analysis::kLabelFlags)
    app.add_option(f.flag, args->labels.*f.value, f.help)->default_val(args->labels.*f.value);
  return [args] { return run_analyze(*args); };
}

}  // namespace headlab::cli
