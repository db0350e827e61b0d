#include "train/session.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <stdexcept>
#include <string>

#include "autograd/ops.h"
#include "core/ops.h"
#include "optim/clip.h"
#include "optim/factory.h"
#include "optim/param_groups.h"
#include "train/data_file.h"
#include "train/errors.h"

namespace headlab::train {
namespace {

// Independent streams for initialization, training batches and the eval batch.
constexpr uint64_t kDataStream = 0x6461746100000000ULL;  // "data"
constexpr uint64_t kEvalStream = 0x6576616c00000000ULL;  // "eval"

// Refuses, before anything is allocated, batches that 32-bit token indices
// cannot address and sizes that cannot fit in the machine's memory: they would
// otherwise fail deep inside an allocation, after the run folder was written.
}  // namespace

void check_sizes(const TrainConfig& c, const layers::TransformerOptions& m, int64_t eval_rows) {
  const int64_t t = m.max_seq_len();
  const int64_t max_rows = std::numeric_limits<int32_t>::max() / t;
  for (const auto& [flag, rows] : {std::pair<const char*, int64_t>{"batch", c.batch}, {"eval-batch", eval_rows}})
    if (rows > max_rows)
      throw UsageError("--" + std::string(flag) + " " + std::to_string(rows) + ": that many sequences of " +
                       std::to_string(t) + " tokens exceed 2^31-1 tokens (at most " + std::to_string(max_rows) + ")");
  // A lower bound: parameters and gradients, and per token position the
  // logits, every layer's attention row per head and its residual stream.
  const double d = static_cast<double>(m.d_model()), layers = static_cast<double>(m.layers());
  const double d_ff = m.attn_only() ? 0.0 : static_cast<double>(m.d_ff());
  const double params = static_cast<double>(m.vocab() + t + m.classes()) * d + layers * (4 * d * d + 2 * d * d_ff);
  const double per_position =
      static_cast<double>(m.classes()) + layers * (static_cast<double>(m.heads() * t) + 2 * d + d_ff);
  const double positions = static_cast<double>(std::max(c.batch, eval_rows) * t);
  const double bytes = 4 * (2 * params + positions * per_position);
  const double ram = static_cast<double>(::sysconf(_SC_PHYS_PAGES)) * static_cast<double>(::sysconf(_SC_PAGE_SIZE));
  if (ram > 0 && bytes > ram) {
    // %g: the estimate can exceed any integer type.
    char need[32], have[32];
    std::snprintf(need, sizeof need, "%.3g", bytes / 1e9);
    std::snprintf(have, sizeof have, "%.3g", ram / 1e9);
    throw UsageError(std::string("this model and batch need at least ") + need + " GB of memory, more than this machine's " +
                     have + " GB (reduce --batch, --eval-batch, --seq-len, --vocab, --layers or --d-model)");
  }
}

namespace {

// A checkpoint's config must describe the model its tensors hold (checked
// before build() allocates anything from the config).
void check_config_describes(const TrainConfig& config, const layers::TransformerOptions& model) {
  const auto task = make_task_for(config);
  const nlohmann::json want = model_json(model);
  const nlohmann::json got = model_json(config.model_options(task->vocab(), task->num_classes(), task->seq_len()));
  if (want == got) return;
  std::string diff;
  for (const auto& [key, value] : want.items())
    if (got[key] != value) diff += (diff.empty() ? "" : ", ") + key + " " + got[key].dump() + " instead of " + value.dump();
  throw UsageError("the config and task " + task->name() + " describe another model than the checkpoint's tensors (" +
                   diff + ")");
}

}  // namespace

std::unique_ptr<Task> make_task_for(const TrainConfig& config) {
  if (!config.data.empty()) {
    if (config.vocab <= 0 || config.seq_len <= 0)
      throw UsageError("--data " + config.data + " needs --vocab and --seq-len (the file's token range and the longest sequence)");
    return std::make_unique<DataFile>(config.data, config.vocab, config.vocab, config.seq_len, config.shuffle);
  }
  const TaskInfo& info = task_info(config.task);
  return make_task(config.task, config.vocab > 0 ? config.vocab : info.default_vocab,
                   config.seq_len > 0 ? config.seq_len : info.default_seq_len);
}

EvalResult score_logits(const core::Tensor& logits, std::span<const int32_t> targets) {
  const int64_t classes = logits.size(-1);
  const core::Tensor flat = logits.reshape({-1, classes}).contiguous().to(core::DType::f64);
  const int64_t rows = flat.size(0);
  if (rows != static_cast<int64_t>(targets.size()))
    throw std::invalid_argument("score_logits: " + std::to_string(rows) + " rows of logits for " +
                                std::to_string(targets.size()) + " targets");
  EvalResult r;
  int64_t correct = 0;
  double loss = 0;
  const double* p = flat.data<double>();
  for (int64_t i = 0; i < rows; ++i) {
    const int32_t t = targets[static_cast<std::size_t>(i)];
    if (t < 0) continue;
    const double* row = p + i * classes;
    // Log-sum-exp shifted by the row's max; the prediction is its first argmax.
    int64_t best = 0;
    for (int64_t c = 1; c < classes; ++c)
      if (row[c] > row[best]) best = c;
    double sum = 0;
    for (int64_t c = 0; c < classes; ++c) sum += std::exp(row[c] - row[best]);
    loss += std::log(sum) - (row[t] - row[best]);
    correct += best == t;
    ++r.count;
  }
  if (r.count > 0) {
    r.loss = loss / static_cast<double>(r.count);
    r.accuracy = static_cast<double>(correct) / static_cast<double>(r.count);
  }
  return r;
}

EvalResult evaluate(layers::Transformer& model, const Batch& batch) {
  autograd::NoGradGuard no_grad;
  const bool was_training = model.is_training();
  model.eval();
  const autograd::Variable logits = model.forward(batch.tokens, batch.batch, batch.seq_len);
  model.train(was_training);
  return score_logits(logits.value(), batch.targets);
}

Session::Session(const TrainConfig& config) : config_(config) {
  config_.validate();
  // The checkpoint and config.json name the data file absolutely, so that
  // eval, analyze and --resume find it from any folder.
  if (!config_.data.empty()) config_.data = std::filesystem::absolute(config_.data).lexically_normal().string();
  build();
}

void check_data_unchanged(const CheckpointInfo& info, const Task& task) {
  const auto* data = dynamic_cast<const DataFile*>(&task);
  if (!data || !info.data_file || data->fingerprint() == *info.data_file) return;
  const auto describe = [](const DataFile::Fingerprint& f) {
    char hash[24];
    std::snprintf(hash, sizeof hash, "%016llx", static_cast<unsigned long long>(f.hash));
    return std::to_string(f.size) + " bytes, hash " + hash;
  };
  throw UsageError("the data file " + data->path() + " has changed since the checkpoint was written (then " +
                   describe(*info.data_file) + "; now " + describe(data->fingerprint()) +
                   "): restore it, or train a new run on the new file");
}

Session::Session(const Checkpoint& checkpoint) : config_(checkpoint.info.config) {
  config_.validate();
  check_config_describes(config_, checkpoint.model);
  build();
  check_data_unchanged(checkpoint.info, *task_);
  const std::string source = "checkpoint (" + checkpoint.info.task + ")";
  load_weights(*model_, checkpoint.file, source);
  try {
    optimizer_->import_state(checkpoint.file.tensors, checkpoint.file.metadata);
    if (auto* data = dynamic_cast<DataFile*>(task_.get()); data && checkpoint.info.data_position)
      data->set_position(*checkpoint.info.data_position);
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

void Session::build() {
  task_ = make_task_for(config_);
  // Checked before anything runs: the head analysis during and after training
  // scores positions q >= 2.
  if (task_->seq_len() < kMinSeqLen)
    throw UsageError("--seq-len " + std::to_string(task_->seq_len()) + " is too short: the head analysis needs at least " +
                     std::to_string(kMinSeqLen) + " positions per sequence");
  const auto options = config_.model_options(task_->vocab(), task_->num_classes(), task_->seq_len());
  try {
    options.validate();
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  const auto* file = dynamic_cast<const DataFile*>(task_.get());
  check_sizes(config_, options, file ? std::min(config_.eval_batch, file->size()) : config_.eval_batch);
  core::Generator init_gen(config_.seed);
  model_ = std::make_unique<layers::Transformer>(options, init_gen);
  const double wd = config_.weight_decay >= 0 ? config_.weight_decay : (config_.optimizer == "adamw" ? 0.01 : 0.0);
  optimizer_ = optim::make_optimizer(config_.optimizer, optim::make_param_groups(model_->named_parameters(), wd, false),
                                     config_.lr);
  schedule_ = std::make_unique<optim::Schedule>(config_.schedule_options());
  data_gen_.reseed(config_.seed ^ kDataStream);
  if (auto* data = dynamic_cast<DataFile*>(task_.get())) {
    eval_batch_ = data->rows(0, std::min(config_.eval_batch, data->size()));
  } else {
    core::Generator eval_gen(config_.seed ^ kEvalStream);
    eval_batch_ = task_->sample(config_.eval_batch, eval_gen);
  }
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
    throw std::runtime_error("the loss is " + std::to_string(r.loss) + " at step " + std::to_string(step_ + 1) +
                             " (try a lower --lr or --clip)");
  loss.backward();
  const auto params = optimizer_->parameters();
  r.grad_norm = config_.clip > 0 ? optim::clip_grad_norm(params, config_.clip) : optim::grad_norm(params);
  if (!std::isfinite(r.grad_norm))
    throw std::runtime_error("the gradient norm is " + std::to_string(r.grad_norm) + " at step " +
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
  if (const auto* data = dynamic_cast<const DataFile*>(task_.get())) {
    info.data_position = data->position();
    info.data_file = data->fingerprint();
  }
  return info;
}

void Session::save(const std::string& path) const {
  // Finite weights can still be useless: an update of 1e30 overflows the next
  // forward pass. The held-out loss says whether the model can be resumed.
  const EvalResult eval = evaluate(*model_, eval_batch_);
  if (!std::isfinite(eval.loss))
    throw NonFiniteState("the model's held-out loss is " + std::to_string(eval.loss) + " at step " +
                         std::to_string(step_));
  save_checkpoint(path, *model_, optimizer_.get(), checkpoint_info());
}

}  // namespace headlab::train
