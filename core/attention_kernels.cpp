// Fused multi-head attention, forward and backward. See attention_kernels.h
// for the shapes and the contract.
#include "core/attention_kernels.h"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/blas.h"
#include "core/softmax_row.h"
#include "core/threads.h"

namespace headlab::core {
namespace {

using detail::gemm;

struct Dims {
  int64_t B = 0, T = 0, d = 0, h = 1, dk = 0;
  int64_t pairs() const { return B * h; }
  // Element (b, 0, head * dk) of a [B, T, d] tensor: head `head`'s [T, dk]
  // block of batch b, rows d apart.
  int64_t block(int64_t pair) const { return (pair / h) * T * d + (pair % h) * dk; }
  // Threads pay off once the pairs hold real GEMM work.
  bool parallel() const { return pairs() > 1 && pairs() * T * T * dk >= kParallelGemmWork; }
};

Dims check_qkv(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionShape& s, const char* op) {
  for (const Tensor* t : {&q, &k, &v})
    if (!t->defined()) throw std::invalid_argument(std::string(op) + ": q, k and v must be defined");
  if (q.dim() != 3 || k.shape() != q.shape() || v.shape() != q.shape())
    throw std::invalid_argument(std::string(op) + ": q, k and v must share one shape [B, T, d], got " +
                                to_string(q.shape()) + ", " + to_string(k.shape()) + " and " + to_string(v.shape()));
  if (k.dtype() != q.dtype() || v.dtype() != q.dtype())
    throw std::invalid_argument(std::string(op) + ": q, k and v must share one dtype");
  Dims dims{q.size(0), q.size(1), q.size(2), s.heads, 0};
  if (s.heads <= 0 || dims.d % s.heads != 0)
    throw std::invalid_argument(std::string(op) + ": d = " + std::to_string(dims.d) + " is not divisible by heads = " +
                                std::to_string(s.heads));
  dims.dk = dims.d / s.heads;
  return dims;
}

void check_gates(const Tensor& gates, const Dims& dims, DType dtype, const char* op) {
  if (gates.defined() && (gates.shape() != Shape{dims.h} || gates.dtype() != dtype))
    throw std::invalid_argument(std::string(op) + ": gates must be [" + std::to_string(dims.h) + "] " +
                                to_string(dtype) + ", got " + to_string(gates.shape()) + " " +
                                to_string(gates.dtype()));
}

// 1 per real key, [B * T]; empty when there is no padding mask.
std::vector<unsigned char> real_keys(const Tensor& key_padding, const Dims& dims) {
  if (!key_padding.defined()) return {};
  if (key_padding.shape() != Shape{dims.B, dims.T})
    throw std::invalid_argument("attention_forward: key padding mask " + to_string(key_padding.shape()) +
                                " does not match [B, T] = " + to_string(Shape{dims.B, dims.T}));
  const std::vector<double> values = key_padding.to_vector();
  std::vector<unsigned char> real(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) real[i] = values[i] != 0.0;
  return real;
}

// q, k, v, out [B, T, d]; P [B, h, T, T].
template <class T>
void attention_fwd(const T* q, const T* k, const T* v, T* out, T* P, const Dims& dims, const AttentionShape& s,
                   const unsigned char* real, const T* gates) {
  const int64_t Tn = dims.T, d = dims.d, dk = dims.dk;
  const T scale = static_cast<T>(s.scale);
#pragma omp parallel for schedule(dynamic, 1) if (dims.parallel())
  for (int64_t pair = 0; pair < dims.pairs(); ++pair) {
    const int64_t off = dims.block(pair);
    T* Pp = P + pair * Tn * Tn;
    gemm<T>(false, true, Tn, Tn, dk, q + off, d, k + off, d, Pp, Tn);  // S = Q K^T [T, T]
    const unsigned char* real_b = real ? real + (pair / dims.h) * Tn : nullptr;
    for (int64_t i = 0; i < Tn; ++i) {
      T* row = Pp + i * Tn;
      const int64_t n = s.causal ? i + 1 : Tn;  // keys the causal mask lets through
#pragma omp simd
      for (int64_t j = 0; j < n; ++j) row[j] *= scale;
      if (real_b)
        for (int64_t j = 0; j < n; ++j)
          if (!real_b[j]) row[j] = -std::numeric_limits<T>::infinity();
      double row_max = 0.0, log_sum = 0.0;
      detail::softmax_row(row, row, n, row_max, log_sum);  // all hidden: zeros
      std::fill(row + n, row + Tn, T(0));
    }
    T* o = out + off;
    gemm<T>(false, false, Tn, dk, Tn, Pp, Tn, v + off, d, o, d);  // P V [T, dk]
    const T g = gates ? gates[pair % dims.h] : T(1);
    if (g != T(1))
      for (int64_t i = 0; i < Tn; ++i)
#pragma omp simd
        for (int64_t j = 0; j < dk; ++j) o[i * d + j] *= g;
  }
}

// dout, q, k, v, dq, dk, dv [B, T, d]; P [B, h, T, T]; dgate_part [B * h] or null.
template <class T>
void attention_bwd(const T* dout, const T* q, const T* k, const T* v, const T* P, T* dq, T* dk_out, T* dv,
                   const Dims& dims, const AttentionShape& s, const T* gates, double* dgate_part) {
  const int64_t Tn = dims.T, d = dims.d, dk = dims.dk;
  const T scale = static_cast<T>(s.scale);
#pragma omp parallel if (dims.parallel())
  {
    // Per thread: dS [T, T], and [T, dk] for the gated dout or P V.
    std::vector<T> dS(static_cast<std::size_t>(Tn * Tn)), tmp(static_cast<std::size_t>(Tn * dk));
#pragma omp for schedule(dynamic, 1)
    for (int64_t pair = 0; pair < dims.pairs(); ++pair) {
      const int64_t off = dims.block(pair);
      const T* Pp = P + pair * Tn * Tn;
      const T g = gates ? gates[pair % dims.h] : T(1);
      // dO' = gate * dout's block: the gradient reaching P V.
      const T* dO = dout + off;
      int64_t ld_dO = d;
      if (g != T(1)) {
        for (int64_t i = 0; i < Tn; ++i)
#pragma omp simd
          for (int64_t j = 0; j < dk; ++j) tmp[i * dk + j] = dout[off + i * d + j] * g;
        dO = tmp.data();
        ld_dO = dk;
      }
      gemm<T>(false, true, Tn, Tn, dk, dO, ld_dO, v + off, d, dS.data(), Tn);  // dP = dO' V^T [T, T]
      gemm<T>(true, false, Tn, dk, Tn, Pp, Tn, dO, ld_dO, dv + off, d);         // dV = P^T dO' [T, dk]
      // Softmax backward, then the scale: dS = scale * P * (dP - rowsum(dP * P)).
      // Hidden keys have P = 0, so their gradient is 0 without a mask.
      for (int64_t i = 0; i < Tn; ++i) {
        const T* pr = Pp + i * Tn;
        T* sr = dS.data() + i * Tn;
        const int64_t n = s.causal ? i + 1 : Tn;
        double dot = 0.0;
#pragma omp simd reduction(+ : dot)
        for (int64_t j = 0; j < n; ++j) dot += static_cast<double>(sr[j]) * static_cast<double>(pr[j]);
        const T dt = static_cast<T>(dot);
#pragma omp simd
        for (int64_t j = 0; j < n; ++j) sr[j] = pr[j] * (sr[j] - dt) * scale;
        std::fill(sr + n, sr + Tn, T(0));
      }
      gemm<T>(false, false, Tn, dk, Tn, dS.data(), Tn, k + off, d, dq + off, d);     // dQ = dS K [T, dk]
      gemm<T>(true, false, Tn, dk, Tn, dS.data(), Tn, q + off, d, dk_out + off, d);  // dK = dS^T Q [T, dk]
      if (dgate_part) {
        // d gate = <dout, P V> over this pair's block; P V is recomputed.
        gemm<T>(false, false, Tn, dk, Tn, Pp, Tn, v + off, d, tmp.data(), dk);
        double sum = 0.0;
        for (int64_t i = 0; i < Tn; ++i)
          for (int64_t j = 0; j < dk; ++j)
            sum += static_cast<double>(dout[off + i * d + j]) * static_cast<double>(tmp[i * dk + j]);
        dgate_part[pair] = sum;
      }
    }
  }
}

}  // namespace

AttentionForward attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionShape& shape,
                                   const Tensor& key_padding, const Tensor& gates) {
  const char* op = "attention_forward";
  const Dims dims = check_qkv(q, k, v, shape, op);
  check_gates(gates, dims, q.dtype(), op);
  const std::vector<unsigned char> real = real_keys(key_padding, dims);
  AttentionForward r{Tensor::empty(q.shape(), q.dtype()), Tensor::empty({dims.B, dims.h, dims.T, dims.T}, q.dtype())};
  if (q.numel() == 0) {  // no queries, or d = 0: nothing to attend with
    r.probs.fill_(0.0);
    return r;
  }
  const Tensor qc = q.contiguous(), kc = k.contiguous(), vc = v.contiguous();
  const Tensor gc = gates.defined() ? gates.contiguous() : Tensor();
  dispatch(q.dtype(), [&](auto tag) {
    using T = decltype(tag);
    attention_fwd<T>(qc.data<T>(), kc.data<T>(), vc.data<T>(), r.out.data<T>(), r.probs.data<T>(), dims, shape,
                     real.empty() ? nullptr : real.data(), gc.defined() ? gc.data<T>() : nullptr);
  });
  return r;
}

AttentionGrads attention_backward(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v,
                                  const Tensor& probs, const AttentionShape& shape, const Tensor& gates,
                                  bool want_dgates) {
  const char* op = "attention_backward";
  const Dims dims = check_qkv(q, k, v, shape, op);
  check_gates(gates, dims, q.dtype(), op);
  if (!dout.defined() || dout.shape() != q.shape() || dout.dtype() != q.dtype())
    throw std::invalid_argument(std::string(op) + ": dout must be like q, " + to_string(q.shape()));
  if (!probs.defined() || probs.shape() != Shape{dims.B, dims.h, dims.T, dims.T} || probs.dtype() != q.dtype())
    throw std::invalid_argument(std::string(op) + ": probs must be [B, h, T, T] = " +
                                to_string(Shape{dims.B, dims.h, dims.T, dims.T}) + " of q's dtype");
  AttentionGrads g{Tensor::empty(q.shape(), q.dtype()), Tensor::empty(q.shape(), q.dtype()),
                   Tensor::empty(q.shape(), q.dtype()), Tensor()};
  std::vector<double> part(want_dgates ? static_cast<std::size_t>(dims.pairs()) : 0, 0.0);
  if (q.numel() > 0) {
    const Tensor dc = dout.contiguous(), qc = q.contiguous(), kc = k.contiguous(), vc = v.contiguous();
    const Tensor pc = probs.contiguous(), gc = gates.defined() ? gates.contiguous() : Tensor();
    dispatch(q.dtype(), [&](auto tag) {
      using T = decltype(tag);
      attention_bwd<T>(dc.data<T>(), qc.data<T>(), kc.data<T>(), vc.data<T>(), pc.data<T>(), g.dq.data<T>(),
                       g.dk.data<T>(), g.dv.data<T>(), dims, shape, gc.defined() ? gc.data<T>() : nullptr,
                       want_dgates ? part.data() : nullptr);
    });
  }
  if (want_dgates) {
    std::vector<double> sums(static_cast<std::size_t>(dims.h), 0.0);
    for (int64_t pair = 0; pair < dims.pairs(); ++pair)  // batch order: fixed
      sums[static_cast<std::size_t>(pair % dims.h)] += part[static_cast<std::size_t>(pair)];
    g.dgates = Tensor::from_vector(sums, {dims.h}, q.dtype());
  }
  return g;
}

}  // namespace headlab::core
