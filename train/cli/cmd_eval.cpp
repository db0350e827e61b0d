// `headlab eval CHECKPOINT`: loss and accuracy on a task batch or a whole
// data file, with optional safetensors dumps of the logits and of the
// gradient of the mean loss with respect to every parameter, and of the
// activations at the model's hook points (dump_activations.h).
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <limits>
#include <optional>

#include "autograd/ops.h"
#include "core/safetensors.h"
#include "core/shortest.h"
#include "core/threads.h"
#include "layers/padding_mask.h"
#include "train/checkpoint.h"
#include "train/cli/analysis_input.h"
#include "train/cli/cli.h"
#include "train/cli/dump_activations.h"
#include "train/errors.h"
#include "train/input_file.h"
#include "train/fixed_sets.h"
#include "train/folder_kind.h"
#include "train/run_builder.h"
#include "train/run_data.h"
#include "train/run_folder.h"
#include "train/run_identity.h"
#include "train/session.h"
#include "train/shell_word.h"
#include "train/signals.h"
#include "train/trainer.h"

namespace headlab::cli {
namespace {

struct EvalArgs {
  std::string checkpoint, task, data, dump_logits, dump_grads, dump_activations;
  std::string run_dir;  // the run folder given instead of its checkpoint, if one was
  std::vector<std::string> hooks;  // empty: every hook point
  int64_t batch = 0;
  uint64_t seed = 0;
  bool seed_given = false, batch_given = false;
  int threads = 0;
  std::string gemm;  // empty: the checkpoint's backend
  std::string precision;  // empty: the checkpoint's
  bool json = false;
};

// Each dump: a new file or a regular one, outside run and sweep folders,
// none of what this eval reads (the checkpoint, --data, the files the run
// trained and was evaluated on), and not another dump: checked before any
// work, so that a refused path costs nothing and replaces nothing.
void check_dumps(const EvalArgs& args, const train::TrainConfig& run) {
  const std::vector<train::NamedInput> inputs{{"the checkpoint", args.checkpoint},
                                              {"--data", args.data},
                                              {"the run's --data", run.data},
                                              {"the run's --eval-data", run.eval_data}};
  const std::pair<const char*, const std::string*> dumps[] = {
      {"--dump-logits", &args.dump_logits}, {"--dump-grads", &args.dump_grads},
      {"--dump-activations", &args.dump_activations}};
  for (std::size_t i = 0; i < std::size(dumps); ++i) {
    const auto& [flag, path] = dumps[i];
    if (path->empty()) continue;
    train::check_output_is_no_input(flag, *path, inputs);
    for (std::size_t j = 0; j < i; ++j) {
      std::error_code ec;
      const std::string& other = *dumps[j].second;
      if (!other.empty() && (std::filesystem::absolute(*path, ec).lexically_normal() ==
                                 std::filesystem::absolute(other, ec).lexically_normal() ||
                             std::filesystem::equivalent(*path, other, ec)))
        throw train::UsageError(std::string(flag) + " " + *path + " is also " + dumps[j].first +
                                "; give each dump its own file");
    }
  }
}

int run_eval(const EvalArgs& args) {
  if (!args.task.empty() && !args.data.empty()) throw train::UsageError("give --task or --data, not both");
  if (args.batch_given && args.batch < 1)
    throw train::UsageError("--batch must be at least 1, got " + std::to_string(args.batch));
  if (args.threads < 0) throw train::UsageError("--threads must be 0 (picked from the model's size) or more");
  if (!args.data.empty()) train::check_data_path("--data", args.data);
  // A run before its first checkpoint, a sweep's folder, ... are said to be
  // what they are, not a file that cannot be opened.
  if (std::error_code ec; !std::filesystem::exists(args.checkpoint, ec))
    throw train::UsageError(train::no_checkpoint(args.run_dir.empty() ? args.checkpoint : args.run_dir,
                                                 "give a run folder or a checkpoint file"));
  const train::Checkpoint ck = train::read_checkpoint(args.checkpoint);
  // `eval RUN` evaluates the run: not another run's checkpoint copied into its folder.
  if (!args.run_dir.empty())
    train::check_checkpoint_is_the_folders(
        {args.run_dir, nullptr}, ck,
        {"", args.checkpoint,
         "Put back the run's own checkpoint, or evaluate the file as a checkpoint of its own: headlab eval " +
             train::shell_word(args.checkpoint)});
  check_dumps(args, ck.info.config);
  use_threads(args.threads, train_flops_per_step(ck.info.config, ck.model));  // 0: as the run's training would
  // The run's own task and evaluation batch unless told otherwise; the model
  // is always the checkpoint's.
  train::TrainConfig config = ck.info.config;
  if (args.seed_given) {
    // The seed draws a task's batch, never the run's split into training and
    // held-out sets, which --seed also seeds unless --split-seed is given.
    if (train::has_fixed_sets(config) && config.split_seed < 0) config.split_seed = static_cast<int64_t>(config.seed);
    config.seed = args.seed;
  }
  if (args.batch_given) config.eval_batch = args.batch;
  use_gemm_backend(args.gemm.empty() ? config.gemm : args.gemm);
  use_precision(args.precision.empty() ? config.precision : args.precision);
  if (!args.data.empty() || !args.task.empty()) {
    // Another source than the run's: none of its training or held-out sets.
    train::drop_fixed_sets(config);
  }
  if (!args.data.empty()) {
    // The file is read with the model's own sizes and classes (eval has no
    // --vocab, --seq-len or --classes), and all of it is evaluated.
    config.data = args.data;
    config.model = ck.model;
    config.eval_batch = std::numeric_limits<int64_t>::max();
  } else if (!args.task.empty()) {
    config.task = args.task;
    config.data.clear();
  }
  // The run's own file, before it is parsed: a changed file is reported as
  // changed, not as a line that no longer parses or no longer fits.
  // A moved run folder's own copy is read in its place (never written back).
  if (args.data.empty()) train::locate_run_data(ck.info, config, train::run_folder_of(args.checkpoint), true);
  // As train warns of settings that do nothing: a file is read in its order.
  if (args.seed_given && !config.data.empty())
    std::fprintf(stderr, "headlab eval: warning: --seed %llu does nothing here: a data file's sequences are "
                 "evaluated as the file holds them (the seed draws a task's sampled batch)\n",
                 static_cast<unsigned long long>(args.seed));
  const auto task = train::make_task_for(config);
  if (args.data.empty()) train::check_data_unchanged(ck.info, config, *task);
  train::check_task_fits(*task, ck.model);
  // As headlab.analyze warns: a file without "targets" scores the next token, which this model may never have learned.
  if (!args.data.empty())
    if (const std::string warning = next_token_warning(ck, args.checkpoint, *task); !warning.empty())
      std::fprintf(stderr, "headlab eval: warning: %s\n", warning.c_str());
  const int64_t total = task->eval_rows(config.eval_batch);
  const bool want_grads = !args.dump_grads.empty();
  // A --data file is scored --batch sequences at a time, dumps included
  // (memory bounded by the batch, not the file); a task's sampled batch is one.
  const int64_t rows =
      args.data.empty() ? total : std::min(total, args.batch_given ? args.batch : ck.info.config.eval_batch);
  // The batch is --batch if given, else the checkpoint's eval-batch: the
  // message names the one in use, and how to choose another.
  try {
    train::check_sizes(ck.model, {{args.batch_given ? "--batch" : "the checkpoint's eval-batch", rows}});
  } catch (const train::UsageError& e) {
    if (args.batch_given) throw;
    throw train::UsageError(std::string(e.what()) + "; give --batch N to evaluate " +
                            (args.data.empty() ? "fewer sequences" : "fewer sequences at a time"));
  }
  const auto model = train::load_model(ck, args.checkpoint);
  model->eval();
  if (!args.hooks.empty() && args.dump_activations.empty())
    throw train::UsageError("--hooks names what --dump-activations writes; give --dump-activations FILE too");
  const std::vector<std::string> hooks = hooks_to_dump(model->spec(), args.hooks);

  // Each batch: forward (with a graph for --dump-grads), score, its rows of
  // the logits dump, and its share of the gradient.
  // The dumps' metadata is JSON: a path not in UTF-8 is recorded with U+FFFD, as heads.json records it.
  const core::Metadata dump_metadata{{"checkpoint", train::as_recorded(args.checkpoint)},
                                     {"task", train::as_recorded(task->name())}};
  std::unique_ptr<core::SafetensorsStream> logits_out;
  std::vector<double> grad_sums;  // sum over batches of (target count x the batch's mean-loss gradient)
  train::EvalResult r;
  double loss_sum = 0, correct = 0;
  int64_t sequences = 0, batches = 0;
  auto evaluate_batch = [&](const train::Batch& batch) {
    autograd::Variable logits, loss;
    {
      std::optional<autograd::NoGradGuard> no_grad;
      if (!want_grads) no_grad.emplace();
      const core::Tensor mask = layers::padding_mask(batch.lengths, batch.batch, batch.seq_len);
      logits = model->forward(batch.tokens, batch.batch, batch.seq_len, &mask);
      loss = autograd::cross_entropy(logits, batch.targets);
    }
    const train::EvalResult b = train::score_logits(logits.value(), batch.targets);
    if (batches == 0) r = b;  // one batch: its result exactly
    else r.count += b.count;
    loss_sum += b.loss * static_cast<double>(b.count);
    correct += b.accuracy * static_cast<double>(b.count);
    if (!args.dump_logits.empty()) {
      if (!logits_out) {
        // Token ids and class labels stay integers (I64); a target of -1 marks an unscored position, and
        // "lengths" the real tokens of each row (the padding after them is computed but meaningless).
        const core::Shape& shape = logits.value().shape();
        logits_out = std::make_unique<core::SafetensorsStream>(
            args.dump_logits,
            std::vector<core::SafetensorsStream::Declared>{
                {"logits", {total, shape[1], shape[2]}, core::DType::f32},
                {"tokens", {total, batch.seq_len}, core::DType::f32, true},
                {"targets", {total, batch.seq_len}, core::DType::f32, true},
                {"lengths", {total}, core::DType::f32, true}},
            dump_metadata);
      }
      logits_out->write_rows("logits", sequences, logits.value());
      logits_out->write_rows("tokens", sequences, std::vector<int64_t>(batch.tokens.begin(), batch.tokens.end()));
      logits_out->write_rows("targets", sequences, std::vector<int64_t>(batch.targets.begin(), batch.targets.end()));
      logits_out->write_rows("lengths", sequences, row_lengths(batch));
    }
    if (want_grads) {
      loss.backward();
      grad_sums.resize(static_cast<std::size_t>(model->num_parameters()), 0.0);
      std::size_t at = 0;
      for (const auto& [name, p] : model->named_parameters()) {
        const auto n = static_cast<std::size_t>(p.value().numel());
        if (p.has_grad()) {
          const core::Tensor g = p.grad().contiguous();
          const float* src = g.data<float>();
          for (std::size_t i = 0; i < n; ++i) grad_sums[at + i] += static_cast<double>(b.count) * src[i];
          p.zero_grad();
        }
        at += n;
      }
    }
    sequences += batch.batch;
    ++batches;
  };
  // A stop signal ends the work between batches: the unwinding removes the
  // dumps' temporary files, and nothing is left half written.
  train::install_stop_handlers();
  for (int64_t first = 0; first < total; first += rows) {
    train::throw_if_stopped();
    evaluate_batch(task->eval_slice(first, std::min(rows, total - first), config.seed));
  }
  if (batches > 1 && r.count > 0) {
    r.loss = loss_sum / static_cast<double>(r.count);
    r.accuracy = correct / static_cast<double>(r.count);
  }
  // Nothing scored would read as a loss of 0: refused, and no dump is left
  // (the unwinding removes their temporary files). A --data file has a
  // target somewhere (DataFile); a run's own rows may not, at a small --batch.
  if (r.count == 0)
    throw train::UsageError("the " + std::to_string(sequences) + " sequences evaluated (" +
                            (config.eval_data.empty() ? task->name() : "the run's --eval-data " + config.eval_data) +
                            ") have no target, so there is no loss or accuracy to measure: give a larger --batch, or "
                            "those lines targets");
  if (logits_out) logits_out->finish();
  if (want_grads) {
    // The gradient of the mean loss over every target: each batch's weighted
    // by its share of the targets (one batch: its own gradient, exactly).
    core::NamedTensors grads;
    std::size_t at = 0;
    for (const auto& [name, p] : model->named_parameters()) {
      core::Tensor g = core::Tensor::zeros_like(p.value());
      float* dst = g.data<float>();
      const auto n = static_cast<std::size_t>(g.numel());
      for (std::size_t i = 0; i < n && r.count > 0; ++i)
        dst[i] = static_cast<float>(grad_sums[at + i] / static_cast<double>(r.count));
      grads.emplace_back(name, std::move(g));
      at += n;
    }
    core::Metadata metadata = dump_metadata;
    metadata["loss"] = core::shortest(r.loss);
    metadata["positions"] = std::to_string(r.count);
    core::save_safetensors(args.dump_grads, grads, metadata);
  }
  if (!args.dump_activations.empty()) {
    // Streamed a batch at a time (a task's sampled batch is one).
    const int64_t dump_rows =
        args.data.empty() ? total : std::min(total, args.batch_given ? args.batch : ck.info.config.eval_batch);
    dump_activations(*model, *task, total, dump_rows, config.seed, hooks, args.dump_activations, dump_metadata);
  }
  // A run's own rows come from its --eval-data file when it had one.
  const bool eval_file = args.data.empty() && args.task.empty() && !config.eval_data.empty();
  if (args.json) {
    nlohmann::json out{{"task", task->name()}, {"sequences", sequences}, {"positions", r.count},
                       {"loss", r.loss}, {"accuracy", r.accuracy}};
    if (eval_file) out["eval_data"] = config.eval_data;
    if (!args.dump_logits.empty()) out["logits_file"] = args.dump_logits;
    if (want_grads) out["grads_file"] = args.dump_grads;
    if (!args.dump_activations.empty()) out["activations_file"] = args.dump_activations;
    // Paths the user named, in bytes JSON may not hold: U+FFFD, not a failure after the work.
    std::cout << out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
  } else {
    std::printf("%s: %lld sequences, %lld target positions\nloss %.6f  accuracy %.2f%%\n",
                (eval_file ? "data:" + config.eval_data : task->name()).c_str(),
                static_cast<long long>(sequences), static_cast<long long>(r.count), r.loss, 100 * r.accuracy);
    // Say where the dumps went, so that a relative path is not a guess.
    if (!args.dump_logits.empty()) std::printf("logits: %s\n", args.dump_logits.c_str());
    if (want_grads) std::printf("gradients: %s\n", args.dump_grads.c_str());
    if (!args.dump_activations.empty()) std::printf("activations: %s\n", args.dump_activations.c_str());
  }
  return 0;
}

}  // namespace

Command add_eval(CLI::App& app) {
  auto args = std::make_shared<EvalArgs>();
  app.add_option("checkpoint", args->checkpoint, "a checkpoint.safetensors (or a run folder)")->required();
  app.add_option("--task", args->task, "evaluate on this task (default: the checkpoint's)");
  app.add_option("--data", args->data, "evaluate on every sequence of this JSONL file, --batch at a time");
  app.add_option("--batch", args->batch,
                 "sequences sampled from the task, or scored at a time from --data (default: the run's eval batch)")
      ->check(in_range<int64_t>())
      ->each([args](const std::string&) { args->batch_given = true; });
  app.add_option("--seed", args->seed, "seed of the sampled batch (default: the run's)")
      ->check(non_negative())
      ->check(in_range<uint64_t>())
      ->each([args](const std::string&) { args->seed_given = true; });
  app.add_option("--threads", args->threads, "threads (0: picked from the model's size, as train does)")
      ->check(in_range<int>());
  app.add_option("--gemm", args->gemm, "GEMM backend, onednn or openblas (default: the run's)");
  app.add_option("--precision", args->precision, "the matrix products in f32 or bf16 (default: the run's)");
  app.add_option("--dump-logits", args->dump_logits, "write the logits [N, T, C] (F32) with the tokens and targets [N, T] and each sequence's lengths [N] "
                 "(I64) as safetensors; read row i up to lengths[i]");
  app.add_option("--dump-grads", args->dump_grads,
                 "write d(mean loss)/d(parameter) for every parameter, under the parameter names, as safetensors");
  app.add_option("--dump-activations", args->dump_activations,
                 "write the activations at the hook points (F32, under TransformerLens's hook names) and the tokens "
                 "[N, T] and lengths [N] (I64) as safetensors, --batch sequences at a time; by default every point but TransformerLens's "
                 "copy points (hook_attn_in, hook_q_input, hook_k_input, hook_v_input, hook_mlp_in), as Python's "
                 "names=None");
  app.add_option("--hooks", args->hooks,
                 "with --dump-activations: only these hook names (comma-separated; a copy point too), or all: every "
                 "point, the copy points included")
      ->delimiter(',');
  app.add_flag("--json", args->json, "print one JSON object");
  return [args] {
    EvalArgs a = *args;
    if (std::filesystem::is_directory(a.checkpoint)) {
      a.run_dir = a.checkpoint;
      a.checkpoint += "/checkpoint.safetensors";
    }
    return run_eval(a);
  };
}

}  // namespace headlab::cli
