// What the machine can do, to put a measured rate in proportion: the FMA
// peak of the widest vector unit the CPU has, chosen at run time.
#pragma once

namespace headlab::core {

struct FmaPeak {
  const char* isa;  // "AVX-512", "AVX2+FMA" or "SSE2" (multiply then add)
  double gflops;    // float32, all `threads` threads together
};

// Each of `threads` OpenMP threads runs a loop of independent
// multiply-adds on the widest float vectors the CPU supports (many
// accumulators, so latency never limits it); best of a few timings.
FmaPeak fma_peak(int threads);

// The same for bf16 products with f32 accumulation, on the widest bf16 unit
// the CPU has, the one oneDNN's bf16 matmul runs on: AMX-BF16's tile
// product tdpbf16ps (16 x 16 x 32 multiply-adds per instruction, on a
// 2 x 2 block of independent accumulator tiles) where the CPU has AMX and
// Linux grants the tile state, else AVX512_BF16's vdpbf16ps (per 32-bit
// lane, two bf16 products added into an f32 accumulator: 4 FLOPs).
// {"none", 0} on a CPU with neither.
FmaPeak bf16_peak(int threads);

}  // namespace headlab::core
