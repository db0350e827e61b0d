// `headlab analyze RUN_DIR|CHECKPOINT`: the head analysis of a trained model
// on its run's evaluation batch (or another task, or a data file's sequences): the terminal table and
// heatmaps, heads.json and report.html. With --patch, also the interventions:
// mean and resample ablation, and activation patching from the clean batch
// into the task's corrupted one (Task::corrupt).
#include <cmath>
#include <filesystem>
#include <iostream>
#include <memory>

#include "analysis/attend.h"
#include "analysis/heads_json.h"
#include "analysis/intervention_text.h"
#include "analysis/text_report.h"
#include "core/shortest.h"
#include "core/threads.h"
#include "train/checkpoint.h"
#include "train/cli/analysis_input.h"
#include "train/cli/cli.h"
#include "train/errors.h"
#include "train/run_builder.h"
#include "train/run_folder.h"
#include "train/session.h"
#include "train/snapshots.h"
#include "train/trainer.h"

namespace headlab::cli {
namespace {

namespace fs = std::filesystem;

struct AnalyzeArgs {
  std::string target, task, out, data;
  std::vector<std::string> patterns;  // --pattern offset:K / position:K
  int64_t batch = 0, example = 0, step = 0;  // step: a snapshot's, if step_given
  int threads = 0;
  std::string gemm;  // empty: the checkpoint's backend
  bool json = false, no_color = false, batch_given = false, step_given = false, patch = false;
  analysis::LabelOptions labels;
};

// Scores, entropies and JS divergences are fractions in [0, 1]; a loss change is any finite number.
void check_label_options(const analysis::LabelOptions& o) {
  const std::pair<const char*, double> fractions[] = {
      {"--threshold", o.score_threshold}, {"--margin", o.margin}, {"--diffuse-entropy", o.diffuse_entropy}};
  for (const auto& [flag, value] : fractions)
    if (!(value >= 0 && value <= 1))
      throw train::UsageError(std::string(flag) + " must be between 0 and 1, got " + core::shortest(value));
  if (!std::isfinite(o.sink_max_delta_loss) || o.sink_max_delta_loss < 0)
    throw train::UsageError("--sink-delta-loss must be 0 or more, got " + core::shortest(o.sink_max_delta_loss));
}

// The folder --out names for heads.json and report.html, when it is not the
// analyzed run's own: a new or empty one, or one an analysis wrote before
// (marked "analysis"). Never another run's folder, a sweep's, or a folder of
// the user's files: their heads.json and report.html are not this model's to
// replace. Checked before the analysis runs.
void check_analysis_out(const std::string& out) {
  std::error_code ec;
  if (!fs::exists(out, ec)) return;
  if (!fs::is_directory(out, ec))
    throw train::UsageError("--out " + out + " is a file; give a folder for heads.json and report.html");
  const std::string kind = train::folder_marker(out);
  if (kind == "analysis") return;
  if (kind == "run" || fs::exists(fs::path(out) / "checkpoint.safetensors", ec))
    throw train::UsageError("--out " + out + " is another run's folder; its heads.json and report.html are its own "
                            "model's: give a new folder (or analyze that run)");
  if (kind == "sweep" || fs::exists(fs::path(out) / "sweep.json", ec))
    throw train::UsageError("--out " + out + " is a sweep's folder; give a new folder");
  if (!fs::is_empty(out, ec))
    throw train::UsageError("--out " + out + " holds files that are not a headlab analysis's (" +
                            fs::directory_iterator(out, ec)->path().filename().string() +
                            "); give an empty or new folder");
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
  if (!fs::exists(ck_path)) throw train::UsageError(args.target + ": no such run folder or checkpoint");
  // A snapshot's analysis goes beside it (snapshots/step-000500/), never over the run's own.
  const bool snapshot = train::snapshot_step(fs::path(ck_path).filename().string()) >= 0 &&
                        fs::path(ck_path).parent_path().filename() == "snapshots";
  if (args.threads < 0) throw train::UsageError("--threads must be 0 (picked from the model's size) or more");
  if (args.batch_given && args.batch < 1)
    throw train::UsageError("--batch must be at least 1, got " + std::to_string(args.batch));
  if (args.example < 0) throw train::UsageError("--example must be 0 or more, got " + std::to_string(args.example));
  check_label_options(args.labels);
  if (!args.data.empty() && !args.task.empty()) throw train::UsageError("give --task or --data, not both");
  check_data_out(args.data, args.out);
  train::Checkpoint ck = train::read_checkpoint(ck_path);
  use_threads(args.threads, train_flops_per_step(ck.info.config));  // 0: as the run's training would
  use_gemm_backend(args.gemm.empty() ? ck.info.config.gemm : args.gemm);
  // Another task than the run's: its files go beside the run's, never over them.
  const std::string trained_on =
      ck.info.config.data.empty() ? ck.info.config.task : "data:" + ck.info.config.data;
  const bool other_task = !args.task.empty() && args.task != trained_on;
  if (!args.task.empty()) {
    ck.info.config.task = args.task;
    ck.info.config.data.clear();
  }
  if (args.batch_given) {
    // Named as analyze's flag here: the run's session below would call it --eval-batch.
    train::check_token_count("--batch", args.batch, ck.model.max_seq_len);
    ck.info.config.eval_batch = args.batch;
  }
  const std::string home = is_dir ? args.target : fs::path(ck_path).parent_path().string();
  const std::string chosen = !args.out.empty() ? args.out
                             : snapshot        ? (fs::path(ck_path).parent_path() / fs::path(ck_path).stem()).string()
                             : other_task ? (fs::path(home.empty() ? "." : home) / ("analysis-" + args.task)).string()
                                          : home;
  const std::string out = chosen.empty() ? "." : chosen;
  std::error_code same_ec;
  const bool own_folder = fs::equivalent(out, home.empty() ? "." : home, same_ec);
  // The folders analyze picks itself (a snapshot's, another task's) are its own.
  if (!own_folder && !args.out.empty()) check_analysis_out(out);
  // The run's own folder is written as its trainer writes it: not while a
  // trainer holds it (its heads.json would be overwritten by the next one).
  std::unique_ptr<train::RunLock> lock;
  if (own_folder && train::folder_marker(out) == "run") lock = std::make_unique<train::RunLock>(out);
  AnalysisInput input = args.data.empty()
                            ? AnalysisInput::of_run(ck)
                            : AnalysisInput::of_file(ck, ck_path, args.data, args.batch_given ? args.batch : 0);
  if (args.example >= input.batch().batch)
    throw train::UsageError("--example " + std::to_string(args.example) + " is beyond the " +
                            std::to_string(input.batch().batch) + " sequences of the batch");
  analysis::AnalysisOptions options;
  options.labels = args.labels;
  options.example = args.example;
  std::vector<int32_t> corrupted;
  if (args.patch) {
    if (input.batch().batch < 2)
      throw train::UsageError("--patch needs at least 2 sequences in the batch (resample ablation takes another "
                              "sequence's head outputs); give --batch 2 or more");
    // Its own stream, so the corruption never depends on the training batches.
    core::Generator gen(input.config().seed ^ 0x7061746368000000ULL);  // "patch"
    corrupted = input.task().corrupt(input.batch(), gen);
    options.interventions = true;
    options.corruption.tokens = corrupted;
    options.corruption_text = input.task().corruption();
  }
  train::Batch batch = input.batch();
  for (const std::string& spec : args.patterns) {
    try {
      batch.attend.push_back(analysis::positional_pattern(spec, batch.batch, batch.seq_len,
                                                          input.model().spec().causal, batch.targets, batch.lengths));
    } catch (const std::invalid_argument& e) {
      throw train::UsageError(e.what());
    }
    for (std::size_t i = 0; i + 1 < batch.attend.size(); ++i)
      if (batch.attend[i].name == spec) throw train::UsageError("--pattern " + spec + " is given twice");
  }
  analysis::RunAnalysis run = analysis::analyze_model(input.model(), train::examples_of(batch), options);
  run.analyzed = input.task().name();

  if (other_task && args.out.empty())
    std::cerr << "analyze: the run trained on " << trained_on << "; its analysis on " << args.task << " goes to "
              << out << " (its own heads.json and report.html are kept)\n";
  std::error_code ec;
  fs::create_directories(out, ec);
  if (ec) throw train::UsageError("cannot create --out " + out + ": " + ec.message());
  if (!own_folder && train::folder_marker(out).empty()) train::write_folder_marker(out, "analysis");
  train::RunFolder folder{out, nullptr};
  // A run folder's report steps through its snapshots as the trainer's does
  // (on the run's own batch: a --data analysis has no snapshots to show).
  const bool with_snapshots = is_dir && !args.step_given && args.data.empty();
  train::write_analysis_files(folder, run, train::to_json(input.config()),
                              with_snapshots ? train::snapshot_views(args.target, input.batch(), args.example)
                                             : std::vector<analysis::SnapshotView>{});
  if (args.json) {
    nlohmann::json j;
    analysis::to_json(j, run);
    std::cout << j.dump(2) << '\n';
  } else {
    analysis::TextOptions text;
    text.color = stdout_is_terminal() && !args.no_color;
    std::cout << analysis::text_report(run, text);
    if (args.patch) std::cout << '\n' << analysis::intervention_table(run);
    std::cout << "\nreport: " << folder.report() << "\nheads:  " << folder.heads() << '\n';
  }
  return 0;
}

}  // namespace

Command add_analyze(CLI::App& app) {
  auto args = std::make_shared<AnalyzeArgs>();
  app.add_option("target", args->target, "a run folder or a checkpoint.safetensors")->required();
  app.add_option("--step", args->step,
                 "analyze the run's snapshot of this step (train --snapshot-every); the files go to "
                 "RUN/snapshots/step-NNNNNN/")
      ->each([args](const std::string&) { args->step_given = true; });
  app.add_option("--task", args->task,
                 "analyze on this task's batch (default: the run's task); another task than the run's writes into "
                 "RUN/analysis-TASK/ unless --out says where");
  app.add_option("--data", args->data,
                 "analyze on the sequences of this JSONL file (as eval --data reads it) instead; needs --out");
  app.add_option("--pattern", args->patterns,
                 "also score every head on a positional pattern: offset:K (attention on q - K) or position:K "
                 "(attention on position K), at the queries with a target; repeatable");
  app.add_option("--batch", args->batch,
                 "sequences in the analysis batch (default: the run's eval batch; with --data the whole file)")
      ->each([args](const std::string&) { args->batch_given = true; });
  app.add_option("--example", args->example, "which sequence the heatmaps show")->default_val(0);
  app.add_option("--out", args->out, "where heads.json and report.html go (default: next to the checkpoint)");
  app.add_option("--threads", args->threads, "threads (0: picked from the model's size, as train does)");
  app.add_option("--gemm", args->gemm, "GEMM backend, onednn or openblas (default: the run's)");
  app.add_flag("--json", args->json, "print heads.json instead of the table");
  app.add_flag("--patch", args->patch,
               "also intervene: mean and resample ablation of each head, and activation patching of each head's "
               "output from the clean batch into the task's corrupted batch (see `headlab tasks`), with the share "
               "of the loss gap it restores");
  app.add_flag("--no-color", args->no_color, "no ANSI colours");
  app.add_option("--threshold", args->labels.score_threshold, "a label's score must reach this")
      ->default_val(args->labels.score_threshold);
  app.add_option("--margin", args->labels.margin, "... and beat the runner-up pattern by this")
      ->default_val(args->labels.margin);
  app.add_option("--diffuse-entropy", args->labels.diffuse_entropy, "normalized entropy above which a head is diffuse")
      ->default_val(args->labels.diffuse_entropy);
  app.add_option("--sink-delta-loss", args->labels.sink_max_delta_loss,
                 "a first-token head whose ablation costs less loss than this is a sink")
      ->default_val(args->labels.sink_max_delta_loss);
  return [args] { return run_analyze(*args); };
}

}  // namespace headlab::cli
