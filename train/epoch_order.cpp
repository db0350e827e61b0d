#include "train/epoch_order.h"

#include <numeric>
#include <stdexcept>
#include <string>
#include <utility>

namespace headlab::train {

EpochOrder::EpochOrder(int64_t size, bool shuffle) : size_(size), shuffle_(shuffle) {
  if (size < 1) throw std::invalid_argument("EpochOrder: size " + std::to_string(size) + " must be at least 1");
  position_.next = size;  // the first next() starts the first epoch
}

int64_t EpochOrder::next(core::Generator& gen) {
  if (position_.next == size_) {
    const uint64_t seed = shuffle_ ? gen.next_u64() : 0;
    start_epoch(seed);
    position_ = {seed, 0};
  }
  return order_[static_cast<std::size_t>(position_.next++)];
}

void EpochOrder::start_epoch(uint64_t epoch_seed) {
  order_.resize(static_cast<std::size_t>(size_));
  std::iota(order_.begin(), order_.end(), int64_t{0});
  if (!shuffle_) return;
  // A generator of its own, so that the seed alone rebuilds the permutation
  // (Fisher-Yates).
  core::Generator epoch(epoch_seed);
  for (std::size_t i = order_.size() - 1; i > 0; --i) {
    std::swap(order_[i], order_[static_cast<std::size_t>(epoch.integer(0, static_cast<int64_t>(i) + 1))]);
  }
}

void EpochOrder::set_position(const Task::Position& position) {
  if (position.next < 0 || position.next > size_) {
    throw std::invalid_argument("next " + std::to_string(position.next) + " is out of [0, " + std::to_string(size_) +
                                "]");
  }
  start_epoch(position.epoch_seed);
  position_ = position;
}

}  // namespace headlab::train
