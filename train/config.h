// TrainConfig: every setting of a training run, under one name everywhere.
//
// The same field list (visit_fields) drives the CLI flags (--d-model), the
// keys of --config FILE.json ("d-model"), the run folder's config.json and the
// config stored in checkpoints, so the four can never drift apart.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "layers/transformer.h"
#include "optim/schedule.h"

namespace headlab::train {

// HEADLAB_GEMM's value if set, else "onednn" (core::default_gemm_backend_name).
std::string default_gemm_backend();

struct TrainConfig {
  // task
  std::string task = "first-prev-pair";
  std::string data;  // a JSONL file instead of a task
  bool shuffle = false;
  int64_t vocab = 0;    // 0: the task's default
  int64_t seq_len = 0;  // 0: the task's default
  // model
  int64_t layers = 1;
  int64_t heads = 2;
  int64_t d_model = 64;
  int64_t d_ff = 0;  // 0: 4 * d_model
  bool attn_only = false;
  bool no_layernorm = false;
  bool bidirectional = false;
  // optimization
  int64_t batch = 64;
  int64_t steps = 600;
  double lr = 1e-3;
  std::string optimizer = "adamw";
  double weight_decay = -1;  // < 0: the optimizer's default (AdamW 0.01, others 0)
  int64_t warmup = 0;
  std::string schedule = "constant";
  double min_lr = 0;
  double clip = 1.0;  // 0: no clipping
  uint64_t seed = 0;
  // running
  int threads = 0;  // 0: all cores
  std::string gemm = default_gemm_backend();  // onednn or openblas
  int64_t eval_batch = 512;
  int64_t log_every = 50;
  int64_t analyze_every = 100;    // 0: only at the end
  int64_t checkpoint_every = 0;   // 0: only at the end (and on a signal)

  // Calls f(flag name, field reference, help) for every field above.
  template <class Self, class F>
  static void visit_fields(Self& c, F&& f) {
    f("task", c.task, "synthetic task (see `headlab tasks`)");
    f("data", c.data, "train on a JSONL file of {\"tokens\": [...], \"targets\": [...]} lines instead of a task");
    f("shuffle", c.shuffle, "with --data: shuffle the sequences each epoch (seeded)");
    f("vocab", c.vocab, "input vocabulary size (0: the task's default)");
    f("seq-len", c.seq_len, "sequence length (0: the task's default)");
    f("layers", c.layers, "transformer blocks");
    f("heads", c.heads, "attention heads per block (must divide --d-model)");
    f("d-model", c.d_model, "model width");
    f("d-ff", c.d_ff, "MLP width (0: 4 * d-model)");
    f("attn-only", c.attn_only, "no MLP in the blocks");
    f("no-layernorm", c.no_layernorm, "no LayerNorm anywhere");
    f("bidirectional", c.bidirectional, "attention sees every position (default: causal)");
    f("batch", c.batch, "sequences per training step");
    f("steps", c.steps, "training steps");
    f("lr", c.lr, "peak learning rate");
    f("optimizer", c.optimizer, "adamw, adam or sgd");
    f("weight-decay", c.weight_decay, "weight decay (negative: the optimizer's default, 0.01 for adamw)");
    f("warmup", c.warmup, "linear warmup steps");
    f("schedule", c.schedule, "constant, cosine, linear or step");
    f("min-lr", c.min_lr, "the floor of the cosine/linear decay");
    f("clip", c.clip, "clip the global gradient norm to this (0: off)");
    f("seed", c.seed, "random seed: same seed and thread count give the same numbers");
    f("threads", c.threads, "threads for OpenMP and OpenBLAS (0: all cores)");
    f("gemm", c.gemm, "GEMM backend: onednn or openblas (default: $HEADLAB_GEMM, else onednn)");
    f("eval-batch", c.eval_batch, "sequences in the fixed evaluation batch");
    f("log-every", c.log_every, "log and record metrics every N steps");
    f("analyze-every", c.analyze_every, "analyze the heads every N steps (0: only at the end)");
    f("checkpoint-every", c.checkpoint_every, "write a checkpoint every N steps (0: only at the end)");
  }

  // Throws UsageError naming the first bad value and what would fit.
  void validate() const;
  // The model these settings describe, for a task with these sizes.
  layers::TransformerOptions model_options(int64_t vocab_size, int64_t classes, int64_t max_seq_len) const;
  optim::ScheduleOptions schedule_options() const;
};

nlohmann::json to_json(const TrainConfig& config);
// Applies the keys of `j` onto `config`; an unknown key or a wrong type is a
// UsageError naming the key (and `source`, e.g. the file name).
void apply_json(TrainConfig& config, const nlohmann::json& j, const std::string& source);

}  // namespace headlab::train
