// The OpenBLAS implementation of core/gemm.h: cblas_sgemm / cblas_dgemm,
// always single-threaded.
#include <cblas.h>
#include <omp.h>

#include "core/gemm.h"

namespace headlab::core::detail {
namespace {

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

}  // namespace headlab::core::detail
