#include "train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <functional>
#include <utility>
#include <string>
#include <vector>

#include "analysis/heads_json.h"
#include "analysis/html_report.h"
#include "analysis/progress_measures.h"
#include "core/atomic_file.h"
#include "core/interrupt.h"
#include "core/shortest.h"
#include "train/analysis_steps.h"
#include "train/errors.h"
#include "train/fixed_sets.h"
#include "train/input_file.h"
#include "train/signals.h"
#include "train/snapshots.h"

namespace headlab::train {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The fields record() writes for a log step (the rest of a line is its step and head analysis).
const std::vector<std::string> kLogFields = {"loss",      "accuracy",     "eval_loss",  "eval_accuracy", "lr",
                                             "grad_norm", "tokens_per_s", "train_loss", "train_accuracy"};

// The fields of a metrics line's head analysis (analysis::compact_json's,
// and a modular-addition run's "progress").
const std::vector<std::string> kAnalysisFields = {"heads",       "layer_js",      "specialized", "roles_found",
                                                  "composition", "position_loss", "icl_score",   "progress"};
// Marks the analysis finish_report added to a last line off the grid.
constexpr const char* kFinalField = "final";

// metrics.jsonl, opened without following a link (core::append_file).
void append_line(const std::string& path, const nlohmann::json& j) { core::append_file(path, j.dump() + "\n"); }

// Whether metrics.jsonl's line of `step` holds an analysis marked final.
bool final_analysis_at(const std::string& path, int64_t step) {
  if (!std::filesystem::exists(path)) return false;
  for (const nlohmann::json& j : read_metrics(path))
    if (j.value("step", int64_t{-1}) == step && j.contains(kFinalField) && j[kFinalField] == true) return true;
  return false;
}

// Nanda et al.'s progress measures of a modular-addition run, over its
// training pairs (all of them without a finite training set); none for any
// other task, nor for addition mod 2 (--vocab 3): the Fourier measures need
// p >= 3 (analysis/fourier.h), and such a run died at its first analysis.
std::optional<analysis::ProgressMeasures> modular_progress(Session& session) {
  const TrainConfig& config = session.config();
  if (config.task != "modular-addition" || !config.data.empty()) return std::nullopt;
  const Task& task = session.task();
  const int64_t p = task.vocab() - 1;
  if (p < 3) return std::nullopt;
  std::vector<bool> train;
  if (has_fixed_sets(config) && task.size() > 0) {
    train.assign(static_cast<std::size_t>(p * p), false);
    const Batch rows = task.rows(0, task.size());
    for (int64_t r = 0; r < rows.batch; ++r) {
      const auto at = static_cast<std::size_t>(r * rows.seq_len);
      train[static_cast<std::size_t>(rows.tokens[at] * p + rows.tokens[at + 1])] = true;
    }
  }
  return analysis::progress_measures(session.model(), p, train);
}

}  // namespace

Trainer::Trainer(Session& session, RunFolder folder, TrainerEvents& events, TrainerOptions options)
    : session_(session), folder_(std::move(folder)), events_(events), options_(options) {}

void Trainer::record(const StepResult& last, bool log, bool analyze) {
  const int64_t step = session_.steps_done();
  nlohmann::json line = {{"step", step}};
  if (log) {
    const auto evaluating = Clock::now();
    const EvalResult eval = evaluate(session_.model(), session_.eval_batch());
    const double eval_seconds = seconds_since(evaluating);
    // The step's update ruined the model: no metrics line for it (the
    // checkpoint writer would refuse it too).
    if (!std::isfinite(eval.loss))
      throw Diverged("the model's held-out loss is " + core::shortest(eval.loss) + " at step " +
                               std::to_string(step) + " (try a lower --lr or --clip)");
    const double n = static_cast<double>(std::max<int64_t>(window_steps_, 1));
    LogLine l{.step = step,
                    .loss = window_loss_ / n,
                    .accuracy = window_acc_ / n,
                    .eval_loss = eval.loss,
                    .eval_accuracy = eval.accuracy,
                    .lr = last.lr,
                    .grad_norm = last.grad_norm,
                    .tokens_per_s = step_seconds_ > 0 ? static_cast<double>(timed_tokens_) / step_seconds_ : 0,
                    .analysis_seconds = analysis_seconds_,
                    .train = {}};
    if (const auto& train = session_.train_eval_batch()) {
      l.train = evaluate(session_.model(), *train);
      line.update({{"train_loss", l.train->loss}, {"train_accuracy", l.train->accuracy}});
    }
    line.update({{"loss", l.loss},
                 {"accuracy", l.accuracy},
                 {"eval_loss", l.eval_loss},
                 {"eval_accuracy", l.eval_accuracy},
                 {"lr", l.lr},
                 {"grad_norm", l.grad_norm},
                 {"tokens_per_s", l.tokens_per_s}});
    events_.logged(l);
    if (!estimated_) {
      // One forward pass of the evaluation batch, timed: the final
      // analysis's unit (before this step's own analysis, if any, runs).
      estimated_ = true;
      const layers::ModelSpec& m = session_.model().spec();
      AnalysisEstimate e{.passes = analysis::analysis_passes(m.layers, m.heads, options_.analysis),
                         .pass_seconds = eval_seconds,
                         .rows = session_.eval_batch().batch};
      e.seconds = e.passes * e.pass_seconds;
      events_.final_analysis_estimated(e);
    }
    logged_ = {{"step", step}, {"loss", l.loss}};
    window_loss_ = window_acc_ = 0;
    window_steps_ = window_tokens_ = 0;
    timed_tokens_ = 0;
    step_seconds_ = analysis_seconds_ = 0;
  }
  if (analyze) {
    const auto analyzing = Clock::now();
    analysis::AnalysisOptions during = options_.analysis;
    during.pruning = false;  // the pruning curve is for the final report
    const analysis::RunAnalysis run = analysis::analyze_model(session_.model(), examples_of(session_.eval_batch()), during);
    line.update(analysis::compact_json(run));
    if (const auto progress = modular_progress(session_)) line["progress"] = analysis::to_json(*progress);
    analysis_seconds_ += seconds_since(analyzing);
    events_.analyzed(step, run);
  }
  append_line(folder_.metrics(), line);
}

void Trainer::save(const std::string& path) {
  nlohmann::json state{{"loss", window_loss_}, {"accuracy", window_acc_}, {"steps", window_steps_},
                       {"tokens", window_tokens_}};
  if (!logged_.is_null()) state["logged"] = logged_;
  session_.set_trainer_state(std::move(state));
  try {
    session_.save(path);
  } catch (const NonFiniteState& e) {
    throw Diverged(std::string(e.what()) + " (try a lower --lr or --clip)");
  }
}

void Trainer::checkpoint() {
  if (!session_.world().is_root()) return;
  save(folder_.checkpoint());
  last_saved_ = {session_.steps_done(), folder_.checkpoint()};
  events_.checkpoint_written(session_.steps_done(), folder_.checkpoint());
}

void Trainer::snapshot() {
  if (!session_.world().is_root()) return;
  std::error_code ec;
  std::filesystem::create_directories(snapshots_dir(folder_.dir), ec);
  if (ec) throw std::runtime_error("cannot create " + snapshots_dir(folder_.dir) + ": " + ec.message());
  save(snapshot_path(folder_.dir, session_.steps_done()));
  // A whole checkpoint of its step, which --resume goes on from when it is
  // newer than checkpoint.safetensors.
  if (session_.steps_done() > last_saved_.step)
    last_saved_ = {session_.steps_done(), snapshot_path(folder_.dir, session_.steps_done())};
  prune_snapshots(folder_.dir, session_.config().keep_snapshots);
}

int Trainer::run() {
  const TrainConfig& config = session_.config();
  start_step_ = session_.steps_done();
  if (start_step_ > 0) last_saved_ = {start_step_, ""};  // resumed from it
  if (const nlohmann::json& w = session_.trainer_state(); w.is_object()) {
    window_loss_ = w.value("loss", 0.0);
    window_acc_ = w.value("accuracy", 0.0);
    window_steps_ = w.value("steps", int64_t{0});
    window_tokens_ = w.value("tokens", int64_t{0});
    logged_ = w.value("logged", nlohmann::json());
  }
  const dist::World& world = session_.world();
  // The lines after the checkpoint's step are written again. The line of
  // that step stays, but for one case: a run that finished off the
  // --log-every grid logged its last step early and kept that window's sums
  // in its checkpoint, so extending it drops that line's log fields and goes
  // on with the sums, as if it had never stopped; the line's head analysis
  // stays (no later step writes it). A line with no sums kept (a step on the
  // grid --log-every had before this resume changed it) stays whole.
  // A resume with no step to train (only the final analysis was missing)
  // keeps that last line whole: no step would log it again. Likewise an
  // analysis marked "final" (finish_report put the final analysis of a
  // last step off the --analyze-every grid there) goes when the run is
  // extended: the uninterrupted run has none at that step.
  const bool on_grid = config.log_every > 0 && start_step_ % config.log_every == 0;
  const bool extended = start_step_ < options_.target_steps;
  const bool relogged = !on_grid && extended && window_steps_ > 0;
  if (world.is_root()) {
    std::vector<std::string> drop = relogged ? kLogFields : std::vector<std::string>{};
    if (extended && final_analysis_at(folder_.metrics(), start_step_)) {
      drop.insert(drop.end(), kAnalysisFields.begin(), kAnalysisFields.end());
      drop.emplace_back(kFinalField);
    }
    const std::vector<int64_t> dropped = truncate_metrics(folder_.metrics(), start_step_, drop);
    if (!dropped.empty()) events_.history_dropped(start_step_, dropped);
  }
  if (on_grid) window_loss_ = window_acc_ = 0, window_steps_ = window_tokens_ = 0;
  const auto start = Clock::now();
  while (session_.steps_done() < options_.target_steps) {
    const auto stepping = Clock::now();
    const StepResult r = session_.step();
    step_seconds_ += seconds_since(stepping);
    timed_tokens_ += r.tokens;
    if (r.stopped) {  // between two slices: the step was abandoned
      const int sig = stop_signal();
      checkpoint();
      events_.stopped(sig, session_.steps_done());
      return 128 + sig;
    }
    window_loss_ += r.loss;
    window_acc_ += r.accuracy;
    window_tokens_ += r.tokens;
    ++window_steps_;
    const int64_t step = session_.steps_done();
    const bool last = step == options_.target_steps;
    // Each interval on its own: a step may log, analyze, both or neither.
    const bool on_log_grid = config.log_every > 0 && step % config.log_every == 0;
    const bool log = on_log_grid || last;
    const bool analyze = is_analysis_step(step, config.analyze_every);
    if ((log || analyze) && world.is_root()) {
      // The final line, off the grid, keeps the window's sums for the final
      // checkpoint: extending the run goes on with them.
      const double loss = window_loss_, accuracy = window_acc_;
      const int64_t steps = window_steps_, tokens = window_tokens_;
      const nlohmann::json logged = logged_;
      record(r, log, analyze);
      if (log && !on_log_grid)
        window_loss_ = loss, window_acc_ = accuracy, window_steps_ = steps, window_tokens_ = tokens, logged_ = logged;
    }
    if (config.checkpoint_every > 0 && step % config.checkpoint_every == 0 && !last) checkpoint();
    if (config.snapshot_every > 0 && step % config.snapshot_every == 0) snapshot();
    events_.stepped(step, seconds_since(start));
    if (const int sig = static_cast<int>(world.max(stop_signal()))) {
      checkpoint();
      events_.stopped(sig, step);
      return 128 + sig;
    }
  }
  checkpoint();
  events_.finished(session_.steps_done() - start_step_, seconds_since(start));
  return 0;
}

namespace {

// One line for the report's settings: "blocks.1.attn.o.weight replaced from
// Python; the rest as in /runs/x/checkpoint.safetensors (step 600)".
std::string edited_text(const nlohmann::json& edited) {
  std::string names;
  if (edited.contains("replaced") && edited["replaced"].is_array())
    for (const auto& name : edited["replaced"])
      names += (names.empty() ? "" : ", ") + (name.is_string() ? name.get<std::string>() : name.dump());
  const nlohmann::json source = edited.value("source", nlohmann::json::object());
  return (names.empty() ? std::string("no parameter") : names) + " replaced from Python; the rest as in " +
         (source.is_object() ? source.value("path", std::string("?")) + " (step " +
                                   (source.contains("step") ? source["step"].dump() : std::string("?")) + ")"
                             : std::string("?"));
}

}  // namespace

std::string as_recorded(const std::string& text) {
  return nlohmann::json::parse(nlohmann::json(text).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace))
      .get<std::string>();
}

void write_analysis_files(const RunFolder& folder, const analysis::RunAnalysis& run, const nlohmann::json& config,
                          const AnalysisSource& source) {
  const nlohmann::json& edited = source.edited;
  nlohmann::json heads;
  analysis::to_json(heads, run);
  // What the heads were trained on: a data file's path, else the task.
  if (config.is_object() && config.value("data", std::string()).empty()) heads["task"] = config.value("task", "");
  else if (config.is_object()) heads["data"] = config.value("data", "");
  if (!source.checkpoint.empty()) heads["checkpoint"] = source.checkpoint;
  if (!source.data_file.is_null()) heads["data_file"] = source.data_file;
  if (!edited.is_null()) heads["edited"] = edited;
  // The report's settings are what the model trained with, never the
  // sequences an analysis read in their place (the title names those).
  nlohmann::json shown = source.run_config.is_null() ? config : source.run_config;
  if (edited.is_object() && shown.is_object()) shown["edited"] = edited_text(edited);
  // A link (or anything but a file) at heads.json is refused before anything
  // is written; a regular one goes first, so that no old heads.json outlives
  // a report that fails.
  core::check_output_path(folder.heads());
  std::error_code ec;
  if (std::filesystem::is_regular_file(std::filesystem::symlink_status(folder.heads(), ec)))
    std::filesystem::remove(folder.heads(), ec);
  analysis::ReportOptions options;
  options.run_name = source.title.empty() ? folder.name() : source.title;
  options.snapshots = source.snapshots;
  const std::vector<nlohmann::json> history = source.history ? *source.history : read_metrics(folder.metrics());
  write_file_atomic(folder.report(), analysis::report_html(run, history, shown, options));
  // The paths it names (checkpoint, data_file) are the user's: never a failure here, after the analysis.
  write_file_atomic(folder.heads(), heads.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
}

std::optional<int64_t> analyzed_step(const RunFolder& folder) {
  // Through the regular-file reader: a FIFO planted as heads.json reads as
  // no analysis (the run is analyzed again) instead of blocking the resume.
  const std::optional<std::string> text = read_regular_file_head(folder.heads(), std::size_t{1} << 30);
  if (!text) return std::nullopt;
  const nlohmann::json heads = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  const auto step = heads.is_object() ? heads.find("step") : heads.end();
  if (step == heads.end() || !step->is_number_integer()) return std::nullopt;
  return step->get<int64_t>();
}

analysis::RunAnalysis Trainer::finish_report(std::function<void(const analysis::AnalysisProgress&)> progress,
                                             std::function<void()> interrupt) {
  analysis::AnalysisOptions options = options_.analysis;
  options.progress = std::move(progress);
  analysis::RunAnalysis run = [&] {
    const core::InterruptScope stoppable(std::move(interrupt));  // empty: no check
    return analysis::analyze_model(session_.model(), examples_of(session_.eval_batch()), options);
  }();
  run.analyzed = session_.task().name();
  run.step = session_.steps_done();
  // A last step off the --analyze-every grid had no analysis in its
  // metrics line: it gets the final one, marked "final" (an extension of the
  // run drops it again, run()), so that the history, and the report's
  // timeline read from it below, ends at the run's end. With
  // --analyze-every 0 there is no history to end.
  if (session_.world().is_root() && session_.config().analyze_every > 0) {
    nlohmann::json fields = analysis::compact_json(run);
    if (const auto measures = modular_progress(session_)) fields["progress"] = analysis::to_json(*measures);
    fields[kFinalField] = true;
    complete_metrics_line(folder_.metrics(), session_.steps_done(), fields);
  }
  AnalysisSource source;
  source.snapshots = snapshot_views(folder_.dir, session_.eval_batch(), options_.analysis.example);
  write_analysis_files(folder_, run, to_json(session_.config()), source);
  return run;
}

}  // namespace headlab::train
