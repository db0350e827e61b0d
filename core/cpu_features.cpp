#include "core/cpu_features.h"

#include <cpuid.h>
#include <immintrin.h>

#include <cstdint>

namespace headlab::core {
namespace {

// XCR0 (xgetbv with ECX = 0), or 0 when the OS has not enabled xgetbv.
__attribute__((target("xsave"))) uint64_t os_saved_states() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid(1, &a, &b, &c, &d) == 0 || ((c >> 27) & 1u) == 0) return 0;  // OSXSAVE
  return _xgetbv(0);
}

// cpuid leaf 7, `subleaf`: {eax, edx}, zeros where the CPU lacks it.
struct Leaf7 {
  unsigned eax = 0, edx = 0;
};
Leaf7 leaf7(unsigned subleaf) {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d) == 0 || subleaf > a) return {};
  if (__get_cpuid_count(7, subleaf, &a, &b, &c, &d) == 0) return {};
  return {a, d};
}

}  // namespace

bool cpu_has_avx512_bf16() {
  // opmask, upper ymm halves, zmm16-31 (XCR0 bits 5-7) besides SSE and AVX (1, 2)
  constexpr uint64_t kAvx512States = 0xE6;
  return ((leaf7(1).eax >> 5) & 1u) != 0 && (os_saved_states() & kAvx512States) == kAvx512States;
}

bool cpu_has_amx_bf16() {
  constexpr uint64_t kTileStates = 3ull << 17;  // XTILECFG, XTILEDATA
  return ((leaf7(0).edx >> 22) & 1u) != 0 && (os_saved_states() & kTileStates) == kTileStates;
}

}  // namespace headlab::core
