// Fused row kernels: softmax, log-softmax, cross-entropy, LayerNorm,
// embedding gather/scatter. See nn_kernels.h for the shapes and contracts.
#include "core/nn_kernels.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "core/bf16.h"
#include "core/bf16_operands.h"
#include "core/nn_kernels_rows.h"
#include "core/softmax_row.h"
#include "core/threads.h"
#include "core/vec_math.h"

namespace headlab::core {
namespace {

using detail::check_same;
using detail::check_vector;
using detail::exp_of;
using detail::parallel;
using detail::RowView;
using detail::rows_of;
using detail::softmax_row;

void check_targets(std::span<const int32_t> targets, RowView v, const char* op) {
  if (static_cast<int64_t>(targets.size()) != v.rows)
    throw std::invalid_argument(std::string(op) + ": " + std::to_string(targets.size()) + " targets for " +
                                std::to_string(v.rows) + " rows of logits; give one target (or -1) per row");
  for (std::size_t i = 0; i < targets.size(); ++i) {
    if (targets[i] < -1 || targets[i] >= v.cols)
      throw std::invalid_argument(std::string(op) + ": target " + std::to_string(targets[i]) + " at row " +
                                  std::to_string(i) + " is out of range for " + std::to_string(v.cols) +
                                  " classes (a target is in [0, " + std::to_string(v.cols) + ") or -1 for none)");
  }
}

constexpr double kInf = std::numeric_limits<double>::infinity();

// --- softmax family: per row of C elements ---

template <class T>
void softmax_fwd(const T* x, T* y, RowView v) {
#pragma omp parallel for schedule(static) if (parallel(v.rows * v.cols))
  for (int64_t r = 0; r < v.rows; ++r) {
    double m = 0.0, sum = 0.0;
    softmax_row(x + r * v.cols, y + r * v.cols, v.cols, m, sum);
  }
}

template <class T>
void softmax_bwd(const T* y, const T* dy, T* dx, RowView v) {
#pragma omp parallel for schedule(static) if (parallel(v.rows * v.cols))
  for (int64_t r = 0; r < v.rows; ++r) {
    const T* yr = y + r * v.cols;
    const T* dyr = dy + r * v.cols;
    T* dxr = dx + r * v.cols;
    double dot = 0.0;
#pragma omp simd reduction(+ : dot)
    for (int64_t c = 0; c < v.cols; ++c) dot += static_cast<double>(dyr[c]) * static_cast<double>(yr[c]);
    const T d = static_cast<T>(dot);
#pragma omp simd
    for (int64_t c = 0; c < v.cols; ++c) dxr[c] = yr[c] * (dyr[c] - d);
  }
}

template <class T>
void log_softmax_fwd(const T* x, T* y, RowView v) {
#pragma omp parallel for schedule(static) if (parallel(v.rows * v.cols))
  for (int64_t r = 0; r < v.rows; ++r) {
    const T* xr = x + r * v.cols;
    T* yr = y + r * v.cols;
    T m = -std::numeric_limits<T>::infinity();
#pragma omp simd reduction(max : m)
    for (int64_t c = 0; c < v.cols; ++c) m = std::max(m, xr[c]);
    if (m == -std::numeric_limits<T>::infinity()) {
      std::fill(yr, yr + v.cols, m);
      continue;
    }
    double s = 0.0;
#pragma omp simd reduction(+ : s)
    for (int64_t c = 0; c < v.cols; ++c) s += static_cast<double>(exp_of(xr[c] - m));
    const double log_s = std::log(s);
    // (x - m) first: exact for large logits, then the small log term.
#pragma omp simd
    for (int64_t c = 0; c < v.cols; ++c) yr[c] = static_cast<T>(static_cast<double>(xr[c] - m) - log_s);
  }
}

template <class T>
void log_softmax_bwd(const T* y, const T* dy, T* dx, RowView v) {
#pragma omp parallel for schedule(static) if (parallel(v.rows * v.cols))
  for (int64_t r = 0; r < v.rows; ++r) {
    const T* yr = y + r * v.cols;
    const T* dyr = dy + r * v.cols;
    T* dxr = dx + r * v.cols;
    double s = 0.0;
#pragma omp simd reduction(+ : s)
    for (int64_t c = 0; c < v.cols; ++c) s += static_cast<double>(dyr[c]);
    const T st = static_cast<T>(s);
#pragma omp simd
    for (int64_t c = 0; c < v.cols; ++c) dxr[c] = dyr[c] - exp_of(yr[c]) * st;
  }
}

// Per-row loss: logsumexp(x) - x[t] = log_sum - (x[t] - max).
// Each element costs an exp and each row a log, several times a plain
// pass's element: counted as kCrossEntropyWork elements, so that logits as
// few as tiny's (512 rows of 16) are shared by the threads too: 23 us on
// one thread, 13 on two (docs/performance.md, "Tiny at 2 threads"). Each
// row is one thread's whatever the count: the same bits.
constexpr int64_t kCrossEntropyWork = 4;
template <class T>
void cross_entropy_fwd(const T* x, T* p, std::span<const int32_t> targets, RowView v, std::vector<double>& losses) {
#pragma omp parallel for schedule(static) if (parallel(v.rows * v.cols * kCrossEntropyWork))
  for (int64_t r = 0; r < v.rows; ++r) {
    const T* xr = x + r * v.cols;
    double m = 0.0, sum = 0.0;
    softmax_row(xr, p + r * v.cols, v.cols, m, sum);
    const int32_t t = targets[static_cast<std::size_t>(r)];
    if (t < 0) continue;
    // An all -inf row puts probability 0 on the target: infinite loss.
    losses[static_cast<std::size_t>(r)] = m == -kInf ? kInf : std::log(sum) - (static_cast<double>(xr[t]) - m);
  }
}

template <class T>
void cross_entropy_bwd(const T* p, T* dx, std::span<const int32_t> targets, RowView v, double scale) {
  const T s = static_cast<T>(scale);
#pragma omp parallel for schedule(static) if (parallel(v.rows * v.cols))
  for (int64_t r = 0; r < v.rows; ++r) {
    const T* pr = p + r * v.cols;
    T* dxr = dx + r * v.cols;
    const int32_t t = targets[static_cast<std::size_t>(r)];
    if (t < 0) {
      std::fill(dxr, dxr + v.cols, T(0));
      continue;
    }
#pragma omp simd
    for (int64_t c = 0; c < v.cols; ++c) dxr[c] = pr[c] * s;
    dxr[t] = (pr[t] - T(1)) * s;
  }
}

// --- LayerNorm: per row of D elements ---

// LayerNorm computes in the tensor's own precision (float rows of a few
// hundred elements lose nothing that matters; double stays exact for the
// gradchecks), so every loop vectorizes at full width. Missing weight or
// bias act as ones and zeros.

// With `addend`, x + addend is written to `sum` first and normalized from
// there, row by row while the row is in cache: the residual add and the next
// LayerNorm in one pass, the same bits as the two apart.
//
// With `y16` (float only), each row of y is also written rounded to bf16
// there, for the Linear that reads y next (core/bf16_operands.h).
template <class T>
void layer_norm_fwd(const T* x, const T* addend, T* sum, const T* w, const T* b, T* y, T* mean, T* rstd, RowView v,
                    double eps, bf16_t* y16) {
  const int64_t D = v.cols;
  const T inv_d = static_cast<T>(1.0 / static_cast<double>(D));
  const T e = static_cast<T>(eps);
#pragma omp parallel for schedule(static) if (parallel(v.rows * D))
  for (int64_t r = 0; r < v.rows; ++r) {
    const T* xr = x + r * D;
    T* yr = y + r * D;
    if (addend) {
      T* sr = sum + r * D;
      const T* ar = addend + r * D;
#pragma omp simd
      for (int64_t c = 0; c < D; ++c) sr[c] = xr[c] + ar[c];
      xr = sr;
    }
    T s = 0;
#pragma omp simd reduction(+ : s)
    for (int64_t c = 0; c < D; ++c) s += xr[c];
    const T mu = s * inv_d;
    T ss = 0;  // two passes: no cancellation for rows with a large mean
#pragma omp simd reduction(+ : ss)
    for (int64_t c = 0; c < D; ++c) ss += (xr[c] - mu) * (xr[c] - mu);
    const T rs = T(1) / std::sqrt(ss * inv_d + e);
    if (w && b) {
#pragma omp simd
      for (int64_t c = 0; c < D; ++c) yr[c] = (xr[c] - mu) * rs * w[c] + b[c];
    } else {
#pragma omp simd
      for (int64_t c = 0; c < D; ++c) yr[c] = (xr[c] - mu) * rs * (w ? w[c] : T(1)) + (b ? b[c] : T(0));
    }
    mean[r] = mu;
    rstd[r] = rs;
    if constexpr (std::is_same_v<T, float>)
      if (y16) pack_bf16(yr, 1, D, D, y16 + r * D);
  }
}

// Rows per block of the dweight/dbias partial sums; fixed so the summation
// order does not depend on the thread count.
constexpr int64_t kLayerNormBlock = 32;

// With `accumulate`, dx already holds a gradient and each row's dx is added
// to it (dx = dx + that row's dx, as core::add would) in the same pass: the
// row's dx goes to a row buffer first, so the sum is rounded exactly as two
// passes round it (no multiply-add is contracted across the two).
template <class T>
void layer_norm_bwd(const T* dy, const T* x, const T* w, const T* mean, const T* rstd, T* dx, T* dw, T* db,
                    RowView v, bool accumulate) {
  const int64_t D = v.cols;
  const int64_t blocks = (v.rows + kLayerNormBlock - 1) / kLayerNormBlock;
  std::vector<T> ones;
  if (!w) {
    ones.assign(static_cast<std::size_t>(D), T(1));
    w = ones.data();
  }
  // Per block of rows: partial sums of dy * xhat (dweight) and dy (dbias).
  std::vector<T> part_w(static_cast<std::size_t>(blocks * D), T(0));
  std::vector<T> part_b(static_cast<std::size_t>(blocks * D), T(0));
  // When accumulating: a row's dx, one buffer per block of rows.
  std::vector<T> rows(accumulate ? static_cast<std::size_t>(blocks * D) : 0);
  const T inv_d = static_cast<T>(1.0 / static_cast<double>(D));
#pragma omp parallel for schedule(static) if (parallel(v.rows * D))
  for (int64_t blk = 0; blk < blocks; ++blk) {
    T* pw = part_w.data() + blk * D;
    T* pb = part_b.data() + blk * D;
    const int64_t end = std::min(v.rows, (blk + 1) * kLayerNormBlock);
    for (int64_t r = blk * kLayerNormBlock; r < end; ++r) {
      const T* dyr = dy + r * D;
      const T* xr = x + r * D;
      T* dxr = dx + r * D;
      const T mu = mean[r], rs = rstd[r];
      // dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * w.
      T sum_g = 0, sum_gx = 0;
#pragma omp simd reduction(+ : sum_g, sum_gx)
      for (int64_t c = 0; c < D; ++c) {
        const T xhat = (xr[c] - mu) * rs;
        const T g = dyr[c] * w[c];
        sum_g += g;
        sum_gx += g * xhat;
        pw[c] += dyr[c] * xhat;
        pb[c] += dyr[c];
      }
      const T mg = sum_g * inv_d, mgx = sum_gx * inv_d;
      T* out = accumulate ? rows.data() + blk * D : dxr;
#pragma omp simd
      for (int64_t c = 0; c < D; ++c) out[c] = rs * (dyr[c] * w[c] - mg - (xr[c] - mu) * rs * mgx);
      if (accumulate) {
#pragma omp simd
        for (int64_t c = 0; c < D; ++c) dxr[c] = dxr[c] + out[c];
      }
    }
  }
  // The blocks in order, in double: the same bits for any thread count.
  for (int64_t c = 0; c < D; ++c) {
    double sw = 0.0, sb = 0.0;
    for (int64_t blk = 0; blk < blocks; ++blk) {
      sw += static_cast<double>(part_w[static_cast<std::size_t>(blk * D + c)]);
      sb += static_cast<double>(part_b[static_cast<std::size_t>(blk * D + c)]);
    }
    if (dw) dw[c] = static_cast<T>(sw);
    db[c] = static_cast<T>(sb);
  }
}

// --- embedding ---

void check_ids(std::span<const int32_t> ids, int64_t vocab, const char* op) {
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= vocab)
      throw std::invalid_argument(std::string(op) + ": id " + std::to_string(ids[i]) + " at position " +
                                  std::to_string(i) + " is out of range for a vocabulary of " + std::to_string(vocab) +
                                  " rows (ids must be in [0, " + std::to_string(vocab) + "))");
  }
}

}  // namespace

Tensor softmax_forward(const Tensor& x) {
  const RowView v = rows_of(x, "softmax_forward");
  const Tensor xc = x.contiguous();
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    softmax_fwd<T>(xc.data<T>(), y.data<T>(), v);
  });
  return y;
}

Tensor softmax_backward(const Tensor& y, const Tensor& dy) {
  check_same(y, dy, "softmax_backward", "y", "dy");
  const RowView v = rows_of(y, "softmax_backward");
  const Tensor yc = y.contiguous(), dyc = dy.contiguous();
  Tensor dx = Tensor::empty(y.shape(), y.dtype());
  dispatch(y.dtype(), [&](auto tag) {
    using T = decltype(tag);
    softmax_bwd<T>(yc.data<T>(), dyc.data<T>(), dx.data<T>(), v);
  });
  return dx;
}

Tensor log_softmax_forward(const Tensor& x) {
  const RowView v = rows_of(x, "log_softmax_forward");
  const Tensor xc = x.contiguous();
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    log_softmax_fwd<T>(xc.data<T>(), y.data<T>(), v);
  });
  return y;
}

Tensor log_softmax_backward(const Tensor& y, const Tensor& dy) {
  check_same(y, dy, "log_softmax_backward", "y", "dy");
  const RowView v = rows_of(y, "log_softmax_backward");
  const Tensor yc = y.contiguous(), dyc = dy.contiguous();
  Tensor dx = Tensor::empty(y.shape(), y.dtype());
  dispatch(y.dtype(), [&](auto tag) {
    using T = decltype(tag);
    log_softmax_bwd<T>(yc.data<T>(), dyc.data<T>(), dx.data<T>(), v);
  });
  return dx;
}

CrossEntropyResult cross_entropy_forward(const Tensor& logits, std::span<const int32_t> targets) {
  const RowView v = rows_of(logits, "cross_entropy_forward");
  check_targets(targets, v, "cross_entropy_forward");
  const Tensor xc = logits.contiguous();
  CrossEntropyResult out;
  out.probs = Tensor::empty(logits.shape(), logits.dtype());
  std::vector<double> losses(static_cast<std::size_t>(v.rows), 0.0);
  dispatch(logits.dtype(), [&](auto tag) {
    using T = decltype(tag);
    cross_entropy_fwd<T>(xc.data<T>(), out.probs.data<T>(), targets, v, losses);
  });
  double total = 0.0;  // in row order: the same bits for any thread count
  for (std::size_t r = 0; r < losses.size(); ++r) {
    if (targets[r] < 0) continue;
    total += losses[r];
    ++out.count;
  }
  out.loss = out.count > 0 ? total / static_cast<double>(out.count) : 0.0;
  return out;
}

Tensor cross_entropy_backward(const Tensor& probs, std::span<const int32_t> targets, int64_t count, double grad) {
  const RowView v = rows_of(probs, "cross_entropy_backward");
  check_targets(targets, v, "cross_entropy_backward");
  if (count < 0) throw std::invalid_argument("cross_entropy_backward: count must be >= 0, got " + std::to_string(count));
  const Tensor pc = probs.contiguous();
  Tensor dx = Tensor::empty(probs.shape(), probs.dtype());
  const double scale = count > 0 ? grad / static_cast<double>(count) : 0.0;
  dispatch(probs.dtype(), [&](auto tag) {
    using T = decltype(tag);
    cross_entropy_bwd<T>(pc.data<T>(), dx.data<T>(), targets, v, scale);
  });
  return dx;
}

namespace {

// layer_norm_forward, of x or (with an addend) of x + addend into `sum`.
LayerNormResult layer_norm_rows(const Tensor& x, const Tensor& addend, Tensor* sum, const Tensor& weight,
                                const Tensor& bias, double eps, const char* op) {
  const RowView v = rows_of(x, op);
  if (weight.defined()) check_vector(weight, v.cols, x.dtype(), op, "weight");
  if (bias.defined()) check_vector(bias, v.cols, x.dtype(), op, "bias");
  if (!(eps >= 0.0)) throw std::invalid_argument(std::string(op) + ": eps must be >= 0, got " + std::to_string(eps));
  Shape stat_shape(x.shape().begin(), x.shape().end() - 1);
  const Tensor xc = x.contiguous();
  const Tensor ac = addend.defined() ? addend.contiguous() : Tensor();
  if (sum) *sum = Tensor::empty(x.shape(), x.dtype());
  const Tensor wc = weight.defined() ? weight.contiguous() : Tensor();
  const Tensor bc = bias.defined() ? bias.contiguous() : Tensor();
  LayerNormResult out{Tensor::empty(x.shape(), x.dtype()), Tensor::empty(stat_shape, x.dtype()),
                      Tensor::empty(stat_shape, x.dtype())};
  bf16_t* y16 = bf16_copy_of_output(out.y, v.cols);
  dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    layer_norm_fwd<T>(xc.data<T>(), ac.defined() ? ac.data<T>() : nullptr, sum ? sum->data<T>() : nullptr,
                      wc.defined() ? wc.data<T>() : nullptr, bc.defined() ? bc.data<T>() : nullptr, out.y.data<T>(),
                      out.mean.data<T>(), out.rstd.data<T>(), v, eps, y16);
  });
  return out;
}

}  // namespace

LayerNormResult layer_norm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) {
  return layer_norm_rows(x, Tensor(), nullptr, weight, bias, eps, "layer_norm_forward");
}

AddLayerNormResult add_layer_norm_forward(const Tensor& a, const Tensor& b, const Tensor& weight, const Tensor& bias,
                                          double eps) {
  check_same(a, b, "add_layer_norm_forward", "a", "b");
  AddLayerNormResult out;
  out.norm = layer_norm_rows(a, b, &out.sum, weight, bias, eps, "add_layer_norm_forward");
  return out;
}

namespace {

// layer_norm_backward, or with a defined `dx_into` its accumulating form.
LayerNormGrads layer_norm_grads(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& mean,
                                const Tensor& rstd, const Tensor& dx_into, const char* op) {
  check_same(dy, x, op, "dy", "x");
  const RowView v = rows_of(x, op);
  if (weight.defined()) check_vector(weight, v.cols, x.dtype(), op, "weight");
  const Shape stat_shape(x.shape().begin(), x.shape().end() - 1);
  for (const Tensor* t : {&mean, &rstd}) {
    if (!t->defined() || t->shape() != stat_shape)
      throw std::invalid_argument(std::string(op) + ": mean and rstd must have shape " + to_string(stat_shape) +
                                  " (x's shape without its last axis)");
    t->check_dtype(x.dtype(), op);
  }
  const bool accumulate = dx_into.defined();
  if (accumulate && (dx_into.shape() != x.shape() || dx_into.dtype() != x.dtype() || !dx_into.is_contiguous()))
    throw std::invalid_argument(std::string(op) + ": dx_into must be contiguous with x's shape and dtype " +
                                to_string(x.shape()) + " " + to_string(x.dtype()) + ", got " +
                                to_string(dx_into.shape()) + " " + to_string(dx_into.dtype()));
  const Tensor dyc = dy.contiguous(), xc = x.contiguous(), mc = mean.contiguous(), rc = rstd.contiguous();
  const Tensor wc = weight.defined() ? weight.contiguous() : Tensor();
  LayerNormGrads g{accumulate ? dx_into : Tensor::empty(x.shape(), x.dtype()),
                   weight.defined() ? Tensor::empty({v.cols}, x.dtype()) : Tensor(),
                   Tensor::empty({v.cols}, x.dtype())};
  dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    layer_norm_bwd<T>(dyc.data<T>(), xc.data<T>(), wc.defined() ? wc.data<T>() : nullptr, mc.data<T>(),
                      rc.data<T>(), g.dx.data<T>(), g.dweight.defined() ? g.dweight.data<T>() : nullptr,
                      g.dbias.data<T>(), v, accumulate);
  });
  return g;
}

}  // namespace

LayerNormGrads layer_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& mean,
                                   const Tensor& rstd) {
  return layer_norm_grads(dy, x, weight, mean, rstd, Tensor(), "layer_norm_backward");
}

LayerNormGrads layer_norm_backward_into(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& mean,
                                        const Tensor& rstd, const Tensor& dx_into) {
  if (!dx_into.defined()) throw std::invalid_argument("layer_norm_backward_into: dx_into is undefined");
  return layer_norm_grads(dy, x, weight, mean, rstd, dx_into, "layer_norm_backward_into");
}

Tensor embedding_forward(const Tensor& weight, std::span<const int32_t> ids) {
  const char* op = "embedding_forward";
  if (!weight.defined() || weight.dim() != 2)
    throw std::invalid_argument(std::string(op) + ": weight must be [V, D], got " +
                                (weight.defined() ? to_string(weight.shape()) : std::string("undefined")));
  const int64_t V = weight.size(0), D = weight.size(1);
  check_ids(ids, V, op);
  const int64_t n = static_cast<int64_t>(ids.size());
  const Tensor wc = weight.contiguous();
  Tensor out = Tensor::empty({n, D}, weight.dtype());
  dispatch(weight.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* w = wc.data<T>();
    T* o = out.data<T>();
#pragma omp parallel for schedule(static) if (parallel(n * D))
    for (int64_t i = 0; i < n; ++i) std::copy_n(w + ids[static_cast<std::size_t>(i)] * D, D, o + i * D);
  });
  return out;
}

Tensor embedding_backward(const Tensor& dout, std::span<const int32_t> ids, int64_t vocab) {
  const char* op = "embedding_backward";
  const int64_t n = static_cast<int64_t>(ids.size());
  if (!dout.defined() || dout.dim() != 2 || dout.size(0) != n)
    throw std::invalid_argument(std::string(op) + ": dout must be [" + std::to_string(n) + ", D] (one row per id), got " +
                                (dout.defined() ? to_string(dout.shape()) : std::string("undefined")));
  check_ids(ids, vocab, op);
  const int64_t D = dout.size(1);
  const Tensor gc = dout.contiguous();
  Tensor dw = Tensor::zeros({vocab, D}, dout.dtype());
  dispatch(dout.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* g = gc.data<T>();
    T* w = dw.data<T>();
    // Threads own column ranges and walk the ids in order: repeated ids add
    // up in the same order whatever the thread count.
    constexpr int64_t kCols = 16;
    const int64_t col_blocks = (D + kCols - 1) / kCols;
#pragma omp parallel for schedule(static) if (parallel(n * D) && col_blocks > 1)
    for (int64_t cb = 0; cb < col_blocks; ++cb) {
      const int64_t c0 = cb * kCols, c1 = std::min(D, c0 + kCols);
      for (int64_t i = 0; i < n; ++i) {
        T* wr = w + ids[static_cast<std::size_t>(i)] * D;
        const T* gr = g + i * D;
        for (int64_t c = c0; c < c1; ++c) wr[c] += gr[c];
      }
    }
  });
  return dw;
}

}  // namespace headlab::core
