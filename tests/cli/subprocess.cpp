#include "tests/cli/subprocess.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace headlab::cli_test {

namespace fs = std::filesystem;

namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

int capture_counter = 0;

}  // namespace

std::string RunResult::describe() const {
  std::ostringstream s;
  if (timed_out) s << "TIMED OUT, ";
  if (signal != 0)
    s << "killed by signal " << signal;
  else
    s << "exit status " << exit_code;
  s << "\n--- stdout ---\n" << out << "\n--- stderr ---\n" << err << "--------------";
  return s.str();
}

std::vector<std::string> RunResult::err_lines() const {
  std::vector<std::string> lines;
  std::istringstream in(err);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

Child::Child(const std::string& program, const std::vector<std::string>& args, const std::string& cwd,
             const std::string& capture_dir) {
  const std::string stem = capture_dir + "/child" + std::to_string(::getpid()) + "-" + std::to_string(capture_counter++);
  out_path_ = stem + ".out";
  err_path_ = stem + ".err";
  // Everything the child needs is prepared before fork: after it, only
  // async-signal-safe calls until exec (the test process may have threads).
  std::vector<std::string> storage;
  storage.push_back(program);
  storage.insert(storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& s : storage) argv.push_back(s.data());
  argv.push_back(nullptr);
  const int out_fd = ::open(out_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  const int err_fd = ::open(err_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (out_fd < 0 || err_fd < 0) {
    if (out_fd >= 0) ::close(out_fd);
    if (err_fd >= 0) ::close(err_fd);
    throw std::runtime_error("Child: cannot create capture files in " + capture_dir);
  }
  pid_ = ::fork();
  if (pid_ == 0) {
    if (::chdir(cwd.c_str()) != 0) ::_exit(125);
    ::dup2(out_fd, STDOUT_FILENO);
    ::dup2(err_fd, STDERR_FILENO);
    const int null_fd = ::open("/dev/null", O_RDONLY);
    if (null_fd >= 0) ::dup2(null_fd, STDIN_FILENO);
    ::execv(program.c_str(), argv.data());
    ::_exit(127);
  }
  ::close(out_fd);
  ::close(err_fd);
  if (pid_ < 0) throw std::runtime_error("Child: fork failed");
}

Child::~Child() {
  if (pid_ > 0 && !reaped_) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, &status_, 0);
  }
}

void Child::signal(int sig) const {
  if (!reaped_) ::kill(pid_, sig);
}

bool Child::finished() {
  if (reaped_) return true;
  rusage usage{};
  const pid_t got = ::wait4(pid_, &status_, WNOHANG, &usage);
  if (got == pid_) reaped_ = true, peak_rss_kib_ = usage.ru_maxrss;
  return reaped_;
}

RunResult Child::wait(double timeout_s) {
  RunResult r;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (!finished()) {
    if (std::chrono::steady_clock::now() > deadline) {
      r.timed_out = true;
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &status_, 0);
      reaped_ = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  r.peak_rss_kib = peak_rss_kib_;
  if (WIFEXITED(status_)) r.exit_code = WEXITSTATUS(status_);
  if (WIFSIGNALED(status_)) r.signal = WTERMSIG(status_);
  r.out = slurp(out_path_);
  r.err = slurp(err_path_);
  std::error_code ec;
  fs::remove(out_path_, ec);
  fs::remove(err_path_, ec);
  return r;
}

const std::string& headlab_path() {
  static const std::string path = [] {
    if (const char* dir = std::getenv("HEADLAB_BUILD_DIR")) return std::string(dir) + "/headlab";
    // build/tests/cli/cli_tests -> build/headlab
    return (fs::read_symlink("/proc/self/exe").parent_path() / "../../headlab").lexically_normal().string();
  }();
  return path;
}

RunResult run_headlab(const std::vector<std::string>& args, const std::string& cwd, double timeout_s) {
  const std::string rss_file = fs::temp_directory_path().string() + "/peak" + std::to_string(::getpid()) + "-" +
                               std::to_string(capture_counter) + ".rss";
  std::vector<std::string> through = {rss_file, headlab_path()};
  through.insert(through.end(), args.begin(), args.end());
  Child child(HEADLAB_PEAK_RSS_EXEC, through, cwd, fs::temp_directory_path().string());
  RunResult r = child.wait(timeout_s);
  std::ifstream rss(rss_file);
  r.peak_rss_kib = 0;  // none if the child was killed at the deadline
  rss >> r.peak_rss_kib;
  std::error_code ec;
  fs::remove(rss_file, ec);
  return r;
}

}  // namespace headlab::cli_test
