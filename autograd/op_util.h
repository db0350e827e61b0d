// Internal helpers shared by the ops_*.cpp files (not part of the API).
#pragma once

#include <string>
#include <vector>

#include "autograd/variable.h"
#include "core/ops.h"

namespace headlab::autograd::detail {

// Sums a broadcast gradient back to an input's shape, then checks the shape:
// the backward of every broadcasting op goes through here.
Tensor reduce_grad(const Tensor& g, const Shape& shape, const char* op);

// Throws std::invalid_argument naming `op` if v is undefined.
const Variable& checked(const Variable& v, const char* op, const char* name);

// A shape-[] tensor of x's dtype.
inline Tensor scalar_like(double value, const Tensor& x) { return Tensor::scalar(value, x.dtype()); }

// Sorted, distinct, non-negative axes; empty means every axis.
std::vector<int64_t> normalize_axes(const std::vector<int64_t>& axes, int64_t dim, const char* op);

// `shape` with each of the (normalized) axes set to 1: a reduction's keepdim shape.
Shape keepdim_shape(const Shape& shape, const std::vector<int64_t>& axes);

}  // namespace headlab::autograd::detail
