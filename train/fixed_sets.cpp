#include "train/fixed_sets.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <utility>
#include <vector>

#include "core/shortest.h"
#include "train/data_file.h"
#include "train/errors.h"
#include "train/run_builder.h"

namespace headlab::train {
namespace {

// The training set's stream, apart from initialization (the seed), the
// training batches ("data") and evaluation ("eval").
constexpr uint64_t kSplitStream = 0x73706c6974000000ULL;  // "split"

// Row `row` of `batch` as bytes: its tokens, its targets and, when the batch
// records lengths, its length (a padded row is not its full-length twin).
std::string row_key(const Batch& batch, int64_t row) {
  const auto t = static_cast<std::size_t>(batch.seq_len);
  const auto at = static_cast<std::size_t>(row) * t;
  std::string key(2 * t * sizeof(int32_t), '\0');
  std::copy_n(reinterpret_cast<const char*>(batch.tokens.data() + at), t * sizeof(int32_t), key.data());
  std::copy_n(reinterpret_cast<const char*>(batch.targets.data() + at), t * sizeof(int32_t),
              key.data() + t * sizeof(int32_t));
  if (!batch.lengths.empty()) key += std::to_string(batch.lengths[static_cast<std::size_t>(row)]);
  return key;
}

// Appends row `row` of `from` to `to` (same seq_len), with the row's keys of
// each pattern `to` carries (empty_like's, in `from`'s order): a data file's
// "attend" patterns follow its rows into a held-out set, so the run's
// analysis scores them whichever rows it reads.
void append_row(Batch& to, const Batch& from, int64_t row) {
  const auto t = static_cast<std::ptrdiff_t>(from.seq_len);
  const auto at = static_cast<std::ptrdiff_t>(row) * t;
  to.tokens.insert(to.tokens.end(), from.tokens.begin() + at, from.tokens.begin() + at + t);
  to.targets.insert(to.targets.end(), from.targets.begin() + at, from.targets.begin() + at + t);
  if (!from.lengths.empty()) to.lengths.push_back(from.lengths[static_cast<std::size_t>(row)]);
  if (!from.lines.empty()) to.lines.push_back(from.lines[static_cast<std::size_t>(row)]);
  for (std::size_t p = 0; p < to.attend.size(); ++p) {
    const auto& keys = from.attend[p].keys;
    to.attend[p].keys.insert(to.attend[p].keys.end(), keys.begin() + at, keys.begin() + at + t);
    ++to.attend[p].batch;
  }
  ++to.batch;
}

// No rows, `b`'s seq_len and, with `patterns`, its patterns' names and
// definitions (a training set needs none: only the analysis reads them).
Batch empty_like(const Batch& b, bool patterns = true) {
  Batch out{0, b.seq_len, {}, {}};
  if (patterns)
    for (const analysis::AttendPattern& p : b.attend) {
      out.attend.push_back(analysis::AttendPattern::empty(p.name, 0, b.seq_len));
      out.attend.back().definition = p.definition;
    }
  return out;
}

// Rows [first, first + count) of `set`; `who` and `what` name the caller and the set in the error.
Batch slice_of(const Batch& set, int64_t first, int64_t count, const char* who, const char* what) {
  if (first < 0 || count < 1 || count > set.batch - first)
    throw std::invalid_argument(std::string(who) + ": first " + std::to_string(first) + ", count " +
                                std::to_string(count) + " are not a non-empty range within the " +
                                std::to_string(set.batch) + " " + what + " sequences");
  Batch out = empty_like(set);
  for (int64_t row = first; row < first + count; ++row) append_row(out, set, row);
  return out;
}

void check_batch(const Task& task, int64_t batch) {
  const int64_t most = std::numeric_limits<int32_t>::max() / task.seq_len();
  if (batch < 1 || batch > most)
    throw std::invalid_argument("Task::sample(" + task.name() + "): batch " + std::to_string(batch) +
                                " must be in [1, " + std::to_string(most) + "]");
}

}  // namespace

FixedSets::FixedSets(std::unique_ptr<Task> base, std::optional<Batch> train, std::optional<Batch> held_out,
                     std::optional<Fingerprint> eval_file)
    : base_(std::move(base)), train_(std::move(train)), held_out_(std::move(held_out)), eval_file_(eval_file) {
  if (train_) {
    order_.emplace(train_->batch, true);
    for (int64_t row = 0; row < train_->batch; ++row) train_keys_.insert(row_key(*train_, row));
  }
}

Batch FixedSets::sample(int64_t batch, core::Generator& gen) {
  if (!train_) return base_->sample(batch, gen);
  check_batch(*this, batch);
  Batch out = empty_like(*train_);
  for (int64_t row = 0; row < batch; ++row) append_row(out, *train_, order_->next(gen));
  return out;
}

void FixedSets::describe(Batch& batch) const {
  base_->describe(batch);
  if (!eval_file_ || !held_out_) return;
  for (const analysis::AttendPattern& p : held_out_->attend) {
    const bool listed = std::any_of(batch.roles.begin(), batch.roles.end(),
                                    [&](const analysis::ExpectedRole& r) { return r.pattern == p.name; });
    if (!listed) batch.roles.push_back({p.name, p.name});
  }
}

int64_t FixedSets::size() const { return train_ ? train_->batch : base_->size(); }

Batch FixedSets::rows(int64_t first, int64_t count) const {
  if (!train_) return base_->rows(first, count);
  return slice_of(*train_, first, count, "FixedSets::rows", "training");
}

int64_t FixedSets::eval_rows(int64_t rows) const {
  return held_out_ ? std::min(rows, held_out_->batch) : base_->eval_rows(rows);
}

Batch FixedSets::eval_batch(int64_t rows, uint64_t seed) {
  if (held_out_) return slice_of(*held_out_, 0, eval_rows(rows), "FixedSets::eval_batch", "held-out");
  if (!train_) return base_->eval_batch(rows, seed);
  // Rejection: draw the task's own evaluation stream (kEvalStream) one
  // sequence at a time, so that the batch is the task's evaluation batch with
  // the training sequences left out, and keep
  // those the training set does not hold. A training set that holds most of
  // the task's sequences would make this slow, hence the bound.
  check_batch(*this, rows);
  core::Generator gen(seed ^ kEvalStream);
  Batch out{0, seq_len(), {}, {}};
  const int64_t most_draws = 100 * rows + 10000;
  for (int64_t draws = 0; out.batch < rows; ++draws) {
    if (draws == most_draws)
      throw UsageError("the training set of " + std::to_string(train_->batch) + " sequences holds nearly every sequence "
                       "of task " + name() + ": only " + std::to_string(out.batch) + " of " + std::to_string(draws) +
                       " evaluation draws were held out (lower --train-size or raise --vocab or --seq-len)");
    const Batch one = base_->sample(1, gen);
    if (!train_keys_.count(row_key(one, 0))) append_row(out, one, 0);
  }
  return out;
}

Batch FixedSets::eval_slice(int64_t first, int64_t count, uint64_t seed) {
  if (!held_out_) return train_ ? Task::eval_slice(first, count, seed) : base_->eval_slice(first, count, seed);
  return slice_of(*held_out_, first, count, "FixedSets::eval_slice", "held-out");
}

std::optional<Task::Position> FixedSets::position() const {
  return order_ ? std::optional<Position>(order_->position()) : base_->position();
}

void FixedSets::set_position(const Position& position) {
  if (!order_) return base_->set_position(position);
  try {
    order_->set_position(position);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument("the training set's position: " + std::string(e.what()));
  }
}

bool has_fixed_sets(const TrainConfig& config) {
  return config.train_size > 0 || config.train_fraction > 0 || !config.eval_data.empty() || config.eval_fraction > 0;
}

void drop_fixed_sets(TrainConfig& config) {
  config.train_size = 0;
  config.train_fraction = 0;
  config.eval_fraction = 0;
  config.eval_data.clear();
  config.split_seed = -1;
}

namespace {

// 0 .. n-1 in the order of a Fisher-Yates shuffle drawn from `gen`.
std::vector<int64_t> shuffled_order(int64_t n, core::Generator& gen) {
  std::vector<int64_t> order(static_cast<std::size_t>(n));
  std::iota(order.begin(), order.end(), int64_t{0});
  for (std::size_t i = order.size() - 1; i > 0; --i)
    std::swap(order[i], order[static_cast<std::size_t>(gen.integer(0, static_cast<int64_t>(i) + 1))]);
  return order;
}

// --split-seed, or by default --seed (the split of runs older than the flag).
uint64_t split_seed(const TrainConfig& config) {
  return config.split_seed >= 0 ? static_cast<uint64_t>(config.split_seed) : config.seed;
}

}  // namespace

void check_training_set(const std::string& task, int64_t rows, int64_t seq_len, double distinct, double memory_bytes) {
  const std::string asked = "--train-size " + std::to_string(rows);
  if (static_cast<double>(rows) >= distinct)
    throw UsageError(asked + ": task " + task + " can make at most " + core::shortest(distinct) +
                     " different sequences, and a training set must leave some to hold out: give a --train-size "
                     "below " + core::shortest(distinct) + " (or raise --vocab or --seq-len)");
  // Per sequence: its tokens and targets (int32), its key in the set of
  // training sequences (a string of both, with the hash set's node) and its
  // place in the epoch order.
  const double bytes = static_cast<double>(rows) * (16.0 * static_cast<double>(seq_len) + 96.0);
  if (bytes > memory_bytes) {
    const double most = std::floor(memory_bytes / (16.0 * static_cast<double>(seq_len) + 96.0));
    throw UsageError(asked + ": a training set of that many sequences of " + std::to_string(seq_len) +
                     " tokens needs about " + core::shortest(std::round(bytes / 1e8) / 10) + " GB, more than the " +
                     core::shortest(std::round(memory_bytes / 1e8) / 10) +
                     " GB this process may use: give a --train-size of at most " + core::shortest(most));
  }
}

std::unique_ptr<Task> with_fixed_sets(std::unique_ptr<Task> base, const TrainConfig& config) {
  if (!has_fixed_sets(config)) return base;
  std::optional<Batch> train, held_out;
  if (config.train_size > 0 || config.train_fraction > 0) {
    core::Generator gen(split_seed(config) ^ kSplitStream);
    if (std::optional<Batch> all = base->all_examples()) {
      const int64_t n = all->batch;
      const int64_t n_train = config.train_size > 0
                                  ? config.train_size
                                  : static_cast<int64_t>(std::llround(config.train_fraction * static_cast<double>(n)));
      const std::string asked = config.train_size > 0 ? "--train-size " + std::to_string(config.train_size)
                                                      : "--train-fraction " + core::shortest(config.train_fraction);
      if (n_train < 1 || n_train >= n)
        throw UsageError(asked + " gives " + std::to_string(n_train) + " training examples, but task " + base->name() +
                         " has " + std::to_string(n) + " distinct examples: it needs at least 1 for training and 1 "
                         "held out (--train-size 1 to " + std::to_string(n - 1) + ")");
      // The first n_train of a shuffled list are the training set.
      const std::vector<int64_t> order = shuffled_order(n, gen);
      train = empty_like(*all, false);
      held_out = empty_like(*all);
      for (int64_t i = 0; i < n; ++i) append_row(i < n_train ? *train : *held_out, *all, order[static_cast<std::size_t>(i)]);
    } else {
      if (config.train_fraction > 0)
        throw UsageError("--train-fraction needs a task whose examples can all be listed (modular-addition, vocab at "
                         "most 2049); task " + base->name() + " draws from too many: give --train-size N instead");
      const int64_t most = std::numeric_limits<int32_t>::max() / base->seq_len();
      if (config.train_size > most)
        throw UsageError("--train-size " + std::to_string(config.train_size) + ": that many sequences of " +
                         std::to_string(base->seq_len()) + " tokens exceed 2^31-1 tokens (at most " +
                         std::to_string(most) + ")");
      check_training_set(base->name(), config.train_size, base->seq_len(), base->distinct_sequences(),
                         memory_limit_bytes());
      train = base->sample(config.train_size, gen);
    }
  }
  if (config.eval_fraction > 0) {
    // A data file (TrainConfig::validate): its first held-out share of a
    // shuffled order is held out, the rest trained on.
    core::Generator gen(split_seed(config) ^ kSplitStream);
    const Batch all = base->rows(0, base->size());
    const int64_t n = all.batch;
    const auto n_eval = static_cast<int64_t>(std::llround(config.eval_fraction * static_cast<double>(n)));
    if (n_eval < 1 || n_eval >= n)
      throw UsageError("--eval-fraction " + core::shortest(config.eval_fraction) + " holds out " +
                       std::to_string(n_eval) + " of the " + std::to_string(n) + " sequences of --data " +
                       config.data + ": it needs at least 1 held out and 1 to train on");
    const std::vector<int64_t> order = shuffled_order(n, gen);
    train = empty_like(all, false);
    held_out = empty_like(all);
    for (int64_t i = 0; i < n; ++i) append_row(i < n_eval ? *held_out : *train, all, order[static_cast<std::size_t>(i)]);
  }
  std::optional<Task::Fingerprint> eval_file;
  if (!config.eval_data.empty()) {
    // Its "attend" keys are checked against the model's attention, as --data's.
    // Sizes inferred from --data alone are said, so that a longer or larger
    // held-out line is met with the flags that fit both files.
    const DataFile file = [&] {
      try {
        return DataFile(config.eval_data, base->vocab(), base->num_classes(), base->seq_len(), false,
                        config.model.causal);
      } catch (const UsageError& e) {
        const std::string inferred = base->inferred_sizes();
        if (inferred.empty()) throw;
        throw UsageError(std::string(e.what()) + " (the model's " + inferred +
                         ": give --seq-len, --vocab or --classes that fit both --data and --eval-data)");
      }
    }();
    held_out = file.rows(0, file.size());
    eval_file = file.fingerprint();
    // The task's own pattern of that name would give way to the file's (describe keeps what the batch has), and
    // the task's role be judged on the file's keys, under the task's words.
    for (const analysis::AttendPattern& p : held_out->attend)
      for (const analysis::ExpectedRole& role : base->expected_roles())
        if (role.pattern == p.name)
          throw UsageError("--eval-data " + config.eval_data + ": its \"attend\" pattern \"" + p.name +
                           "\" has the name of the " + base->name() + " task's own pattern for its role '" +
                           role.role + "'; rename the file's pattern (say \"my-" + p.name +
                           "\"): both are then scored and expected");
  }
  return std::make_unique<FixedSets>(std::move(base), std::move(train), std::move(held_out), eval_file);
}

}  // namespace headlab::train
