// Internal: one typed entry point to OpenBLAS's row-major GEMM.
#pragma once

#include <cblas.h>

#include <cstdint>
#include <type_traits>

namespace headlab::core::detail {

// C [m, n] = alpha * op(A) [m, k] @ op(B) [k, n] + beta * C, row-major, op =
// transpose where ta / tb. Inside an OpenMP parallel region OpenBLAS's
// OpenMP build runs single-threaded, so callers may run many at once.
template <class T>
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda, const T* b, int64_t ldb, T* c,
          int64_t ldc, T alpha = T(1), T beta = T(0)) {
  const auto TA = ta ? CblasTrans : CblasNoTrans, TB = tb ? CblasTrans : CblasNoTrans;
  const auto M = static_cast<blasint>(m), N = static_cast<blasint>(n), K = static_cast<blasint>(k);
  const auto LDA = static_cast<blasint>(lda), LDB = static_cast<blasint>(ldb), LDC = static_cast<blasint>(ldc);
  if constexpr (std::is_same_v<T, float>) {
    cblas_sgemm(CblasRowMajor, TA, TB, M, N, K, alpha, a, LDA, b, LDB, beta, c, LDC);
  } else {
    cblas_dgemm(CblasRowMajor, TA, TB, M, N, K, alpha, a, LDA, b, LDB, beta, c, LDC);
  }
}

}  // namespace headlab::core::detail
