// headlab._core.run_command_line: the headlab command line in this process
// (train/cli/command_line.h), so headlab.train() is `headlab train`.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <array>
#include <csignal>
#include <cstdio>
#include <mutex>
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

// What a command changes for the whole process and the session keeps its own
// of: the signal handlers (the trainer installs SIGINT/SIGTERM/SIGHUP handlers
// that stop it after the current step, with a checkpoint) and --threads,
// --gemm and --precision. Counted: commands may overlap on several threads,
// and only the first saves the session's state (a later one would save the
// running command's) and only the last restores it and forgets a received
// stop signal, so that the signal stops no later command.
class SessionState {
 public:
  SessionState() {
    const std::lock_guard lock(mutex_);
    if (users_++ > 0) return;
    for (std::size_t i = 0; i < kSignals.size(); ++i) sigaction(kSignals[i], nullptr, &handlers_[i]);
    threads_ = core::num_threads();
    gemm_ = core::gemm_backend();
    precision_ = core::gemm_precision();
  }
  ~SessionState() {
    const std::lock_guard lock(mutex_);
    if (--users_ > 0) return;
    for (std::size_t i = 0; i < kSignals.size(); ++i) sigaction(kSignals[i], &handlers_[i], nullptr);
    train::reset_stop_signal();
    core::set_num_threads(threads_);
    core::set_gemm_backend(gemm_);
    core::set_gemm_precision(precision_);
  }
  SessionState(const SessionState&) = delete;
  SessionState& operator=(const SessionState&) = delete;

 private:
  static constexpr std::array<int, 3> kSignals{SIGINT, SIGTERM, SIGHUP};
  static inline std::mutex mutex_;
  static inline int users_ = 0;
  static inline std::array<struct sigaction, 3> handlers_{};
  static inline int threads_ = 0;
  static inline core::GemmBackend gemm_{};
  static inline core::GemmPrecision precision_{};
};

// argv without the program's name -> (exit status, the error line or "").
std::pair<int, std::string> run_command(const std::vector<std::string>& args) {
  std::vector<std::string> owned{"headlab"};
  owned.insert(owned.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : owned) argv.push_back(a.data());
  argv.push_back(nullptr);
  py::gil_scoped_release release;
  int status = 0;
  {
    const SessionState session;
    // The caller raises the error line: printed too, a notebook would show it twice.
    status = cli::run_command_line(static_cast<int>(owned.size()), argv.data(), /*print_error=*/false);
  }
  std::fflush(stdout);
  return {status, cli::last_error()};
}

}  // namespace

void bind_command(py::module_& m) { m.def("run_command_line", &run_command, py::arg("args")); }

}  // namespace headlab::python
