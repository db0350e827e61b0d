// headlab._core.Model: a checkpoint's Transformer, read-only, with the
// checkpoint's metadata. Every forward pass runs with the GIL released.
#pragma once

#include <pybind11/pybind11.h>

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "layers/transformer.h"

namespace headlab::python {

namespace py = pybind11;

struct Model {
  std::shared_ptr<const layers::Transformer> transformer;
  std::string path;       // the checkpoint file
  nlohmann::json config;  // the run's TrainConfig (flag names as keys)
  std::string task;
  int64_t step = 0;
};

// A run folder (its checkpoint.safetensors) or a checkpoint file, snapshots
// included. A missing path is a FileNotFoundError; a bad file a ValueError.
Model load_model(const std::string& path);

// Registers Model and load(); returns the class for the other files' methods.
py::class_<Model> bind_model(py::module_& m);
// Model.run, Model.gradients, Model.hook_names (hooks.cpp).
void bind_hooks(py::class_<Model>& model);

}  // namespace headlab::python
