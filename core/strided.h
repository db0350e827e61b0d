// Internal: iteration over N strided operands of one shape.
//
// Axes are coalesced where every operand allows it, so contiguous tensors
// become one flat row. The outer index space is split among OpenMP threads
// only past kParallelGrain elements; each element is visited by exactly one
// thread, so results never depend on the thread count.
#pragma once

#include <omp.h>

#include <array>
#include <cstdint>

#include "core/tensor.h"
#include "core/threads.h"

namespace headlab::core::detail {

template <std::size_t N>
struct Layout {
  Shape shape;                   // coalesced, size-1 axes removed
  std::array<Shape, N> strides;  // per operand, same rank as shape
};

template <std::size_t N>
Layout<N> coalesce(const Shape& shape, const std::array<const Shape*, N>& strides) {
  Layout<N> out;
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    bool merge = !out.shape.empty();
    for (std::size_t k = 0; merge && k < N; ++k)
      merge = out.strides[k].back() == (*strides[k])[d] * shape[d];
    if (merge) {
      out.shape.back() *= shape[d];
      for (std::size_t k = 0; k < N; ++k) out.strides[k].back() = (*strides[k])[d];
    } else {
      out.shape.push_back(shape[d]);
      for (std::size_t k = 0; k < N; ++k) out.strides[k].push_back((*strides[k])[d]);
    }
  }
  if (out.shape.empty()) {  // a single element
    out.shape.push_back(1);
    for (std::size_t k = 0; k < N; ++k) out.strides[k].push_back(0);
  }
  return out;
}

// Calls row(offsets, n, inner_strides) for every innermost row of the layout:
// offsets[k] is operand k's element offset of the row's first element.
template <std::size_t N, class Row>
void for_each_row(const Layout<N>& layout, Row&& row) {
  const int64_t rank = static_cast<int64_t>(layout.shape.size());
  const int64_t inner = layout.shape.back();
  std::array<int64_t, N> inner_strides{};
  for (std::size_t k = 0; k < N; ++k) inner_strides[k] = layout.strides[k].back();
  int64_t rows = 1;
  for (int64_t d = 0; d + 1 < rank; ++d) rows *= layout.shape[d];

  auto run = [&](int64_t begin, int64_t end) {
    // Multi-index of row `begin`, then incremented like an odometer.
    Shape index(static_cast<std::size_t>(rank > 1 ? rank - 1 : 0), 0);
    std::array<int64_t, N> off{};
    int64_t rest = begin;
    for (int64_t d = rank - 2; d >= 0; --d) {
      index[d] = rest % layout.shape[d];
      rest /= layout.shape[d];
      for (std::size_t k = 0; k < N; ++k) off[k] += index[d] * layout.strides[k][d];
    }
    for (int64_t r = begin; r < end; ++r) {
      row(off, inner, inner_strides);
      for (int64_t d = rank - 2; d >= 0; --d) {
        for (std::size_t k = 0; k < N; ++k) off[k] += layout.strides[k][d];
        if (++index[d] < layout.shape[d]) break;
        for (std::size_t k = 0; k < N; ++k) off[k] -= index[d] * layout.strides[k][d];
        index[d] = 0;
      }
    }
  };

  const int64_t total = rows * inner;
  if (total == 0) return;  // a zero-size tensor has no rows (and its odometer would divide by 0)
  if (total < kParallelGrain || rows == 1) {
    if (rows == 1 && total >= kParallelGrain) {
      // One long row: split it instead.
#pragma omp parallel
      {
        const int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
        const int64_t b = inner * t / nt, e = inner * (t + 1) / nt;
        std::array<int64_t, N> off{};
        for (std::size_t k = 0; k < N; ++k) off[k] = b * inner_strides[k];
        if (e > b) row(off, e - b, inner_strides);
      }
      return;
    }
    run(0, rows);
    return;
  }
#pragma omp parallel
  {
    const int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
    run(rows * t / nt, rows * (t + 1) / nt);
  }
}

}  // namespace headlab::core::detail
