#include "core/gemm_kernels.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <stdexcept>
#include <string>

#include <oneapi/dnnl/dnnl.h>

namespace headlab::core {
namespace {

std::vector<std::string> split(const std::string& line, char sep) {
  std::vector<std::string> out;
  std::string field;
  std::istringstream in(line);
  while (std::getline(in, field, sep)) out.push_back(field);
  if (!line.empty() && line.back() == sep) out.emplace_back();
  return out;
}

std::string trimmed(const std::string& s) {
  const auto b = s.find_first_not_of(' ');
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(' ') - b + 1);
}

std::atomic<bool> g_listing{false};

// Restores file descriptor 1 and oneDNN's verbose level however `work` ends.
class CapturedStdout {
 public:
  explicit CapturedStdout(std::FILE* into) {
    std::fflush(stdout);
    saved_ = dup(1);
    if (saved_ < 0 || dup2(fileno(into), 1) < 0) throw std::runtime_error("cannot redirect stdout to a file");
    dnnl_set_verbose(1);
    g_listing.store(true);
  }
  ~CapturedStdout() {
    g_listing.store(false);
    dnnl_set_verbose(0);
    std::fflush(stdout);
    dup2(saved_, 1);
    close(saved_);
  }
  CapturedStdout(const CapturedStdout&) = delete;
  CapturedStdout& operator=(const CapturedStdout&) = delete;

 private:
  int saved_ = -1;
};

}  // namespace

// oneDNN 2.x prints, per executed primitive:
//   onednn_verbose,exec,cpu,matmul,IMPL,PROP,MEMORY DESCS,ATTRS,AUX,DIMS,MS
// (dnnl_verbose before 2.5); its info lines ("info,...") are skipped.
// The products headlab runs in its own loops or on OpenBLAS print the same
// fields after "headlab_verbose" (detail::note_product).
std::vector<GemmKernelUse> parse_onednn_verbose(const std::string& text) {
  std::vector<GemmKernelUse> uses;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    const std::vector<std::string> f = split(line, ',');
    if (f.size() < 11 || f[1] != "exec" || f[3] != "matmul") continue;
    if (f[0] != "onednn_verbose" && f[0] != "dnnl_verbose" && f[0] != "headlab_verbose") continue;
    GemmKernelUse use{.kernel = f[4], .shapes = f[9], .layouts = trimmed(f[6]), .attrs = trimmed(f[7])};
    const double ms = std::strtod(f[10].c_str(), nullptr);
    bool found = false;
    for (GemmKernelUse& u : uses)
      if (u.kernel == use.kernel && u.shapes == use.shapes && u.layouts == use.layouts && u.attrs == use.attrs) {
        ++u.calls;
        u.ms += ms;
        found = true;
        break;
      }
    if (!found) {
      use.calls = 1;
      use.ms = ms;
      uses.push_back(use);
    }
  }
  return uses;
}

std::vector<GemmKernelUse> gemm_kernels_of(const std::function<void()>& work) {
  std::FILE* file = std::tmpfile();
  if (!file) throw std::runtime_error("cannot create a temporary file for oneDNN's verbose output");
  std::string text;
  try {
    {
      const CapturedStdout capture(file);
      work();
    }
    std::rewind(file);
    char buffer[4096];
    for (std::size_t n; (n = std::fread(buffer, 1, sizeof buffer, file)) > 0;) text.append(buffer, n);
  } catch (...) {
    std::fclose(file);
    throw;
  }
  std::fclose(file);
  return parse_onednn_verbose(text);
}

namespace detail {

bool kernel_listing_active() { return g_listing.load(std::memory_order_relaxed); }

// Formats in oneDNN's letters (ab row-major, ba transposed; a batched
// operand leads with its two batch dims: abcd, abdc), shapes src:weights:dst
// with the batch first, as oneDNN gives a batched matmul's.
void note_product(const char* kernel, bool ta, bool tb, int64_t outer, int64_t inner, int64_t m, int64_t n,
                  int64_t k, const char* dtype, double ms) {
  const bool batched = outer != 1 || inner != 1;
  const std::string lead = batched ? std::to_string(outer) + "x" + std::to_string(inner) + "x" : "";
  const auto dims = [&](int64_t rows, int64_t cols) {
    return lead + std::to_string(rows) + "x" + std::to_string(cols);
  };
  const auto letters = [&](bool transposed) -> std::string {
    if (batched) return transposed ? "abdc" : "abcd";
    return transposed ? "ba" : "ab";
  };
  std::printf("headlab_verbose,exec,cpu,matmul,%s,undef,src_%s:%s wei_%s:%s dst_%s:%s,,,%s:%s:%s,%g\n", kernel, dtype,
              letters(ta).c_str(), dtype, letters(tb).c_str(), dtype, letters(false).c_str(), dims(m, k).c_str(),
              dims(k, n).c_str(), dims(m, n).c_str(), ms);
}

}  // namespace detail

}  // namespace headlab::core
