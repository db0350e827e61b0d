// headlab._core's memory: the engine keeps freed tensor storage for reuse at
// the same size (core/tensor.h), which a training step's fixed sizes need
// and a notebook's varying ones do not: a cache of 20,000 sequences, deleted,
// stayed held at 1 GiB, and the next cache of another batch size was
// allocated beside it. The package keeps at most kPythonCacheBytes, and
// headlab.release_memory() returns all of it.
#include <pybind11/pybind11.h>

#include <cstddef>

#include "core/tensor.h"

namespace headlab::python {

namespace py = pybind11;

namespace {
constexpr std::size_t kPythonCacheBytes = std::size_t{256} << 20;
}  // namespace

void bind_memory(py::module_& m) {
  core::set_buffer_cache_limit(kPythonCacheBytes);
  m.def("release_memory", [] {
    core::set_buffer_cache_limit(0);
    core::set_buffer_cache_limit(kPythonCacheBytes);
  });
  m.def("cached_bytes", &core::buffer_cache_bytes);
  m.attr("cache_limit_bytes") = kPythonCacheBytes;
}

}  // namespace headlab::python
