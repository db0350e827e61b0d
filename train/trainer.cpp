#include "train/trainer.h"

#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <iostream>

#include "train/head_report_text.h"
#include "train/report_html.h"
#include "train/signals.h"

namespace headlab::train {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::string format_duration(double seconds) {
  const auto s = static_cast<int64_t>(seconds + 0.5);
  char buf[32];
  if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", static_cast<long long>(s / 3600), static_cast<long long>(s / 60 % 60));
  else if (s >= 60)
    std::snprintf(buf, sizeof buf, "%lldm%02llds", static_cast<long long>(s / 60), static_cast<long long>(s % 60));
  else
    std::snprintf(buf, sizeof buf, "%llds", static_cast<long long>(s));
  return buf;
}

void append_line(const std::string& path, const nlohmann::json& j) {
  std::ofstream out(path, std::ios::app);
  out << j.dump() << '\n';
  out.flush();
  if (!out) throw std::runtime_error("cannot append to " + path);
}

}  // namespace

Trainer::Trainer(Session& session, RunFolder folder, std::shared_ptr<spdlog::logger> logger, TrainerOptions options)
    : session_(session), folder_(std::move(folder)), log_(std::move(logger)), options_(options) {}

void Trainer::draw_progress(double elapsed) const {
  const int64_t done = session_.steps_done(), total = options_.target_steps;
  const double frac = total > 0 ? static_cast<double>(done) / static_cast<double>(total) : 1.0;
  constexpr int kWidth = 30;
  const int filled = static_cast<int>(frac * kWidth);
  std::string bar(static_cast<std::size_t>(filled), '#');
  bar.resize(kWidth, '.');
  const int64_t since_start = done - start_step_;
  const double eta = since_start > 0 ? elapsed / static_cast<double>(since_start) * static_cast<double>(total - done) : 0;
  std::fprintf(stderr, "\r[%s] %3.0f%%  step %lld/%lld  ETA %s   ", bar.c_str(), frac * 100,
               static_cast<long long>(done), static_cast<long long>(total), format_duration(eta).c_str());
  std::fflush(stderr);
}

void Trainer::log_window(const StepResult& last, double seconds) {
  const int64_t step = session_.steps_done();
  const EvalResult eval = evaluate(session_.model(), session_.eval_batch());
  // The step's update ruined the model: no metrics line for it (the checkpoint
  // writer would refuse it too).
  if (!std::isfinite(eval.loss))
    throw std::runtime_error("the model's held-out loss is " + std::to_string(eval.loss) + " at step " +
                             std::to_string(step) + " (try a lower --lr or --clip)");
  const double n = static_cast<double>(std::max<int64_t>(window_steps_, 1));
  const double tokens_per_s = seconds > 0 ? static_cast<double>(window_tokens_) / seconds : 0;
  nlohmann::json line = {{"step", step},
                         {"loss", window_loss_ / n},
                         {"accuracy", window_acc_ / n},
                         {"eval_loss", eval.loss},
                         {"eval_accuracy", eval.accuracy},
                         {"lr", last.lr},
                         {"grad_norm", last.grad_norm},
                         {"tokens_per_s", tokens_per_s}};
  if (options_.progress_bar) std::fprintf(stderr, "\r\033[K");
  log_->info("step {:>6}  loss {:.4f}  acc {:6.2f}%  eval loss {:.4f}  eval acc {:6.2f}%  lr {:.2e}  |g| {:.3f}  {:.0f} tok/s",
             step, window_loss_ / n, 100 * window_acc_ / n, eval.loss, 100 * eval.accuracy, last.lr, last.grad_norm,
             tokens_per_s);
  const int64_t every = session_.config().analyze_every;
  if (every > 0 && step % every == 0) {
    const RunAnalysis analysis = analyze_model(session_.model(), session_.eval_batch(), options_.analysis);
    line.update(compact_json(analysis));
    for (int64_t l = 0; l < analysis.num_layers; ++l) log_->info("  {}", layer_summary(analysis, l));
  }
  append_line(folder_.metrics(), line);
  window_loss_ = window_acc_ = 0;
  window_steps_ = window_tokens_ = 0;
}

void Trainer::checkpoint() {
  session_.set_trainer_state({{"loss", window_loss_}, {"accuracy", window_acc_}, {"steps", window_steps_},
                              {"tokens", window_tokens_}});
  try {
    session_.save(folder_.checkpoint());
  } catch (const NonFiniteState& e) {
    throw std::runtime_error(std::string(e.what()) + " (try a lower --lr or --clip)");
  }
  last_checkpoint_step_ = session_.steps_done();
  log_->debug("checkpoint at step {} -> {}", session_.steps_done(), folder_.checkpoint());
}

int Trainer::run() {
  const TrainConfig& config = session_.config();
  start_step_ = session_.steps_done();
  if (start_step_ > 0) last_checkpoint_step_ = start_step_;  // resumed from it
  if (const nlohmann::json& w = session_.trainer_state(); w.is_object()) {
    window_loss_ = w.value("loss", 0.0);
    window_acc_ = w.value("accuracy", 0.0);
    window_steps_ = w.value("steps", int64_t{0});
    window_tokens_ = w.value("tokens", int64_t{0});
  }
  // A run that finished off the --log-every grid logged its last step early
  // and kept that window's sums in its checkpoint: extending it drops that
  // line and goes on with the sums, as if it had never stopped.
  const bool on_grid = start_step_ % config.log_every == 0;
  truncate_metrics(folder_.metrics(), on_grid || start_step_ == 0 ? start_step_ : start_step_ - 1);
  if (on_grid) window_loss_ = window_acc_ = 0, window_steps_ = window_tokens_ = 0;
  const auto start = Clock::now();
  auto window_start = start;
  while (session_.steps_done() < options_.target_steps) {
    const StepResult r = session_.step();
    window_loss_ += r.loss;
    window_acc_ += r.accuracy;
    window_tokens_ += r.tokens;
    ++window_steps_;
    const int64_t step = session_.steps_done();
    const bool last = step == options_.target_steps;
    if (step % config.log_every == 0) {
      log_window(r, seconds_since(window_start));
      window_start = Clock::now();
    } else if (last) {
      // The final line, off the grid; the final checkpoint keeps the sums.
      const double loss = window_loss_, accuracy = window_acc_;
      const int64_t steps = window_steps_, tokens = window_tokens_;
      log_window(r, seconds_since(window_start));
      window_loss_ = loss, window_acc_ = accuracy, window_steps_ = steps, window_tokens_ = tokens;
    }
    if (config.checkpoint_every > 0 && step % config.checkpoint_every == 0 && !last) checkpoint();
    if (options_.progress_bar) draw_progress(seconds_since(start));
    if (const int sig = stop_signal()) {
      if (options_.progress_bar) std::fprintf(stderr, "\r\033[K");
      checkpoint();
      log_->warn("stopped by {} after step {}; checkpoint saved. Continue with: headlab train --resume {}",
                 sig == SIGPIPE ? std::string("a failed write to stdout") : "signal " + std::to_string(sig), step,
                 folder_.dir);
      return 128 + sig;
    }
  }
  if (options_.progress_bar) std::fprintf(stderr, "\r\033[K");
  checkpoint();
  const double seconds = seconds_since(start);
  log_->info("trained {} steps in {} ({:.1f} ms/step); checkpoint: {}", session_.steps_done() - start_step_,
             format_duration(seconds),
             1000 * seconds / static_cast<double>(std::max<int64_t>(1, session_.steps_done() - start_step_)),
             folder_.checkpoint());
  return 0;
}

void write_analysis_files(const RunFolder& folder, const RunAnalysis& analysis, const nlohmann::json& config) {
  nlohmann::json heads;
  to_json(heads, analysis);
  write_file_atomic(folder.heads(), heads.dump(2) + "\n");
  write_file_atomic(folder.report(), report_html(analysis, read_metrics(folder.metrics()), config));
}

RunAnalysis Trainer::finish_report() {
  const RunAnalysis analysis = analyze_model(session_.model(), session_.eval_batch(), options_.analysis);
  write_analysis_files(folder_, analysis, to_json(session_.config()));
  TextOptions text;
  text.color = options_.color;
  std::cout << '\n' << text_report(analysis, text) << '\n';
  std::cout << "report: " << folder_.report() << "\nheads:  " << folder_.heads() << '\n';
  std::cout.flush();
  return analysis;
}

}  // namespace headlab::train
