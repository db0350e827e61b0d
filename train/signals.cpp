#include "train/signals.h"

#include <csignal>
#include <initializer_list>
#include <string>

namespace headlab::train {
namespace {

volatile std::sig_atomic_t g_signal = 0;

extern "C" void on_stop_signal(int sig) {
  if (g_signal == 0) g_signal = sig;
}

}  // namespace

void install_stop_handlers() {
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  for (const int sig : {SIGINT, SIGTERM, SIGHUP}) sigaction(sig, &action, nullptr);
  std::signal(SIGPIPE, SIG_IGN);
}

int stop_signal() { return g_signal; }

void request_stop(int sig) { on_stop_signal(sig); }

void reset_stop_signal() { g_signal = 0; }

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
