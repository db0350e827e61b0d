// TrainConfig: every setting of a training run, under one name everywhere.
//
// The same field list (visit_fields) drives the CLI flags (--d-model), the
// keys of --config FILE.json ("d-model"), the run folder's config.json and the
// config stored in checkpoints, so the four can never drift apart. The model's
// fields live in one layers::ModelSpec; the list below gives them their flag
// names.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include <nlohmann/json.hpp>

#include "layers/model_spec.h"
#include "optim/schedule.h"

namespace headlab::train {

// A bool flag that sets a model field to false when given: --no-layernorm
// (layernorm), --bidirectional (causal). Bool is bool or const bool.
template <class Bool>
struct Negated {
  Bool& field;
};
template <class T>
inline constexpr bool is_negated_v = false;
template <class Bool>
inline constexpr bool is_negated_v<Negated<Bool>> = true;

// HEADLAB_GEMM's value if set, else "onednn" (core::default_gemm_backend_name).
std::string default_gemm_backend();
// HEADLAB_PRECISION's value if set, else "f32" (core::default_gemm_precision_name).
std::string default_gemm_precision();

// The largest --eps: beyond it Adam's update is lr * m / eps, a slowed SGD.
inline constexpr double kMaxEps = 1e-2;

struct TrainConfig {
  // task
  std::string task = "first-prev-pair";
  std::string data;  // a JSONL file instead of a task
  bool shuffle = false;
  // A finite training set (train/fixed_sets.h): 0 and 0 mean fresh examples
  // every step, as a task does by default.
  int64_t train_size = 0;
  double train_fraction = 0;
  std::string eval_data;  // a JSONL file to evaluate on instead of the task's held-out batch
  double eval_fraction = 0;  // with --data: the share of its sequences held out (0: evaluate on training ones)
  // The roles every analysis of the run expects, changed from the data's or
  // the task's as `analyze --expect/--scored-only` changes them
  // (train/analysis_roles.h): pattern names. Kept in config.json and the
  // checkpoint, so that `analyze RUN` and the run's sweep count the same roles.
  std::vector<std::string> expect, scored_only;
  // The checkpoint the weights started from (`train --init`; a run folder or
  // a snapshot is resolved to its file, absolute); empty: the seed's.
  std::string init;
  // The weights' scale at initialization (layers/init_scale.h): a standard
  // deviation, fan-in or nanda.
  std::string init_std = "0.02";
  // The model. vocab, max_seq_len (--seq-len) and classes 0 stand for the
  // task's own (a data file's classes: its vocab); d_ff 0 for 4 * d_model.
  layers::ModelSpec model{.vocab = 0, .classes = 0, .max_seq_len = 0, .layers = 1, .heads = 2, .d_model = 64};
  // optimization
  int64_t batch = 64;  // 0: the whole (finite) training set
  // Slices of each step's batch whose gradients are summed before the update;
  // under mpirun -np N they are spread over the N processes. 0: one per process.
  int64_t micro_batches = 0;
  int64_t steps = 600;
  double lr = 1e-3;
  std::string optimizer = "adamw";
  double weight_decay = -1;  // < 0: the optimizer's default (AdamW 0.01, others 0)
  std::vector<double> betas = {0.9, 0.999};  // Adam and AdamW
  double eps = 1e-8;                         // Adam and AdamW, in (0, kMaxEps]
  int64_t warmup = 0;
  std::string schedule = "constant";
  // The step a decaying schedule reaches its floor at (its horizon): 0 stands
  // for --steps, and a new run with a decaying schedule records it resolved,
  // so that extending the run with --steps never stretches (or restarts) its
  // decay unless asked.
  int64_t schedule_steps = 0;
  double min_lr = 0;
  double clip = 1.0;  // 0: no clipping
  // The precision of the log-softmax and cross-entropy of the training loss:
  // "f32", or "f64" (the logits converted to double, the gradient back to
  // the model's float32).
  std::string loss_dtype = "f32";
  uint64_t seed = 0;
  // The seed of the finite training set's draw (train/fixed_sets.h); -1: --seed.
  int64_t split_seed = -1;
  // running
  int threads = 0;  // 0: picked from the model's work per step (core::threads_for_work), recorded as picked
  std::string gemm = default_gemm_backend();  // onednn or openblas
  // The float32 GEMMs' precision (core/gemm.h): "f32", or "bf16" (operands
  // rounded to bfloat16, f32 accumulation and outputs; weights, optimizer,
  // loss and every other op stay f32). The head analysis always runs in f32.
  std::string precision = default_gemm_precision();
  int64_t eval_batch = 512;
  int64_t log_every = 50;
  int64_t analyze_every = 100;    // 0: only at the end
  int64_t checkpoint_every = 0;   // 0: only at the end (and on a signal)
  int64_t snapshot_every = 0;     // 0: none; N: keep snapshots/step-NNNNNN.safetensors every N steps
  int64_t keep_snapshots = 0;     // 0: every snapshot; K: only the newest K

  // Calls f(flag name, field reference, help) for every field above; a model
  // field that the flag sets to false comes as a Negated (is_negated_v).
  template <class Self, class F>
  static void visit_fields(Self& c, F&& f) {
    using Bool = std::remove_reference_t<decltype((c.model.layernorm))>;  // const with Self
    Negated<Bool> no_layernorm{c.model.layernorm}, bidirectional{c.model.causal};
    f("task", c.task, "synthetic task (see `headlab tasks`)");
    f("data", c.data, "train on a JSONL file of {\"tokens\": [...], \"targets\": [...]} lines instead of a task");
    f("shuffle", c.shuffle, "with --data: shuffle the sequences each epoch (seeded)");
    f("train-size", c.train_size,
      "train on a fixed set of N examples drawn once from the seed, in shuffled epochs; evaluate on held-out "
      "examples (0: fresh examples every step)");
    f("train-fraction", c.train_fraction,
      "modular-addition: train on this fraction of all p^2 pairs, evaluate on the rest (0: off)");
    f("eval-data", c.eval_data, "evaluate on this JSONL file (same format as --data) instead of the task's batch");
    f("eval-fraction", c.eval_fraction,
      "with --data: hold this fraction of the file's sequences out of training (drawn with the seed) and evaluate "
      "on them (0: without --eval-data, the held-out metrics are on training sequences)");
    f("expect", c.expect,
      "also expect this pattern as a role (a built-in one such as previous-token, or an \"attend\" pattern of the "
      "data that --scored-only leaves out): the verdict says whether a head carries it; repeatable or a comma list");
    f("scored-only", c.scored_only,
      "an \"attend\" pattern of the data that is scored and may label heads but is no expected role (a hypothesis "
      "to test, not one the verdict counts); repeatable or a comma list");
    f("init", c.init,
      "start from this checkpoint's model and weights: a checkpoint, a snapshot or a run folder (model flags must "
      "agree with it)");
    f("init-std", c.init_std,
      "initial weight scale: a standard deviation (at most 100) for every Linear and Embedding weight, fan-in "
      "(1/sqrt(in) per matrix, 1/sqrt(d-model) for the embeddings) or nanda (Nanda et al.'s: 1/sqrt(d-model), the "
      "unembedding 1/sqrt(vocab))");
    f("vocab", c.model.vocab, "input vocabulary size (0: the task's default)");
    f("seq-len", c.model.max_seq_len, "sequence length (0: the task's default)");
    f("classes", c.model.classes, "output classes (0: the task's; with --data, --vocab)");
    f("layers", c.model.layers, "transformer blocks");
    f("heads", c.model.heads, "attention heads per block (must divide --d-model)");
    f("d-model", c.model.d_model, "model width");
    f("d-ff", c.model.d_ff, "MLP width (0: 4 * d-model)");
    f("activation", c.model.activation, "MLP activation: gelu or relu");
    f("attn-only", c.model.attn_only, "no MLP in the blocks");
    f("no-layernorm", no_layernorm, "no LayerNorm anywhere");
    f("bidirectional", bidirectional, "attention sees every position (default: causal)");
    f("batch", c.batch, "sequences per training step (0 or full: the whole finite training set)");
    f("micro-batches", c.micro_batches,
      "split each step's batch into this many slices, gradients summed (0: one per process; "
      "under mpirun -np N, a multiple of N)");
    f("steps", c.steps, "training steps");
    f("lr", c.lr, "peak learning rate");
    f("optimizer", c.optimizer, "adamw, adam or sgd");
    f("weight-decay", c.weight_decay,
      "weight decay, decoupled for adamw (negative: the optimizer's default, 0.01 for adamw); lr x weight-decay "
      "must be below 1");
    f("betas", c.betas, "adam/adamw: B1,B2, the moments' decay rates");
    f("eps", c.eps, "adam/adamw: added to the denominator's square root (at most 0.01)");
    f("warmup", c.warmup, "linear warmup steps");
    f("schedule", c.schedule, "constant, cosine, linear or step");
    f("schedule-steps", c.schedule_steps,
      "the step the schedule decays to (0: --steps; a run keeps it when extended with --resume --steps)");
    f("min-lr", c.min_lr, "the floor of the cosine/linear decay");
    f("clip", c.clip, "clip the global gradient norm to this (0: off)");
    f("loss-dtype", c.loss_dtype,
      "f32 or f64: the training loss's log-softmax and cross-entropy in float or double (its gradient back in float)");
    f("seed", c.seed, "random seed: same seed and thread count give the same numbers");
    f("split-seed", c.split_seed,
      "draw the finite training set (--train-size, --train-fraction, --eval-fraction) from this seed instead of "
      "--seed (-1: --seed)");
    f("threads", c.threads, "threads for OpenMP and OpenBLAS (0: 1 for a toy model, all cores for a larger one)");
    f("gemm", c.gemm, "GEMM backend: onednn or openblas (default: $HEADLAB_GEMM, else onednn)");
    f("precision", c.precision,
      "f32 or bf16: the model's matrix products in float32, or with bfloat16 operands (f32 accumulation; weights, "
      "optimizer and the other ops stay f32; needs a CPU with bf16 units; default: $HEADLAB_PRECISION, else f32)");
    f("eval-batch", c.eval_batch,
      "sequences in the fixed evaluation batch, which every head analysis reads (the final one about 1 + 3.5 "
      "heads x (layers + 1) forward passes of it; train says at its first log line when that takes a minute or more)");
    f("log-every", c.log_every, "log and record metrics every N steps (0: only at the end)");
    f("analyze-every", c.analyze_every, "analyze the heads every N steps (0: only at the end)");
    f("checkpoint-every", c.checkpoint_every, "write a checkpoint every N steps (0: only at the end)");
    f("snapshot-every", c.snapshot_every,
      "also keep the checkpoint of every N-th step as snapshots/step-NNNNNN.safetensors (0: none)");
    f("keep-snapshots", c.keep_snapshots, "keep only the newest K snapshots (0: all)");
  }

  // Throws UsageError naming the first bad value and what would fit.
  void validate() const;
  // Settings of a valid config that do nothing in this run (--keep-snapshots
  // without --snapshot-every, a --snapshot-every or --warmup beyond --steps),
  // each as one sentence naming the flag and its value: the command line
  // warns of them. They may be meant for a later --resume --steps.
  std::vector<std::string> inert_settings() const;
  optim::ScheduleOptions schedule_options() const;
};

// The flag that sets a model field ("max_seq_len" -> "--seq-len"), for
// messages about a model (layers::ModelSpec::FieldName).
std::string model_flag(const std::string& field);
// Validates a model spec, naming the flags in a UsageError.
void validate_model(const layers::ModelSpec& spec);

// Makes `model` (a checkpoint's, named by `source`) the config's model. A
// model flag among `given` whose value differs is a UsageError naming the
// flag, the given value and the checkpoint's (0 for --vocab, --seq-len,
// --classes or --d-ff means "the default" and never differs).
void take_model(TrainConfig& config, const layers::ModelSpec& model, const std::vector<std::string>& given,
                const std::string& source);

nlohmann::json to_json(const TrainConfig& config);
// Applies the keys of `j` onto `config`; an unknown key or a wrong type is a
// UsageError naming the key (and `source`, e.g. the file name).
void apply_json(TrainConfig& config, const nlohmann::json& j, const std::string& source);
// The config an earlier run or sweep stored (a checkpoint's, a run's or a
// sweep's config.json, a shard's file): `j` applied as by apply_json, except
// that a missing "precision" is f32, not the default. The stored run trained
// before the key existed, in f32, whatever HEADLAB_PRECISION says now: the
// defaults are for new runs only.
TrainConfig stored_config(const nlohmann::json& j, const std::string& source);

}  // namespace headlab::train
