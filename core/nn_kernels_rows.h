// Internal: the checks and row view the fused row kernels share
// (nn_kernels.cpp, nn_kernels_gelu.cpp).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

#include "core/tensor.h"
#include "core/threads.h"

namespace headlab::core::detail {

// A tensor seen as rows x cols over its last axis.
struct RowView {
  int64_t rows = 0;
  int64_t cols = 0;
};

inline RowView rows_of(const Tensor& x, const char* op) {
  if (!x.defined()) throw std::invalid_argument(std::string(op) + ": the input tensor is undefined");
  if (x.dim() < 1) throw std::invalid_argument(std::string(op) + ": needs at least one axis, got a scalar (shape [])");
  RowView v;
  v.cols = x.size(-1);
  v.rows = v.cols == 0 ? 0 : x.numel() / v.cols;
  return v;
}

inline void check_same(const Tensor& a, const Tensor& b, const char* op, const char* a_name, const char* b_name) {
  if (!a.defined() || !b.defined())
    throw std::invalid_argument(std::string(op) + ": " + a_name + " and " + b_name + " must both be defined");
  if (a.shape() != b.shape())
    throw std::invalid_argument(std::string(op) + ": " + a_name + " has shape " + to_string(a.shape()) + " but " +
                                b_name + " has shape " + to_string(b.shape()) + "; they must be equal");
  if (a.dtype() != b.dtype())
    throw std::invalid_argument(std::string(op) + ": " + a_name + " is " + to_string(a.dtype()) + " but " + b_name +
                                " is " + to_string(b.dtype()) + "; they must be equal");
}

inline void check_vector(const Tensor& v, int64_t n, DType dtype, const char* op, const char* name) {
  if (v.shape() != Shape{n})
    throw std::invalid_argument(std::string(op) + ": " + name + " has shape " + to_string(v.shape()) +
                                ", expected [" + std::to_string(n) + "] (the size of the last axis)");
  v.check_dtype(dtype, op);
}

// Whether a kernel over `work` elements splits it among threads.
inline bool parallel(int64_t work) { return work >= kParallelGrain; }

}  // namespace headlab::core::detail
