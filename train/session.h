// A training session: the task, the model, the optimizer and the random
// state of one run, and the training step itself, built by the run builder
// (run_builder.h). The Trainer (trainer.h) drives it; bench, sweep and
// analyze build one too.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>

#include "analysis/evaluate.h"
#include "core/random.h"
#include "layers/transformer.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"
#include "train/checkpoint.h"
#include "train/config.h"
#include "train/dist.h"
#include "train/run_builder.h"
#include "train/step_lanes.h"
#include "train/tasks.h"

namespace headlab::train {

struct StepResult {
  double loss = 0, accuracy = 0, grad_norm = 0, lr = 0;
  int64_t tokens = 0;  // target positions in the batch
  // A stop signal came between two slices (--micro-batches, one process): the
  // step was abandoned, nothing of it kept (weights, data stream, step count),
  // so a checkpoint taken now resumes it from its start.
  bool stopped = false;
};

using analysis::EvalResult;
using analysis::score_logits;

// The batch as the analysis library reads it (a view: `batch` must outlive it).
analysis::Examples examples_of(const Batch& batch);

// Loss and accuracy of the model on a batch, without recording a graph.
EvalResult evaluate(const layers::Transformer& model, const Batch& batch);

class Session {
 public:
  // A new run: validates the config (UsageError), builds everything from the
  // seed. `world`: the processes that train it together (dist.h); every one
  // builds the same Session. config().micro_batches is then resolved (>= 1).
  explicit Session(const TrainConfig& config, const dist::World& world = dist::World::single());
  // Continues a checkpoint: the model, optimizer and random state as saved.
  explicit Session(const Checkpoint& checkpoint, const dist::World& world = dist::World::single());

  // One training step on a fresh batch: forward, backward, clipping, update.
  // With --micro-batches K the batch is split into K slices of rows, spread
  // over the world's ranks (K / size each, in rank order); each slice's
  // gradient is added in slice order into one flat buffer, and the ranks'
  // buffers are summed in rank order, so every rank updates the same weights
  // and K slices give the same bits on 1 or K processes. Loss and accuracy
  // are sums over the slices divided by the batch's target count.
  // Throws std::runtime_error naming the step if the loss or the gradient
  // norm is not finite (the model is then left unchanged); with more than one
  // slice it is a SharedError, thrown by every rank at the same step.
  StepResult step();

  const TrainConfig& config() const { return config_; }
  TrainConfig& config() { return config_; }
  Task& task() { return *task_; }
  layers::Transformer& model() { return *model_; }
  optim::Optimizer& optimizer() { return *optimizer_; }
  int64_t steps_done() const { return step_; }
  // The processes that train this session together.
  const dist::World& world() const { return *world_; }
  // The fixed held-out batch that evaluation and head analysis use.
  const Batch& eval_batch() const { return eval_batch_; }
  // With a fixed training set and a held-out set apart from it
  // (has_fixed_sets): the training set's first --eval-batch sequences, on
  // which the trainer logs the training loss and accuracy. Otherwise none.
  const std::optional<Batch>& train_eval_batch() const { return train_eval_batch_; }
  // Sequences per step: --batch, or for --batch 0 the whole training set.
  int64_t batch_rows() const { return batch_rows_; }
  // The rows of a step this process computes, in the order their gradients
  // are added: its slices, or, alone with one slice and several threads,
  // that slice split among the threads (train/step_lanes.h).
  std::vector<Piece> step_pieces() const;

  CheckpointInfo checkpoint_info() const;
  // What the trainer keeps across a resume (see CheckpointInfo::trainer).
  const nlohmann::json& trainer_state() const { return trainer_state_; }
  void set_trainer_state(nlohmann::json state) { trainer_state_ = std::move(state); }
  // What the run's weights started from (see CheckpointInfo::init): null, or
  // set once by `train --init`, then kept by every checkpoint.
  const nlohmann::json& init() const { return init_; }
  void set_init(nlohmann::json init) { init_ = std::move(init); }
  // Writes a checkpoint; throws NonFiniteState (writing nothing) if a
  // parameter, an optimizer tensor or the held-out loss is not finite.
  void save(const std::string& path) const;

 private:
  void build(const layers::ModelSpec& spec);  // model, optimizer and eval batch; task_ is built
  // Forward and backward over this rank's slices of `batch`; leaves the
  // gradient summed over every rank's slices in the parameters.
  StepResult forward_backward_slices(const Batch& batch);
  // The precision of the training loss (--loss-dtype).
  core::DType loss_dtype() const { return config_.loss_dtype == "f64" ? core::DType::f64 : core::DType::f32; }

  TrainConfig config_;
  std::unique_ptr<Task> task_;
  std::unique_ptr<layers::Transformer> model_;
  std::unique_ptr<optim::Optimizer> optimizer_;
  std::unique_ptr<optim::Schedule> schedule_;
  core::Generator data_gen_;
  Batch eval_batch_;
  std::optional<Batch> train_eval_batch_;
  int64_t batch_rows_ = 0;
  int64_t step_ = 0;
  nlohmann::json trainer_state_;
  nlohmann::json init_;
  const dist::World* world_;
  ModelLanes lanes_;  // the models the step's slices run on side by side
};

}  // namespace headlab::train
