// headlab._core: the pybind11 module under the Python package headlab
// (docs/python.md). It calls the C++ libraries; nothing below python/ knows
// Python. C++ exceptions arrive as Python exceptions carrying their message:
// bad input (std::invalid_argument, a UsageError, malformed JSON) as
// ValueError, std::out_of_range as IndexError, anything else as RuntimeError.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "analysis/attend.h"
#include "layers/hooks.h"
#include "layers/hooks_short_names.h"
#include "model.h"
#include "train/cli/version.h"
#include "train/errors.h"

namespace headlab::python {
void bind_analyze(py::module_& m);
void bind_command(py::module_& m);
void bind_emergence(py::module_& m);
void bind_folders(py::module_& m);
void bind_memory(py::module_& m);
void bind_task_batch(py::class_<Model>& model);
void bind_threads(py::module_& m, py::class_<Model>& model);
}  // namespace headlab::python

PYBIND11_MODULE(_core, m) {
  namespace py = pybind11;
  using namespace headlab;
  m.doc() = "headlab's C++ engine; use the package headlab, not this module";
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const train::UsageError& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const nlohmann::json::exception& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    }
  });
  auto model = python::bind_model(m);
  python::bind_hooks(model);
  python::bind_task_batch(model);
  python::bind_weights(model);
  python::bind_circuits(model);
  python::bind_analyze(m);
  python::bind_command(m);
  python::bind_folders(m);
  python::bind_emergence(m);
  python::bind_memory(m);
  python::bind_threads(m, model);
  // names=None leaves out the copy points by the engine's own list, not a copy of it.
  m.def("is_copy_point", &layers::is_copy_point, py::arg("name"));
  // TransformerLens's short names by the rule the CLI's --hooks reads (layers/hooks_short_names.h).
  m.def("short_hook_names", &layers::short_hook_names);
  m.def("is_short_hook_name", &layers::is_short_hook_name, py::arg("name"));
  m.def("act_name", &layers::act_name, py::arg("name"), py::arg("layer"), py::arg("layer_type"));
  m.def("full_hook_name", &layers::full_hook_name, py::arg("name"));
  m.def(
      "split_compact_hook_name",
      [](const std::string& name) -> std::optional<py::tuple> {
        const std::optional<layers::CompactHookName> c = layers::split_compact_hook_name(name);
        if (!c) return std::nullopt;
        return py::make_tuple(c->name, c->layer, c->layer_type);
      },
      py::arg("name"));
  // headlab.sweep runs the headlab program only if its --version line is this one (python/headlab/_program.py).
  m.def("version_line", &cli::version_line);
  // headlab.write_data checks a pattern's name by the analysis's own rule, not a copy of it.
  m.def("check_pattern_name", &analysis::check_pattern_name, py::arg("name"));
}
