// How every command builds a run from its TrainConfig: the task (or data
// file), the model spec the two imply, the size checks, the model and the
// fixed evaluation batch. train, analyze, bench and sweep come here through
// Session (session.h); eval through the same functions without an optimizer.
// A default, a random stream or a limit therefore lives in one place.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "layers/model_spec.h"
#include "layers/transformer.h"
#include "train/checkpoint.h"
#include "train/config.h"
#include "train/tasks.h"

namespace headlab::train {

// The task a config names (or its data file), with its sizes resolved and
// its fixed training and held-out sets if the config asks (fixed_sets.h).
// Throws UsageError on anything the task or file cannot use.
std::unique_ptr<Task> make_task_for(const TrainConfig& config);
// make_task_for for a new run (Session's constructor from a config): a --data
// file with lines none of whose positions has a target is refused first
// (UsageError naming the first of them, their count and the fix): no
// training step learns from such a line, nor, held out by --eval-fraction,
// does any metric measure it. Resuming, evaluating or analyzing a run reads
// its file as make_task_for does, whatever it holds.
std::unique_ptr<Task> make_task_to_train(const TrainConfig& config);

// Head analysis scores positions q >= 2: shorter sequences are a usage error
// (model_spec_for).
inline constexpr int64_t kMinSeqLen = 3;

// The rows the head analysis reads (a run's evaluation batch, analyze
// --data's file) need one of at least kMinSeqLen real tokens; shorter rows
// beside it count in the scores they can show (docs/head-metrics.md,
// "Padding"). Throws UsageError naming `source` and its longest row
// otherwise, naming a pattern of theirs (Batch::attend) that gives no query
// a key, or when none of them has a target (rows given with their targets;
// a batch of lengths alone is not checked for them). Rows read from the data
// file `file` (Batch::lines) are named by its path and line, as the file's
// own errors name them ("data.jsonl:7"), whatever order a held-out share
// put them in.
void check_analysable(const Batch& rows, const std::string& source, const std::string& file = "");

// The model `config` describes for `task`: vocab, max_seq_len and classes
// are the task's, the rest the config's, defaults resolved. Throws UsageError
// naming the flags (a --classes the task does not have, heads that do not
// divide d_model, sequences shorter than kMinSeqLen, ...).
layers::ModelSpec model_spec_for(const TrainConfig& config, const Task& task);

// The memory this process may allocate, in bytes: the machine's physical
// memory, lowered by an address-space or data-segment limit (ulimit -v) and
// by the memory.max of its cgroup (a container's, a Slurm job's).
double memory_limit_bytes();

// Refuses, before anything is allocated, batches that 32-bit token indices
// cannot address and sizes that cannot fit in the machine's memory: they
// would otherwise fail deep inside an allocation. `batches`: each batch's
// flag (for the message) and its number of sequences of max_seq_len tokens.
// `inferred`: the sizes the task read from its data file
// (Task::inferred_sizes), which the message then names with their lines.
void check_sizes(const layers::ModelSpec& model, const std::vector<std::pair<std::string, int64_t>>& batches,
                 const std::string& inferred = "");
// The size of the head analysis's logits, positions x classes, from which
// train warns that it will be slow: each analysis runs dozens of forward
// passes (ablations, importance, the pruning curve), each scoring every
// position against every class (2^25, 128 MB of float32 logits: measured,
// about 10 s an analysis of a 2-head model on one core).
inline constexpr double kSlowAnalysisLogits = double(int64_t{1} << 25);
// A warning naming the numbers and the flags to change when the analysis of
// `rows` sequences of `seq_len` positions by `model` reaches that size; "".
// `inferred` (Task::inferred_sizes): classes read from a data file are
// named as such, not as a --vocab the user gave.
std::string slow_analysis_warning(const layers::ModelSpec& model, int64_t rows, int64_t seq_len,
                                  const std::string& inferred = "");

// The first half of check_sizes for one batch: a UsageError naming `flag`
// unless `rows` sequences of `seq_len` tokens fit in 32-bit token indices.
void check_token_count(const std::string& flag, int64_t rows, int64_t seq_len);

// Throws UsageError unless `task` can feed `model`: tokens within its
// vocabulary, the same classes, sequences no longer than its max_seq_len.
void check_task_fits(const Task& task, const layers::ModelSpec& model);

// The slices each step's batch is split into (--micro-batches; 0 means one
// per process) for a job of `processes`. A UsageError naming the numbers
// unless every process gets the same number of slices of the same size.
int64_t micro_batches_for(const TrainConfig& config, int processes);

// What a new run derives from its settings before it starts, as its
// config.json and checkpoint record them: the data files by absolute path
// (make_data_paths_absolute), --micro-batches resolved for `processes`
// (micro_batches_for), and a decaying schedule's horizon (--steps when
// --schedule-steps is 0; kept when the run is extended). A sweep compares a
// run's config.json with its plan through it.
void derive_run_settings(TrainConfig& config, int processes);
// --data and --eval-data by absolute, lexically normal path: eval, analyze,
// --resume and a sweep's shards find them from any folder, and compare them
// whatever their spelling.
void make_data_paths_absolute(TrainConfig& config);

// For --batch full (0): a UsageError unless the `rows` of the whole training
// set split into the config's (resolved) micro-batches, naming where the
// rows come from (--train-size, --train-fraction, --data) and the numbers
// that would split them over `processes`.
void check_full_batch_splits(const TrainConfig& config, int64_t rows, int processes);

// A checkpoint's model with its weights; `source` names it in messages.
std::unique_ptr<layers::Transformer> load_model(const Checkpoint& checkpoint, const std::string& source);

}  // namespace headlab::train
