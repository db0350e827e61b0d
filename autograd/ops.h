// The op library: every op computes its forward with core kernels and
// records a backward. Implementations are split by family:
// ops_elementwise.cpp, ops_reduce.cpp, ops_matmul.cpp, ops_shape.cpp, ops_nn.cpp.
//
// Broadcasting ops reduce each gradient back to its input's shape (a sum over
// the broadcast axes) and check the shape. Errors name the op and the shapes.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "autograd/variable.h"
#include "core/random.h"

namespace headlab::autograd {

// --- elementwise, broadcasting ---
Variable add(const Variable& a, const Variable& b);
Variable sub(const Variable& a, const Variable& b);
Variable mul(const Variable& a, const Variable& b);
Variable div(const Variable& a, const Variable& b);
Variable add(const Variable& a, double b);
Variable mul(const Variable& a, double b);
Variable neg(const Variable& x);
Variable exp(const Variable& x);
Variable log(const Variable& x);
Variable sqrt(const Variable& x);
Variable pow(const Variable& x, double exponent);
Variable tanh(const Variable& x);
Variable relu(const Variable& x);
Variable sigmoid(const Variable& x);
Variable gelu(const Variable& x);  // exact: 0.5 x (1 + erf(x / sqrt 2))

// --- reductions (empty axes = all) ---
Variable sum(const Variable& x, const std::vector<int64_t>& axes = {}, bool keepdim = false);
Variable mean(const Variable& x, const std::vector<int64_t>& axes = {}, bool keepdim = false);
Variable max(const Variable& x, int64_t axis, bool keepdim = false);  // gradient to the first maximum

// --- matmul: a [..., M, K] @ b [..., K, N], batch axes broadcast ---
Variable matmul(const Variable& a, const Variable& b);

// --- fused layers ---
// PyTorch's Linear: x [..., in], weight [out, in], bias [out] (or undefined:
// none) -> [..., out] = x weight^T + bias, one GEMM forward; backward
// dx = g weight, dweight = g^T x, dbias = the column sums of g.
Variable linear(const Variable& x, const Variable& weight, const Variable& bias);
// gelu(linear(x, weight, bias)) as one node: it keeps GELU's slope instead
// of the Linear's output, and its backward turns the slope and the bias
// gradient into one pass.
Variable linear_gelu(const Variable& x, const Variable& weight, const Variable& bias);

// Fused multi-head attention (core/attention_kernels.h): q, k, v [B, T, d]
// with head i in columns i*d_k .. (i+1)*d_k - 1 -> [B, T, d], per head
// gate_i * softmax(mask(scale * Q_i K_i^T)) V_i. key_padding: undefined or
// [B, T] (0 = pad). gates: undefined (all 1) or [h]; its gradient is computed
// only when it requires one. If `probs` is given it receives the attention
// probabilities [B, h, T, T] (the tensor backward saves: read-only).
Variable attention(const Variable& q, const Variable& k, const Variable& v, int64_t heads, bool causal, double scale,
                   const Tensor& key_padding = Tensor(), const Variable& gates = Variable(), Tensor* probs = nullptr);
// The same attention as three nodes, for hooks that read or replace the
// scores or the probabilities (core/attention_split.h); composed they give
// attention's bits. attention_scores: q, k [B, T, d] -> S [B, h, T, T] =
// scale Q_i K_i^T with hidden keys (after the query when causal, padding)
// at -inf. attention_softmax: S -> P, each row's softmax over the keys the
// causal mask lets through (the rest 0). attention_apply: P, v -> [B, T, d],
// head i's columns gate_i * P_i V_i, keys after the query ignored when causal.
Variable attention_scores(const Variable& q, const Variable& k, int64_t heads, bool causal, double scale,
                          const Tensor& key_padding = Tensor());
Variable attention_softmax(const Variable& scores, bool causal);
Variable attention_apply(const Variable& probs, const Variable& v, int64_t heads, bool causal,
                         const Variable& gates = Variable());

// --- shape (forward is a view; backward maps the gradient back) ---
Variable reshape(const Variable& x, const Shape& shape);
Variable transpose(const Variable& x, int64_t a, int64_t b);
Variable permute(const Variable& x, const std::vector<int64_t>& order);
Variable slice(const Variable& x, int64_t axis, int64_t start, int64_t end, int64_t step = 1);
Variable expand(const Variable& x, const Shape& shape);
Variable concat(const std::vector<Variable>& xs, int64_t axis);
std::vector<Variable> split(const Variable& x, const std::vector<int64_t>& sizes, int64_t axis);

// --- neural-network ops ---
Variable softmax(const Variable& x, int64_t axis = -1);
Variable log_softmax(const Variable& x, int64_t axis = -1);
// logits [..., C] against targets (one per row of logits, -1 = no target):
// the mean over rows with a target; 0 if none has one. Fused with log-softmax.
Variable cross_entropy(const Variable& logits, std::span<const int32_t> targets);
// The same computed in `compute`: float32 logits converted to double, their
// softmax and loss in double, the gradient rounded back to float32 only at
// the end (so that probabilities within 1e-7 of 1 still give a loss and a
// gradient). The loss keeps the logits' dtype.
Variable cross_entropy(const Variable& logits, std::span<const int32_t> targets, core::DType compute);
// Over the last axis: (x - mean) * rstd * weight + bias. weight, bias [D].
Variable layer_norm(const Variable& x, const Variable& weight, const Variable& bias, double eps = 1e-5);
// The residual add and the next LayerNorm, a, b [..., D] (equal shapes):
// sum = a + b and normalized = layer_norm(sum, weight, bias, eps), the same
// values and graph as those two ops, from one pass over the rows.
struct AddLayerNorm {
  Variable sum, normalized;
};
AddLayerNorm add_layer_norm(const Variable& a, const Variable& b, const Variable& weight, const Variable& bias,
                            double eps = 1e-5);
// weight [V, D], ids (values in [0, V)) of shape ids_shape -> ids_shape + [D].
Variable embedding(const Variable& weight, std::span<const int32_t> ids, const Shape& ids_shape);
// Where mask (broadcastable to x, nonzero = fill) is set, the output is value
// and the gradient is 0.
Variable masked_fill(const Variable& x, const Tensor& mask, double value);
// Zeroes each element with probability p and scales the rest by 1 / (1 - p);
// the identity when !training or p == 0.
Variable dropout(const Variable& x, double p, core::Generator& gen, bool training);

// --- operators ---
inline Variable operator+(const Variable& a, const Variable& b) { return add(a, b); }
inline Variable operator-(const Variable& a, const Variable& b) { return sub(a, b); }
inline Variable operator*(const Variable& a, const Variable& b) { return mul(a, b); }
inline Variable operator/(const Variable& a, const Variable& b) { return div(a, b); }
inline Variable operator-(const Variable& x) { return neg(x); }
inline Variable operator+(const Variable& a, double b) { return add(a, b); }
inline Variable operator*(const Variable& a, double b) { return mul(a, b); }
inline Variable operator*(double a, const Variable& b) { return mul(b, a); }

}  // namespace headlab::autograd
