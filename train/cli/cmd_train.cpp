// `headlab train`: a new run, a resumed one (--resume DIR) or one started
// from given weights (--init CHECKPOINT); under mpirun, one run on all ranks.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <optional>

#include "core/gemm.h"
#include "core/shortest.h"
#include "core/threads.h"
#include "train/checkpoint.h"
#include "train/cli/cli.h"
#include "train/cli/logging.h"
#include "train/cli/progress_bar.h"
#include "train/cli/train_view.h"
#include "train/dist.h"
#include "train/errors.h"
#include "train/folder_kind.h"
#include "train/rank_agreement.h"
#include "train/run_builder.h"
#include "train/run_identity.h"
#include "train/shell_word.h"
#include "train/signals.h"
#include "train/snapshots.h"
#include "train/trainer.h"

namespace headlab::cli {
namespace {

namespace fs = std::filesystem;

struct TrainArgs {
  std::string config_file, out, resume;
  bool force = false, quiet = false;
};

// --init's checkpoint: a file (a checkpoint or a snapshot) or a run folder's.
std::string init_checkpoint(const std::string& init) {
  const std::string path = fs::is_directory(init) ? (fs::path(init) / "checkpoint.safetensors").string() : init;
  if (!fs::exists(path))
    throw train::UsageError("--init " + (fs::is_directory(init)
                                             ? train::no_checkpoint(init, "give a run folder, a checkpoint or a snapshot")
                                             : init + ": no such checkpoint, snapshot or run folder"));
  return fs::absolute(path).lexically_normal().string();
}

// --init's checkpoint (`path`, absolute) must not be a file of the run in
// --out (its checkpoint, a snapshot): --force removes those before the new
// run starts, and config.json's "init" would name a file that no longer holds
// the weights the run started from. Any other file in --out is left alone.
void check_init_outlives_out(const std::string& path, const std::string& source, const std::string& out) {
  std::error_code ec;
  const fs::path init = fs::weakly_canonical(path, ec), dir = fs::weakly_canonical(out, ec);
  const fs::path folder = init.parent_path();
  if ((folder == dir && init.filename() == "checkpoint.safetensors") || folder == dir / "snapshots")
    throw train::UsageError("--init " + source + " is a checkpoint of the run in --out " + out +
                            ", which --force removes before the new run starts: its config.json would name a file "
                            "that no longer holds the weights it started from. Copy it out first (cp " + path +
                            " init.safetensors; --init init.safetensors), or give another --out");
}

// A setting's value as typed: a string without its JSON quotes.
std::string shown_value(const nlohmann::json& value) {
  return value.is_string() ? value.get<std::string>() : value.dump();
}

// Whether a setting given again with --resume is config.json's: a data file
// by the file it names, however it is spelled (config.json's path is absolute).
bool same_setting(const std::string& flag, const nlohmann::json& was, const nlohmann::json& now) {
  if (was == now) return true;
  if ((flag != "data" && flag != "eval-data") || !was.is_string() || !now.is_string()) return false;
  std::error_code ec;
  return fs::equivalent(was.get<std::string>(), now.get<std::string>(), ec);
}

// The checkpoint --resume continues from: checkpoint.safetensors, or the
// run's newest snapshot when the folder has none (a run killed before its
// first checkpoint: --checkpoint-every 0 writes one only on a stop signal and
// at the end) or one of an earlier step (killed between a snapshot and the
// next checkpoint). A snapshot is the run's whole checkpoint of its step, so
// the run goes on bit for bit; `note` says which one was taken and why.
train::Checkpoint resume_checkpoint(const train::RunFolder& folder, std::string& note) {
  const std::vector<int64_t> snapshots = train::snapshot_steps(folder.dir);
  std::optional<train::Checkpoint> checkpoint;
  // Without a snapshot, the checkpoint or its reader's error: under mpirun
  // the other ranks get here without open_run_folder's check.
  if (snapshots.empty() || fs::exists(folder.checkpoint())) {
    checkpoint = train::read_checkpoint(folder.checkpoint());
    if (snapshots.empty() || snapshots.back() <= checkpoint->info.step) return std::move(*checkpoint);
  }
  const std::string path = train::snapshot_path(folder.dir, snapshots.back());
  note = "resuming from the run's newest snapshot, " + path + " (step " + std::to_string(snapshots.back()) + "): " +
         (checkpoint ? "its checkpoint.safetensors is of step " + std::to_string(checkpoint->info.step)
                     : std::string("the folder has no checkpoint.safetensors")) +
         ", so the run was stopped without a checkpoint (SIGKILL, a power cut) after that snapshot";
  return train::read_checkpoint(path);
}

// What an extension does to a decaying schedule's learning rate: "" when
// nothing changes, else one sentence.
std::string schedule_change(const train::TrainConfig& before, const train::TrainConfig& after, int64_t step) {
  if (after.schedule == "constant") return "";
  const double was = optim::Schedule(before.schedule_options()).lr_at(step);
  const double now = optim::Schedule(after.schedule_options()).lr_at(step);
  const std::string s = std::to_string(step);
  if (after.schedule_steps != before.schedule_steps)
    return "--schedule-steps " + std::to_string(after.schedule_steps) + " moves the " + after.schedule +
           " schedule's horizon from step " + std::to_string(before.schedule_steps) + ": the learning rate goes from " +
           core::shortest(was) + " to " + core::shortest(now) + " at step " + s;
  if (after.steps > after.schedule_steps && before.steps <= before.schedule_steps)
    return "--steps " + std::to_string(after.steps) + " goes past the " + after.schedule + " schedule's horizon (step " +
           std::to_string(after.schedule_steps) + ", --schedule-steps): the learning rate stays at " +
           core::shortest(optim::Schedule(after.schedule_options()).lr_at(after.steps - 1)) + " from step " +
           std::to_string(std::max(step, after.schedule_steps)) + " on; to decay over the new steps, add --schedule-steps " +
           std::to_string(after.steps) + " (the learning rate then goes from " + core::shortest(was) + " to " +
           core::shortest(optim::Schedule([&] {
                            train::TrainConfig c = after;
                            c.schedule_steps = after.steps;
                            return c.schedule_options();
                          }())
                              .lr_at(step)) +
           " at step " + s + ")";
  return "";
}

// For a run of a task that needs a bigger model than it had and fell short of
// the task's target: the flags that solve it. "" otherwise.
std::string bigger_model_hint(const train::TrainConfig& config, const analysis::RunAnalysis& run) {
  if (!config.data.empty() || !run.accuracy) return "";
  const std::optional<train::SuggestedModel> model = train::suggested_model(config.task);
  if (!model || config.model.layers >= model->layers || *run.accuracy >= model->target_accuracy) return "";
  char reached[64];
  std::snprintf(reached, sizeof reached, "%.1f%% (its target: %.0f%%)", 100 * *run.accuracy,
                100 * model->target_accuracy);
  return "task " + config.task + " needs a bigger model than --layers " + std::to_string(config.model.layers) +
         ": this run reached " + reached + "; it is solved by headlab train --task " + config.task + " " + model->flags;
}

int run_train(const TrainArgs& args, const ConfigFlags& flags) {
  // Under mpirun every rank runs this; rank 0 alone writes and prints.
  const train::dist::World& world = train::dist::world();
  train::RunFolder folder;
  std::unique_ptr<train::Session> session;
  int64_t target = 0;
  train::TrainConfig resumed;  // the run's settings before this resume
  std::string init_source;     // --init's checkpoint, as given
  bool complete = false;  // --resume of a run already at its --steps
  std::string resumed_from;  // why --resume took a snapshot instead of checkpoint.safetensors
  std::string new_dir;    // a new run's folder, created once the ranks agree
  train::dist::all_or_none(world, [&] {
    if (!args.resume.empty()) {
      const std::vector<std::string> typed = flags.given();
      if (!args.out.empty() || std::find(typed.begin(), typed.end(), "init") != typed.end() ||
          !args.config_file.empty() || args.force)
        throw train::UsageError("--resume continues a run in its own folder: it takes no --out, --init, --config or --force");
      // Rank 0 locks the folder and writes into it; the others only read the checkpoint.
      folder = world.is_root() ? train::open_run_folder(args.resume) : train::RunFolder{args.resume, nullptr};
      train::Checkpoint ck = resume_checkpoint(folder, resumed_from);
      // A checkpoint from before --schedule-steps decayed to its --steps.
      if (ck.info.config.schedule_steps == 0 && ck.info.config.schedule != "constant")
        ck.info.config.schedule_steps = ck.info.config.steps;
      resumed = ck.info.config;
      flags.apply(ck.info.config);
      // Any other setting is the run's: given again at config.json's value
      // (a script that resumes with the flags it started with), it changes
      // nothing; another value is refused.
      const nlohmann::json was = train::to_json(resumed), now = train::to_json(ck.info.config);
      nlohmann::json kept = nlohmann::json::object();  // those settings, as config.json spells them
      for (const std::string& flag : flags.given())
        if (std::find(train::kResumeFlags.begin(), train::kResumeFlags.end(), flag) != train::kResumeFlags.end())
          continue;
        else if (was.contains(flag) && same_setting(flag, was[flag], now[flag]))
          kept[flag] = was[flag];
        else
          throw train::UsageError(
              "--" + flag + (now.contains(flag) ? " " + shown_value(now[flag]) : "") + " cannot change when resuming" +
              (was.contains(flag) ? ": the run's config.json has " + shown_value(was[flag]) : "") +
              "; only --steps, --lr, --schedule-steps, --threads, --micro-batches, --log-every, --analyze-every, "
              "--checkpoint-every, --snapshot-every and --keep-snapshots can (drop --" + flag + ")");
      train::apply_json(ck.info.config, kept, "config.json");
      ck.info.config.validate();
      use_gemm_backend(ck.info.config.gemm);
      use_precision(ck.info.config.precision);  // the run's: --precision cannot change on resume
      session = std::make_unique<train::Session>(ck, world);
      // config.json records the count a new run picked; --threads 0 picks again.
      use_threads_for(*session);
      // A checkpoint that is whole (the session took it) but another run's.
      if (world.is_root())
        train::check_checkpoint_is_the_folders(
            folder, ck,
            {"--resume " + folder.dir, ck.path,
             "Put back the run's own checkpoint (or one of its snapshots), or resume the other run in its own folder"});
      target = session->config().steps;
      if (target < session->steps_done())
        throw train::UsageError("--steps " + std::to_string(target) + " is below the " +
                                std::to_string(session->steps_done()) + " steps the run has already done");
      // After every usage check: a refused command leaves the folder untouched.
      if (world.is_root()) train::check_run_paths(folder, session->config().snapshot_every > 0 ? target : -1);
      // A run stopped between its last step and its final analysis, or whose
      // report.html could not be written, has no heads.json of its last step
      // (written last, write_analysis_files): it still gets that analysis.
      complete = target == session->steps_done() && train::analyzed_step(folder) == session->steps_done();
    } else {
      train::TrainConfig config;
      std::vector<std::string> given = flags.given();
      if (!args.config_file.empty()) {
        const std::vector<std::string> keys = apply_config_file(config, args.config_file);
        given.insert(given.end(), keys.begin(), keys.end());
      }
      flags.apply(config);
      // On the command line only: a config file (a sweep's, a run's config.json) holds every key.
      const std::vector<std::string>& typed = flags.given();
      const auto has = [&](const char* key) { return std::find(typed.begin(), typed.end(), key) != typed.end(); };
      check_data_paths(config, flags, args.config_file);  // before anything is read
      if (has("data") && has("task"))
        throw train::UsageError("--data " + config.data + " trains on the file's sequences, so --task " + config.task +
                                " would be ignored: give one of them");
      // Adam's own settings, typed for SGD (even at their defaults, which
      // validate() cannot tell from not given), would be ignored.
      for (const char* adam_only : {"betas", "eps"})
        if (config.optimizer == "sgd" && has(adam_only))
          throw train::UsageError(std::string("--") + adam_only + " is Adam's and AdamW's, but --optimizer sgd has no " +
                                  adam_only + ": drop --" + adam_only + ", or choose --optimizer adamw");
      config.validate();
      std::optional<train::Checkpoint> init;
      if (!config.init.empty()) {
        init_source = config.init;
        config.init = init_checkpoint(config.init);
        if (!args.out.empty()) check_init_outlives_out(config.init, init_source, args.out);
        init = train::read_checkpoint(config.init);
        train::take_model(config, init->model, given, init_source);  // the model is the checkpoint's
        // The task's sizes against the checkpoint's model, naming --init: the
        // model's --classes or --vocab came from the checkpoint, not from a flag.
        try {
          train::check_task_fits(*train::make_task_for(config), config.model.resolved());
        } catch (const train::UsageError& e) {
          throw train::UsageError("--init " + init_source + ": " + e.what() + " (give --task or --data that fits it)");
        }
      }
      use_gemm_backend(config.gemm);
      use_precision(config.precision);
      session = std::make_unique<train::Session>(config, world);  // validates the task and model before anything is written
      use_threads_for(*session);  // from the session's own sizes: a --data file is parsed once
      if (init) {
        train::load_weights(session->model(), init->file, "--init " + init_source);
        session->set_init(train::init_identity(config.init, *init));
      }
      target = config.steps;
      new_dir = args.out.empty() ? train::default_run_dir(config.data.empty() ? config.task : "data") : args.out;
    }
  });
  // Every rank trains the same run, or none does: checked before anything is
  // written, and before one rank could return early or exchange a gradient
  // of another length.
  if (world.size() > 1) {
    train::RunFingerprint mine = train::run_fingerprint(*session);
    mine.push_back({"whether the run is complete", complete ? "yes" : "no", false});
    train::check_ranks_agree(world, mine);
  }
  if (!new_dir.empty())
    train::dist::all_or_none(world, [&] {
      if (!world.is_root()) {
        folder = train::RunFolder{new_dir, nullptr};
        return;
      }
      folder = train::create_run_folder(new_dir, args.force, session->config().snapshot_every > 0 ? target : -1);
      // The session's config: --micro-batches resolved.
      train::write_file_atomic(folder.config(), train::to_json(session->config()).dump(2) + "\n");
    });
  if (complete) {
    // Nothing to train: say so instead of "trained 0 steps" and the report again.
    if (world.is_root())
      std::printf("%s is complete at step %lld (its --steps); extend it with: headlab train --resume %s --steps %lld\n",
                  folder.dir.c_str(), static_cast<long long>(target), train::shell_word(folder.dir).c_str(),
                  static_cast<long long>(2 * std::max<int64_t>(target, 1)));
    return 0;
  }
  warn_of_settings(*session);  // after every check: a refused command's error stays its one line
  if (!world.is_root()) {
    static train::TrainerEvents silent;  // the other ranks report nothing
    train::Trainer trainer(*session, folder, silent, {.target_steps = target, .analysis = {}});
    train::install_stop_handlers();
    return trainer.run();
  }

  auto log = make_run_logger(folder.log(), stdout_is_terminal(), args.quiet);
  const train::TrainConfig& config = session->config();
  const layers::ModelSpec& m = session->model().spec();
  // An attention-only model's d_ff (config.json keeps the setting) is no part of it.
  // Which snapshot, in train.log's history; why, on stderr (the terminal's
  // log lines would say it twice).
  if (!resumed_from.empty()) std::fprintf(stderr, "headlab train: warning: %s\n", resumed_from.c_str());
  log->info("{} {} in {}{}: {} layer(s), {} heads, d_model {}, d_k {}, {}, {} parameters, {} thread(s)",
            args.resume.empty() ? "training" : "resuming", session->task().name(), folder.dir,
            resumed_from.empty() ? "" : " from its snapshot of step " + std::to_string(session->steps_done()),
            m.layers, m.heads, m.d_model, m.d_k(), m.attn_only ? "attention only" : "d_ff " + std::to_string(m.d_ff),
            session->model().num_parameters(), core::num_threads());
  if (const std::string note = core::openblas_fallback_note();
      !note.empty() && core::gemm_backend() == core::GemmBackend::openblas)
    log->info("--gemm openblas: {}", note);
  // config.json keeps the 0 that asked for them; the model's sizes are the checkpoint's.
  if (const std::string inferred = session->task().inferred_sizes(); !inferred.empty()) log->info("{}", inferred);
  log->info("{} steps of {} sequences x {} tokens, {} lr {}, seed {}", target, session->batch_rows(), m.max_seq_len,
            config.optimizer, config.lr, config.seed);
  // With several threads the slices run side by side (train/step_lanes.h).
  const std::vector<train::Piece> pieces = session->step_pieces();
  const auto lanes = std::min<int64_t>(core::num_threads(), static_cast<int64_t>(pieces.size()));
  if (world.size() > 1 || config.micro_batches > 1)
    log->info("each step: {} slices of {} sequences, {} on each of {} process(es){}", config.micro_batches,
              session->batch_rows() / config.micro_batches, config.micro_batches / world.size(), world.size(),
              lanes > 1 ? ", " + std::to_string(lanes) + " at a time, one per thread" : std::string());
  else if (pieces.size() > 1)
    log->info("each step: its {} sequences as {} slices side by side, one per thread{}", session->batch_rows(),
              pieces.size(),
              session->batch_rows() % static_cast<int64_t>(pieces.size()) == 0
                  ? " (the bits of --micro-batches " + std::to_string(pieces.size()) + " --threads 1)"
                  : std::string());
  if (!config.data.empty() && config.eval_data.empty() && config.eval_fraction == 0)
    log->info("the held-out metrics (eval loss, eval acc) are computed on the first {} sequences of --data, which "
              "it also trains on: hold part of the file out with --eval-fraction F (such as 0.1), or give "
              "--eval-data FILE",
              session->eval_batch().batch);
  if (!init_source.empty()) {
    const nlohmann::json& init = session->init();
    log->info("weights from --init {} ({}: step {} of {}, {} bytes, FNV-1a hash {:016x})",
              init_source, config.init, init.value("step", int64_t{0}), init.value("task", ""),
              init.value("size", uint64_t{0}), init.value("hash", uint64_t{0}));
  }
  if (!args.resume.empty() && train::to_json(config) != train::to_json(resumed)) {
    // config.json tells the settings the run goes on with; these log lines
    // keep the history.
    train::write_file_atomic(folder.config(), train::to_json(config).dump(2) + "\n");
    if (config.lr != resumed.lr)
      log->info("--lr changes the learning rate from {} to {} at step {}", resumed.lr, config.lr,
                session->steps_done());
    if (const std::string change = schedule_change(resumed, config, session->steps_done()); !change.empty())
      log->info("{}", change);
  }

  train::TrainerOptions options;
  options.target_steps = target;
  TrainView view(log, folder, session->steps_done(), target, stderr_is_terminal() && !args.quiet, args.quiet);
  train::Trainer trainer(*session, folder, view, options);
  train::install_stop_handlers();
  int status = 0;
  try {
    status = trainer.run();
  } catch (const std::exception& e) {
    // What --resume goes on from: a snapshot is a whole checkpoint of its step.
    const train::Trainer::Saved& saved = trainer.last_saved();
    const std::string kept =
        saved.path.empty() ? fmt::format("the last good checkpoint, of step {} (the one this run went on from),",
                                         saved.step)
                           : fmt::format("the last good checkpoint, of step {} ({}),", saved.step, saved.path);
    if (saved.step >= 0 && dynamic_cast<const train::Diverged*>(&e) != nullptr)
      log->error("{}; {} is kept. Continue from it with a lower learning rate: headlab train --resume {} --lr {}",
                 e.what(), kept, train::shell_word(folder.dir), config.lr / 10);
    else if (saved.step >= 0)
      log->error("{}; {} is kept: headlab train --resume {} continues from it", e.what(), kept,
                 train::shell_word(folder.dir));
    else
      log->error("{}; no checkpoint had been written yet", e.what());
    throw;
  }
  if (world.size() > 1)
    log->info("time in gradient and stop-signal exchange: {:.3f} s over {} steps", world.seconds_communicating(),
              session->steps_done() - trainer.start_step());
  if (status == 0) {
    // The final analysis, with analyze's progress line on a terminal (a
    // large --eval-batch takes minutes). A stop signal ends it between two
    // forward passes, as it ends analyze: the checkpoint is saved, and
    // `train --resume` writes the analysis that is missing.
    AnalysisProgressBar bar(stderr_is_terminal() && !args.quiet);
    std::optional<analysis::RunAnalysis> run;
    try {
      run = trainer.finish_report([&bar](const analysis::AnalysisProgress& p) { bar.show(p); },
                                  train::throw_if_stopped);
    } catch (const train::Stopped& e) {
      bar.clear();
      log->warn("signal {} during the final analysis: the run is saved in {} (step {}) without its analysis "
                "(heads.json, report.html): headlab train --resume {} writes it",
                e.signal, folder.dir, session->steps_done(), train::shell_word(folder.dir));
      return 128 + e.signal;
    }
    bar.clear();
    view.report(*run, stdout_is_terminal());
    if (const std::string hint = bigger_model_hint(config, *run); !hint.empty()) log->warn("{}", hint);
    // A stop signal after the analysis (while its files were written): the
    // run is complete; it still ends as stopped, as asked.
    if (const int sig = train::stop_signal()) {
      log->warn("signal {} during the final analysis; the run is complete and saved in {}", sig, folder.dir);
      status = 128 + sig;
    }
  }
  return status;
}

}  // namespace

Command add_train(CLI::App& app) {
  auto args = std::make_shared<TrainArgs>();
  app.add_option("--config", args->config_file, "a JSON file of settings; keys are the flag names (\"d-model\": 64)")
      ->check(CLI::ExistingFile);
  auto flags = std::make_shared<ConfigFlags>(app);
  app.add_option("--out", args->out, "the run folder (default: a fresh folder under runs/)");
  app.add_flag("--force", args->force, "overwrite the run files in an existing --out folder");
  app.add_option("--resume", args->resume, "continue the run in this folder (to --steps, by default its own target)");
  app.add_flag("--quiet", args->quiet,
               "print only a summary at the end (the last log line, the verdict's first line, where report.html and "
               "heads.json are) and warnings; train.log, heads.json and report.html keep everything");
  app.footer(
      "With no flags: the default demo (first-prev-pair, vocabulary 8, 6 tokens, 1 layer, 2 heads,\n"
      "d_model 64), which should give one previous-token head and one first-token head.");
  return [args, flags] { return run_train(*args, *flags); };
}

}  // namespace headlab::cli
