// GELU's fused kernels, declared apart from the other row kernels of
// nn_kernels.h (which includes this header). Float uses the vectorizable
// normal CDF of core/vec_math.h; double keeps libm's erf (the gradchecks).
#pragma once

#include "core/bf16_operands.h"
#include "core/tensor.h"

namespace headlab::core {

// GELU, exact form: x * Phi(x) = 0.5 x (1 + erf(x / sqrt 2)). Any shape.
Tensor gelu_forward(const Tensor& x);
// dx = dy * (Phi(x) + x * phi(x)), phi the standard normal density. In bf16
// mixed precision the slope Phi + x phi is rounded to bf16 first, as the
// fused kernel below keeps it, so that GELU apart from its Linear (a hook
// between them) gives the fused form's bits.
Tensor gelu_backward(const Tensor& x, const Tensor& dy);

// GELU behind a Linear layer, as the Linear's epilogue: h [..., C], the
// product x W^T without its bias, and bias [C] (undefined: none) -> y =
// gelu(h + bias), written over h (which must be contiguous and shared with
// no one: the GEMM's fresh output), and, if want_slope, slope = dy/d(h + b)
// = Phi + (h + b) phi, all the backward needs, so the pre-activation is not
// kept. One pass: the bias is added as the product is read, not copied into
// the GEMM's output first. In bf16 mixed precision (float32 whose products
// run in bf16, gemm_precision()) the slope is kept rounded to bf16 instead,
// slope16 (slope undefined): half the bytes written here, kept
// until the backward and read there, where dh = dy * slope is rounded to
// bf16 for the products anyway (gelu_backward_rounded). A slope in [-0.17,
// 1.13] rounded moves by at most 2^-9 of itself, as each operand of the
// products does.
struct GeluWithSlope {
  Tensor y, slope;  // slope undefined unless wanted (or kept as slope16)
  Bf16Copy slope16;
  // The slope as float32 values, whichever way it is kept (none: undefined).
  Tensor slope_values() const;
};
GeluWithSlope bias_gelu_forward(Tensor h, const Tensor& bias, bool want_slope);
// dy, slope [N, C] -> dh = dy * slope [N, C] and, if wanted, its column sums
// [C] (the bias gradient of the Linear before), each column added in row
// order in double, so the bits never depend on the thread count. With
// overwrite_dy (dy contiguous, and no one else's) dh is written over dy,
// element by element: one [N, C] buffer less at the backward's peak.
struct GeluSlopeGrads {
  Tensor dh, column_sums;
};
GeluSlopeGrads gelu_backward_with_slope(const Tensor& dy, const Tensor& slope, bool want_column_sums,
                                        bool overwrite_dy = false);
// The same for float32 in bf16 mixed precision, where dh is read only by
// the Linear's products, which read it rounded: dh exists only rounded,
// each row's block rounded as it is made (core::linear_backward takes it),
// and the sums are of its float32 values, as above. What it saves is a
// float32 dh written and read back from memory by each of the two products.
struct GeluSlopeRounded {
  Bf16Copy dh;
  Tensor column_sums;
};
GeluSlopeRounded gelu_backward_rounded(const Tensor& dy, const Tensor& slope, bool want_column_sums);
// The same from the slope kept rounded (GeluWithSlope::slope16).
GeluSlopeRounded gelu_backward_rounded(const Tensor& dy, const Bf16Copy& slope16, bool want_column_sums);
// The rounded slope widened back to float32 [rows, cols], for a backward
// that runs in float32 after a bf16 forward.
Tensor widen_bf16(const Bf16Copy& copy);

}  // namespace headlab::core
