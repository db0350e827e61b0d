// The precision of the float32 GEMMs (f32 or bf16 mixed): HEADLAB_PRECISION
// at first use, then set_gemm_precision; its f32 guard, and whether the CPU
// has bf16 units.
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

#include "core/cpu_features.h"
#include "core/gemm.h"

namespace headlab::core {
namespace {

// -1: not read from HEADLAB_PRECISION yet.
std::atomic<int> g_precision{-1};
// The F32Gemms alive, on any thread.
std::atomic<int> g_f32_guards{0};

}  // namespace

std::string default_gemm_precision_name() {
  const char* env = std::getenv("HEADLAB_PRECISION");
  return env != nullptr ? std::string(env) : "f32";
}

GemmPrecision gemm_precision() {
  if (g_f32_guards.load(std::memory_order_relaxed) > 0) return GemmPrecision::f32;
  const int current = g_precision.load(std::memory_order_relaxed);
  if (current >= 0) return static_cast<GemmPrecision>(current);
  const std::string name = default_gemm_precision_name();
  GemmPrecision precision;
  try {
    precision = parse_gemm_precision(name);
  } catch (const std::invalid_argument&) {
    throw std::invalid_argument("HEADLAB_PRECISION must be f32 or bf16, got '" + name +
                                "' (unset it for the default, f32)");
  }
  // As the CLI refuses --precision bf16 there.
  if (precision == GemmPrecision::bf16 && !cpu_has_native_bf16())
    throw std::invalid_argument(std::string("HEADLAB_PRECISION=bf16: ") + kNoBf16Units + "; unset it or set it to f32");
  int expected = -1;
  g_precision.compare_exchange_strong(expected, static_cast<int>(precision));
  return static_cast<GemmPrecision>(g_precision.load());
}

void set_gemm_precision(GemmPrecision precision) { g_precision.store(static_cast<int>(precision)); }

GemmPrecision parse_gemm_precision(const std::string& name) {
  if (name == "f32") return GemmPrecision::f32;
  if (name == "bf16") return GemmPrecision::bf16;
  throw std::invalid_argument("the GEMM precision must be f32 or bf16, got '" + name + "'");
}

const char* gemm_precision_name(GemmPrecision precision) {
  return precision == GemmPrecision::f32 ? "f32" : "bf16";
}

bool cpu_has_native_bf16() {
  const char* off = std::getenv("HEADLAB_NO_CPU_BF16");
  if (off != nullptr && std::strcmp(off, "1") == 0) return false;
  const char* emulate = std::getenv("HEADLAB_EMULATE_BF16");
  if (emulate != nullptr && std::strcmp(emulate, "1") == 0) return true;
  static const bool has = cpu_has_avx512_bf16() || cpu_has_amx_bf16();
  return has;
}

bool bf16_products_widened(GemmBackend backend) {
  return backend == GemmBackend::onednn ? !detail::onednn_has_bf16_matmul() : !detail::openblas_has_sbgemm();
}

F32Gemms::F32Gemms() { g_f32_guards.fetch_add(1); }
F32Gemms::~F32Gemms() { g_f32_guards.fetch_sub(1); }

}  // namespace headlab::core
