// Which GEMM backend runs: HEADLAB_GEMM at first use, then set_gemm_backend.
#include "core/gemm.h"

#include <atomic>
#include <cstdlib>
#include <stdexcept>

namespace headlab::core {
namespace {

// -1: not read from HEADLAB_GEMM yet.
std::atomic<int> g_backend{-1};

}  // namespace

GemmBackend parse_gemm_backend(const std::string& name) {
  if (name == "onednn") return GemmBackend::onednn;
  if (name == "openblas") return GemmBackend::openblas;
  throw std::invalid_argument("the GEMM backend must be onednn or openblas, got '" + name + "'");
}

const char* gemm_backend_name(GemmBackend backend) {
  return backend == GemmBackend::onednn ? "onednn" : "openblas";
}

std::string default_gemm_backend_name() {
  const char* env = std::getenv("HEADLAB_GEMM");
  return env != nullptr ? std::string(env) : "onednn";
}

GemmBackend gemm_backend() {
  const int current = g_backend.load(std::memory_order_relaxed);
  if (current >= 0) return static_cast<GemmBackend>(current);
  GemmBackend backend;
  try {
    backend = parse_gemm_backend(default_gemm_backend_name());
  } catch (const std::invalid_argument&) {
    throw std::invalid_argument("HEADLAB_GEMM must be onednn or openblas, got '" + default_gemm_backend_name() +
                                "' (unset it for the default, onednn)");
  }
  int expected = -1;
  g_backend.compare_exchange_strong(expected, static_cast<int>(backend));
  return static_cast<GemmBackend>(g_backend.load());
}

void set_gemm_backend(GemmBackend backend) { g_backend.store(static_cast<int>(backend)); }

}  // namespace headlab::core
