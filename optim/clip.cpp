#include "optim/clip.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>
#include <string>

#include "core/shortest.h"
#include "core/threads.h"

namespace headlab::optim {

namespace {

// The unit of the parallel sum; fixed, so the sum never depends on threads.
constexpr int64_t kChunk = 4096;

// x: [n] contiguous -> sum of x[i]^2 in double. Eight running sums, added in
// a fixed order, let the compiler vectorize without reordering anything.
template <class T>
double chunk_sum_of_squares(const T* x, int64_t n) {
  constexpr int kLanes = 8;
  double lanes[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int j = 0; j < kLanes; ++j) lanes[j] += static_cast<double>(x[i + j]) * static_cast<double>(x[i + j]);
  }
  double total = 0.0;
  for (const double lane : lanes) total += lane;
  for (; i < n; ++i) total += static_cast<double>(x[i]) * static_cast<double>(x[i]);
  return total;
}

// x: [n] contiguous -> sum of x[i]^2 in double, over fixed-size chunks summed
// in a fixed order: the same result on any thread count.
template <class T>
double sum_of_squares(const T* x, int64_t n) {
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  std::vector<double> partial(static_cast<std::size_t>(chunks), 0.0);
#pragma omp parallel for schedule(static) if (n >= core::kParallelGrain)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t begin = c * kChunk;
    partial[static_cast<std::size_t>(c)] = chunk_sum_of_squares(x + begin, std::min(kChunk, n - begin));
  }
  double total = 0.0;
  for (const double s : partial) total += s;
  return total;
}

// x: [n] contiguous, x *= factor.
template <class T>
void scale(T* x, int64_t n, double factor) {
  const T f = static_cast<T>(factor);
#pragma omp parallel for schedule(static) if (n >= core::kParallelGrain)
  for (int64_t i = 0; i < n; ++i) x[i] *= f;
}

}  // namespace

double grad_norm(const std::vector<autograd::Variable>& params) {
  double total = 0.0;
  for (const autograd::Variable& p : params) {
    if (!p.defined() || !p.has_grad()) continue;
    const core::Tensor g = p.grad().contiguous();
    total += core::dispatch(g.dtype(), [&](auto zero) {
      using T = decltype(zero);
      return sum_of_squares<T>(g.data<T>(), g.numel());
    });
  }
  return std::sqrt(total);
}

double clip_grad_norm(const std::vector<autograd::Variable>& params, double max_norm) {
  if (!std::isfinite(max_norm) || max_norm <= 0.0) {
    throw std::invalid_argument("optim::clip_grad_norm: max_norm must be finite and > 0, got " +
                                core::shortest(max_norm));
  }
  const double norm = grad_norm(params);
  if (!std::isfinite(norm) || norm <= max_norm) return norm;
  const double factor = max_norm / (norm + 1e-6);
  // A gradient is scaled in place only if it is contiguous and the sole user
  // of its storage; any other (a broadcast view, or gradients sharing one
  // buffer) is replaced by a scaled copy, so nothing is scaled twice.
  std::map<const core::Storage*, int> users;
  for (const autograd::Variable& p : params) {
    if (p.defined() && p.has_grad()) ++users[p.grad().storage().get()];
  }
  for (const autograd::Variable& p : params) {
    if (!p.defined() || !p.has_grad()) continue;
    const core::Tensor& g = p.grad();
    const bool in_place = g.is_contiguous() && users[g.storage().get()] == 1;
    const core::Tensor target = in_place ? g : g.clone();
    core::dispatch(target.dtype(), [&](auto zero) {
      using T = decltype(zero);
      scale<T>(target.data<T>(), target.numel(), factor);
    });
    if (!in_place) p.set_grad(target);
  }
  return norm;
}

}  // namespace headlab::optim
