// The OpenBLAS implementation of core/gemm.h: cblas_sgemm / cblas_dgemm,
// always single-threaded; bf16 mixed precision on cblas_sbgemm.
//
// cblas_sbgemm exists only in an OpenBLAS built with BUILD_BFLOAT16, and
// Debian 12's 0.3.21 is not (its cblas.h declares it, its library lacks it).
// So it is a weak reference, taken when the library has it; otherwise the
// bf16 operands are widened back to float and multiplied by cblas_sgemm
// (detail::widened_bf16_gemm): the same arithmetic as sbgemm's, without its
// speed.
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <string>

#include "core/gemm.h"
#include "core/gemm_kernels.h"

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

void call(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb,
          float* c, int64_t ldc, float alpha, float beta) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, static_cast<blasint>(m),
              static_cast<blasint>(n), static_cast<blasint>(k), alpha, a, static_cast<blasint>(lda), b,
              static_cast<blasint>(ldb), beta, c, static_cast<blasint>(ldc));
}

void call(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const double* a, int64_t lda, const double* b,
          int64_t ldb, double* c, int64_t ldc, double alpha, double beta) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, static_cast<blasint>(m),
              static_cast<blasint>(n), static_cast<blasint>(k), alpha, a, static_cast<blasint>(lda), b,
              static_cast<blasint>(ldb), beta, c, static_cast<blasint>(ldc));
}

// While `headlab bench --kernels` lists a step's products (core/
// gemm_kernels.h), each call is timed and listed as "openblas".
template <class T>
void listed_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda, const T* b,
                 int64_t ldb, T* c, int64_t ldc, T alpha, T beta) {
  const SingleThreadedBlas single;
  if (!kernel_listing_active()) {
    call(ta, tb, m, n, k, a, lda, b, ldb, c, ldc, alpha, beta);
    return;
  }
  const auto start = std::chrono::steady_clock::now();
  call(ta, tb, m, n, k, a, lda, b, ldb, c, ldc, alpha, beta);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  note_product("openblas", ta, tb, 1, 1, m, n, k, sizeof(T) == 4 ? "f32" : "f64", ms);
}

}  // namespace

void openblas_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
                   int64_t ldb, float* c, int64_t ldc, float alpha, float beta) {
  listed_gemm(ta, tb, m, n, k, a, lda, b, ldb, c, ldc, alpha, beta);
}

void openblas_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const double* a, int64_t lda, const double* b,
                   int64_t ldb, double* c, int64_t ldc, double alpha, double beta) {
  listed_gemm(ta, tb, m, n, k, a, lda, b, ldb, c, ldc, alpha, beta);
}

void openblas_batched_gemm_bf16(const BatchedGemm<bf16_t>& product, float alpha, float beta, float* c) {
  BatchedGemm<bf16_t> g = product;
  bias_as_beta(g, alpha, beta, c);
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
  widened_bf16_gemm(g, alpha, beta, c, GemmBackend::openblas);
}

bool openblas_has_sbgemm() { return has_sbgemm(); }

}  // namespace headlab::core::detail

namespace headlab::core {

std::string openblas_kernels() {
  const char* name = openblas_get_corename();
  return name != nullptr ? name : "";
}

std::string better_openblas_coretype(const std::string& kernels, bool coretype_set, bool avx512, bool avx2_fma) {
  // OpenBLAS's x86-64 kernels older than AVX, where an unknown CPU lands.
  static const char* const generic[] = {"prescott", "core2", "nehalem", "atom", "katmai", "coppermine", "northwood",
                                        "banias"};
  std::string lower = kernels;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  if (coretype_set || std::find(std::begin(generic), std::end(generic), lower) == std::end(generic)) return "";
  return avx512 ? "SkylakeX" : avx2_fma ? "Haswell" : "";
}

std::string openblas_better_coretype() {
  const char* set = std::getenv("OPENBLAS_CORETYPE");
  // SkylakeX's kernels need AVX-512 F, BW, VL, DQ and CD.
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
                      __builtin_cpu_supports("avx512cd");
  const bool avx2_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return better_openblas_coretype(openblas_kernels(), set != nullptr && *set != '\0', avx512, avx2_fma);
}

std::string openblas_fallback_note() {
  const std::string better = openblas_better_coretype();
  if (better.empty()) return "";
  return "OpenBLAS does not know this CPU and runs its generic " + openblas_kernels() +
         " kernels; OPENBLAS_CORETYPE=" + better + " in the environment selects the faster ones the CPU allows";
}

}  // namespace headlab::core
