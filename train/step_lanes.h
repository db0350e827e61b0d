// A training step's slices side by side, one per thread ("lanes").
//
// A toy model's step is hundreds of small kernels. Split over threads op by
// op, each kernel forks and joins, and at tiny and small sizes the joins, the
// uneven splits and the cache lines crossing between cores take a third of
// the step (docs/performance.md, "Slices on threads"). Data parallelism
// inside the process has none of that: each thread runs the forward and
// backward of its own slice of the batch, every kernel single-threaded, and
// the threads meet once, to add their gradients.
//
// Lane 0 computes with the session's model; each other lane with a replica
// whose parameters are new leaves over the same value tensors, so the
// weights are shared (the optimizer's in-place update reaches every lane)
// and each lane's gradients are its own.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "layers/transformer.h"

namespace headlab::train {

// Rows [first, first + rows) of a step's batch.
struct Piece {
  int64_t first = 0, rows = 0;
};

// A process's part of the step, as pieces run `threads` at a time: its
// `slices` slices of `rows` rows from row `first`; one slice alone is split
// into up to `threads` pieces (the first ones a row longer where they do
// not divide), so that every thread has rows of its own.
std::vector<Piece> step_pieces(int64_t first, int64_t slices, int64_t rows, int threads);

class ModelLanes {
 public:
  // The model lane `lane` computes with: `main` for lane 0, else a replica
  // sharing main's parameter values, built on first use and rebuilt when
  // main's parameters no longer hold the values it shares (a parameter
  // replaced, or a checkpoint loaded into new tensors). `params`:
  // main.parameters(), which the caller has at hand every step.
  const layers::Transformer& model(const layers::Transformer& main, const std::vector<autograd::Variable>& params,
                                   int lane);
  // The parameters of model(main, params, lane), in model order (params
  // themselves for lane 0).
  const std::vector<autograd::Variable>& parameters(const std::vector<autograd::Variable>& params, int lane) const;

 private:
  struct Replica {
    std::unique_ptr<layers::Transformer> model;
    std::vector<autograd::Variable> params;
  };
  std::vector<Replica> replicas_;  // lanes 1, 2, ...
};

// Runs fn(0) .. fn(n - 1) at once, one per OpenMP thread, each with one
// thread for the kernels it calls; n == 1 runs fn(0) here with the
// process's threads. The first exception (by lane) is rethrown after all
// lanes end.
void run_lanes(int n, const std::function<void(int lane)>& fn);

}  // namespace headlab::train
