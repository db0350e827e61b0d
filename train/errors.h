// The CLI's two kinds of failure: a usage error (bad flag, value, file or
// option; exit status 2) and everything else (exit status 1).
#pragma once

#include <stdexcept>

namespace headlab::train {

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A runtime failure that every process of a data-parallel job meets at the
// same step (the loss summed over them is not finite), so each can stop on
// its own (train/dist.h).
struct SharedError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace headlab::train
