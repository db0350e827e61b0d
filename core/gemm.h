// headlab's one GEMM interface, with two implementations: oneDNN (the
// default) and OpenBLAS.
//
//   C [m, n] = alpha * op(A) [m, k] @ op(B) [k, n] + beta * C
//
// row-major, op = transpose where ta / tb, computed on the calling thread
// only: headlab's own threads split the work above it (core/blas.h), into
// blocks fixed by the shape alone (on one thread a product runs whole).
// Each backend gives the same bits run to run for the same shapes and
// thread count; the two backends differ from each other in the last bits
// (their kernels sum in different orders).
//
// float64 always runs on OpenBLAS: oneDNN's matmul has no f64 on CPUs. The
// float64 gradient checks therefore test OpenBLAS's products under either
// backend, and the float32 suite tests the selected one.
//
// The float32 products run in one of two precisions (process-wide, beside
// the backend): f32, or bf16 mixed precision, where A and B are rounded to
// bfloat16 (to nearest, ties to even) and the products accumulate and land
// in float32 (core/gemm_bf16.cpp). float64 products never change.
#pragma once

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "core/bf16.h"

namespace headlab::core {

enum class GemmBackend { onednn, openblas };

// The backend every float32 GEMM uses from now on (process-wide). Before any
// call it is HEADLAB_GEMM's value ("onednn" or "openblas"), else oneDNN.
// gemm_backend() throws std::invalid_argument when HEADLAB_GEMM holds
// anything else.
GemmBackend gemm_backend();
void set_gemm_backend(GemmBackend backend);
// "onednn" / "openblas" -> the backend; anything else throws std::invalid_argument.
GemmBackend parse_gemm_backend(const std::string& name);
const char* gemm_backend_name(GemmBackend backend);
// HEADLAB_GEMM's text if set, else "onednn": the default a CLI flag shows.
std::string default_gemm_backend_name();

// The kernels OpenBLAS chose for this CPU when it loaded
// (openblas_get_corename: "SkylakeX", "Haswell", "Prescott", ...).
std::string openblas_kernels();
// OpenBLAS picks its kernels by the CPU's model number; on a CPU newer than
// the library (Debian 12's 0.3.21 on an Intel Xeon of family 6 model 207)
// it falls back to its generic x86-64 ones ("Prescott": SSE3), a fifth of
// its AVX-512 ones' speed there. Where it did (and OPENBLAS_CORETYPE is
// unset: a value the user set is left alone), the value of
// OPENBLAS_CORETYPE that selects the kernels the CPU's features allow
// ("SkylakeX" with AVX-512, "Haswell" with AVX2 and FMA); else empty.
// OpenBLAS reads the variable when it loads, so only the environment of
// the next process can take it.
std::string openblas_better_coretype();
// The rule, apart from the machine: `kernels` as openblas_kernels says,
// `coretype_set` whether OPENBLAS_CORETYPE is set, and the CPU's features.
std::string better_openblas_coretype(const std::string& kernels, bool coretype_set, bool avx512, bool avx2_fma);
// Where openblas_better_coretype has a value, the sentence that says so
// (for bench's output and train.log, when the products run on OpenBLAS);
// else empty.
std::string openblas_fallback_note();

enum class GemmPrecision { f32, bf16 };

// The precision of every float32 GEMM from now on (process-wide), as the
// products see it: f32 while any F32Gemms is alive. Before any call it is
// HEADLAB_PRECISION's value ("f32" or "bf16"), else f32, as HEADLAB_GEMM
// sets the backend: the suite runs in bf16 under HEADLAB_PRECISION=bf16.
// gemm_precision() throws std::invalid_argument when HEADLAB_PRECISION holds
// anything else, or bf16 on a CPU without bf16 units (cpu_has_native_bf16).
GemmPrecision gemm_precision();
void set_gemm_precision(GemmPrecision precision);
// "f32" / "bf16" -> the precision; anything else throws std::invalid_argument.
GemmPrecision parse_gemm_precision(const std::string& name);
const char* gemm_precision_name(GemmPrecision precision);
// HEADLAB_PRECISION's text if set, else "f32": the default a CLI flag shows.
std::string default_gemm_precision_name();

// Whether the CPU multiplies bf16 natively (AVX512_BF16, or AMX-BF16, in
// cpuid; AVX-512 enabled by the OS). Without it oneDNN emulates bf16 at a
// fraction of f32's speed, so the CLI refuses --precision bf16. Two
// environment variables, for the tests, override the CPU:
// HEADLAB_NO_CPU_BF16=1 makes it say false on any CPU, so that the refusal
// can be tested on a CPU that has the units; HEADLAB_EMULATE_BF16=1 makes it
// say true on any CPU, the bf16 products then running as f32 products of the
// rounded operands where the backend has no bf16 kernel (widened_bf16_gemm),
// so that bf16's arithmetic is tested on a CPU without them
// (scripts/test.sh's bf16 pass). The first wins when both are set.
bool cpu_has_native_bf16();
// Whether `backend` multiplies bf16 operands as f32 products of them widened
// back to float (detail::widened_bf16_gemm: OpenBLAS without cblas_sbgemm,
// oneDNN without a bf16 matmul): the same arithmetic as a bf16 kernel's, on
// the backend's f32 kernels, which is what oneDNN's verbose output and
// `headlab bench --kernels` then name (src_f32); bench marks them emulated.
bool bf16_products_widened(GemmBackend backend);
// Why bf16 is refused without them, for the messages of the flag and of
// HEADLAB_PRECISION.
inline constexpr const char* kNoBf16Units =
    "this CPU has no bf16 units (no AVX512_BF16 or AMX-BF16), so bf16 products would be emulated, slower than float32";

// While alive, every float32 GEMM runs in f32 whatever the precision set:
// the head analysis measures the model, not the arithmetic that trained it,
// so its numbers never depend on --precision. A count, not a saved value,
// so guards on several threads at once (concurrent analyses) nest safely.
class F32Gemms {
 public:
  F32Gemms();
  ~F32Gemms();
  F32Gemms(const F32Gemms&) = delete;
  F32Gemms& operator=(const F32Gemms&) = delete;
};

namespace detail {

// A batch of products over a [outer, inner] grid of independent GEMMs, all
// of one shape: product (i, j) reads a + i * a_stride[0] + j * a_stride[1]
// (likewise b, c) with the leading dimensions below. Attention's heads are
// the grid [batch, heads] of [T, d_k] blocks inside [B, T, d] tensors.
//
// `bias`, if given (with alpha 1 and beta 0 only), is a row of n values
// added to every row of every product: C = op(A) op(B) + bias, a Linear's
// forward. oneDNN adds it in the product's epilogue, as it writes C; the
// other paths set C's rows to it first and multiply with beta 1
// (bias_as_beta). The two round alike unless the kernel adds its sum into
// C in parts (oneDNN's f32 kernel at a long k): then in the last bits.
template <class T>
struct BatchedGemm {
  using Out = std::conditional_t<std::is_same_v<T, bf16_t>, float, T>;  // C's type
  bool ta = false, tb = false;
  int64_t m = 0, n = 0, k = 0;
  int64_t outer = 1, inner = 1;
  const T* a = nullptr;
  int64_t lda = 0, a_stride[2] = {0, 0};
  const T* b = nullptr;
  int64_t ldb = 0, b_stride[2] = {0, 0};
  T* c = nullptr;
  int64_t ldc = 0, c_stride[2] = {0, 0};
  T alpha = T(1), beta = T(0);
  const Out* bias = nullptr;
};

// A bias goes with alpha 1 and beta 0 only (a logic error otherwise).
template <class S>
void check_bias(const void* bias, S alpha, S beta) {
  if (bias != nullptr && (alpha != S(1) || beta != S(0)))
    throw std::logic_error("a GEMM's bias needs alpha 1 and beta 0");
}

// For a path whose kernel cannot add a bias: C's rows (of every product of
// the batch, C at `c`) set to g.bias, and the product made one of beta 1
// without it. alpha, beta and c are g's own, or, for packed bf16 products
// (whose C is float), those given beside g.
template <class T, class S>
void bias_as_beta(BatchedGemm<T>& g, S alpha, S& beta, typename BatchedGemm<T>::Out* c) {
  if (g.bias == nullptr) return;
  check_bias(g.bias, alpha, beta);
  for (int64_t i = 0; i < g.outer; ++i)
    for (int64_t j = 0; j < g.inner; ++j)
      for (int64_t r = 0; r < g.m; ++r) std::copy_n(g.bias, g.n, c + i * g.c_stride[0] + j * g.c_stride[1] + r * g.ldc);
  g.bias = nullptr;
  beta = S(1);
}

void openblas_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
                   int64_t ldb, float* c, int64_t ldc, float alpha, float beta);
void openblas_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const double* a, int64_t lda, const double* b,
                   int64_t ldb, double* c, int64_t ldc, double alpha, double beta);
void onednn_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
                 int64_t ldb, float* c, int64_t ldc, float alpha, float beta);

void onednn_batched_gemm(const BatchedGemm<float>& g);

// The same product with bf16 operands, f32 accumulation and f32 C, on the
// given backend (oneDNN's matmul with bf16 src and weights; OpenBLAS's
// cblas_sbgemm, one call per product, see openblas_has_sbgemm).
void onednn_batched_gemm_bf16(const BatchedGemm<bf16_t>& g, float alpha, float beta, float* c);
void openblas_batched_gemm_bf16(const BatchedGemm<bf16_t>& g, float alpha, float beta, float* c);
// Whether the OpenBLAS loaded has cblas_sbgemm (a BUILD_BFLOAT16 build);
// without it, the bf16 products run as f32 products of the rounded operands.
bool openblas_has_sbgemm();
// Whether oneDNN has a bf16 matmul on this CPU (AVX-512 or more, as its
// effective ISA says); without it, as without sbgemm.
bool onednn_has_bf16_matmul();
// The bf16 product as the backend's f32 product of its operands widened
// back to float. Widening is exact, and so is each product of two bf16
// values in float32 (8 + 8 significant bits): bf16 products with f32
// accumulation, the arithmetic of a bf16 kernel without its speed. OpenBLAS
// without cblas_sbgemm takes it, and oneDNN where it has no bf16 matmul (no
// AVX-512: a CPU that HEADLAB_EMULATE_BF16 lets run bf16, see
// cpu_has_native_bf16).
void widened_bf16_gemm(const BatchedGemm<bf16_t>& g, float alpha, float beta, float* c, GemmBackend backend);
// The float32 product in bf16 mixed precision (core/gemm_bf16.cpp): A and B
// rounded into this thread's dense bf16 buffers, then the backend's bf16 GEMM.
void bf16_batched_gemm(const BatchedGemm<float>& g, GemmBackend backend);
// A product (or a batch of them) of operands already in bf16 into the f32
// C, on the selected backend.
void packed_bf16_gemm(const BatchedGemm<bf16_t>& g, float alpha, float beta, float* c);

// core/gemm_replay.h: whether this thread's products are being timed and
// recorded, and the calls that run and record one.
bool gemm_recording();
void record_batched_gemm(const BatchedGemm<float>& g);
void record_packed_bf16_gemm(const BatchedGemm<bf16_t>& g, float alpha, float beta, float* c);

// The product above on the calling thread, by the selected backend; with
// `bias` (n values, alpha 1 and beta 0 only), C = op(A) op(B) + bias, as
// BatchedGemm says.
template <class T>
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda, const T* b, int64_t ldb, T* c,
          int64_t ldc, T alpha = T(1), T beta = T(0), const T* bias = nullptr) {
  BatchedGemm<T> g{.ta = ta, .tb = tb, .m = m, .n = n, .k = k, .a = a, .lda = lda, .b = b, .ldb = ldb, .c = c,
                   .ldc = ldc, .alpha = alpha, .beta = beta, .bias = bias};
  if constexpr (std::is_same_v<T, float>) {
    if (gemm_recording()) {  // core/gemm_replay.h
      record_batched_gemm(g);
      return;
    }
    if (gemm_precision() == GemmPrecision::bf16 && m > 0 && n > 0 && k > 0) {
      bf16_batched_gemm(g, gemm_backend());
      return;
    }
    if (gemm_backend() == GemmBackend::onednn) {
      onednn_batched_gemm(g);
      return;
    }
  }
  bias_as_beta(g, g.alpha, g.beta, g.c);
  openblas_gemm(ta, tb, m, n, k, a, lda, b, ldb, c, ldc, alpha, g.beta);
}

// Attention's products at short sequences (T = 3..16) are thousands of tiny
// matrices, on which a library call costs far more than the arithmetic:
// oneDNN ran Q K^T for 479 x 4 heads of 3 x 32 x 3 at 1 GFLOP/s, plain loops
// at 14 (docs/performance.md, "Attention at short sequences"). Products of
// at most this many multiply-adds (m n k) run in core/gemm_small.cpp's
// loops, on either backend, in float32 and float64: up to 8192 when op(B) is
// B (rows of B summed, lanes over n), 4096 when it is B^T (dot products over
// k, which end in a sum across lanes). n is at most kSmallMaxN.
inline constexpr int64_t kSmallRowsLimit = 8192, kSmallDotsLimit = 4096, kSmallMaxN = 256;
template <class T>
bool is_small_product(const BatchedGemm<T>& g) {
  return g.k > 0 && g.n <= kSmallMaxN && g.m * g.n * g.k <= (g.tb ? kSmallDotsLimit : kSmallRowsLimit);
}
// The whole batch in those loops, on the calling thread. The order of
// summation is fixed (over k in turn, lanes over n; or over k in vector
// lanes, then across them), so each product's bits depend only on its shape
// and layout, never on the thread count or the backend. As in BLAS, beta = 0
// does not read C.
template <class T>
void small_batched_gemm(const BatchedGemm<T>& g);

// The whole batch on the calling thread, as it stands (no recording, no
// rounding): headlab's loops for small products; otherwise one oneDNN
// primitive, or a loop of OpenBLAS calls (always for float64). Either way
// each product's bits depend only on its shape.
template <class T>
void batched_gemm_on(const BatchedGemm<T>& product, GemmBackend backend) {
  if constexpr (std::is_same_v<T, float>) {
    if (backend == GemmBackend::onednn && !is_small_product(product)) {
      onednn_batched_gemm(product);
      return;
    }
  }
  BatchedGemm<T> g = product;
  bias_as_beta(g, g.alpha, g.beta, g.c);
  if (is_small_product(g)) {
    small_batched_gemm(g);
    return;
  }
  for (int64_t i = 0; i < g.outer; ++i)
    for (int64_t j = 0; j < g.inner; ++j)
      openblas_gemm(g.ta, g.tb, g.m, g.n, g.k, g.a + i * g.a_stride[0] + j * g.a_stride[1], g.lda,
                    g.b + i * g.b_stride[0] + j * g.b_stride[1], g.ldb, g.c + i * g.c_stride[0] + j * g.c_stride[1],
                    g.ldc, g.alpha, g.beta);
}

// The whole batch on the calling thread, by the selected backend and precision.
template <class T>
void batched_gemm(const BatchedGemm<T>& g) {
  if (g.outer <= 0 || g.inner <= 0 || g.m <= 0 || g.n <= 0) return;
  if constexpr (std::is_same_v<T, float>) {
    if (gemm_recording()) {  // core/gemm_replay.h
      record_batched_gemm(g);
      return;
    }
    if (gemm_precision() == GemmPrecision::bf16 && g.k > 0) {
      bf16_batched_gemm(g, gemm_backend());
      return;
    }
  }
  batched_gemm_on(g, gemm_backend());
}

}  // namespace detail

}  // namespace headlab::core
