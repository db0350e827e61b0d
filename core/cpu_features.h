// What the CPU can multiply in bf16, from cpuid and from what the OS saves
// on a context switch (XCR0): an instruction the OS does not enable faults.
#pragma once

namespace headlab::core {

// AVX512_BF16 (vdpbf16ps, vcvtne2ps2bf16), with AVX-512 enabled by the OS.
bool cpu_has_avx512_bf16();
// AMX-BF16 (tile products), with the tile state enabled by the OS.
bool cpu_has_amx_bf16();

}  // namespace headlab::core
