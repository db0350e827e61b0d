// headlab._core.run_command_line: the headlab command line in this process
// (train/cli/command_line.h), so headlab.train() is `headlab train`.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <array>
#include <csignal>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "core/gemm.h"
#include "core/threads.h"
#include "train/cli/command_line.h"
#include "train/signals.h"

namespace headlab::python {

namespace py = pybind11;

namespace {

// The trainer installs its own SIGINT/SIGTERM/SIGHUP handlers (a stop after
// the current step, with a checkpoint); the interpreter gets its own back.
class SavedSignalHandlers {
 public:
  SavedSignalHandlers() {
    for (std::size_t i = 0; i < kSignals.size(); ++i) sigaction(kSignals[i], nullptr, &saved_[i]);
  }
  ~SavedSignalHandlers() {
    for (std::size_t i = 0; i < kSignals.size(); ++i) sigaction(kSignals[i], &saved_[i], nullptr);
    train::reset_stop_signal();
  }
  SavedSignalHandlers(const SavedSignalHandlers&) = delete;
  SavedSignalHandlers& operator=(const SavedSignalHandlers&) = delete;

 private:
  static constexpr std::array<int, 3> kSignals{SIGINT, SIGTERM, SIGHUP};
  std::array<struct sigaction, 3> saved_{};
};

// argv without the program's name -> (exit status, the error line or "").
std::pair<int, std::string> run(const std::vector<std::string>& args) {
  std::vector<std::string> owned{"headlab"};
  owned.insert(owned.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : owned) argv.push_back(a.data());
  argv.push_back(nullptr);
  py::gil_scoped_release release;
  const SavedSignalHandlers saved;
  // A command's --threads, --gemm and --precision are process-wide: the session keeps its own.
  const int threads = core::num_threads();
  const core::GemmBackend gemm = core::gemm_backend();
  const core::GemmPrecision precision = core::gemm_precision();
  const int status = cli::run_command_line(static_cast<int>(owned.size()), argv.data());
  core::set_num_threads(threads);
  core::set_gemm_backend(gemm);
  core::set_gemm_precision(precision);
  std::fflush(stdout);
  return {status, cli::last_error()};
}

}  // namespace

void bind_command(py::module_& m) { m.def("run_command_line", &run, py::arg("args")); }

}  // namespace headlab::python
