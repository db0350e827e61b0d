#include "train/signals.h"

#include <pthread.h>

#include <atomic>
#include <csignal>
#include <iterator>
#include <string>

namespace headlab::train {
namespace {

volatile std::sig_atomic_t g_signal = 0;
std::atomic<unsigned> g_installs{0};  // calls of install_stop_handlers
constexpr int kStopSignals[3] = {SIGINT, SIGTERM, SIGHUP};

extern "C" void on_stop_signal(int sig) {
  if (g_signal == 0) g_signal = sig;
}

}  // namespace

void install_stop_handlers() {
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  for (const int sig : kStopSignals) sigaction(sig, &action, nullptr);
  std::signal(SIGPIPE, SIG_IGN);
  ++g_installs;
}

int stop_signal() { return g_signal; }

void request_stop(int sig) { on_stop_signal(sig); }

void reset_stop_signal() { g_signal = 0; }

int pending_stop_signal() {
  if (const int sig = stop_signal()) return sig;
  sigset_t pending, blocked;
  if (sigpending(&pending) != 0 || pthread_sigmask(SIG_BLOCK, nullptr, &blocked) != 0) return 0;
  for (const int sig : kStopSignals)
    if (sigismember(&pending, sig) == 1 && sigismember(&blocked, sig) == 1) return sig;
  return 0;
}

StopSignalsCaught::StopSignalsCaught() : installs_(g_installs.load()) {
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  for (std::size_t i = 0; i < std::size(kStopSignals); ++i) {
    if (sigaction(kStopSignals[i], nullptr, &previous_[i]) != 0) continue;
    // An ignored signal stays ignored (nohup, a job started without job control).
    if (previous_[i].sa_handler == SIG_IGN || previous_[i].sa_handler == on_stop_signal) continue;
    replaced_[i] = sigaction(kStopSignals[i], &action, nullptr) == 0;
  }
}

StopSignalsCaught::~StopSignalsCaught() {
  if (g_installs.load() != installs_) return;
  for (std::size_t i = 0; i < std::size(kStopSignals); ++i)
    if (replaced_[i]) sigaction(kStopSignals[i], &previous_[i], nullptr);
}

Stopped::Stopped(int sig)
    : std::runtime_error(std::string("stopped by ") + (sig == SIGINT    ? "SIGINT"
                                                       : sig == SIGTERM ? "SIGTERM"
                                                       : sig == SIGHUP  ? "SIGHUP"
                                                                        : "signal " + std::to_string(sig)) +
                         "; nothing was written"),
      signal(sig) {}

void throw_if_stopped() {
  if (const int sig = stop_signal()) throw Stopped(sig);
}

}  // namespace headlab::train
