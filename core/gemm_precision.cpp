// The precision of the float32 GEMMs (f32 or bf16 mixed), its f32 guard, and
// whether the CPU has bf16 units.
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "core/cpu_features.h"
#include "core/gemm.h"

namespace headlab::core {
namespace {

std::atomic<int> g_precision{static_cast<int>(GemmPrecision::f32)};
// The F32Gemms alive, on any thread.
std::atomic<int> g_f32_guards{0};

}  // namespace

GemmPrecision gemm_precision() {
  if (g_f32_guards.load(std::memory_order_relaxed) > 0) return GemmPrecision::f32;
  return static_cast<GemmPrecision>(g_precision.load(std::memory_order_relaxed));
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
  static const bool has = cpu_has_avx512_bf16() || cpu_has_amx_bf16();
  return has;
}

F32Gemms::F32Gemms() { g_f32_guards.fetch_add(1); }
F32Gemms::~F32Gemms() { g_f32_guards.fetch_sub(1); }

}  // namespace headlab::core
