// A step's GEMM time inside the step against the same calls alone: see
// core/gemm_replay.h.
#include "core/gemm_replay.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "core/bf16.h"
#include "core/gemm.h"
#include "core/shortest.h"

namespace headlab::core {
namespace {

using Clock = std::chrono::steady_clock;

// One recorded product: its arguments (the pointers are not kept: the
// replay runs on its own operands), its precision as it ran, its time.
struct Recorded {
  detail::BatchedGemm<float> g;  // for a packed bf16 product: its shape, layout, alpha and beta
  bool packed_bf16 = false;      // a detail::packed_bf16_gemm call (operands already bf16)
  GemmPrecision precision = GemmPrecision::f32;
  double seconds = 0;
};

std::atomic<bool> g_recording{false};
std::mutex g_mutex;
std::vector<Recorded>* g_records = nullptr;  // while recording
// Set while this thread runs a recorded product: the calls that product
// makes through core/gemm.h are its own parts, not products of the work.
thread_local bool t_inside_record = false;

void add(Recorded r) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_records != nullptr) g_records->push_back(r);
}

template <class F>
double timed(F&& run) {
  t_inside_record = true;
  const auto t0 = Clock::now();
  run();
  const double s = std::chrono::duration<double>(Clock::now() - t0).count();
  t_inside_record = false;
  return s;
}

// Elements from an operand's first to its last: `outer` x `inner` matrices
// of [rows, cols] (stored), rows `ld` apart, at the given strides.
int64_t extent(int64_t rows, int64_t cols, int64_t ld, int64_t outer, int64_t inner, const int64_t* strides) {
  return (outer - 1) * strides[0] + (inner - 1) * strides[1] + (rows - 1) * ld + cols;
}

// Replays `r` on operands of its layout, `repeats` times: the best time.
double replay(const Recorded& r, int repeats) {
  const auto& g = r.g;
  if (g.m <= 0 || g.n <= 0 || g.k <= 0 || g.outer <= 0 || g.inner <= 0) return 0;  // nothing multiplied
  const int64_t a_size = extent(g.ta ? g.k : g.m, g.ta ? g.m : g.k, g.lda, g.outer, g.inner, g.a_stride);
  const int64_t b_size = extent(g.tb ? g.n : g.k, g.tb ? g.k : g.n, g.ldb, g.outer, g.inner, g.b_stride);
  const int64_t c_size = extent(g.m, g.n, g.ldc, g.outer, g.inner, g.c_stride);
  std::vector<float> c(static_cast<std::size_t>(c_size), 0.0f);
  const auto value = [](int64_t i) { return static_cast<float>(i % 7 - 3) * 0.125f; };  // small, exact in bf16
  std::vector<float> a(static_cast<std::size_t>(a_size)), b(static_cast<std::size_t>(b_size));
  for (int64_t i = 0; i < a_size; ++i) a[static_cast<std::size_t>(i)] = value(i);
  for (int64_t i = 0; i < b_size; ++i) b[static_cast<std::size_t>(i)] = value(i + 3);
  std::vector<float> bias(static_cast<std::size_t>(g.bias != nullptr ? g.n : 0), 0.5f);
  std::vector<bf16_t> a16, b16;
  if (r.packed_bf16) {
    a16.resize(a.size());
    b16.resize(b.size());
    std::transform(a.begin(), a.end(), a16.begin(), to_bf16);
    std::transform(b.begin(), b.end(), b16.begin(), to_bf16);
  }
  const GemmPrecision before = gemm_precision();
  set_gemm_precision(r.precision);
  double best = 0;
  for (int i = 0; i <= repeats; ++i) {  // the first run warms the cache and the primitive
    const auto t0 = Clock::now();
    if (r.packed_bf16) {
      detail::BatchedGemm<bf16_t> h{.ta = g.ta, .tb = g.tb, .m = g.m, .n = g.n, .k = g.k, .outer = g.outer,
                                    .inner = g.inner, .a = a16.data(), .lda = g.lda, .b = b16.data(), .ldb = g.ldb,
                                    .ldc = g.ldc, .bias = g.bias != nullptr ? bias.data() : nullptr};
      std::copy(g.a_stride, g.a_stride + 2, h.a_stride);
      std::copy(g.b_stride, g.b_stride + 2, h.b_stride);
      std::copy(g.c_stride, g.c_stride + 2, h.c_stride);
      detail::packed_bf16_gemm(h, g.alpha, g.beta, c.data());
    } else {
      detail::BatchedGemm<float> f = g;
      f.a = a.data(), f.b = b.data(), f.c = c.data();
      if (g.bias != nullptr) f.bias = bias.data();
      detail::batched_gemm(f);
    }
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    if (i == 1 || (i > 1 && s < best)) best = s;
  }
  set_gemm_precision(before);
  return best;
}

// "bf16 16 x NT 64x128x32" (beta shown when not 0): what GemmShapeTimes groups by.
std::string shape_of(const Recorded& r) {
  const auto& g = r.g;
  std::string s = std::string(r.precision == GemmPrecision::bf16 ? "bf16 " : "f32 ") +
                  std::to_string(g.outer * g.inner) + " x " + (g.ta ? "T" : "N") + (g.tb ? "T" : "N") + " " +
                  std::to_string(g.m) + "x" + std::to_string(g.n) + "x" + std::to_string(g.k);
  if (g.beta != 0.0f) s += " beta " + shortest(g.beta);
  return s;
}

}  // namespace

namespace detail {

bool gemm_recording() { return g_recording.load(std::memory_order_relaxed) && !t_inside_record; }

void record_batched_gemm(const BatchedGemm<float>& g) {
  Recorded r{g, false, gemm_precision(), 0};
  r.seconds = timed([&] { batched_gemm(g); });
  add(r);
}

void record_packed_bf16_gemm(const BatchedGemm<bf16_t>& g, float alpha, float beta, float* c) {
  Recorded r{{.ta = g.ta, .tb = g.tb, .m = g.m, .n = g.n, .k = g.k, .outer = g.outer, .inner = g.inner,
              .lda = g.lda, .ldb = g.ldb, .ldc = g.ldc, .alpha = alpha, .beta = beta, .bias = g.bias},
             true, GemmPrecision::bf16, 0};
  std::copy(g.a_stride, g.a_stride + 2, r.g.a_stride);
  std::copy(g.b_stride, g.b_stride + 2, r.g.b_stride);
  std::copy(g.c_stride, g.c_stride + 2, r.g.c_stride);
  r.seconds = timed([&] { packed_bf16_gemm(g, alpha, beta, c); });
  add(r);
}

}  // namespace detail

GemmTimes gemm_time_inside_and_alone(const std::function<void()>& work, int repeats) {
  std::vector<Recorded> records;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    g_records = &records;
  }
  g_recording.store(true);
  try {
    work();
  } catch (...) {
    g_recording.store(false);
    std::lock_guard<std::mutex> lock(g_mutex);
    g_records = nullptr;
    throw;
  }
  g_recording.store(false);
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    g_records = nullptr;
  }
  GemmTimes t;
  t.calls = static_cast<long>(records.size());
  std::map<std::string, GemmShapeTimes> by_shape;
  for (const Recorded& r : records) {
    const double inside = 1000 * r.seconds, alone = 1000 * replay(r, std::max(1, repeats));
    t.inside_ms += inside;
    t.alone_ms += alone;
    GemmShapeTimes& s = by_shape[shape_of(r)];
    ++s.calls, s.inside_ms += inside, s.alone_ms += alone;
  }
  for (auto& [shape, s] : by_shape) {
    s.shape = shape;
    t.shapes.push_back(s);
  }
  std::stable_sort(t.shapes.begin(), t.shapes.end(), [](const GemmShapeTimes& x, const GemmShapeTimes& y) {
    return x.inside_ms - x.alone_ms > y.inside_ms - y.alone_ms;
  });
  return t;
}

}  // namespace headlab::core
