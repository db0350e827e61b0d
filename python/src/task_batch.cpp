// Model.task_batch: the batch a run's own head analysis reads (its task's
// held-out sequences, with the patterns and roles the task declares), as
// headlab.analyze's keyword arguments, so that
// `headlab.analyze(model, **model.task_batch())` is the run's heads.json;
// with the corrupted batch (corrupted=True), that of `headlab analyze RUN
// --patch`.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>

#include "attend.h"
#include "model.h"
#include "train/checkpoint.h"
#include "train/patch_corruption.h"
#include "train/session.h"

namespace headlab::python {

namespace {

py::array_t<int32_t> int_array(const std::vector<int32_t>& values, std::vector<py::ssize_t> shape) {
  py::array_t<int32_t> out(shape);
  std::copy(values.begin(), values.end(), out.mutable_data());
  return out;
}

py::dict task_batch(const Model& model, bool corrupted) {
  train::Batch batch;
  std::vector<int32_t> corrupted_tokens;
  {
    py::gil_scoped_release release;
    // The session the analysis of `headlab analyze RUN` builds: the run's task,
    // split and seed, its data file checked unchanged.
    train::Session session(train::read_checkpoint(model.path));
    batch = session.eval_batch();
    // As `analyze RUN --patch` corrupts the run's batch: one chunk, its own stream.
    if (corrupted) {
      core::Generator stream = train::patch_corruption_stream(session.config().seed);
      corrupted_tokens = session.task().corrupt(batch, stream);
    }
  }
  const py::ssize_t B = batch.batch, T = batch.seq_len;
  py::dict out;
  out["tokens"] = int_array(batch.tokens, {B, T});
  out["targets"] = int_array(batch.targets, {B, T});
  out["lengths"] = batch.lengths.empty() ? py::object(py::none()) : py::object(int_array(batch.lengths, {B}));
  py::dict patterns;
  for (const analysis::AttendPattern& p : batch.attend) {
    const std::vector<uint8_t> mask = pattern_mask(p);
    py::array_t<bool> array({B, T, T});
    std::transform(mask.begin(), mask.end(), array.mutable_data(), [](uint8_t m) { return m != 0; });
    patterns[py::str(p.name)] = py::make_tuple(array, p.definition);
  }
  out["patterns"] = patterns;
  py::list roles;
  for (const analysis::ExpectedRole& r : batch.roles) roles.append(py::make_tuple(r.role, r.pattern));
  out["roles"] = roles;
  out["sources"] = batch.sources;
  if (corrupted) out["corrupted"] = int_array(corrupted_tokens, {B, T});
  return out;
}

}  // namespace

void bind_task_batch(py::class_<Model>& model) { model.def("task_batch", &task_batch, py::arg("corrupted") = false); }

}  // namespace headlab::python
