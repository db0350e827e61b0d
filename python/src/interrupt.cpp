#include "interrupt.h"

#include <pybind11/pybind11.h>

namespace headlab::python {

namespace py = pybind11;

Interruptible::Interruptible() {
  const py::module_ threading = py::module_::import("threading");
  if (!threading.attr("current_thread")().is(threading.attr("main_thread")())) return;
  last_ = std::chrono::steady_clock::now();
  scope_.emplace([this] {
    // At most every 20 ms: taking the GIL waits for the threads that hold it.
    const auto now = std::chrono::steady_clock::now();
    if (now - last_ < std::chrono::milliseconds(20)) return;
    last_ = now;
    const py::gil_scoped_acquire gil;
    if (PyErr_CheckSignals() != 0) throw py::error_already_set();
  });
}

}  // namespace headlab::python
