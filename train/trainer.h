// The training loop of `headlab train`: steps a Session, logs, records
// metrics.jsonl, analyzes the heads, writes checkpoints and the final report,
// and stops cleanly on SIGINT/SIGTERM or a non-finite loss.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <spdlog/logger.h>

#include "train/analysis.h"
#include "train/run_folder.h"
#include "train/session.h"

namespace headlab::train {

struct TrainerOptions {
  int64_t target_steps = 0;
  bool progress_bar = false;  // redrawn on stderr; for terminals only
  bool color = false;         // ANSI colours in the printed report
  AnalysisOptions analysis;
};

class Trainer {
 public:
  Trainer(Session& session, RunFolder folder, std::shared_ptr<spdlog::logger> logger, TrainerOptions options);

  // Trains to the target step. Returns 0 when done, or 128 + signal after a
  // stop signal (a checkpoint is saved first). A non-finite loss, gradient or
  // model throws std::runtime_error naming the step; the last checkpoint, which
  // is always finite, stays as it was.
  int run();

  // Analyzes the heads on the eval batch; writes heads.json and report.html,
  // prints the text report. Also used by `headlab analyze`.
  RunAnalysis finish_report();

  // The step of the newest checkpoint in the run folder that this run wrote or
  // resumed from, or -1 if there is none.
  int64_t last_checkpoint_step() const { return last_checkpoint_step_; }

 private:
  void log_window(const StepResult& last, double seconds);
  void checkpoint();
  void draw_progress(double elapsed) const;

  Session& session_;
  RunFolder folder_;
  std::shared_ptr<spdlog::logger> log_;
  TrainerOptions options_;
  // Sums over the steps since the last log line.
  double window_loss_ = 0, window_acc_ = 0;
  int64_t window_steps_ = 0, window_tokens_ = 0;
  int64_t start_step_ = 0;
  int64_t last_checkpoint_step_ = -1;
};

// Writes heads.json and report.html for an analysis into `folder`.
void write_analysis_files(const RunFolder& folder, const RunAnalysis& analysis, const nlohmann::json& config);

}  // namespace headlab::train
