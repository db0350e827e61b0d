// Arrays across the binding: a Tensor leaves as a numpy array viewing its
// storage (no copy, the storage kept alive by the array), and numpy arrays come
// in as contiguous Tensors or token ids, checked once, never element by
// element in Python.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace headlab::python {

namespace py = pybind11;

// A numpy array of `t`'s values (float32 or float64), sharing its storage
// when `t` is contiguous. Needs the GIL.
py::array to_numpy(const core::Tensor& t);

// The same values in a fresh array the caller may change freely.
py::array to_numpy_copy(const core::Tensor& t);

// "[2, 6, 16]": how messages spell a shape.
std::string shape_text(const std::vector<int64_t>& shape);

// A contiguous Tensor of `dtype` holding `array`, which must have exactly
// `shape` and a floating-point dtype (an integer or bool one is refused, never
// cast); otherwise a ValueError (std::invalid_argument) naming `what` and the
// shape expected.
core::Tensor tensor_from(const py::array& array, const core::Shape& shape, core::DType dtype, const std::string& what);

// Token ids [B, T] as the forward pass reads them (row-major int32); the
// Python side (headlab/_tokens.py) has already checked their range.
struct Tokens {
  std::vector<int32_t> ids;
  int64_t batch = 0, seq_len = 0;
};
using IntArray = py::array_t<int32_t, py::array::c_style | py::array::forcecast>;
Tokens tokens_from(const IntArray& array);

// The forward pass's padding mask for rows of these real lengths [B]
// (layers/padding_mask.h): undefined, no mask, when `lengths` is None or every
// row is full. The Python side has checked each length is in [1, T].
core::Tensor padding_mask_of(const std::optional<IntArray>& lengths, const Tokens& tokens);

}  // namespace headlab::python
