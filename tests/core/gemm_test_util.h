// Helpers shared by the GEMM tests (gemm_test.cpp, gemm_bf16_test.cpp).
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "core/gemm.h"
#include "core/random.h"

namespace headlab::core::test {

// Sets the GEMM backend and precision while alive.
class Scope {
 public:
  Scope(GemmBackend b, GemmPrecision p) : backend_(gemm_backend()), precision_(gemm_precision()) {
    set_gemm_backend(b);
    set_gemm_precision(p);
  }
  ~Scope() {
    set_gemm_backend(backend_);
    set_gemm_precision(precision_);
  }
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  GemmBackend backend_;
  GemmPrecision precision_;
};

inline std::vector<float> random_floats(int64_t count, uint64_t seed) {
  const std::vector<double> v = Generator(seed).normal({count}, 0, 1).to_vector();
  return {v.begin(), v.end()};
}

// Entry (i, j) of op(A) op(B) in double, and the sum of its terms' sizes
// (what a tolerance scales with).
struct ReferenceEntry {
  double value = 0, size = 0;
};
template <class T>
ReferenceEntry reference_entry(bool ta, bool tb, int64_t k, const T* a, int64_t lda, const T* b, int64_t ldb,
                               int64_t i, int64_t j) {
  ReferenceEntry e;
  for (int64_t p = 0; p < k; ++p) {
    const double term = static_cast<double>(ta ? a[p * lda + i] : a[i * lda + p]) *
                        static_cast<double>(tb ? b[j * ldb + p] : b[p * ldb + j]);
    e.value += term;
    e.size += std::abs(term);
  }
  return e;
}

// Attention's Q K^T as one batched product over [B, H]: q, k [B, T, H * dk]
// with head h in columns h*dk.., into s [B, H, T, T].
inline detail::BatchedGemm<float> qk_heads(const float* q, const float* k, float* s, int64_t B, int64_t H, int64_t T,
                                           int64_t dk) {
  const int64_t d = H * dk;
  detail::BatchedGemm<float> qk;
  qk.tb = true;
  qk.m = T, qk.n = T, qk.k = dk, qk.outer = B, qk.inner = H;
  qk.a = q, qk.lda = d, qk.a_stride[0] = T * d, qk.a_stride[1] = dk;
  qk.b = k, qk.ldb = d, qk.b_stride[0] = T * d, qk.b_stride[1] = dk;
  qk.c = s, qk.ldc = T, qk.c_stride[0] = H * T * T, qk.c_stride[1] = T * T;
  return qk;
}

}  // namespace headlab::core::test
