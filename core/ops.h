// Tensor operations: elementwise (NumPy broadcasting), reductions, matmul.
//
// Every op accepts non-contiguous inputs and returns a fresh contiguous
// tensor. Binary ops require equal dtypes; a mismatch, a shape that does not
// broadcast or an axis out of range throws std::invalid_argument naming the
// op, the shapes and what would fit.
#pragma once

#include <vector>

#include "core/tensor.h"

namespace headlab::core {

// The shape two shapes broadcast to; throws naming `op` if they do not.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);

// --- unary ---
Tensor neg(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor erf(const Tensor& x);
Tensor abs(const Tensor& x);
Tensor sign(const Tensor& x);
Tensor relu(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor pow(const Tensor& x, double exponent);

// --- binary, broadcasting ---
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, const Tensor& b);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
// Comparisons give 1 or 0 in the inputs' dtype.
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
// cond != 0 ? a : b, all three broadcast together.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);

// --- with a scalar ---
Tensor add(const Tensor& a, double b);
Tensor mul(const Tensor& a, double b);

// --- reductions over a set of axes (empty = all axes) ---
Tensor sum(const Tensor& x, const std::vector<int64_t>& axes = {}, bool keepdim = false);
Tensor mean(const Tensor& x, const std::vector<int64_t>& axes = {}, bool keepdim = false);
Tensor max(const Tensor& x, const std::vector<int64_t>& axes = {}, bool keepdim = false);
// Index of the largest element along one axis (first on ties), as the input's dtype.
Tensor argmax(const Tensor& x, int64_t axis, bool keepdim = false);
// Sums `x` down to `shape` (the reverse of broadcasting `shape` up to x.shape()).
Tensor sum_to(const Tensor& x, const Shape& shape);

// --- matmul ---
// a [..., M, K] @ b [..., K, N] -> [..., M, N]; batch axes broadcast; 1-D
// operands are promoted as in NumPy. Transposed views go to BLAS as
// transposes, without a copy.
Tensor matmul(const Tensor& a, const Tensor& b);

// x [N, in] @ weight [out, in]^T + bias [out] -> [N, out], PyTorch's Linear
// in one GEMM (the bias is its starting C). bias may be undefined (none).
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias);
// Its backward for grad [N, out]: dx = grad weight [N, in] and dweight =
// grad^T x [out, in], each only if wanted (else undefined); the two GEMMs
// share one parallel region.
// With want_dbias, also dbias = grad's column sums [out] (core::sum(grad,
// {0})'s bits), in the same region.
struct Bf16Copy;  // core/bf16_operands.h
struct LinearGrads {
  Tensor dx, dweight, dbias;
};
LinearGrads linear_backward(const Tensor& grad, const Tensor& x, const Tensor& weight, bool want_dx,
                            bool want_dweight, bool want_dbias = false);
// The same, with x float32 [N, in] given only as its rounded copy, in bf16
// mixed precision (a Linear that freed its input after the forward,
// core/bf16_operands.h): the bits of the call with x. Should the products
// have gone back to f32 since the forward, x's rounded values stand in.
LinearGrads linear_backward(const Tensor& grad, const Bf16Copy& x, const Tensor& weight, bool want_dx,
                            bool want_dweight, bool want_dbias = false);
// The same in bf16 mixed precision with grad [N, out] given only as its
// rounded copy (core::gelu_backward_rounded: the products read it rounded,
// so nothing stored its float32 values), and x as a float32 tensor or, if
// x16 holds one, its rounded copy: the bits of the calls above with grad's
// float32 values. No bias gradient: grad's maker sums its columns.
LinearGrads linear_backward(const Bf16Copy& grad, const Tensor& x, const Bf16Copy& x16, const Tensor& weight,
                            bool want_dx, bool want_dweight);

// --- operators ---
inline Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
inline Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
inline Tensor operator-(const Tensor& a) { return neg(a); }
inline Tensor operator+(const Tensor& a, double b) { return add(a, b); }
inline Tensor operator*(const Tensor& a, double b) { return mul(a, b); }
inline Tensor operator*(double a, const Tensor& b) { return mul(b, a); }

// Largest absolute difference between two tensors of one shape.
double max_abs_diff(const Tensor& a, const Tensor& b);
bool allclose(const Tensor& a, const Tensor& b, double rtol = 1e-5, double atol = 1e-8);

}  // namespace headlab::core
