// Which oneDNN kernel each GEMM ran on: oneDNN's verbose output (the lines
// ONEDNN_VERBOSE=1 prints for each primitive it executes), captured around a
// piece of work and parsed. `headlab bench --kernels` shows it for one step.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace headlab::core {

// One kind of matmul call: the kernel oneDNN ran it on, what it was given,
// and how often and how long.
struct GemmKernelUse {
  std::string kernel;   // oneDNN's implementation name: gemm:jit, brg:avx512_core, ...
  std::string shapes;   // src:weights:dst dims, "512x64:64x256:512x256"; batched ones lead with their batch
  std::string layouts;  // the memory formats, "src_f32::blocked:ab:f0 wei_f32::blocked:ba:f0 ..."
  std::string attrs;    // attributes: the scratchpad, output scales, post-ops
  int calls = 0;
  double ms = 0;  // as oneDNN timed them, all calls
};

// Runs `work` with oneDNN's verbose mode on and its output (written to file
// descriptor 1) captured, then returns the matmuls it executed, one entry per
// distinct (kernel, shapes, layouts, attrs), in order of first call. Empty if
// this oneDNN prints no verbose lines. Not thread-safe against other output
// on stdout while `work` runs: the descriptor is redirected for its duration.
std::vector<GemmKernelUse> onednn_kernels_of(const std::function<void()>& work);

// The verbose lines in `text` as above (for tests; onednn_kernels_of uses it).
std::vector<GemmKernelUse> parse_onednn_verbose(const std::string& text);

}  // namespace headlab::core
