#include "train/session.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <stdexcept>
#include <string>

#include "autograd/ops.h"
#include "core/ops.h"
#include "core/shortest.h"
#include "optim/clip.h"
#include "optim/factory.h"
#include "optim/param_groups.h"
#include "train/errors.h"

namespace headlab::train {
namespace {

// Independent streams for initialization and training batches (the
// evaluation batch has its own, Task::eval_batch).
constexpr uint64_t kDataStream = 0x6461746100000000ULL;  // "data"

// A checkpoint's config must describe the model its tensors hold (checked
// before build() allocates anything from the config).
void check_config_describes(const Task& task, const layers::ModelSpec& described, const layers::ModelSpec& model) {
  const nlohmann::json want = model_json(model);
  const nlohmann::json got = model_json(described);
  if (want == got) return;
  std::string diff;
  for (const auto& [key, value] : want.items())
    if (got[key] != value) diff += (diff.empty() ? "" : ", ") + key + " " + got[key].dump() + " instead of " + value.dump();
  throw UsageError("the config and task " + task.name() + " describe another model than the checkpoint's tensors (" +
                   diff + ")");
}

}  // namespace

analysis::Examples examples_of(const Batch& batch) {
  return {batch.batch, batch.seq_len, batch.tokens, batch.targets};
}

EvalResult evaluate(const layers::Transformer& model, const Batch& batch) {
  return analysis::evaluate(model, examples_of(batch));
}

Session::Session(const TrainConfig& config) : config_(config) {
  config_.validate();
  // The checkpoint and config.json name the data file absolutely, so that
  // eval, analyze and --resume find it from any folder.
  if (!config_.data.empty()) config_.data = std::filesystem::absolute(config_.data).lexically_normal().string();
  task_ = make_task_for(config_);
  build(model_spec_for(config_, *task_));
}

Session::Session(const Checkpoint& checkpoint) : config_(checkpoint.info.config) {
  config_.validate();
  task_ = make_task_for(config_);
  const layers::ModelSpec spec = model_spec_for(config_, *task_);
  check_config_describes(*task_, spec, checkpoint.model);
  build(spec);
  check_data_unchanged(checkpoint.info, *task_);
  const std::string source = "checkpoint (" + checkpoint.info.task + ")";
  load_weights(*model_, checkpoint.file, source);
  try {
    optimizer_->import_state(checkpoint.file.tensors, checkpoint.file.metadata);
    // Only a task with a stream of its own continues it (analyze --task
    // reads a data-file run's checkpoint with a synthetic task).
    if (checkpoint.info.data_position && task_->position()) task_->set_position(*checkpoint.info.data_position);
  } catch (const std::invalid_argument& e) {
    throw UsageError(std::string("cannot resume from the checkpoint: ") + e.what());
  }
  // Each step steps the optimizer once, so the two counts agree; any other
  // count is a corrupt file, and one near 2^63 would overflow at the next step.
  if (optimizer_->step_count() != checkpoint.info.step)
    throw UsageError("cannot resume from the checkpoint: its optimizer has taken " +
                     std::to_string(optimizer_->step_count()) + " steps, but the checkpoint's \"step\" is " +
                     std::to_string(checkpoint.info.step));
  data_gen_.set_state(checkpoint.info.data_rng);
  step_ = checkpoint.info.step;
  trainer_state_ = checkpoint.info.trainer;
}

void Session::build(const layers::ModelSpec& spec) {
  check_sizes(spec, {{"--batch", config_.batch}, {"--eval-batch", task_->eval_rows(config_.eval_batch)}});
  core::Generator init_gen(config_.seed);
  model_ = std::make_unique<layers::Transformer>(spec, init_gen);
  const double wd = config_.weight_decay >= 0 ? config_.weight_decay : (config_.optimizer == "adamw" ? 0.01 : 0.0);
  optimizer_ = optim::make_optimizer(config_.optimizer, optim::make_param_groups(model_->named_parameters(), wd, false),
                                     config_.lr);
  schedule_ = std::make_unique<optim::Schedule>(config_.schedule_options());
  data_gen_.reseed(config_.seed ^ kDataStream);
  eval_batch_ = task_->eval_batch(config_.eval_batch, config_.seed);
}

StepResult Session::step() {
  const Batch batch = task_->sample(config_.batch, data_gen_);
  StepResult r;
  r.lr = schedule_->lr_at(step_);
  optimizer_->set_lr(r.lr);
  optimizer_->zero_grad();
  const autograd::Variable logits = model_->forward(batch.tokens, batch.batch, batch.seq_len);
  const autograd::Variable loss = autograd::cross_entropy(logits, batch.targets);
  const EvalResult scored = score_logits(logits.value(), batch.targets);
  r.loss = loss.value().item();
  r.accuracy = scored.accuracy;
  r.tokens = scored.count;
  if (!std::isfinite(r.loss))
    throw std::runtime_error("the loss is " + core::shortest(r.loss) + " at step " + std::to_string(step_ + 1) +
                             " (try a lower --lr or --clip)");
  loss.backward();
  const auto params = optimizer_->parameters();
  r.grad_norm = config_.clip > 0 ? optim::clip_grad_norm(params, config_.clip) : optim::grad_norm(params);
  if (!std::isfinite(r.grad_norm))
    throw std::runtime_error("the gradient norm is " + core::shortest(r.grad_norm) + " at step " +
                             std::to_string(step_ + 1) + " (try a lower --lr or --clip)");
  optimizer_->step();
  ++step_;
  return r;
}

CheckpointInfo Session::checkpoint_info() const {
  CheckpointInfo info;
  info.config = config_;
  info.task = task_->name();
  info.step = step_;
  info.trainer = trainer_state_;
  info.data_rng = data_gen_.state();
  info.data_position = task_->position();
  info.data_file = task_->fingerprint();
  return info;
}

void Session::save(const std::string& path) const {
  // Finite weights can still be useless: an update of 1e30 overflows the next
  // forward pass. The held-out loss says whether the model can be resumed.
  const EvalResult eval = evaluate(*model_, eval_batch_);
  if (!std::isfinite(eval.loss))
    throw NonFiniteState("the model's held-out loss is " + core::shortest(eval.loss) + " at step " +
                         std::to_string(step_));
  save_checkpoint(path, *model_, optimizer_.get(), checkpoint_info());
}

}  // namespace headlab::train
