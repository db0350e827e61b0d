#include "train/cli/train_view.h"

#include <csignal>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include <spdlog/fmt/fmt.h>

#include "analysis/html_report.h"
#include "analysis/text_report.h"
#include "train/cli/progress_bar.h"
#include "train/run_folder.h"
#include "train/shell_word.h"

namespace headlab::cli {
namespace {

// "6366 tok/s", the training's own; the head analyses since the previous
// line, which it leaves out, are said beside it: "6366 tok/s (head analysis 3.21 s)".
std::string throughput(const train::LogLine& l) {
  std::string text = fmt::format("{:.0f} tok/s", l.tokens_per_s);
  if (l.analysis_seconds > 0) text += fmt::format(" (head analysis {:.2f} s)", l.analysis_seconds);
  return text;
}

}  // namespace

TrainView::TrainView(std::shared_ptr<spdlog::logger> log, train::RunFolder folder, int64_t start_step,
                     int64_t target_steps, bool progress_bar, bool quiet)
    : log_(std::move(log)),
      folder_(std::move(folder)),
      start_step_(start_step),
      target_steps_(target_steps),
      progress_bar_(progress_bar),
      quiet_(quiet) {}

void TrainView::clear_progress() const {
  if (progress_bar_) std::fprintf(stderr, "\r\033[K");
}

void TrainView::stepped(int64_t step, double seconds) {
  if (!progress_bar_) return;
  const int64_t total = target_steps_;
  const double frac = total > 0 ? static_cast<double>(step) / static_cast<double>(total) : 1.0;
  const int64_t since_start = step - start_step_;
  const double eta = since_start > 0 ? seconds / static_cast<double>(since_start) * static_cast<double>(total - step) : 0;
  const std::string what = "step " + std::to_string(step) + "/" + std::to_string(total);
  std::fprintf(stderr, "\r%s   ", progress_line(frac, what, eta).c_str());
  std::fflush(stderr);
}

void TrainView::logged(const train::LogLine& l) {
  clear_progress();
  if (l.train) {
    // A fixed training set: the model on it and on the held-out set, now.
    log_->info("step {:>6}  train loss {:.4f}  acc {:6.2f}%  held-out loss {:.4f}  acc {:6.2f}%  lr {:.2e}  |g| {:.3f}  "
               "{}",
               l.step, l.train->loss, 100 * l.train->accuracy, l.eval_loss, 100 * l.eval_accuracy, l.lr, l.grad_norm,
               throughput(l));
    last_logged_ = l.step;
    return;
  }
  log_->info("step {:>6}  loss {:.4f}  acc {:6.2f}%  eval loss {:.4f}  eval acc {:6.2f}%  lr {:.2e}  |g| {:.3f}  {}",
             l.step, l.loss, 100 * l.accuracy, l.eval_loss, 100 * l.eval_accuracy, l.lr, l.grad_norm, throughput(l));
  last_logged_ = l.step;
}

void TrainView::final_analysis_estimated(const train::AnalysisEstimate& e) {
  // A short analysis (the demo's takes a fraction of a second) goes unsaid.
  constexpr double kLong = 60;
  if (e.seconds < kLong || e.rows < 2) return;
  clear_progress();
  // The largest power-of-two batch whose analysis takes about a minute at
  // most, at this batch's time per sequence.
  const double per_row = e.seconds / static_cast<double>(e.rows);
  int64_t rows = 1;
  while (rows * 2 < e.rows && static_cast<double>(rows * 2) * per_row <= kLong) rows *= 2;
  log_->warn("the final head analysis will take about {} ({:.0f} forward passes' worth of the {} --eval-batch "
             "sequences, {:.3g} s each); --eval-batch {} would make it about {} (a new run: --resume keeps the "
             "run's --eval-batch)",
             format_duration(e.seconds), e.passes, e.rows, e.pass_seconds, rows,
             format_duration(static_cast<double>(rows) * per_row));
}

void TrainView::analyzed(int64_t step, const analysis::RunAnalysis& analysis) {
  clear_progress();
  // An analysis between two log lines gets a heading of its own.
  if (step != last_logged_) log_->info("step {:>6}  head analysis", step);
  for (int64_t l = 0; l < analysis.num_layers; ++l) log_->info("  {}", analysis::layer_summary(analysis, l));
}

void TrainView::checkpoint_written(int64_t step, const std::string& path) {
  log_->debug("checkpoint at step {} -> {}", step, path);
}

void TrainView::stopped(int signal, int64_t step) {
  clear_progress();
  // SIGPIPE is ignored; a failed write to stdout asks for a stop under its name.
  log_->warn("stopped by {} after step {}; checkpoint saved. Continue with: headlab train --resume {}",
             signal == SIGPIPE ? std::string("a failed write to stdout") : "signal " + std::to_string(signal), step,
             train::shell_word(folder_.dir));
}

void TrainView::history_dropped(int64_t step, const std::vector<int64_t>& steps) {
  // metrics.jsonl is in step order: the first and last lines dropped bound them.
  log_->warn("metrics.jsonl held {} line(s) of steps {} to {}, after step {} which this run goes on from: the "
             "stopped run trained them but saved no checkpoint of them (a kill, a divergence); they are dropped, "
             "and this run trains those steps again",
             steps.size(), steps.front(), steps.back(), step);
}

void TrainView::finished(int64_t steps, double seconds) {
  clear_progress();
  if (steps == 0 && start_step_ > 0)  // a resume at its last step: only its final analysis was missing
    finished_ = fmt::format("no steps left to train (at step {} of --steps {}); writing the final analysis; "
                            "checkpoint: {}",
                            start_step_, target_steps_, folder_.checkpoint());
  else if (steps == 0)
    finished_ = fmt::format("trained no steps (--steps 0): the model is as initialized; checkpoint: {}",
                            folder_.checkpoint());
  else
    finished_ = fmt::format("trained {} steps in {} ({:.1f} ms/step); checkpoint: {}", steps, format_duration(seconds),
                            1000 * seconds / static_cast<double>(steps), folder_.checkpoint());
  log_->info("{}", finished_);
}

void TrainView::report(const analysis::RunAnalysis& analysis, bool color) const {
  analysis::TextOptions text;
  text.color = color;
  // When each head's label emerged, from the analyses logged while training
  // (report.html's steps): none logged (--analyze-every 0), no column.
  text.emerged = analysis::logged_emergence_steps(train::read_metrics(folder_.metrics()), analysis);
  if (quiet_) {
    const std::string verdict = analysis::verdict_text(analysis, text);
    std::cout << finished_ << '\n' << verdict.substr(0, verdict.find('\n')) << '\n';
  } else {
    std::cout << '\n' << analysis::text_report(analysis, text) << '\n';
  }
  std::cout << "report: " << folder_.report() << "\nheads:  " << folder_.heads() << '\n';
  std::cout.flush();
}

}  // namespace headlab::cli
