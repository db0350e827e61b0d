// How `headlab train` shows a run: the progress bar (terminals only), the log
// lines on the terminal and in train.log, and the final report. The Trainer
// reports what happens (train/trainer.h); this decides how it looks.
#pragma once

#include <spdlog/logger.h>

#include <memory>
#include <string>

#include "train/trainer.h"

namespace headlab::cli {

class TrainView final : public train::TrainerEvents {
 public:
  // progress_bar: redraw a bar on stderr after every step. quiet: the
  // terminal's log sink takes only warnings (make_run_logger), and report()
  // prints a summary of a few lines instead of the whole text report.
  TrainView(std::shared_ptr<spdlog::logger> log, train::RunFolder folder, int64_t start_step, int64_t target_steps,
            bool progress_bar, bool quiet = false);

  void stepped(int64_t step, double seconds) override;
  void logged(const train::LogLine& line) override;
  void final_analysis_estimated(const train::AnalysisEstimate& estimate) override;
  void analyzed(int64_t step, const analysis::RunAnalysis& analysis) override;
  void checkpoint_written(int64_t step, const std::string& path) override;
  void stopped(int signal, int64_t step) override;
  void history_dropped(int64_t step, const std::vector<int64_t>& steps) override;
  void finished(int64_t steps, double seconds) override;

  // The final report on stdout: the text report (quiet: the last log line
  // and the verdict's first line) and where the files are.
  void report(const analysis::RunAnalysis& analysis, bool color) const;

 private:
  void clear_progress() const;

  std::shared_ptr<spdlog::logger> log_;
  train::RunFolder folder_;
  int64_t start_step_, target_steps_;
  bool progress_bar_, quiet_;
  int64_t last_logged_ = -1;  // the step of the last log line
  std::string finished_;      // finished()'s line, which a quiet report repeats
};

}  // namespace headlab::cli
