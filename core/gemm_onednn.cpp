// The oneDNN implementation of core/gemm.h: one matmul primitive per shape.
//
// Creating a primitive costs far more than a small product (oneDNN
// dispatches over its implementations and JIT-compiles a kernel), so each
// thread keeps its primitives in a small map keyed by everything that shapes
// them: sizes, leading dimensions, transposes, alpha and beta. A cached
// entry also holds its memory objects and its scratchpad, so a call only
// swaps the data pointers in and executes: no allocation per product.
//
// Every product runs on one thread. Called inside a parallel region, oneDNN
// (built on the same OpenMP runtime, DNNL_CPU_RUNTIME = OMP in dnnl_config.h)
// runs sequentially; outside one, the thread count is set to 1 around the
// call, and around the creation too, so a primitive's kernel and blocking
// never depend on the thread count: the bits are the same at any count.
//
// No signal is handled while a product runs. oneDNN 2.x's JIT GEMM kernels
// (gemm:jit, which the matmul picks for f32 on AVX2 and AVX-512 CPUs) point
// the stack pointer into a heap buffer while they compute; a signal handled
// then makes the kernel write the handler's frame (registers and the XSAVE
// area, a few KB) below that pointer, over malloc's bookkeeping, and a later
// free aborts ("corrupted size vs. prev_size"). So a run's stop signal, or a
// profiler's, waits blocked on the thread until the product returns (two
// sigprocmask calls, well under a microsecond, per product).
#include <omp.h>
#include <signal.h>

#include <cstddef>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <tuple>
#include <unordered_map>

#include <oneapi/dnnl/dnnl.hpp>

#include "core/gemm.h"

namespace headlab::core::detail {
namespace {

// Everything a primitive is made for: a batch of outer x inner products
// (1 x 1 for a single one) with their strides, sizes, leading dimensions,
// whether A and B are bf16 (C is always f32), and whether a bias row is
// added in the epilogue.
struct Key {
  bool ta = false, tb = false, bf16 = false, bias = false;
  int64_t m = 0, n = 0, k = 0, lda = 0, ldb = 0, ldc = 0;
  int64_t outer = 1, inner = 1, sa[2] = {0, 0}, sb[2] = {0, 0}, sc[2] = {0, 0};
  float alpha = 1, beta = 0;
  auto fields() const {
    return std::make_tuple(ta, tb, bf16, bias, m, n, k, lda, ldb, ldc, outer, inner, sa[0], sa[1], sb[0], sb[1], sc[0], sc[1]);
  }
  bool operator==(const Key& o) const {
    return fields() == o.fields() && std::memcmp(&alpha, &o.alpha, sizeof alpha) == 0 &&
           std::memcmp(&beta, &o.beta, sizeof beta) == 0;
  }
};

struct KeyHash {
  std::size_t operator()(const Key& key) const {
    uint32_t alpha = 0, beta = 0;
    std::memcpy(&alpha, &key.alpha, sizeof alpha);
    std::memcpy(&beta, &key.beta, sizeof beta);
    std::size_t h = (key.ta ? 1u : 0u) | (key.tb ? 2u : 0u) | (key.bf16 ? 4u : 0u) | (key.bias ? 8u : 0u);
    const auto mix = [&h](int64_t v) { h = h * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(v); };
    std::apply([&](bool, bool, bool, bool, auto... v) { (mix(v), ...); }, key.fields());
    mix(alpha);
    mix(beta);
    return h;
  }
};

struct AlignedFree {
  void operator()(std::byte* p) const { ::operator delete[](p, std::align_val_t{64}); }
};

// One shape's primitive with its arguments, ready to run.
struct Entry {
  dnnl::matmul primitive;
  dnnl::memory a, b, c, bias, scratch;
  std::unique_ptr<std::byte[], AlignedFree> scratch_buffer;
  dnnl_exec_arg_t args[5] = {};
  int nargs = 0;
};

// While alive, OpenMP (and so oneDNN) sees one thread on this thread.
class OneThread {
 public:
  OneThread() : previous_(omp_get_max_threads()) {
    if (previous_ != 1) omp_set_num_threads(1);
  }
  ~OneThread() {
    if (previous_ != 1) omp_set_num_threads(previous_);
  }
  OneThread(const OneThread&) = delete;
  OneThread& operator=(const OneThread&) = delete;

 private:
  int previous_;
};

// While alive, the asynchronous signals wait (pending) on this thread; a
// fault (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP) cannot wait, so it stays unblocked.
class SignalsDeferred {
 public:
  SignalsDeferred() { pthread_sigmask(SIG_BLOCK, &deferred(), &previous_); }
  ~SignalsDeferred() { pthread_sigmask(SIG_SETMASK, &previous_, nullptr); }
  SignalsDeferred(const SignalsDeferred&) = delete;
  SignalsDeferred& operator=(const SignalsDeferred&) = delete;

 private:
  static const sigset_t& deferred() {
    static const sigset_t set = [] {
      sigset_t s;
      sigfillset(&s);
      for (const int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP}) sigdelset(&s, sig);
      return s;
    }();
    return set;
  }
  sigset_t previous_;
};

const dnnl::engine& cpu_engine() {
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

// A training step uses a few dozen shapes; a program that keeps changing
// them (say, evaluation at many batch sizes) starts over past this many.
constexpr std::size_t kMaxCachedShapes = 512;

struct ThreadCache {
  dnnl::stream stream{cpu_engine()};
  std::unordered_map<Key, std::unique_ptr<Entry>, KeyHash> entries;
};

// A [rows, cols] matrix of `type` (transposed in memory if `trans`, leading
// dimension ld), behind the key's batch axes of more than one product.
dnnl::memory::desc matrix_md(const Key& key, int64_t rows, int64_t cols, bool trans, int64_t ld,
                             const int64_t* batch_strides, dnnl::memory::data_type type) {
  dnnl::memory::dims dims, strides;
  if (key.outer > 1) {
    dims.push_back(key.outer);
    strides.push_back(batch_strides[0]);
  }
  if (key.inner > 1) {
    dims.push_back(key.inner);
    strides.push_back(batch_strides[1]);
  }
  dims.insert(dims.end(), {rows, cols});
  strides.insert(strides.end(), {trans ? 1 : ld, trans ? ld : 1});
  return dnnl::memory::desc(dims, type, strides);
}

std::unique_ptr<Entry> create(const Key& key) {
  using dt = dnnl::memory::data_type;
  const dt operands = key.bf16 ? dt::bf16 : dt::f32;
  const dnnl::memory::desc a_md = matrix_md(key, key.m, key.k, key.ta, key.lda, key.sa, operands);
  const dnnl::memory::desc b_md = matrix_md(key, key.k, key.n, key.tb, key.ldb, key.sb, operands);
  const dnnl::memory::desc c_md = matrix_md(key, key.m, key.n, false, key.ldc, key.sc, dt::f32);
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (key.alpha != 1.0f) attr.set_output_scales(0, {key.alpha});
  if (key.beta != 0.0f) {
    dnnl::post_ops ops;
    ops.append_sum(key.beta);
    attr.set_post_ops(ops);
  }
  // The bias: one row of n, broadcast over every row of every product.
  dnnl::memory::desc bias_md;
  if (key.bias) {
    dnnl::memory::dims dims{1, key.n}, strides{key.n, 1};
    for (const int64_t axis : {key.outer, key.inner})  // C's batch axes, as matrix_md makes them
      if (axis > 1) {
        dims.insert(dims.begin(), 1);
        strides.insert(strides.begin(), key.n);
      }
    bias_md = dnnl::memory::desc(dims, dt::f32, strides);
  }
  const dnnl::matmul::primitive_desc pd(
      key.bias ? dnnl::matmul::desc(a_md, b_md, bias_md, c_md) : dnnl::matmul::desc(a_md, b_md, c_md), attr,
      cpu_engine());
  auto e = std::make_unique<Entry>();
  e->primitive = dnnl::matmul(pd);
  const dnnl::engine& engine = cpu_engine();
  e->a = dnnl::memory(a_md, engine, nullptr);
  e->b = dnnl::memory(b_md, engine, nullptr);
  e->c = dnnl::memory(c_md, engine, nullptr);
  e->args[0] = {DNNL_ARG_SRC, e->a.get()};
  e->args[1] = {DNNL_ARG_WEIGHTS, e->b.get()};
  e->args[2] = {DNNL_ARG_DST, e->c.get()};
  e->nargs = 3;
  if (key.bias) {
    e->bias = dnnl::memory(bias_md, engine, nullptr);
    e->args[e->nargs++] = {DNNL_ARG_BIAS, e->bias.get()};
  }
  const dnnl::memory::desc scratch_md = pd.scratchpad_desc();
  if (const std::size_t bytes = scratch_md.get_size(); bytes > 0) {
    e->scratch_buffer.reset(new (std::align_val_t{64}) std::byte[bytes]);
    e->scratch = dnnl::memory(scratch_md, engine, e->scratch_buffer.get());
    e->args[e->nargs++] = {DNNL_ARG_SCRATCHPAD, e->scratch.get()};
  }
  return e;
}

// A and B are float, or bf16_t when key.bf16; bias (n floats) when key.bias.
void run(const Key& key, const void* a, const void* b, float* c, const float* bias) {
  thread_local ThreadCache cache;
  const OneThread one;
  auto it = cache.entries.find(key);
  if (it == cache.entries.end()) {
    if (cache.entries.size() >= kMaxCachedShapes) cache.entries.clear();
    try {
      it = cache.entries.emplace(key, create(key)).first;
    } catch (const dnnl::error& e) {
      throw std::runtime_error(std::string("oneDNN cannot create a matmul for this product (") + e.what() +
                               "); try --gemm openblas");
    }
  }
  Entry& e = *it->second;
  dnnl_memory_set_data_handle(e.a.get(), const_cast<void*>(a));
  dnnl_memory_set_data_handle(e.b.get(), const_cast<void*>(b));
  dnnl_memory_set_data_handle(e.c.get(), c);
  if (key.bias) dnnl_memory_set_data_handle(e.bias.get(), const_cast<float*>(bias));
  const SignalsDeferred deferred;
  const dnnl_status_t status = dnnl_primitive_execute(e.primitive.get(), cache.stream.get(), e.nargs, e.args);
  if (status != dnnl_success)
    throw std::runtime_error("oneDNN's matmul failed with status " + std::to_string(static_cast<int>(status)));
}

}  // namespace

void onednn_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
                 int64_t ldb, float* c, int64_t ldc, float alpha, float beta) {
  onednn_batched_gemm({.ta = ta, .tb = tb, .m = m, .n = n, .k = k, .a = a, .lda = lda, .b = b, .ldb = ldb, .c = c,
                       .ldc = ldc, .alpha = alpha, .beta = beta});
}

void onednn_batched_gemm(const BatchedGemm<float>& product) {
  BatchedGemm<float> g = product;
  check_bias(g.bias, g.alpha, g.beta);
  if (g.m <= 0 || g.n <= 0 || g.k <= 0) {  // nothing to multiply: C = beta C (+ bias), as BLAS defines it
    bias_as_beta(g, g.alpha, g.beta, g.c);
    for (int64_t i = 0; i < g.outer; ++i)
      for (int64_t j = 0; j < g.inner; ++j)
        openblas_gemm(g.ta, g.tb, g.m, g.n, g.k, g.a, g.lda, g.b, g.ldb, g.c + i * g.c_stride[0] + j * g.c_stride[1],
                      g.ldc, g.alpha, g.beta);
    return;
  }
  const Key key{.ta = g.ta, .tb = g.tb, .bias = g.bias != nullptr, .m = g.m, .n = g.n, .k = g.k, .lda = g.lda,
                .ldb = g.ldb, .ldc = g.ldc, .outer = g.outer, .inner = g.inner, .sa = {g.a_stride[0], g.a_stride[1]},
                .sb = {g.b_stride[0], g.b_stride[1]}, .sc = {g.c_stride[0], g.c_stride[1]}, .alpha = g.alpha,
                .beta = g.beta};
  run(key, g.a, g.b, g.c, g.bias);
}

bool onednn_has_bf16_matmul() {
  // oneDNN 2.6 multiplies bf16 from AVX-512 on (avx512_core, emulated there
  // without bf16 units); below it (or capped below it by
  // ONEDNN_MAX_CPU_ISA), only a CPU made to pass for one with
  // HEADLAB_EMULATE_BF16 runs bf16 products.
  static const bool has =
      (static_cast<unsigned>(dnnl::get_effective_cpu_isa()) & static_cast<unsigned>(dnnl::cpu_isa::avx512_core)) ==
      static_cast<unsigned>(dnnl::cpu_isa::avx512_core);
  return has;
}

void onednn_batched_gemm_bf16(const BatchedGemm<bf16_t>& g, float alpha, float beta, float* c) {
  check_bias(g.bias, alpha, beta);
  if (!onednn_has_bf16_matmul()) {
    widened_bf16_gemm(g, alpha, beta, c, GemmBackend::onednn);
    return;
  }
  // k > 0, m > 0, n > 0: bf16_batched_gemm sends empty products the f32 way.
  const int64_t each = g.m * g.n;
  const bool dense_c = g.ldc == g.n && (g.inner == 1 || g.c_stride[1] == each) &&
                       (g.outer == 1 || g.c_stride[0] == g.inner * each);
  Key key{.ta = g.ta, .tb = g.tb, .bf16 = true, .bias = g.bias != nullptr, .m = g.m, .n = g.n, .k = g.k,
          .lda = g.lda, .ldb = g.ldb, .ldc = g.n, .outer = g.outer, .inner = g.inner,
          .sa = {g.a_stride[0], g.a_stride[1]}, .sb = {g.b_stride[0], g.b_stride[1]}, .sc = {g.inner * each, each},
          .alpha = alpha, .beta = beta};
  if (dense_c) {
    run(key, g.a, g.b, c, g.bias);
    return;
  }
  // A strided C (attention's chunks: rows of the [B, h, T, T] scores, or of
  // a head's columns in [B, T, d]) keeps oneDNN 2.6's bf16 matmul on its
  // gemm:jit kernels even with dense operands; a dense one puts it on
  // brgemm (AMX where the CPU has it). So the batch lands in this thread's
  // dense buffer, then in C: C = buffer + beta C, the sum oneDNN's post-op
  // computes. Measured alone, warm, 1 thread (docs/performance.md, "Which
  // kernel each GEMM ran on"): a causal chunk's P V 21.9 -> 8.5 us.
  thread_local std::vector<float> dense;
  const auto size = static_cast<std::size_t>(each * g.outer * g.inner);
  if (dense.size() < size) dense.resize(size);
  key.beta = 0.0f;
  run(key, g.a, g.b, dense.data(), g.bias);
  for (int64_t i = 0; i < g.outer; ++i)
    for (int64_t j = 0; j < g.inner; ++j) {
      const float* from = dense.data() + (i * g.inner + j) * each;
      float* to = c + i * g.c_stride[0] + j * g.c_stride[1];
      for (int64_t r = 0; r < g.m; ++r) {
        const float* src = from + r * g.n;
        float* dst = to + r * g.ldc;
        if (beta == 0.0f) {
          std::copy_n(src, g.n, dst);
        } else {
#pragma omp simd
          for (int64_t col = 0; col < g.n; ++col) dst[col] = src[col] + beta * dst[col];
        }
      }
    }
}

}  // namespace headlab::core::detail
