// The threads a model's calls run on. A call from Python (a forward, a
// cache, hooks, gradients, an analysis) runs at the count `headlab analyze
// RUN` picks for the run (core::threads_for_work of its training step: 1
// thread for the toy models, one per core from 10 GFLOP per step), unless
// headlab.set_num_threads(n) chose one for the session: a 64 x 24 forward of
// the induction model took a median 19 ms at 2 threads on 2 cores another
// process kept busy, 1.2 ms at 1 (docs/python.md, "Threads").
#pragma once

#include <pybind11/pybind11.h>

#include "model.h"

namespace headlab::python {

// The count `headlab analyze` picks for a run of this checkpoint's config and model.
int threads_for_run(const train::TrainConfig& config, const layers::ModelSpec& spec);

// The count a call of `model` runs at: the session's headlab.set_num_threads
// count, or the model's own.
int call_threads(const Model& model);

// For the scope of one call: OpenMP's thread count on the calling thread only
// (omp_set_num_threads sets the calling thread's own setting), so calls on
// several Python threads never change one another's, and the count before
// comes back when the call ends, however it ends.
class CallThreads {
 public:
  explicit CallThreads(const Model& model);
  ~CallThreads();
  CallThreads(const CallThreads&) = delete;
  CallThreads& operator=(const CallThreads&) = delete;

 private:
  int before_;
};

void bind_threads(py::module_& m, py::class_<Model>& model);

}  // namespace headlab::python
