// Fused forward/backward kernels for the network's hot spots. Each pair works
// on the last axis ("rows" of C or D elements); inputs may be views, the
// kernels make them contiguous. Outputs are fresh contiguous tensors in the
// input's dtype; sums over a row accumulate in double. Rows are split among
// OpenMP threads past kParallelGrain elements, each row computed by one
// thread, so results never depend on the thread count.
#pragma once

#include <cstdint>
#include <span>

#include "core/nn_kernels_gelu.h"
#include "core/tensor.h"

namespace headlab::core {

// x [..., C] -> y [..., C], rows sum to 1. Entries that are -inf give exactly
// 0; a row that is entirely -inf (every key masked) gives a row of 0s, not NaN.
Tensor softmax_forward(const Tensor& x);
// y, dy [..., C] -> dx = y * (dy - sum(dy * y))
Tensor softmax_backward(const Tensor& y, const Tensor& dy);

// x [..., C] -> x - logsumexp(x). A row that is entirely -inf gives -inf
// everywhere (the log of softmax's row of 0s).
Tensor log_softmax_forward(const Tensor& x);
// y (log-probs), dy [..., C] -> dx = dy - exp(y) * sum(dy)
Tensor log_softmax_backward(const Tensor& y, const Tensor& dy);

// Mean cross-entropy of logits [N, C] (or [..., C], N = the leading product)
// against targets [N] (target -1 = none; others must be in [0, C)).
// Returns the loss (0 when no row has a target) and, in `probs`,
// softmax(logits) for the backward. The loss is logsumexp(row) - row[target]
// computed in double after subtracting the row's max, so logits like 1e4 are
// exact; the per-row losses are summed in row order.
struct CrossEntropyResult {
  double loss = 0.0;
  int64_t count = 0;  // positions with a target
  Tensor probs;       // same shape as the logits
};
CrossEntropyResult cross_entropy_forward(const Tensor& logits, std::span<const int32_t> targets);
// d loss / d logits [N, C] = (probs - onehot) * grad / count, zero rows where target is -1.
Tensor cross_entropy_backward(const Tensor& probs, std::span<const int32_t> targets, int64_t count, double grad);

// x [N, D] (or [..., D]), weight [D], bias [D] -> y like x; saves mean and
// rstd, shaped like x without its last axis ([N]). The variance is the biased
// one (divided by D), as in PyTorch. An undefined weight means 1, an
// undefined bias 0.
struct LayerNormResult {
  Tensor y, mean, rstd;
};
LayerNormResult layer_norm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps);
// The residual add and the next LayerNorm in one pass over the rows:
// a, b [N, D] (or [..., D], equal shapes and dtypes) -> sum = a + b and
// norm = layer_norm_forward(sum, weight, bias, eps), bit for bit.
struct AddLayerNormResult {
  Tensor sum;
  LayerNormResult norm;
};
AddLayerNormResult add_layer_norm_forward(const Tensor& a, const Tensor& b, const Tensor& weight, const Tensor& bias,
                                          double eps);
// dy, x [N, D] -> dx [N, D], dweight [D] (undefined if weight is), dbias [D].
// dweight and dbias sum over rows in fixed blocks of rows, then over the
// blocks in order: the same bits for any thread count.
struct LayerNormGrads {
  Tensor dx, dweight, dbias;
};
LayerNormGrads layer_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& mean,
                                   const Tensor& rstd);
// The same, with dx added into dx_into (a gradient already gathered for x:
// contiguous, x's shape and dtype) in the same pass over the rows rather
// than returned apart: dx_into becomes core::add(dx_into, dx), bit for bit,
// and is the result's dx. The residual stream's gradient takes LayerNorm's
// dx so, with no [N, D] array written and read again.
LayerNormGrads layer_norm_backward_into(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& mean,
                                        const Tensor& rstd, const Tensor& dx_into);

// Row gather: weight [V, D], ids [n] -> out [n, D] with out[i] = weight[ids[i]].
// An id outside [0, V) throws std::invalid_argument naming the id and V.
Tensor embedding_forward(const Tensor& weight, std::span<const int32_t> ids);
// Scatter-add: dout [n, D] -> dweight [V, D], dweight[v] = sum of dout[i] over
// ids[i] == v, added in the order of i.
Tensor embedding_backward(const Tensor& dout, std::span<const int32_t> ids, int64_t vocab);

}  // namespace headlab::core
