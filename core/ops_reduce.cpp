// Reductions over any set of axes: sum, mean, max, argmax, sum_to.
//
// Every output element is reduced by one thread in a fixed order, so results
// do not depend on the thread count. Sums accumulate in double.
#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "core/ops.h"
#include "core/strided.h"

namespace headlab::core {
namespace {

struct ReducePlan {
  Shape out_shape;             // with keepdim
  std::vector<int64_t> outer;  // element offset of each output's first input
  std::vector<int64_t> inner;  // offsets of the reduced elements, relative
  int64_t inner_stride = 0;    // when the reduced elements form one strided row
  bool inner_is_row = false;
  int64_t count = 1;  // reduced elements per output
};

// Offsets of every element of the (shape, strides) sub-space, row-major.
std::vector<int64_t> offsets_of(const Shape& shape, const Shape& strides) {
  std::vector<int64_t> out;
  out.reserve(static_cast<std::size_t>(numel_of(shape)));
  if (numel_of(shape) == 0) return out;
  Shape index(shape.size(), 0);
  int64_t off = 0;
  while (true) {
    out.push_back(off);
    int64_t d = static_cast<int64_t>(shape.size()) - 1;
    for (; d >= 0; --d) {
      off += strides[d];
      if (++index[d] < shape[d]) break;
      off -= index[d] * strides[d];
      index[d] = 0;
    }
    if (d < 0) break;
  }
  return out;
}

ReducePlan plan(const Tensor& x, std::vector<int64_t> axes, bool keepdim, const char* op) {
  if (!x.defined()) throw std::invalid_argument(std::string(op) + ": the tensor is undefined");
  std::vector<bool> reduced(static_cast<std::size_t>(x.dim()), axes.empty());
  for (int64_t a : axes) {
    const int64_t w = x.wrap_axis(a, op);
    if (reduced[w]) throw std::invalid_argument(std::string(op) + ": axis " + std::to_string(a) + " is given twice");
    reduced[w] = true;
  }
  ReducePlan p;
  Shape kept_shape, kept_strides, red_shape, red_strides;
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (reduced[d]) {
      red_shape.push_back(x.shape()[d]);
      red_strides.push_back(x.strides()[d]);
      if (keepdim) p.out_shape.push_back(1);
    } else {
      kept_shape.push_back(x.shape()[d]);
      kept_strides.push_back(x.strides()[d]);
      p.out_shape.push_back(x.shape()[d]);
    }
  }
  p.count = numel_of(red_shape);
  p.outer = offsets_of(kept_shape, kept_strides);
  const auto layout = detail::coalesce<1>(red_shape, {&red_strides});
  if (layout.shape.size() == 1) {
    p.inner_is_row = true;
    p.inner_stride = layout.strides[0][0];
  } else {
    p.inner = offsets_of(red_shape, red_strides);
  }
  return p;
}

// Whether outputs are the columns of x seen as [count, M]: x contiguous,
// the reduced axes leading (a bias gradient, a broadcast over the batch).
bool reduces_leading_rows(const Tensor& x, const ReducePlan& p) {
  const auto m_count = static_cast<int64_t>(p.outer.size());
  return x.is_contiguous() && p.inner_is_row && m_count > 1 && p.inner_stride == m_count &&
         p.outer.front() == 0 && p.outer.back() == m_count - 1;
}

// x [count, M] -> out [M], out[m] = finish(fold over rows r in order): the
// same folds, in the same order, as the general loop below, but walking x
// row by row, so the inner loop is contiguous and vectorizes. Threads own
// column blocks.
template <class T, class Acc, class Fold, class Finish>
void reduce_leading_rows(const T* x, T* o, int64_t count, int64_t M, Acc init, Fold fold, Finish finish) {
  constexpr int64_t kCols = 256;
  const int64_t blocks = (M + kCols - 1) / kCols;
#pragma omp parallel for schedule(static) if (blocks > 1 && count * M >= kParallelGrain)
  for (int64_t blk = 0; blk < blocks; ++blk) {
    const int64_t c0 = blk * kCols, n = std::min(kCols, M - c0);
    Acc acc[kCols];
    for (int64_t c = 0; c < n; ++c) acc[c] = init;
    for (int64_t r = 0; r < count; ++r) {
      const T* row = x + r * M + c0;
#pragma omp simd
      for (int64_t c = 0; c < n; ++c) acc[c] = fold(acc[c], row[c]);
    }
    for (int64_t c = 0; c < n; ++c) o[c0 + c] = static_cast<T>(finish(acc[c], count));
  }
}

// out[m] = finish(fold(init, x[outer[m] + inner[r]] for r), count)
template <class T, class Acc, class Fold, class Finish>
Tensor reduce(const Tensor& x, const ReducePlan& p, Acc init, Fold fold, Finish finish) {
  Tensor out = Tensor::empty(p.out_shape, x.dtype());
  T* o = out.data<T>();
  const T* base = x.data<T>();
  const auto m_count = static_cast<int64_t>(p.outer.size());
  if (reduces_leading_rows(x, p)) {
    reduce_leading_rows<T>(base, o, p.count, m_count, init, fold, finish);
    return out;
  }
  const bool parallel = m_count > 1 && m_count * p.count >= kParallelGrain;
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t m = 0; m < m_count; ++m) {
    const T* src = base + p.outer[m];
    Acc acc = init;
    if (p.inner_is_row) {
      for (int64_t r = 0; r < p.count; ++r) acc = fold(acc, src[r * p.inner_stride]);
    } else {
      for (int64_t r = 0; r < p.count; ++r) acc = fold(acc, src[p.inner[r]]);
    }
    o[m] = static_cast<T>(finish(acc, p.count));
  }
  return out;
}

}  // namespace

Tensor sum(const Tensor& x, const std::vector<int64_t>& axes, bool keepdim) {
  const ReducePlan p = plan(x, axes, keepdim, "sum");
  return dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    return reduce<T>(x, p, 0.0, [](double a, T v) { return a + v; }, [](double a, int64_t) { return a; });
  });
}

Tensor mean(const Tensor& x, const std::vector<int64_t>& axes, bool keepdim) {
  const ReducePlan p = plan(x, axes, keepdim, "mean");
  if (p.count == 0) throw std::invalid_argument("mean: reducing zero elements of shape " + to_string(x.shape()));
  return dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    return reduce<T>(x, p, 0.0, [](double a, T v) { return a + v; },
                     [](double a, int64_t n) { return a / static_cast<double>(n); });
  });
}

Tensor max(const Tensor& x, const std::vector<int64_t>& axes, bool keepdim) {
  const ReducePlan p = plan(x, axes, keepdim, "max");
  if (p.count == 0)
    throw std::invalid_argument("max: reducing zero elements of shape " + to_string(x.shape()) +
                                " (max of nothing is undefined)");
  return dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    // NaN propagates, as in PyTorch.
    return reduce<T>(x, p, -std::numeric_limits<double>::infinity(),
                     [](double a, T v) { return std::isnan(a) || a >= v ? a : static_cast<double>(v); },
                     [](double a, int64_t) { return a; });
  });
}

Tensor argmax(const Tensor& x, int64_t axis, bool keepdim) {
  const int64_t a = x.wrap_axis(axis, "argmax");
  const ReducePlan p = plan(x, {a}, keepdim, "argmax");
  if (p.count == 0) throw std::invalid_argument("argmax: axis " + std::to_string(axis) + " of shape " +
                                                to_string(x.shape()) + " is empty");
  return dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    Tensor out = Tensor::empty(p.out_shape, x.dtype());
    T* o = out.data<T>();
    const T* base = x.data<T>();
    const int64_t stride = x.strides()[a];
    for (std::size_t m = 0; m < p.outer.size(); ++m) {
      const T* src = base + p.outer[m];
      int64_t best = 0;
      for (int64_t r = 1; r < p.count; ++r)
        if (src[r * stride] > src[best * stride]) best = r;
      o[m] = static_cast<T>(best);
    }
    return out;
  });
}

Tensor sum_to(const Tensor& x, const Shape& shape) {
  if (x.shape() == shape) return x;
  const int64_t lead = x.dim() - static_cast<int64_t>(shape.size());
  if (lead < 0)
    throw std::invalid_argument("sum_to: cannot sum shape " + to_string(x.shape()) + " to more axes " +
                                to_string(shape));
  std::vector<int64_t> axes;
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (d < lead) {
      axes.push_back(d);
    } else if (shape[d - lead] == 1 && x.shape()[d] != 1) {
      axes.push_back(d);
    } else if (shape[d - lead] != x.shape()[d]) {
      throw std::invalid_argument("sum_to: shape " + to_string(x.shape()) + " does not broadcast from " +
                                  to_string(shape));
    }
  }
  return sum(x, axes, true).reshape(shape);
}

}  // namespace headlab::core
