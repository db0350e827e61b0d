// headlab._core.is_sweep_folder and folder_marker: how headlab tells its own
// folders apart (train/run_folder.h, train/sweep_folder.h), for headlab.Run
// and headlab.Sweep, so that Python reads a folder by the CLI's rule itself
// and never by a copy of it. Paths arrive as bytes (os.fsencode): any name
// the file system holds, UTF-8 or not.
#include <pybind11/pybind11.h>

#include <string>

#include "train/run_folder.h"
#include "train/sweep_folder.h"

namespace headlab::python {

namespace py = pybind11;

namespace {

// `ask(path)` as a function of a bytes path, run without the GIL (it reads files).
template <class Ask>
auto of_bytes_path(Ask ask) {
  return [ask](const py::bytes& dir) {
    const std::string path = dir;
    py::gil_scoped_release release;
    return ask(path);
  };
}

}  // namespace

void bind_folders(py::module_& m) {
  m.def("is_sweep_folder", of_bytes_path(&train::is_sweep_folder), py::arg("dir"));
  m.def("folder_marker", of_bytes_path(&train::folder_marker), py::arg("dir"));
}

}  // namespace headlab::python
