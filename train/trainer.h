// The training loop of `headlab train`: steps a Session, records
// metrics.jsonl, analyzes the heads, writes checkpoints and the final
// analysis files, and stops cleanly on SIGINT/SIGTERM or a non-finite loss.
// In a data-parallel job every rank runs it; only rank 0 evaluates, writes
// and reports, and all ranks stop at the same step.
// It prints nothing: it tells a TrainerEvents what happens, and the command
// line (train/cli/train_view.h) draws the progress bar, the log and the report.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "analysis/analyze_model.h"
#include "analysis/html_report.h"
#include "train/run_folder.h"
#include "train/session.h"

namespace headlab::train {

// The averages of one log line (also a line of metrics.jsonl).
struct LogLine {
  int64_t step = 0;
  double loss = 0, accuracy = 0;            // training batches since the last log line
  double eval_loss = 0, eval_accuracy = 0;  // the fixed evaluation (held-out) batch
  double lr = 0, grad_norm = 0;             // of the step itself
  // The training's throughput: the window's tokens over the time its steps
  // took, never the evaluations, head analyses or checkpoints between them.
  double tokens_per_s = 0;
  // The head analyses since the previous log line took this long (not in
  // tokens_per_s; the log line says it, metrics.jsonl does not).
  double analysis_seconds = 0;
  // With a fixed training set: the model at this step on the training set
  // (Session::train_eval_batch).
  std::optional<EvalResult> train;
};

// What the final head analysis will cost, estimated before it starts: its
// forward passes of the evaluation batch (analysis::analysis_passes, the
// set ablations left out) times what one took at the first log line (that
// line's evaluation, in the run's --precision; the analysis runs in f32).
struct AnalysisEstimate {
  double seconds = 0;       // the whole analysis, about
  double passes = 0;        // forward passes' worth of the evaluation batch
  double pass_seconds = 0;  // one pass, timed
  int64_t rows = 0;         // the evaluation batch's sequences (--eval-batch)
};

// What the trainer reports as it goes; every callback does nothing by default.
class TrainerEvents {
 public:
  virtual ~TrainerEvents() = default;
  // After every training step; `seconds` since run() began.
  virtual void stepped(int64_t /*step*/, double /*seconds*/) {}
  virtual void logged(const LogLine& /*line*/) {}
  // Once a run, after its first log line: what its final head analysis will
  // cost (a large model's at a large --eval-batch takes minutes, after
  // training that took seconds).
  virtual void final_analysis_estimated(const AnalysisEstimate& /*estimate*/) {}
  // After a head analysis during training (every --analyze-every steps).
  virtual void analyzed(int64_t /*step*/, const analysis::RunAnalysis& /*analysis*/) {}
  virtual void checkpoint_written(int64_t /*step*/, const std::string& /*path*/) {}
  // A stop signal arrived; the checkpoint after `step` is written.
  virtual void stopped(int /*signal*/, int64_t /*step*/) {}
  // A resumed run goes on from `step`, and metrics.jsonl held lines of the
  // later `steps` (a run stopped without a checkpoint of them, by SIGKILL or
  // a divergence), which it dropped: they are trained again.
  virtual void history_dropped(int64_t /*step*/, const std::vector<int64_t>& /*steps*/) {}
  // The target is reached and the checkpoint written: `steps` trained by
  // this run() in `seconds`.
  virtual void finished(int64_t /*steps*/, double /*seconds*/) {}
};

struct TrainerOptions {
  int64_t target_steps = 0;
  analysis::AnalysisOptions analysis;
};

class Trainer {
 public:
  Trainer(Session& session, RunFolder folder, TrainerEvents& events, TrainerOptions options);

  // Trains to the target step. Returns 0 when done, or 128 + signal after a
  // stop signal (a checkpoint is saved first); a signal that reaches any rank
  // stops every rank after the same step. A non-finite loss, gradient or
  // model throws std::runtime_error naming the step; the last checkpoint, which
  // is always finite, stays as it was.
  int run();

  // Analyzes the heads on the eval batch and writes heads.json and
  // report.html; the caller shows the analysis. `progress`, if given, hears
  // of each chunk; `interrupt`, if given, runs between the analysis's
  // forward passes and may throw to end it before anything is written (the
  // checkpoint is; `train --resume` then writes the analysis).
  analysis::RunAnalysis finish_report(std::function<void(const analysis::AnalysisProgress&)> progress = {},
                                      std::function<void()> interrupt = {});

  int64_t start_step() const { return start_step_; }

  // What `train --resume` goes on from after a failure: the newest
  // checkpoint or snapshot this run wrote, or the one it resumed from (path
  // ""), as {step, path}; step -1 if there is none.
  struct Saved {
    int64_t step = -1;
    std::string path;
  };
  const Saved& last_saved() const { return last_saved_; }

 private:
  // Writes the metrics line of this step: the log line's averages (log), the
  // head analysis (analyze), or both.
  void record(const StepResult& last, bool log, bool analyze);
  void save(const std::string& path);  // the session, with the log window's sums
  void checkpoint();
  void snapshot();  // snapshots/step-NNNNNN.safetensors, then --keep-snapshots

  Session& session_;
  RunFolder folder_;
  TrainerEvents& events_;
  TrainerOptions options_;
  // Sums over the steps since the last log line.
  double window_loss_ = 0, window_acc_ = 0;
  int64_t window_steps_ = 0, window_tokens_ = 0;
  // The log line's timing, since the previous log line of this process (a
  // resumed window's tokens from before the stop were timed by another): the
  // steps' tokens and seconds, and the head analyses' seconds.
  int64_t timed_tokens_ = 0;
  double step_seconds_ = 0, analysis_seconds_ = 0;
  // The last log line on the --log-every grid: {"step", "loss"}, or null. A
  // checkpoint keeps it, so that --resume can tell its own run's
  // metrics.jsonl from another's (run_identity.h).
  nlohmann::json logged_;
  bool estimated_ = false;  // final_analysis_estimated was reported
  int64_t start_step_ = 0;
  Saved last_saved_;
};

// What heads.json and report.html say besides the analysis and the config.
struct AnalysisSource {
  // The report's slider steps through these (snapshot_views).
  std::vector<analysis::SnapshotView> snapshots;
  // The provenance of a checkpoint saved from Python (CheckpointInfo::edited),
  // which heads.json carries as "edited" and the report's settings name, so
  // that neither is taken for the source run's analysis.
  nlohmann::json edited;
  // The checkpoint `headlab analyze` read (absolute), heads.json's
  // "checkpoint"; empty for the trainer's own analysis, whose heads.json
  // stays the same bytes wherever the run folder is.
  std::string checkpoint;
  // What `analyze --data` read (AnalysisInput::data_record), heads.json's
  // "data_file"; null otherwise.
  nlohmann::json data_file;
  // The start of the report's title; empty: the folder's name. A checkpoint
  // file of its own is named by its file ("edits/no-L1H0.safetensors").
  std::string title;
  // The run's own settings, which the report shows as its config.json, when
  // the analysis read other sequences than the run's (`analyze --data` or
  // `--task`, whose config names what was read, as heads.json's task or data
  // do); null: the config itself.
  nlohmann::json run_config;
  // The training history the report draws and takes emergence steps from
  // (metrics.jsonl's lines); none: the folder's own metrics.jsonl. `analyze
  // RUN --out DIR` passes the run's, as its folder's would be.
  std::optional<std::vector<nlohmann::json>> history;
};

// `text` as heads.json records it: JSON holds UTF-8 only, so a byte that is
// not (a path named in Latin-1) becomes U+FFFD there, never an error after
// the analysis. Compare a recorded string with this of the current one.
std::string as_recorded(const std::string& text);

// Writes heads.json and report.html for an analysis into `folder`. heads.json
// goes last, once report.html is written (an older one is removed first): a
// heads.json of the checkpoint's step (analyzed_step) tells --resume that the
// final analysis is done, so a report that could not be written (a full disk)
// is written again by the next --resume.
void write_analysis_files(const RunFolder& folder, const analysis::RunAnalysis& analysis, const nlohmann::json& config,
                          const AnalysisSource& source = {});

// The step of the checkpoint the folder's heads.json analyzed ("step"): the
// run is complete once it is the last step's. nullopt when heads.json is
// missing, unreadable, or from before heads.json recorded the step -- then
// `train --resume` writes the final analysis again rather than trusting it
// (an older run's extension stopped before its own final analysis keeps the
// older step's heads.json).
std::optional<int64_t> analyzed_step(const RunFolder& folder);

}  // namespace headlab::train
