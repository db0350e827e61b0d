#include "threads.h"

#include <omp.h>

#include <atomic>
#include <stdexcept>
#include <string>

#include "core/threads.h"
#include "train/cli/cli.h"

namespace headlab::python {

namespace {
// headlab.set_num_threads's count; 0: each model's own.
std::atomic<int> session_threads{0};
}  // namespace

int threads_for_run(const train::TrainConfig& config, const layers::ModelSpec& spec) {
  return core::threads_for_work(cli::train_flops_per_step(config, spec));
}

int call_threads(const Model& model) {
  const int chosen = session_threads.load();
  return chosen > 0 ? chosen : model.source->threads;
}

CallThreads::CallThreads(const Model& model) : before_(omp_get_max_threads()) {
  const int n = call_threads(model);
  if (n != before_) omp_set_num_threads(n);
}

CallThreads::~CallThreads() {
  if (omp_get_max_threads() != before_) omp_set_num_threads(before_);
}

void bind_threads(py::module_& m, py::class_<Model>& model) {
  m.def("set_num_threads", [](int n) {
    if (n < 0 || n > core::hardware_threads())
      throw std::invalid_argument("set_num_threads: " + std::to_string(n) + " is not in [0, " +
                                  std::to_string(core::hardware_threads()) +
                                  "] (0: each model's own count; more threads than the cores only make every "
                                  "parallel region wait for a descheduled one)");
    session_threads = n;
  });
  m.def("get_num_threads", [] { return session_threads.load(); });
  m.def("hardware_threads", &core::hardware_threads);
  // The count OpenMP's next parallel region on this thread would use: what a hook sees during a call.
  m.def("active_threads", [] { return omp_get_max_threads(); });
  model.def_property_readonly("threads", &call_threads);
}

}  // namespace headlab::python
