// Slices side by side on the threads: see step_lanes.h.
#include "train/step_lanes.h"

#include <omp.h>

#include <algorithm>
#include <exception>

#include "core/threads.h"

namespace headlab::train {
namespace {

// Whether every parameter of a replica (`mine`) is a leaf over main's value
// (the same storage and view), requiring a gradient as main's does.
bool shares_values(const std::vector<autograd::Variable>& mine, const std::vector<autograd::Variable>& theirs) {
  if (mine.size() != theirs.size()) return false;
  for (std::size_t i = 0; i < mine.size(); ++i) {
    const core::Tensor &a = mine[i].value(), &b = theirs[i].value();
    if (!a.shares_storage(b) || a.offset() != b.offset() || a.shape() != b.shape() ||
        mine[i].requires_grad() != theirs[i].requires_grad())
      return false;
  }
  return true;
}

std::unique_ptr<layers::Transformer> replica_of(const layers::Transformer& main) {
  core::Generator unused;  // the initial values are replaced at once
  auto replica = std::make_unique<layers::Transformer>(main.spec(), unused, main.dtype());
  for (const auto& [name, p] : main.named_parameters())
    replica->replace_parameter(name, autograd::Variable(p.value(), p.requires_grad()));
  replica->train(main.is_training());
  return replica;
}

}  // namespace

std::vector<Piece> step_pieces(int64_t first, int64_t slices, int64_t rows, int threads) {
  std::vector<Piece> pieces;
  if (slices > 1 || threads <= 1 || rows < 2) {
    for (int64_t j = 0; j < slices; ++j) pieces.push_back({first + j * rows, rows});
    return pieces;
  }
  const int64_t n = std::min<int64_t>(threads, rows), base = rows / n, longer = rows % n;
  for (int64_t j = 0, at = first; j < n; ++j) {
    const int64_t r = base + (j < longer ? 1 : 0);
    pieces.push_back({at, r});
    at += r;
  }
  return pieces;
}

const layers::Transformer& ModelLanes::model(const layers::Transformer& main,
                                             const std::vector<autograd::Variable>& params, int lane) {
  if (lane == 0) return main;
  const auto i = static_cast<std::size_t>(lane - 1);
  if (replicas_.size() <= i) replicas_.resize(i + 1);
  Replica& r = replicas_[i];
  if (!r.model || r.model->is_training() != main.is_training() || !shares_values(r.params, params)) {
    r.model = replica_of(main);
    r.params = r.model->parameters();
  }
  return *r.model;
}

const std::vector<autograd::Variable>& ModelLanes::parameters(const std::vector<autograd::Variable>& params,
                                                              int lane) const {
  return lane == 0 ? params : replicas_.at(static_cast<std::size_t>(lane - 1)).params;
}

void run_lanes(int n, const std::function<void(int lane)>& fn) {
  if (n <= 1) {
    if (n == 1) fn(0);
    return;
  }
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(n));
  int cpus[core::detail::kMaxTrackedThreads];
  std::fill(cpus, cpus + core::detail::kMaxTrackedThreads, -1);
#pragma omp parallel num_threads(n)
  {
    const int t = omp_get_thread_num(), team = omp_get_num_threads();
    if (t < core::detail::kMaxTrackedThreads) cpus[t] = core::detail::current_cpu();
    // The lane's kernels run on this thread alone: their parallel regions,
    // nested in this one, get a team of one.
    omp_set_num_threads(1);
    // A smaller team than asked for (OMP_THREAD_LIMIT, a region nested in
    // another) runs the remaining lanes in turn.
    for (int lane = t; lane < n; lane += team) {
      try {
        fn(lane);
      } catch (...) {
        errors[static_cast<std::size_t>(lane)] = std::current_exception();
      }
    }
  }
  // Two lanes on one CPU would take turns for the whole step.
  core::detail::spread_if_shared(cpus, std::min(n, core::detail::kMaxTrackedThreads));
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace headlab::train
