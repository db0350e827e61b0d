// Which kernel each GEMM ran on: oneDNN's verbose output (the lines
// ONEDNN_VERBOSE=1 prints for each primitive it executes), captured around a
// piece of work and parsed, with the products headlab ran in its own loops
// (core/gemm_small.cpp) or on OpenBLAS listed in the same form. `headlab bench --kernels`
// shows it for one step.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace headlab::core {

// One kind of matmul call: the kernel oneDNN ran it on, what it was given,
// and how often and how long.
struct GemmKernelUse {
  // oneDNN's implementation name (gemm:jit, brg:avx512_core, ...), "loops"
  // (headlab's own, core/gemm_small.cpp) or "openblas".
  std::string kernel;
  std::string shapes;   // src:weights:dst dims, "512x64:64x256:512x256"; batched ones lead with their batch
  std::string layouts;  // the memory formats, "src_f32::blocked:ab:f0 wei_f32::blocked:ba:f0 ..."
  std::string attrs;    // attributes: the scratchpad, output scales, post-ops
  int calls = 0;
  double ms = 0;  // as oneDNN timed them, all calls
};

// Runs `work` with oneDNN's verbose mode on and its output (written to file
// descriptor 1) captured, then returns the matmuls it executed, one entry per
// distinct (kernel, shapes, layouts, attrs), in order of first call. Empty if
// this oneDNN prints no verbose lines and no product ran in headlab's loops
// or on OpenBLAS.
// Not thread-safe against other output on stdout while `work` runs: the
// descriptor is redirected for its duration.
std::vector<GemmKernelUse> gemm_kernels_of(const std::function<void()>& work);

// The verbose lines in `text` as above (for tests; gemm_kernels_of uses it):
// oneDNN's, and headlab's own "headlab_verbose,exec,cpu,matmul,loops,..."
// lines in oneDNN's form.
std::vector<GemmKernelUse> parse_onednn_verbose(const std::string& text);

namespace detail {
// Whether gemm_kernels_of is listing: the products oneDNN does not run then
// time themselves and are noted here, one verbose line each in oneDNN's form
// (kernel "loops": a batch of core/gemm_small.cpp's; "openblas": one cblas
// call).
bool kernel_listing_active();
void note_product(const char* kernel, bool ta, bool tb, int64_t outer, int64_t inner, int64_t m, int64_t n, int64_t k,
                  const char* dtype, double ms);
}  // namespace detail

}  // namespace headlab::core
