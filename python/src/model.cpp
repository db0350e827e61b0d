#include "model.h"

#include <pybind11/stl.h>

#include <filesystem>
#include <limits>
#include <span>

#include "arrays.h"
#include "interrupt.h"
#include "threads.h"
#include "autograd/variable.h"
#include "train/checkpoint.h"
#include "train/config.h"
#include "train/input_file.h"
#include "train/run_builder.h"
#include "train/run_data.h"
#include "train/run_folder.h"

namespace headlab::python {

namespace fs = std::filesystem;

void raise(PyObject* type, const std::string& what) {
  PyErr_SetString(type, what.c_str());
  throw py::error_already_set();
}

Model load_model(const std::string& path) {
  const std::string file = fs::is_directory(path) ? (fs::path(path) / "checkpoint.safetensors").string() : path;
  if (!fs::exists(file)) {
    const std::string training = fs::is_directory(path) ? train::still_training_without_checkpoint(path) : "";
    const std::string what = !training.empty()          ? training
                             : fs::is_directory(path) ? path + " is a folder without checkpoint.safetensors (not a run folder)"
                                                      : path + ": no such run folder or checkpoint";
    raise(PyExc_FileNotFoundError, what);
  }
  Model m;
  {
    py::gil_scoped_release release;
    // Read once, hashed and parsed from the same bytes: the hash a saved
    // edit records is of the file these weights came from, even if a
    // training run replaces it meanwhile. A regular file, as the CLI's
    // loader asks: a device (a link to /dev/zero) would be read without
    // end, a FIFO waited on, and either read again by an unpickle.
    const std::string bytes =
        train::read_input(file, "checkpoint " + file, std::numeric_limits<std::size_t>::max() - 1,
                          "a model pickles as the checkpoint file it was read from, which unpickling reads again");
    train::ByteHash hash;
    hash.add(bytes.data(), bytes.size());
    train::Checkpoint ck = train::read_checkpoint(
        std::span(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()), file);
    m.transformer = train::load_model(ck, file);
    m.config = train::to_json(ck.info.config);
    // A moved or copied run folder names the data files where task_batch()
    // and the CLI find them (train/run_data.h); only when a recorded file is
    // gone, so that loading reads no data file otherwise. One that cannot be
    // found keeps the recorded path, which task_batch() then names.
    const train::TrainConfig& recorded = ck.info.config;
    if ((!recorded.data.empty() && !fs::exists(recorded.data)) ||
        (!recorded.eval_data.empty() && !fs::exists(recorded.eval_data))) {
      train::TrainConfig moved = recorded;
      try {
        train::locate_run_data(ck.info, moved, train::run_folder_of(file), false);
        m.config = train::to_json(moved);
      } catch (const std::exception&) {
      }
    }
    m.task = ck.info.task;
    m.step = ck.info.step;
    auto source = std::make_shared<Source>();
    source->path = fs::absolute(file).lexically_normal().string();
    source->size = hash.size;
    source->hash = hash.hash;
    source->threads = threads_for_run(ck.info.config, m.transformer->spec());
    source->info = std::move(ck.info);
    for (auto& [name, tensor] : ck.file.tensors)
      if (name.starts_with("optimizer.")) source->optimizer.tensors.emplace_back(name, std::move(tensor));
    for (auto& [key, value] : ck.file.metadata)
      if (key.starts_with("optimizer.")) source->optimizer.metadata.emplace(key, value);
    source->weights = m.transformer;
    m.source = std::move(source);
  }
  m.path = file;
  return m;
}

namespace {

py::array forward(const Model& model, const IntArray& tokens, const std::optional<IntArray>& lengths) {
  const Tokens t = tokens_from(tokens);
  const core::Tensor mask = padding_mask_of(lengths, t);
  core::Tensor logits;
  {
    const Interruptible interruptible;  // Ctrl-C stops the pass between two blocks
    const CallThreads threads(model);
    py::gil_scoped_release release;
    autograd::NoGradGuard no_grad;
    logits = model.transformer->forward(t.ids, t.batch, t.seq_len, &mask).value();
  }
  return to_numpy(logits);
}

py::dict params(const Model& model) {
  py::dict out;
  for (const auto& [name, value] : model.transformer->named_parameters()) out[py::str(name)] = to_numpy_copy(value.value());
  return out;
}

}  // namespace

py::class_<Model> bind_model(py::module_& m) {
  py::class_<Model> cls(m, "Model");
  cls
      .def_property_readonly("spec_json", [](const Model& model) { return train::model_json(model.transformer->spec()).dump(); })
      .def_property_readonly("config_json", [](const Model& model) { return model.config.dump(); })
      .def_property_readonly("path", [](const Model& model) { return model.path; })
      .def_property_readonly("task", [](const Model& model) { return model.task; })
      .def_property_readonly("step", [](const Model& model) { return model.step; })
      // (path, size, hash) of the checkpoint file the weights were read from
      // (an edit's: its source's), as read: what an unpickled model checks.
      .def_property_readonly("source_file", [](const Model& model) {
        return py::make_tuple(model.source->path, model.source->size, model.source->hash);
      })
      .def_property_readonly("dtype", [](const Model& model) {
        return model.transformer->dtype() == core::DType::f32 ? "float32" : "float64";
      })
      .def("params", &params)
      .def("forward", &forward, py::arg("tokens"), py::arg("lengths") = py::none());
  m.def("load", &load_model, py::arg("path"));
  return cls;
}

}  // namespace headlab::python
