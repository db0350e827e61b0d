// matmul: a [..., M, K] @ b [..., K, N] -> [..., M, N], batch axes broadcast,
// 1-D operands promoted as in NumPy (a [K] is [1, K], b [K] is [K, 1], and
// the promoted axis is dropped from the result).
//
// Backward on the promoted shapes: da = g @ b^T, db = a^T @ g, each summed
// over the batch axes its operand was broadcast along.
#include <stdexcept>
#include <string>
#include <vector>

#include "autograd/op_util.h"
#include "autograd/ops.h"
#include "core/bf16_operands.h"
#include "core/gemm.h"
#include "core/nn_kernels.h"
#include "core/ops.h"

namespace headlab::autograd {

using detail::checked;

namespace {

Tensor t_last2(const Tensor& t) { return t.transpose(-1, -2); }

// The gradient of the result, shaped like the product of the promoted operands.
Tensor promoted_grad(const Tensor& g, bool a_vec, bool b_vec) {
  Tensor r = g;
  if (a_vec) r = r.unsqueeze(r.dim() - (b_vec ? 0 : 1));  // the dropped M axis
  if (b_vec) r = r.unsqueeze(r.dim());                    // the dropped N axis
  return r;
}

}  // namespace

Variable matmul(const Variable& a, const Variable& b) {
  const Tensor& av = checked(a, "matmul", "a").value();
  const Tensor& bv = checked(b, "matmul", "b").value();
  Tensor y = core::matmul(av, bv);
  return Variable::from_op(
      std::move(y), {a, b},
      [](std::vector<Variable>& in, const Tensor& g) {
        const Tensor& a_val = in[0].value();
        const Tensor& b_val = in[1].value();
        const bool a_vec = a_val.dim() == 1, b_vec = b_val.dim() == 1;
        const Tensor a2 = a_vec ? a_val.unsqueeze(0) : a_val;  // [..., M, K]
        const Tensor b2 = b_vec ? b_val.unsqueeze(1) : b_val;  // [..., K, N]
        const Tensor g2 = promoted_grad(g, a_vec, b_vec);      // [..., M, N]
        if (in[0].requires_grad()) {
          const Tensor da = detail::reduce_grad(core::matmul(g2, t_last2(b2)), a2.shape(), "matmul");
          in[0].accumulate_grad(da.reshape(a_val.shape()));
        }
        if (in[1].requires_grad()) {
          Tensor db;
          if (b2.dim() == 2 && a2.dim() > 2) {
            // A shared weight: fold the batch into M for one GEMM,
            // [K, B*M] @ [B*M, N], instead of a batched product and a sum.
            const int64_t k = a2.size(-1), n = g2.size(-1);
            const Tensor a_rows = a2.reshape({-1, k});
            const Tensor g_rows = g2.reshape({-1, n});  // g's batch is a's: b has none
            db = core::matmul(t_last2(a_rows), g_rows);
          } else {
            db = detail::reduce_grad(core::matmul(t_last2(a2), g2), b2.shape(), "matmul");
          }
          in[1].accumulate_grad(db.reshape(b_val.shape()));
        }
      },
      "matmul");
}

namespace {

// x [..., in] @ weight [out, in]^T + bias, the forward of linear and
// linear_gelu: y [N, out] with N the product of x's leading sizes.
// In bf16 mixed precision inside a training step's Bf16Operands scope, x16
// holds x's rounded copy, which the backward's dW = g^T x reads instead of
// x: the node then does not keep x's values (blind_x), which, for the
// LayerNorm, GELU and attention outputs a Linear reads, nothing else
// reads later (core/bf16_operands.h).
struct LinearForward {
  int64_t in = 0, out = 0;
  Shape out_shape;  // [..., out]
  Tensor y;         // [N, out]
  core::Bf16Copy x16;
  uint32_t blind_x() const { return x16 ? 1u : 0u; }  // bit 0: the node's input 0, x
};
LinearForward linear_forward(const Variable& x, const Variable& weight, const Variable& bias, const char* op) {
  const Tensor& xv = checked(x, op, "x").value();
  const Tensor& w = checked(weight, op, "weight").value();
  if (xv.dim() < 1 || w.dim() != 2 || xv.size(-1) != w.size(1))
    throw std::invalid_argument(std::string(op) + ": x " + core::to_string(xv.shape()) + " and weight " +
                                core::to_string(w.shape()) + " do not fit; expected x [..., in] and weight [out, in]");
  LinearForward f{w.size(1), w.size(0), xv.shape(), Tensor(), {}};
  f.out_shape.back() = f.out;
  const Tensor rows = xv.reshape({-1, f.in});
  f.y = core::linear(rows, w, bias.defined() ? bias.value() : Tensor());
  if (grad_enabled()) f.x16 = core::held_bf16_copy(rows);  // empty unless this product kept (or found) one
  return f;
}

// dx = g W [N, in] and dW = g^T x [out, in] from g [N, out], and with
// `with_dbias` db = g's column sums [out], in one parallel region; inputs
// are {x, weight, bias}. x's rounded copy x16 stands in for x once x's
// values are released (LinearForward). While they are not, someone else
// holds x, maybe a hook that changed it in place since the forward: the
// product then reads x, as in float32 (through the scope's kept copy, if no
// hook visit dropped it since).
// g16, if it holds one, stands for g: g's rounded copy, in bf16 precision
// (then g is undefined and with_dbias false).
void accumulate_linear_grads(std::vector<Variable>& inputs, const Tensor& g, int64_t in, bool with_dbias,
                             const core::Bf16Copy& x16, const core::Bf16Copy& g16 = {}) {
  const bool want_dbias = with_dbias && inputs[2].requires_grad();
  const bool want_dx = inputs[0].requires_grad(), want_dw = inputs[1].requires_grad();
  const bool from_copy = x16 && inputs[0].node()->released();
  const Tensor x = from_copy ? Tensor() : inputs[0].value().reshape({-1, in});
  const core::LinearGrads d =
      g16        ? core::linear_backward(g16, x, from_copy ? x16 : core::Bf16Copy{}, inputs[1].value(), want_dx,
                                         want_dw)
      : from_copy ? core::linear_backward(g, x16, inputs[1].value(), want_dx, want_dw, want_dbias)
                  : core::linear_backward(g, x, inputs[1].value(), want_dx, want_dw, want_dbias);
  if (inputs[0].requires_grad()) inputs[0].accumulate_grad(d.dx.reshape(inputs[0].shape()));
  if (inputs[1].requires_grad()) inputs[1].accumulate_grad(d.dweight);
  if (want_dbias) inputs[2].accumulate_grad(d.dbias);
}

}  // namespace

Variable linear(const Variable& x, const Variable& weight, const Variable& bias) {
  LinearForward f = linear_forward(x, weight, bias, "linear");
  return Variable::from_op(
      f.y.reshape(f.out_shape), {x, weight, bias},
      [in = f.in, out = f.out, x16 = f.x16](std::vector<Variable>& inputs, const Tensor& g) {
        accumulate_linear_grads(inputs, g.reshape({-1, out}), in, true, x16);  // g [N, out]
      },
      "linear", f.blind_x());
}

Variable linear_gelu(const Variable& x, const Variable& weight, const Variable& bias) {
  // The product alone; the bias joins GELU's pass (core::bias_gelu_forward),
  // which writes y over the product and keeps GELU's slope, not its input.
  LinearForward f = linear_forward(x, weight, Variable(), "linear_gelu");
  const bool want_slope =
      grad_enabled() && (x.requires_grad() || weight.requires_grad() || (bias.defined() && bias.requires_grad()));
  core::GeluWithSlope r = core::bias_gelu_forward(f.y, bias.defined() ? bias.value() : Tensor(), want_slope);
  return Variable::from_op(
      r.y.reshape(f.out_shape), {x, weight, bias},
      [in = f.in, out = f.out, slope = r.slope, slope16 = r.slope16, x16 = f.x16](std::vector<Variable>& inputs,
                                                                                   const Tensor& g) {
        // dh = g * slope [N, out], and db = its column sums, in one pass.
        // In bf16 precision the products alone read dh, rounded: it is
        // made rounded, never stored in float32.
        if (g.dtype() == core::DType::f32 && core::gemm_precision() == core::GemmPrecision::bf16) {
          const core::GeluSlopeRounded dh =
              slope16 ? core::gelu_backward_rounded(g.reshape({-1, out}), slope16, inputs[2].requires_grad())
                      : core::gelu_backward_rounded(g.reshape({-1, out}), slope, inputs[2].requires_grad());
          accumulate_linear_grads(inputs, Tensor(), in, false, x16, dh.dh);
          if (inputs[2].requires_grad()) inputs[2].accumulate_grad(dh.column_sums);
          return;
        }
        // dh is written over g when this backward holds g alone (then g is
        // fc2's fresh dx, which nothing reads after this).
        const bool own_g = g.is_contiguous() && g.storage().use_count() == 1;
        // A bf16 forward's slope, widened, should the backward run in float32.
        const core::GeluSlopeGrads dh = core::gelu_backward_with_slope(g.reshape({-1, out}),
                                                                       slope16 ? core::widen_bf16(slope16) : slope,
                                                                       inputs[2].requires_grad(), own_g);
        accumulate_linear_grads(inputs, dh.dh, in, false, x16);
        if (inputs[2].requires_grad()) inputs[2].accumulate_grad(dh.column_sums);
      },
      "linear_gelu", f.blind_x());
}

}  // namespace headlab::autograd
