// Checkpoints: one safetensors file (format in README.md, "The model and its checkpoints").
//
// Tensors: the model's parameters under their dotted names (PyTorch layouts)
// and the optimizer's state ("optimizer.<param>.<slot>"). __metadata__:
//   format          "headlab-checkpoint"
//   format_version  "1"
//   model           JSON of the architecture (vocab, classes, max_seq_len, ...)
//   config          JSON of the whole TrainConfig (flag names as keys)
//   task            the task name, or "data:<file>"
//   step            completed training steps
//   rng.data        JSON array: the data generator's state
//   data.position   JSON {epoch_seed, next} when training on a data file
//   data.file       JSON {path, size, hash} of that file (absolute path, FNV-1a
//                   hash of its bytes): a file changed since is refused
//   eval_data.file  the same of the --eval-data file, when there is one
//   init            JSON {path, size, hash, step, task, config} of the
//                   checkpoint a run started from with --init (init_identity)
//   edited          JSON {by, source {path, size, hash, step, task}, replaced}
//                   of a checkpoint written from Python (Model.save,
//                   docs/python.md): the checkpoint its weights came from and
//                   the parameters replaced since; absent otherwise
//   trainer         JSON of the trainer's sums since its last log line, and
//                   that line's {step, loss} ("logged"): --resume checks it
//                   against the folder's metrics.jsonl (run_identity.h)
//   optimizer.*     the optimizer's own metadata (kind, step counts, lr)
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "core/random.h"
#include "core/safetensors.h"
#include "layers/model_spec.h"
#include "layers/transformer.h"
#include "optim/optimizer.h"
#include "train/config.h"
#include "train/data_file.h"

namespace headlab::train {

inline constexpr const char* kCheckpointFormat = "headlab-checkpoint";
inline constexpr const char* kCheckpointVersion = "1";

struct CheckpointInfo {
  TrainConfig config;
  std::string task;
  int64_t step = 0;
  core::Generator::State data_rng{};
  std::optional<DataFile::Position> data_position;
  std::optional<Task::Fingerprint> data_file;
  // The same of --eval-data's file; none in a checkpoint from before it was recorded.
  std::optional<Task::Fingerprint> eval_data_file;
  // The trainer's running sums since its last log line, so that a run resumed
  // between two log lines logs the same averages as an uninterrupted one.
  nlohmann::json trainer;
  // A run started with --init: the checkpoint it started from, as it was
  // then (init_identity), so that the run's origin is known after that file
  // has changed or gone; null otherwise.
  nlohmann::json init;
  // A checkpoint written from Python after its parameters were replaced
  // (python/src/weights.cpp): where they came from; provenance only, any
  // object, null otherwise.
  nlohmann::json edited;
};

// The "model" metadata: every ModelSpec field under its name, resolved.
nlohmann::json model_json(const layers::ModelSpec& spec);
// Reads it back; throws std::invalid_argument on a missing key or a wrong type.
layers::ModelSpec model_from_json(const nlohmann::json& j);

// The first tensor holding a NaN or an infinity, as "NAME holds nan at
// element I", or nothing when every value is finite.
std::optional<std::string> first_non_finite(const core::NamedTensors& tensors);

// Thrown by save_checkpoint for a model or optimizer state that is not finite:
// such a state is never written, so a checkpoint always holds finite numbers.
struct NonFiniteState : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Writes atomically (temporary file, fsync, rename); `optimizer` may be null.
// Throws NonFiniteState, leaving any previous file as it was, if a parameter
// or an optimizer tensor is not finite.
void save_checkpoint(const std::string& path, const layers::Transformer& model, const optim::Optimizer* optimizer,
                     const CheckpointInfo& info);
// The same with an optimizer state as export_state() gave it (empty: none),
// for a model whose optimizer is not at hand: one loaded from a checkpoint
// that is saved again keeps that checkpoint's state.
void save_checkpoint(const std::string& path, const layers::Transformer& model,
                     const optim::OptimizerState& optimizer_state, const CheckpointInfo& info);

struct Checkpoint {
  std::string path;  // as read_checkpoint was given it
  core::SafetensorsFile file;
  layers::ModelSpec model;
  CheckpointInfo info;
};
// Reads and checks the file, its metadata and that every tensor is finite;
// throws UsageError saying what is wrong (a checkpoint is user input).
Checkpoint read_checkpoint(const std::string& path);
// The same for a file's bytes already in memory; `path` names it in messages.
Checkpoint read_checkpoint(std::span<const uint8_t> bytes, const std::string& path);

// What `--init` records of its checkpoint at `path` (absolute): the path,
// the file's size and 64-bit FNV-1a hash, and the checkpoint's step, task
// and config (and what it records of its own origin: init, edited).
nlohmann::json init_identity(const std::string& path, const Checkpoint& checkpoint);

// Copies the weights into `model`: every parameter must be present with its
// exact shape; a missing or unexpected parameter tensor is a UsageError.
void load_weights(layers::Transformer& model, const core::SafetensorsFile& file, const std::string& source);

}  // namespace headlab::train
