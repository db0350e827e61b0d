// Runs the headlab binary as a child process, the way a user's shell would:
// its own working folder, stdout and stderr captured to files, signals sent
// from outside, a deadline so a hang fails the test instead of stalling it.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace headlab::cli_test {

struct RunResult {
  int exit_code = -1;  // -1 if the child did not exit normally
  int signal = 0;      // the signal that ended it, or 0
  bool timed_out = false;
  // The child's largest resident set, its ru_maxrss: from run_headlab,
  // headlab's own; from a Child, at least the test process's own peak (Linux
  // carries it into a forked child through exec: tests/cli/peak_rss_exec.cpp).
  long peak_rss_kib = 0;
  std::string out, err;

  // exit=N or signal=N plus both streams, for failure messages.
  std::string describe() const;
  // The lines of stderr, without the final newline.
  std::vector<std::string> err_lines() const;
};

// A running child. Destroying one that still runs kills it (SIGKILL).
class Child {
 public:
  // Starts `program args...` in `cwd`; stdout and stderr go to files in
  // `capture_dir`, read back by wait().
  Child(const std::string& program, const std::vector<std::string>& args, const std::string& cwd,
        const std::string& capture_dir);
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  ~Child();

  pid_t pid() const { return pid_; }
  void signal(int sig) const;
  // True once the child has ended (reaps it).
  bool finished();
  // Waits for the end, at most `timeout_s` seconds (then SIGKILL, timed_out).
  RunResult wait(double timeout_s = 120);

 private:
  pid_t pid_ = -1;
  int status_ = 0;
  long peak_rss_kib_ = 0;
  bool reaped_ = false;
  std::string out_path_, err_path_;
};

// The headlab executable: $HEADLAB_BUILD_DIR/headlab (ctest sets it), else
// found from this test binary's own location in the build tree.
const std::string& headlab_path();

// headlab ARGS... in `cwd`, to completion, through peak_rss_exec, so that
// peak_rss_kib is headlab's own.
RunResult run_headlab(const std::vector<std::string>& args, const std::string& cwd, double timeout_s = 120);

}  // namespace headlab::cli_test
