// The CLI's two kinds of failure: a usage error (bad flag, value, file or
// option; exit status 2) and everything else (exit status 1).
#pragma once

#include <stdexcept>

namespace headlab::train {

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A run that diverged: a loss, gradient, weight or held-out loss that is not
// finite. Only then does going on from the last checkpoint with a lower --lr
// help, so only then does the CLI suggest it.
struct Diverged : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A divergence that every process of a data-parallel job meets at the same
// step (the loss summed over them is not finite), so each can stop on its own
// (train/dist.h).
struct SharedError : Diverged {
  using Diverged::Diverged;
};

}  // namespace headlab::train
