// Attention's products at short sequences, in plain loops: the shapes and
// the rule that sends products here are in core/gemm.h (is_small_product).
#include <algorithm>
#include <chrono>
#include <cstdio>

#include "core/gemm.h"
#include "core/gemm_kernels.h"

namespace headlab::core::detail {
namespace {

// C's row i from its accumulators: alpha acc + beta C (C unread at beta 0).
template <class T>
void store_row(T* ci, const T* acc, int64_t n, T alpha, T beta) {
  if (beta == T(0)) {
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) ci[j] = alpha * acc[j];
  } else {
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) ci[j] = alpha * acc[j] + beta * ci[j];
  }
}

// op(B) = B (P V, P^T dO, dS K, dS^T Q): row i of C is a sum of B's rows,
// vector lanes over n. N > 0 fixes n at compile time (d_k = 32, 64), so
// that the accumulators stay in registers; N = 0 takes any n.
template <class T, int64_t N>
void rows_of_b(bool ta, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda, const T* b, int64_t ldb, T* c,
               int64_t ldc, T alpha, T beta) {
  if constexpr (N > 0) n = N;
  const int64_t a_row = ta ? 1 : lda, a_col = ta ? lda : 1;  // a(i, p) = a[i * a_row + p * a_col]
  for (int64_t i = 0; i < m; ++i) {
    T acc[N > 0 ? N : kSmallMaxN];
    const T* ai = a + i * a_row;
    {
      const T a0 = ai[0];
#pragma omp simd
      for (int64_t j = 0; j < n; ++j) acc[j] = a0 * b[j];
    }
    for (int64_t p = 1; p < k; ++p) {
      const T aip = ai[p * a_col];
      const T* __restrict bp = b + p * ldb;
#pragma omp simd
      for (int64_t j = 0; j < n; ++j) acc[j] += aip * bp[j];
    }
    store_row(c + i * ldc, acc, n, alpha, beta);
  }
}

// op(B) = B^T with A untransposed (Q K^T, dO V^T): dot products of A's and
// B's rows over k, lanes over k. K > 0 fixes k at compile time.
template <class T, int64_t K>
void dots(int64_t m, int64_t n, int64_t k, const T* a, int64_t lda, const T* b, int64_t ldb, T* c, int64_t ldc,
          T alpha, T beta) {
  if constexpr (K > 0) k = K;
  T acc[kSmallMaxN];
  for (int64_t i = 0; i < m; ++i) {
    const T* __restrict ai = a + i * lda;
    for (int64_t j = 0; j < n; ++j) {
      const T* __restrict bj = b + j * ldb;
      T s = 0;
#pragma omp simd reduction(+ : s)
      for (int64_t p = 0; p < k; ++p) s += ai[p] * bj[p];
      acc[j] = s;
    }
    store_row(c + i * ldc, acc, n, alpha, beta);
  }
}

// One product: C [m, n] = alpha op(A) op(B) + beta C.
template <class T>
void small_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda, const T* b, int64_t ldb,
                T* c, int64_t ldc, T alpha, T beta) {
  if (!tb) {
    if (n == 32)
      rows_of_b<T, 32>(ta, m, n, k, a, lda, b, ldb, c, ldc, alpha, beta);
    else if (n == 64)
      rows_of_b<T, 64>(ta, m, n, k, a, lda, b, ldb, c, ldc, alpha, beta);
    else
      rows_of_b<T, 0>(ta, m, n, k, a, lda, b, ldb, c, ldc, alpha, beta);
  } else if (!ta) {
    if (k == 32)
      dots<T, 32>(m, n, k, a, lda, b, ldb, c, ldc, alpha, beta);
    else if (k == 64)
      dots<T, 64>(m, n, k, a, lda, b, ldb, c, ldc, alpha, beta);
    else
      dots<T, 0>(m, n, k, a, lda, b, ldb, c, ldc, alpha, beta);
  } else {
    // Both transposed: no caller runs it; plain loops, for completeness.
    T acc[kSmallMaxN];
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        T s = 0;
        for (int64_t p = 0; p < k; ++p) s += a[p * lda + i] * b[j * ldb + p];
        acc[j] = s;
      }
      store_row(c + i * ldc, acc, n, alpha, beta);
    }
  }
}

}  // namespace

template <class T>
void run_batch(const BatchedGemm<T>& g) {
  for (int64_t i = 0; i < g.outer; ++i)
    for (int64_t j = 0; j < g.inner; ++j)
      small_gemm<T>(g.ta, g.tb, g.m, g.n, g.k, g.a + i * g.a_stride[0] + j * g.a_stride[1], g.lda,
                    g.b + i * g.b_stride[0] + j * g.b_stride[1], g.ldb, g.c + i * g.c_stride[0] + j * g.c_stride[1],
                    g.ldc, g.alpha, g.beta);
}

// While `headlab bench --kernels` lists a step's products (core/
// gemm_kernels.h), each batch run here is timed and listed as "loops".
template <class T>
void small_batched_gemm(const BatchedGemm<T>& g) {
  if (!kernel_listing_active()) {
    run_batch(g);
    return;
  }
  const auto start = std::chrono::steady_clock::now();
  run_batch(g);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  note_product("loops", g.ta, g.tb, g.outer, g.inner, g.m, g.n, g.k, sizeof(T) == 4 ? "f32" : "f64", ms);
}

template void small_batched_gemm<float>(const BatchedGemm<float>&);
template void small_batched_gemm<double>(const BatchedGemm<double>&);

}  // namespace headlab::core::detail
