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

void bind_folders(py::module_& m) {
  m.def(
      "is_sweep_folder",
      [](const py::bytes& dir) {
        const std::string path = dir;
        py::gil_scoped_release release;
        return train::is_sweep_folder(path);
      },
      py::arg("dir"));
  m.def(
      "folder_marker",
      [](const py::bytes& dir) {
        const std::string path = dir;
        py::gil_scoped_release release;
        return train::folder_marker(path);
      },
      py::arg("dir"));
}

}  // namespace headlab::python
