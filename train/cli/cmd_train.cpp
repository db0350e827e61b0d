// `headlab train`: a new run, a resumed one (--resume DIR) or one started
// from given weights (--init CHECKPOINT); under mpirun, one run on all ranks.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <optional>

#include "core/threads.h"
#include "train/checkpoint.h"
#include "train/cli/cli.h"
#include "train/cli/logging.h"
#include "train/cli/train_view.h"
#include "train/dist.h"
#include "train/errors.h"
#include "train/signals.h"
#include "train/trainer.h"

namespace headlab::cli {
namespace {

struct TrainArgs {
  std::string config_file, out, resume, init;
  bool force = false;
};

// Flags a resumed run may change: how long and how it reports, never what it
// trains -- except the learning rate, so that a run that diverged can go on
// from its last good checkpoint with a smaller one.
const std::vector<std::string> kResumeFlags = {"steps",     "lr",           "threads",         "micro-batches",
                                               "log-every", "analyze-every", "checkpoint-every"};

int run_train(const TrainArgs& args, const ConfigFlags& flags) {
  // Under mpirun every rank runs this; rank 0 alone writes and prints.
  const train::dist::World& world = train::dist::world();
  train::RunFolder folder;
  std::unique_ptr<train::Session> session;
  int64_t target = 0;
  double resumed_lr = 0;  // the run's learning rate before this resume
  bool complete = false;  // --resume of a run already at its --steps
  train::dist::all_or_none(world, [&] {
    if (!args.resume.empty()) {
      if (!args.out.empty() || !args.init.empty() || !args.config_file.empty() || args.force)
        throw train::UsageError("--resume continues a run in its own folder: it takes no --out, --init, --config or --force");
      for (const std::string& flag : flags.given())
        if (std::find(kResumeFlags.begin(), kResumeFlags.end(), flag) == kResumeFlags.end())
          throw train::UsageError("--" + flag + " cannot change when resuming (the run's config.json fixes it); "
                                  "only --steps, --lr, --threads, --micro-batches, --log-every, --analyze-every and "
                                  "--checkpoint-every can");
      // Rank 0 locks the folder and writes into it; the others only read the checkpoint.
      folder = world.is_root() ? train::open_run_folder(args.resume) : train::RunFolder{args.resume, nullptr};
      train::Checkpoint ck = train::read_checkpoint(folder.checkpoint());
      resumed_lr = ck.info.config.lr;
      flags.apply(ck.info.config);
      ck.info.config.validate();
      use_threads(ck.info.config.threads);
      use_gemm_backend(ck.info.config.gemm);
      session = std::make_unique<train::Session>(ck, world);
      target = session->config().steps;
      if (target < session->steps_done())
        throw train::UsageError("--steps " + std::to_string(target) + " is below the " +
                                std::to_string(session->steps_done()) + " steps the run has already done");
      // A run stopped between its last step and its final analysis (no
      // heads.json yet) still gets that analysis.
      complete = target == session->steps_done() && std::filesystem::exists(folder.heads());
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
      if (has("data") && has("task"))
        throw train::UsageError("--data " + config.data + " trains on the file's sequences, so --task " + config.task +
                                " would be ignored: give one of them");
      config.validate();
      std::optional<train::Checkpoint> init;
      if (!args.init.empty()) {
        init = train::read_checkpoint(args.init);
        train::take_model(config, init->model, given, args.init);  // the model is the checkpoint's
      }
      use_threads(config.threads);
      use_gemm_backend(config.gemm);
      session = std::make_unique<train::Session>(config, world);  // validates the task and model before anything is written
      if (init) train::load_weights(session->model(), init->file, "--init " + args.init);
      target = config.steps;
      const std::string dir =
          args.out.empty() ? train::default_run_dir(config.data.empty() ? config.task : "data") : args.out;
      if (world.is_root()) {
        folder = train::create_run_folder(dir, args.force);
        // The session's config: --micro-batches resolved.
        train::write_file_atomic(folder.config(), train::to_json(session->config()).dump(2) + "\n");
      } else {
        folder = train::RunFolder{dir, nullptr};
      }
    }
  });
  if (complete) {
    // Nothing to train: say so instead of "trained 0 steps" and the report again.
    if (world.is_root())
      std::printf("%s is complete at step %lld (its --steps); extend it with: headlab train --resume %s --steps %lld\n",
                  folder.dir.c_str(), static_cast<long long>(target), folder.dir.c_str(),
                  static_cast<long long>(2 * std::max<int64_t>(target, 1)));
    return 0;
  }
  if (!world.is_root()) {
    static train::TrainerEvents silent;  // the other ranks report nothing
    train::Trainer trainer(*session, folder, silent, {.target_steps = target, .analysis = {}});
    train::install_stop_handlers();
    return trainer.run();
  }

  auto log = make_run_logger(folder.log(), stdout_is_terminal());
  const train::TrainConfig& config = session->config();
  const layers::ModelSpec& m = session->model().spec();
  log->info("{} {} in {}: {} layer(s), {} heads, d_model {}, d_k {}, {} parameters, {} thread(s)",
            args.resume.empty() ? "training" : "resuming", session->task().name(), folder.dir, m.layers, m.heads,
            m.d_model, m.d_k(), session->model().num_parameters(), core::num_threads());
  log->info("{} steps of {} sequences x {} tokens, {} lr {}, seed {}", target, session->batch_rows(), m.max_seq_len,
            config.optimizer, config.lr, config.seed);
  if (world.size() > 1 || config.micro_batches > 1)
    log->info("each step: {} slices of {} sequences, {} on each of {} process(es)", config.micro_batches,
              config.batch / config.micro_batches, config.micro_batches / world.size(), world.size());
  if (!args.resume.empty() && config.lr != resumed_lr) {
    // config.json tells the settings the run goes on with; this log line
    // keeps the history.
    train::write_file_atomic(folder.config(), train::to_json(config).dump(2) + "\n");
    log->info("--lr changes the learning rate from {} to {} at step {}", resumed_lr, config.lr,
              session->steps_done());
  }

  train::TrainerOptions options;
  options.target_steps = target;
  TrainView view(log, folder, session->steps_done(), target, stderr_is_terminal());
  train::Trainer trainer(*session, folder, view, options);
  train::install_stop_handlers();
  int status = 0;
  try {
    status = trainer.run();
  } catch (const std::exception& e) {
    if (trainer.last_checkpoint_step() >= 0 && dynamic_cast<const train::Diverged*>(&e) != nullptr)
      log->error("{}; the last good checkpoint, of step {}, is kept. Continue from it with a lower learning rate: "
                 "headlab train --resume {} --lr {}",
                 e.what(), trainer.last_checkpoint_step(), folder.dir, config.lr / 10);
    else if (trainer.last_checkpoint_step() >= 0)
      log->error("{}; the last good checkpoint, of step {}, is kept: headlab train --resume {} continues from it",
                 e.what(), trainer.last_checkpoint_step(), folder.dir);
    else
      log->error("{}; no checkpoint had been written yet", e.what());
    throw;
  }
  if (world.size() > 1)
    log->info("time in gradient and stop-signal exchange: {:.3f} s over {} steps", world.seconds_communicating(),
              session->steps_done() - trainer.start_step());
  if (status == 0) {
    view.report(trainer.finish_report(), stdout_is_terminal());
    // A stop signal during the final analysis: the checkpoint is saved and
    // the report written; the run still ends as stopped, as asked.
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
  app.add_option("--init", args->init, "start from this checkpoint's model and weights (model flags must agree with it)");
  app.footer(
      "With no flags: the default demo (first-prev-pair, vocabulary 8, 6 tokens, 1 layer, 2 heads,\n"
      "d_model 64), which should give one previous-token head and one first-token head.");
  return [args, flags] { return run_train(*args, *flags); };
}

}  // namespace headlab::cli
