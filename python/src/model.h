// headlab._core.Model: a checkpoint's Transformer, read-only, with the
// checkpoint's metadata. Every forward pass runs with the GIL released.
// Model.with_params makes another Model whose weights are these with some
// replaced (weights.cpp); the weights of a Model never change.
#pragma once

#include <pybind11/pybind11.h>

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "layers/transformer.h"
#include "optim/optimizer.h"
#include "train/checkpoint.h"

namespace headlab::python {

namespace py = pybind11;

// What a model keeps of the checkpoint file it was read from, to write a
// checkpoint again (Model.save) and to say where its weights came from:
// shared, unchanged, by every model edited from it.
struct Source {
  std::string path;                // the file, absolute
  uint64_t size = 0, hash = 0;     // of the bytes read (64-bit FNV-1a, as --init records)
  train::CheckpointInfo info;      // its metadata: config, task, step, data file, provenance
  optim::OptimizerState optimizer; // its optimizer state, which the CLI's session reads back
  // Its weights, which an edit's `replaced` is measured against (an edit of an
  // edit that gives a parameter back its value replaces it no longer).
  std::shared_ptr<const layers::Transformer> weights;
  // The threads its calls run at, as `headlab analyze` picks them for its run (threads.h).
  int threads = 1;
};

struct Model {
  std::shared_ptr<const layers::Transformer> transformer;
  std::shared_ptr<const Source> source;
  std::string path;       // the checkpoint file (an edited model: its source's)
  nlohmann::json config;  // the run's TrainConfig (flag names as keys)
  std::string task;
  int64_t step = 0;
  // Made by with_params: the parameters whose values differ from `source`'s,
  // in the order first replaced.
  bool edited = false;
  std::vector<std::string> replaced;
};

// Raises the Python exception `type` (FileNotFoundError, KeyError ...) with
// this message: for errors that are not a ValueError or a RuntimeError.
[[noreturn]] void raise(PyObject* type, const std::string& what);

// What a saved edit records of its origin (the "edited" metadata,
// train/checkpoint.h): the source file, its step and task, the parameters
// replaced.
nlohmann::json edited_record(const Model& model);

// A run folder (its checkpoint.safetensors) or a checkpoint file, snapshots
// included. A missing path is a FileNotFoundError; a bad file a ValueError.
Model load_model(const std::string& path);

// Registers Model and load(); returns the class for the other files' methods.
py::class_<Model> bind_model(py::module_& m);
// Model.run, Model.gradients, Model.hook_names (hooks.cpp).
void bind_hooks(py::class_<Model>& model);
// Model.with_params, Model.edited_json, Model.save (weights.cpp).
void bind_weights(py::class_<Model>& model);
void bind_circuits(py::class_<Model>& model);

}  // namespace headlab::python
