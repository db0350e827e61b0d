// FixedSets: a task with a fixed training set, a held-out evaluation set, or
// both (--train-size, --train-fraction, --eval-data).
//
// The training set is drawn once, from a stream of its own of the run's
// --split-seed (by default --seed, so that one can vary the initialization
// with the split fixed), and served in epochs, shuffled each epoch (EpochOrder): --batch 0
// trains on all of it at every step. The held-out set that eval_batch()
// returns is
//   - for a task that can list its examples (modular-addition's p^2 pairs):
//     the list is shuffled with that stream, its first N (--train-size) or
//     round(F * p^2) (--train-fraction) are the training set and all the
//     others are held out;
//   - for any other task (--train-size only): the task's own evaluation
//     stream, skipping every sequence that is in the training set;
//   - with --eval-data FILE: the file's sequences, whatever the task.
// The split is a function of the seed and the epoch order a Task::Position,
// so a checkpoint resumes it exactly. Without any of the three flags the
// run builder uses the bare task, so a run trains on the same numbers as
// before these flags existed.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_set>

#include "train/config.h"
#include "train/epoch_order.h"
#include "train/tasks.h"

namespace headlab::train {

class FixedSets final : public Task {
 public:
  // `train`: the training set (none: the base task's fresh examples);
  // `held_out`: the evaluation set (none: the base's evaluation batch, minus
  // the training set's sequences); `eval_file`: the fingerprint of the
  // --eval-data file it was read from, if it was.
  FixedSets(std::unique_ptr<Task> base, std::optional<Batch> train, std::optional<Batch> held_out,
            std::optional<Fingerprint> eval_file = std::nullopt);

  std::string name() const override { return base_->name(); }
  int64_t vocab() const override { return base_->vocab(); }
  int64_t num_classes() const override { return base_->num_classes(); }
  int64_t seq_len() const override { return base_->seq_len(); }
  std::optional<Batch> all_examples() const override { return base_->all_examples(); }
  double distinct_sequences() const override { return base_->distinct_sequences(); }
  std::vector<analysis::ExpectedRole> expected_roles() const override { return base_->expected_roles(); }
  // The base's description, and with --eval-data the file's "attend"
  // patterns as roles too (a task's run evaluated on a file of patterns).
  void describe(Batch& batch) const override;

  // The next `batch` sequences of the training set's epochs.
  Batch sample(int64_t batch, core::Generator& gen) override;
  int64_t size() const override;
  Batch rows(int64_t first, int64_t count) const override;

  int64_t eval_rows(int64_t rows) const override;
  // Throws UsageError if the training set leaves too few other sequences.
  Batch eval_batch(int64_t rows, uint64_t seed) override;
  // Slices of a held-out list or file; the rejection-drawn set is one draw.
  Batch eval_slice(int64_t first, int64_t count, uint64_t seed) override;
  // The training file's (with --data), and --eval-data's.
  std::optional<Fingerprint> fingerprint() const override { return base_->fingerprint(); }
  std::optional<Fingerprint> eval_fingerprint() const override { return eval_file_; }
  std::string inferred_sizes() const override { return base_->inferred_sizes(); }

  std::optional<Position> position() const override;
  void set_position(const Position& position) override;

 private:
  std::unique_ptr<Task> base_;
  std::optional<Batch> train_, held_out_;
  std::optional<Fingerprint> eval_file_;
  std::optional<EpochOrder> order_;
  std::unordered_set<std::string> train_keys_;  // each training sequence's tokens and targets
};

// Whether `config` asks for a training set or an evaluation set apart from
// the task's own stream.
bool has_fixed_sets(const TrainConfig& config);
// `config` without its training and held-out sets (--train-size,
// --train-fraction, --eval-fraction, --eval-data, --split-seed): what eval
// and analyze read from another source than the run's, a --data file or a
// task, all of it.
void drop_fixed_sets(TrainConfig& config);

// Refuses, before anything is drawn, a training set of `rows` sequences of
// `seq_len` tokens that the task cannot fill with different sequences
// (`distinct`, Task::distinct_sequences: at least one must be left to hold
// out) or whose estimated size exceeds `memory_bytes` (what this process may
// allocate, memory_limit_bytes() in run_builder.h), naming the bound and the fix.
void check_training_set(const std::string& task, int64_t rows, int64_t seq_len, double distinct, double memory_bytes);

// The task of `config` with its fixed sets (see above); `base` unchanged if
// has_fixed_sets is false. Throws UsageError for a size that does not fit
// the task, naming the flag and what would.
std::unique_ptr<Task> with_fixed_sets(std::unique_ptr<Task> base, const TrainConfig& config);

}  // namespace headlab::train
