// The OpenBLAS implementation of core/gemm.h: cblas_sgemm / cblas_dgemm,
// always single-threaded; bf16 mixed precision on cblas_sbgemm.
//
// cblas_sbgemm exists only in an OpenBLAS built with BUILD_BFLOAT16, and
// Debian 12's 0.3.21 is not (its cblas.h declares it, its library lacks it).
// So it is a weak reference, taken when the library has it; otherwise the
// bf16 operands are widened back to float, which is exact, and multiplied by
// cblas_sgemm: each product of two bf16 values is exact in float32 (8 + 8
// significant bits), so that is bf16 products with f32 accumulation, the
// same arithmetic as sbgemm's, without its speed.
#include <cblas.h>
#include <omp.h>

#include <cstddef>
#include <vector>

#include "core/gemm.h"

#pragma weak cblas_sbgemm

namespace headlab::core::detail {
namespace {

bool has_sbgemm() { return &cblas_sbgemm != nullptr; }

// While alive on a thread outside any parallel region, OpenMP (and so
// OpenBLAS's OpenMP build, which asks omp_get_max_threads()) sees one thread.
// BLAS threading its own GEMMs would fork with fine-grained spin-waits of its
// own, which on a busy 2-core machine stall whenever one thread is
// descheduled.
class SingleThreadedBlas {
 public:
  SingleThreadedBlas() : previous_(omp_in_parallel() ? 0 : omp_get_max_threads()) {
    if (previous_ > 1) omp_set_num_threads(1);
  }
  ~SingleThreadedBlas() {
    if (previous_ > 1) omp_set_num_threads(previous_);
  }
  SingleThreadedBlas(const SingleThreadedBlas&) = delete;
  SingleThreadedBlas& operator=(const SingleThreadedBlas&) = delete;

 private:
  int previous_;
};

}  // namespace

void openblas_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
                   int64_t ldb, float* c, int64_t ldc, float alpha, float beta) {
  const SingleThreadedBlas single;
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, static_cast<blasint>(m),
              static_cast<blasint>(n), static_cast<blasint>(k), alpha, a, static_cast<blasint>(lda), b,
              static_cast<blasint>(ldb), beta, c, static_cast<blasint>(ldc));
}

void openblas_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const double* a, int64_t lda, const double* b,
                   int64_t ldb, double* c, int64_t ldc, double alpha, double beta) {
  const SingleThreadedBlas single;
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, static_cast<blasint>(m),
              static_cast<blasint>(n), static_cast<blasint>(k), alpha, a, static_cast<blasint>(lda), b,
              static_cast<blasint>(ldb), beta, c, static_cast<blasint>(ldc));
}

void openblas_batched_gemm_bf16(const BatchedGemm<bf16_t>& g, float alpha, float beta, float* c) {
  const SingleThreadedBlas single;
  if (has_sbgemm()) {
    for (int64_t i = 0; i < g.outer; ++i)
      for (int64_t j = 0; j < g.inner; ++j)
        cblas_sbgemm(CblasRowMajor, g.ta ? CblasTrans : CblasNoTrans, g.tb ? CblasTrans : CblasNoTrans,
                     static_cast<blasint>(g.m), static_cast<blasint>(g.n), static_cast<blasint>(g.k), alpha,
                     g.a + i * g.a_stride[0] + j * g.a_stride[1], static_cast<blasint>(g.lda),
                     g.b + i * g.b_stride[0] + j * g.b_stride[1], static_cast<blasint>(g.ldb), beta,
                     c + i * g.c_stride[0] + j * g.c_stride[1], static_cast<blasint>(g.ldc));
    return;
  }
  // The operands widened back to float (exactly), multiplied by sgemm. An
  // operand may be a block of a larger packed one (core/blas.h hands out
  // row or column blocks), so what is widened is its whole extent, from its
  // first element to its last, gaps between its rows included.
  thread_local std::vector<float> a_wide, b_wide;
  const auto widen = [&g](std::vector<float>& out, const bf16_t* in, int64_t rows, int64_t cols, int64_t ld,
                          const int64_t* strides) {
    const int64_t count = (g.outer - 1) * strides[0] + (g.inner - 1) * strides[1] + (rows - 1) * ld + cols;
    if (out.size() < static_cast<std::size_t>(count)) out.resize(static_cast<std::size_t>(count));
    for (int64_t i = 0; i < count; ++i) out[static_cast<std::size_t>(i)] = from_bf16(in[i]);
  };
  widen(a_wide, g.a, g.ta ? g.k : g.m, g.ta ? g.m : g.k, g.lda, g.a_stride);
  widen(b_wide, g.b, g.tb ? g.n : g.k, g.tb ? g.k : g.n, g.ldb, g.b_stride);
  for (int64_t i = 0; i < g.outer; ++i)
    for (int64_t j = 0; j < g.inner; ++j)
      cblas_sgemm(CblasRowMajor, g.ta ? CblasTrans : CblasNoTrans, g.tb ? CblasTrans : CblasNoTrans,
                  static_cast<blasint>(g.m), static_cast<blasint>(g.n), static_cast<blasint>(g.k), alpha,
                  a_wide.data() + i * g.a_stride[0] + j * g.a_stride[1], static_cast<blasint>(g.lda),
                  b_wide.data() + i * g.b_stride[0] + j * g.b_stride[1], static_cast<blasint>(g.ldb), beta,
                  c + i * g.c_stride[0] + j * g.c_stride[1], static_cast<blasint>(g.ldc));
}

bool openblas_has_sbgemm() { return has_sbgemm(); }

}  // namespace headlab::core::detail
