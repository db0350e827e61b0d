#include "train/session.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>

#include "autograd/ops.h"
#include "core/bf16_operands.h"
#include "core/ops.h"
#include "core/shortest.h"
#include "core/threads.h"
#include "layers/init_scale.h"
#include "layers/padding_mask.h"
#include "optim/clip.h"
#include "optim/factory.h"
#include "optim/param_groups.h"
#include "train/analysis_roles.h"
#include "train/errors.h"
#include "train/fixed_sets.h"
#include "train/input_file.h"
#include "train/run_data.h"
#include "train/signals.h"
#include "train/step_lanes.h"

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

// Rows [first, first + rows) of a batch.
Batch rows_of(const Batch& batch, int64_t first, int64_t rows) {
  const auto begin = static_cast<std::ptrdiff_t>(first * batch.seq_len);
  const auto end = static_cast<std::ptrdiff_t>((first + rows) * batch.seq_len);
  Batch out{rows, batch.seq_len, {batch.tokens.begin() + begin, batch.tokens.begin() + end},
            {batch.targets.begin() + begin, batch.targets.begin() + end}};
  if (!batch.lengths.empty())
    out.lengths.assign(batch.lengths.begin() + first, batch.lengths.begin() + first + rows);
  if (!batch.lines.empty()) out.lines.assign(batch.lines.begin() + first, batch.lines.begin() + first + rows);
  return out;
}

// The rows of the held-out metrics and the head analysis, as messages name them.
std::string held_out_rows(const TrainConfig& config, const Task& task, int64_t rows) {
  const std::string n = std::to_string(rows);
  if (!config.eval_data.empty()) return "--eval-data " + config.eval_data + " (its first " + n + " sequences)";
  if (config.eval_fraction > 0)
    return "--eval-fraction " + core::shortest(config.eval_fraction) + " (the first " + n +
           " of the sequences it holds out of --data " + config.data + ")";
  if (!config.data.empty())
    return "--data " + config.data + " (its first " + n + " sequences)";
  return task.name();
}

int64_t count_targets(const std::vector<int32_t>& targets) {
  return std::count_if(targets.begin(), targets.end(), [](int32_t t) { return t >= 0; });
}

// Copies (first) or adds the parameters' gradients into one flat buffer, in
// parameter order; a parameter without a gradient counts as zeros.
void add_grads(const std::vector<autograd::Variable>& params, std::vector<float>& flat, bool first) {
  if (first) {
    std::size_t total = 0;
    for (const autograd::Variable& p : params) total += static_cast<std::size_t>(p.value().numel());
    flat.assign(total, 0.0f);
  }
  std::size_t at = 0;
  for (const autograd::Variable& p : params) {
    const auto n = static_cast<std::size_t>(p.value().numel());
    if (p.has_grad()) {
      const core::Tensor g = p.grad().contiguous();
      const float* src = g.data<float>();
      float* dst = flat.data() + at;
      if (first) std::copy(src, src + n, dst);
      else
        for (std::size_t i = 0; i < n; ++i) dst[i] += src[i];
    }
    at += n;
  }
}

void set_grads(const std::vector<autograd::Variable>& params, const std::vector<float>& flat) {
  std::size_t at = 0;
  for (const autograd::Variable& p : params) {
    core::Tensor g = core::Tensor::empty(p.value().shape());
    const auto n = static_cast<std::size_t>(g.numel());
    std::copy(flat.data() + at, flat.data() + at + n, g.data<float>());
    p.set_grad(std::move(g));
    at += n;
  }
}

// Adds a lane's gradients (train/step_lanes.h) to the parameters' own, both
// in model order, and drops the lane's: the bits of add_grads of the two in
// turn and set_grads, in one pass and no flat buffer. A parameter without a
// gradient counts as zeros, and ends with one.
void add_lane_grads(const std::vector<autograd::Variable>& params, const std::vector<autograd::Variable>& lane) {
  for (std::size_t i = 0; i < params.size(); ++i) {
    const autograd::Variable &p = params[i], &q = lane[i];
    if (!p.has_grad()) p.set_grad(core::Tensor::zeros(p.value().shape(), p.value().dtype()));
    if (!q.has_grad()) continue;
    const core::Tensor &mine = p.grad(), &theirs = q.grad();
    // In place where the parameter alone holds its gradient (a leaf's is its
    // own copy): medium's 13 MB of gradients are not allocated again.
    if (mine.dtype() == core::DType::f32 && theirs.dtype() == core::DType::f32 && mine.is_contiguous() &&
        theirs.is_contiguous() && mine.storage().use_count() == 1) {
      float* to = mine.data<float>();
      const float* from = theirs.data<float>();
      const int64_t n = mine.numel();
#pragma omp parallel for simd schedule(static) if (n >= core::kParallelGrain)
      for (int64_t j = 0; j < n; ++j) to[j] += from[j];
    } else {
      p.set_grad(core::add(mine, theirs));
    }
    q.zero_grad();
  }
}

std::string not_finite(const char* what, double value, int64_t step) {
  return std::string(what) + " is " + core::shortest(value) + " at step " + std::to_string(step) +
         " (try a lower --lr or --clip)";
}

// The step's accuracy and target count: the first argmax of each row with a
// target, as score_logits picks it, on the logits' own dtype. The loss
// comes from cross_entropy, so score_logits' float64 copy and log-sum-exp
// (a libm exp per logit, about 3% of tiny's profile) would be thrown away.
template <class T>
int64_t correct_predictions(const T* p, int64_t classes, std::span<const int32_t> targets, int64_t& count) {
  int64_t correct = 0;
  for (std::size_t i = 0; i < targets.size(); ++i) {
    if (targets[i] < 0) continue;
    const T* row = p + static_cast<int64_t>(i) * classes;
    int64_t best = 0;
    for (int64_t c = 1; c < classes; ++c)
      if (row[c] > row[best]) best = c;
    correct += best == targets[i];
    ++count;
  }
  return correct;
}

EvalResult accuracy_of(const core::Tensor& logits, std::span<const int32_t> targets) {
  const int64_t classes = logits.size(-1);
  const core::Tensor flat = logits.reshape({-1, classes}).contiguous();
  if (flat.size(0) != static_cast<int64_t>(targets.size()))
    throw std::invalid_argument("accuracy_of: " + std::to_string(flat.size(0)) + " rows of logits for " +
                                std::to_string(targets.size()) + " targets");
  EvalResult r;
  const int64_t correct = flat.dtype() == core::DType::f32
                              ? correct_predictions(flat.data<float>(), classes, targets, r.count)
                              : correct_predictions(flat.data<double>(), classes, targets, r.count);
  if (r.count > 0) r.accuracy = static_cast<double>(correct) / static_cast<double>(r.count);
  return r;
}

}  // namespace

analysis::Examples examples_of(const Batch& batch) {
  analysis::Examples out;
  out.batch = batch.batch;
  out.seq_len = batch.seq_len;
  out.tokens = batch.tokens;
  out.targets = batch.targets;
  out.lengths = batch.lengths;
  out.attend = batch.attend;
  out.roles = batch.roles;
  out.sources = batch.sources;
  return out;
}

EvalResult evaluate(const layers::Transformer& model, const Batch& batch) {
  return analysis::evaluate(model, examples_of(batch));
}

Session::Session(const TrainConfig& config, const dist::World& world) : config_(config), world_(&world) {
  config_.validate();
  // A run's files are read again (by --resume, eval and analyze of the run;
  // by each run of a sweep): a pipe would by then be empty, or another stream.
  for (const auto& [flag, path] : {std::pair<std::string, std::string>{"--data", config_.data}, {"--eval-data", config_.eval_data}})
    if (!path.empty())
      require_regular_file(path, flag + " " + path,
                           "a run reads its " + flag + " again when it is resumed, evaluated or analyzed; save it to a "
                           "file and give its path (eval --data and analyze --data read a pipe, once)");
  derive_run_settings(config_, world.size());
  task_ = make_task_to_train(config_);
  build(model_spec_for(config_, *task_));
  // Before any step: the held-out metrics and the analyses during and after
  // training read it. (The training rows, the log's training loss among
  // them, each have a target: make_task_to_train.)
  check_analysable(eval_batch_, held_out_rows(config_, *task_, eval_batch_.batch),
                   config_.eval_data.empty() ? config_.data : config_.eval_data);
}

Session::Session(const Checkpoint& checkpoint, const dist::World& world)
    : config_(checkpoint.info.config), world_(&world) {
  config_.validate();
  config_.micro_batches = micro_batches_for(config_, world.size());
  // Before the file is parsed: a changed file is reported as changed, not as
  // a line that no longer parses or a model that no longer fits. A moved run
  // folder's own copy is found here, and the next checkpoint records it.
  locate_run_data(checkpoint.info, config_, checkpoint.path.empty() ? "" : run_folder_of(checkpoint.path),
                  world.is_root());
  task_ = make_task_for(config_);
  const layers::ModelSpec spec = model_spec_for(config_, *task_);
  check_config_describes(*task_, spec, checkpoint.model);
  build(spec);
  check_data_unchanged(checkpoint.info, config_, *task_);
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
  init_ = checkpoint.info.init;
}

void Session::build(const layers::ModelSpec& spec) {
  batch_rows_ = config_.batch > 0 ? config_.batch : task_->size();
  if (batch_rows_ == 0)  // --train-fraction only where every example can be listed (train/fixed_sets.h)
    throw UsageError("--batch 0 (full) trains on the whole training set, but task " + task_->name() +
                     " draws fresh examples: give --train-size N" +
                     (task_->all_examples() ? " (or --train-fraction F)" : "") + ", or a --batch of 1 or more");
  if (config_.batch == 0) check_full_batch_splits(config_, batch_rows_, world_->size());
  const int64_t train_eval_rows = has_fixed_sets(config_) ? std::min(config_.eval_batch, task_->size()) : 0;
  check_sizes(spec, {{"--batch", batch_rows_},
                     {"--eval-batch", std::max(task_->eval_rows(config_.eval_batch), train_eval_rows)}},
              task_->inferred_sizes());
  core::Generator init_gen(config_.seed);
  model_ = std::make_unique<layers::Transformer>(spec, init_gen);
  layers::apply_init_scale(*model_, config_.init_std, spec);
  const double wd = config_.weight_decay >= 0 ? config_.weight_decay : (config_.optimizer == "adamw" ? 0.01 : 0.0);
  optimizer_ = optim::make_optimizer(config_.optimizer, optim::make_param_groups(model_->named_parameters(), wd, false),
                                     config_.lr, {config_.betas.at(0), config_.betas.at(1), config_.eps});
  schedule_ = std::make_unique<optim::Schedule>(config_.schedule_options());
  data_gen_.reseed(config_.seed ^ kDataStream);
  eval_batch_ = task_->eval_batch(config_.eval_batch, config_.seed);
  task_->describe(eval_batch_);
  // The roles the run was told to expect otherwise (--expect, --scored-only):
  // every analysis of this batch counts them, analyze RUN's too.
  const RoleChanges roles{config_.scored_only, config_.expect};
  if (!roles.scored_only.empty() || !roles.expect.empty()) {
    check_role_changes(roles, eval_batch_,
                       !config_.eval_data.empty() ? "--eval-data " + config_.eval_data
                       : !config_.data.empty()    ? "--data " + config_.data
                                                  : "task " + task_->name());
    change_roles(eval_batch_, roles);
  }
  if (train_eval_rows > 0) train_eval_batch_ = task_->rows(0, train_eval_rows);
}

StepResult Session::step() {
  const core::Generator::State data_state = data_gen_.state();
  const auto position = task_->position();
  const Batch batch = task_->sample(batch_rows_, data_gen_);
  const double lr = schedule_->lr_at(step_);
  optimizer_->set_lr(lr);
  StepResult r;
  // One slice on one thread: the plain step. Otherwise the slices, or the
  // batch split among the threads (train/step_lanes.h).
  if (config_.micro_batches == 1 && (core::num_threads() == 1 || batch.batch < 2)) {
    optimizer_->zero_grad();
    // bf16: each weight and Linear input rounded once for forward and backward; closed before the optimizer.
    const core::Bf16Operands rounded_once;
    const core::Tensor mask = layers::padding_mask(batch.lengths, batch.batch, batch.seq_len);
    const autograd::Variable logits = model_->forward(batch.tokens, batch.batch, batch.seq_len, &mask);
    const autograd::Variable loss = autograd::cross_entropy(logits, batch.targets, loss_dtype());
    const EvalResult scored = accuracy_of(logits.value(), batch.targets);
    r.loss = loss.value().item();
    r.accuracy = scored.accuracy;
    r.tokens = scored.count;
    if (!std::isfinite(r.loss)) throw SharedError(not_finite("the loss", r.loss, step_ + 1));
    loss.backward();
  } else {
    r = forward_backward_slices(batch);
    if (r.stopped) {
      data_gen_.set_state(data_state);
      if (position) task_->set_position(*position);
      return r;
    }
  }
  r.lr = lr;
  const auto params = optimizer_->parameters();
  r.grad_norm = config_.clip > 0 ? optim::clip_grad_norm(params, config_.clip) : optim::grad_norm(params);
  if (!std::isfinite(r.grad_norm)) throw SharedError(not_finite("the gradient norm", r.grad_norm, step_ + 1));
  optimizer_->step();
  ++step_;
  return r;
}

std::vector<Piece> Session::step_pieces() const {
  const int64_t slices = config_.micro_batches, mine = slices / world_->size(), rows = batch_rows_ / slices;
  // A lone process splits a lone slice among its threads; the ranks of
  // several keep theirs whole, so that N processes still train the bits of
  // --micro-batches N in one.
  return train::step_pieces(world_->rank() * mine * rows, mine, rows, world_->size() == 1 ? core::num_threads() : 1);
}

StepResult Session::forward_backward_slices(const Batch& batch) {
  const std::vector<Piece> pieces = step_pieces();
  const int lanes = static_cast<int>(std::min<int64_t>(core::num_threads(), static_cast<int64_t>(pieces.size())));
  // Each piece's loss is its share of the mean over the whole batch's
  // targets, so the summed gradient is the whole batch's.
  const auto targets = static_cast<double>(count_targets(batch.targets));
  const std::vector<autograd::Variable> params = model_->parameters();  // each lane's in the same order
  // One round of lanes in a lone process adds its lanes' gradients into the
  // parameters' own; otherwise they go through one flat buffer.
  const bool direct = world_->size() == 1 && static_cast<int64_t>(pieces.size()) <= lanes && lanes > 1;
  std::vector<float> grads;
  std::vector<double> sums(3, 0.0);  // loss, correct predictions, targets
  struct LaneResult {
    double loss = 0, correct = 0, count = 0;
  };
  std::vector<LaneResult> results(static_cast<std::size_t>(lanes));
  std::vector<const layers::Transformer*> models(static_cast<std::size_t>(lanes));
  for (int lane = 0; lane < lanes; ++lane)
    models[static_cast<std::size_t>(lane)] = &lanes_.model(*model_, params, lane);
  for (std::size_t p0 = 0; p0 < pieces.size(); p0 += static_cast<std::size_t>(lanes)) {
    // A long step (many slices) stops within a slice of a signal. Across
    // processes the stop is agreed on after the step (every rank must join
    // the sums below), so only a lone process stops here.
    if (p0 > 0 && world_->size() == 1 && stop_signal() != 0) return StepResult{.stopped = true};
    const int n = static_cast<int>(std::min<std::size_t>(static_cast<std::size_t>(lanes), pieces.size() - p0));
    run_lanes(n, [&](int lane) {
      const Piece& piece = pieces[p0 + static_cast<std::size_t>(lane)];
      const layers::Transformer& model = *models[static_cast<std::size_t>(lane)];
      const Batch slice = rows_of(batch, piece.first, piece.rows);
      for (const autograd::Variable& p : lanes_.parameters(params, lane)) p.zero_grad();
      const core::Bf16Operands rounded_once;  // this piece's forward and backward (see step)
      const core::Tensor mask = layers::padding_mask(slice.lengths, slice.batch, slice.seq_len);
      const autograd::Variable logits = model.forward(slice.tokens, slice.batch, slice.seq_len, &mask);
      const EvalResult scored = accuracy_of(logits.value(), slice.targets);
      const double share = targets > 0 ? static_cast<double>(scored.count) / targets : 0.0;
      const autograd::Variable loss = autograd::cross_entropy(logits, slice.targets, loss_dtype()) * share;
      loss.backward();
      results[static_cast<std::size_t>(lane)] = {loss.value().item(),
                                                 std::round(scored.accuracy * static_cast<double>(scored.count)),
                                                 static_cast<double>(scored.count)};
    });
    // In piece order: the bits of the pieces run one after another.
    for (int lane = 0; lane < n; ++lane) {
      if (direct) {
        if (lane > 0) add_lane_grads(params, lanes_.parameters(params, lane));
      } else {
        add_grads(lanes_.parameters(params, lane), grads, p0 + static_cast<std::size_t>(lane) == 0);
      }
      const LaneResult& lr = results[static_cast<std::size_t>(lane)];
      sums[0] += lr.loss;
      sums[1] += lr.correct;
      sums[2] += lr.count;
    }
  }
  if (!direct) {
    world_->sum_in_rank_order(grads);
    world_->sum_in_rank_order(sums);
  }
  StepResult r;
  r.loss = sums[0];
  r.accuracy = sums[2] > 0 ? sums[1] / sums[2] : 0.0;
  r.tokens = static_cast<int64_t>(sums[2]);
  // Every rank sees the same sums, so every rank stops here.
  if (!std::isfinite(r.loss)) throw SharedError(not_finite("the loss", r.loss, step_ + 1));
  if (!direct) set_grads(params, grads);
  return r;
}

CheckpointInfo Session::checkpoint_info() const {
  CheckpointInfo info;
  info.config = config_;
  info.task = task_->name();
  info.step = step_;
  info.trainer = trainer_state_;
  info.init = init_;
  info.data_rng = data_gen_.state();
  info.data_position = task_->position();
  info.data_file = task_->fingerprint();
  info.eval_data_file = task_->eval_fingerprint();
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
