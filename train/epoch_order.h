// EpochOrder: the order in which a finite source (a data file, a fixed
// training set) serves its sequences. Epochs of all of them, one after the
// other; with shuffle each epoch is a fresh permutation whose seed is drawn
// from the training generator when the epoch starts, so that a checkpoint
// needs only Task::Position (that seed and the index into the epoch) to
// continue exactly.
#pragma once

#include <cstdint>
#include <vector>

#include "core/random.h"
#include "train/tasks.h"

namespace headlab::train {

class EpochOrder {
 public:
  // size >= 1 sequences; the first next() starts the first epoch.
  EpochOrder(int64_t size, bool shuffle);

  // The index of the next sequence. Draws one number from gen at the start of
  // each epoch, and only when shuffling.
  int64_t next(core::Generator& gen);

  Task::Position position() const { return position_; }
  // Rebuilds the epoch of position.epoch_seed; throws std::invalid_argument
  // unless 0 <= position.next <= size (size: the epoch is finished).
  void set_position(const Task::Position& position);

 private:
  void start_epoch(uint64_t epoch_seed);

  int64_t size_;
  bool shuffle_;
  std::vector<int64_t> order_;  // the current epoch's order
  Task::Position position_;
};

}  // namespace headlab::train
