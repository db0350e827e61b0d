#include "train/sweep_supervisor.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "train/dist.h"
#include "train/signals.h"

namespace headlab::train {
namespace {

using Clock = std::chrono::steady_clock;

sigset_t waited_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);
  sigaddset(&set, SIGCHLD);
  return set;
}

// Starts `job` as a child with stdin from /dev/null and stdout and stderr
// into its log, under the signal mask `mask`.
pid_t spawn(const ChildJob& job, const sigset_t& mask) {
  std::vector<char*> args;
  for (const std::string& a : job.argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  // A run of a sweep under mpirun is a process of its own, not a rank of the
  // sweep's job: it gets none of the launcher's variables.
  std::vector<char*> env;
  for (char** e = environ; *e != nullptr; ++e)
    if (!dist::is_launcher_variable(*e)) env.push_back(*e);
  env.push_back(nullptr);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error(std::string("sweep: cannot start a training process: ") + std::strerror(errno));
  if (pid == 0) {
    // The child: only async-signal-safe calls until exec. It gets SIGTERM
    // (a clean stop with a checkpoint) when the sweep dies, however it dies;
    // a sweep that died before this line is caught by the parent check.
    if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0 || getppid() != parent) _exit(128 + SIGTERM);
    const int out = open_log(job.log_path.c_str());
    const int in = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (out < 0 || in < 0 || dup2(in, STDIN_FILENO) < 0 || dup2(out, STDOUT_FILENO) < 0 ||
        dup2(out, STDERR_FILENO) < 0)
      _exit(127);
    pthread_sigmask(SIG_SETMASK, &mask, nullptr);
    // This very program, even if the file was replaced since it started.
    execve("/proc/self/exe", args.data(), env.data());
    constexpr char kMessage[] = "headlab sweep: cannot execute /proc/self/exe\n";
    (void)!write(STDERR_FILENO, kMessage, sizeof kMessage - 1);
    _exit(127);
  }
  return pid;
}

// The running children; whatever happens to the sweep, none outlives it.
class Children {
 public:
  struct Child {
    pid_t pid;
    std::size_t job;
    Clock::time_point start;
  };

  ~Children() {
    signal_all(SIGTERM);
    for (const Child& c : running_) {
      int status = 0;
      while (waitpid(c.pid, &status, 0) < 0 && errno == EINTR) {
      }
    }
  }

  void add(pid_t pid, std::size_t job) { running_.push_back({pid, job, Clock::now()}); }
  std::size_t size() const { return running_.size(); }
  void signal_all(int sig) const {
    for (const Child& c : running_) kill(c.pid, sig);
  }

  // Reaps the children that have exited: calls done(job, exit).
  template <class F>
  void reap(F&& done) {
    for (std::size_t i = 0; i < running_.size();) {
      int status = 0;
      if (waitpid(running_[i].pid, &status, WNOHANG) == running_[i].pid) {
        const Child c = running_[i];
        running_.erase(running_.begin() + static_cast<std::ptrdiff_t>(i));
        const int code = WIFEXITED(status) ? WEXITSTATUS(status) : WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 1;
        done(c.job, ChildExit{code, std::chrono::duration<double>(Clock::now() - c.start).count()});
      } else {
        ++i;
      }
    }
  }

 private:
  std::vector<Child> running_;
};

}  // namespace

SweepSignals::SweepSignals() {
  const sigset_t set = waited_signals();
  pthread_sigmask(SIG_BLOCK, &set, &old_);
}

SweepSignals::~SweepSignals() { pthread_sigmask(SIG_SETMASK, &old_, nullptr); }

int open_log(const char* path) {
  // Without O_TRUNC first: a FIFO or device at the path is refused before anything is cut.
  const int fd = open(path, O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
  if (fd < 0) return -1;
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || ftruncate(fd, 0) != 0 ||
      fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0) {
    const int saved = S_ISREG(st.st_mode) ? errno : EINVAL;
    close(fd);
    errno = saved;
    return -1;
  }
  return fd;
}

int supervise(std::size_t count, int jobs, const SweepSignals& signals,
              const std::function<std::optional<ChildJob>(std::size_t)>& start,
              const std::function<void(std::size_t, const ChildExit&)>& done) {
  Children children;
  std::size_t next = 0;
  int stop = 0;
  const auto request_stop = [&](int sig) {
    if (stop == 0) {
      stop = sig;
      std::fprintf(stderr, "headlab sweep: signal %d: stopping the %zu running run(s); no new ones start\n", sig,
                   children.size());
    }
    children.signal_all(sig);
  };
  const sigset_t waited = waited_signals();
  while (true) {
    children.reap(done);
    // A signal that reached a thread without the mask went to the stop handler.
    if (stop == 0 && stop_signal() != 0) request_stop(stop_signal());
    while (stop == 0 && next < count && children.size() < static_cast<std::size_t>(jobs)) {
      const std::size_t job = next++;
      if (const std::optional<ChildJob> child = start(job)) children.add(spawn(*child, signals.old()), job);
    }
    if (children.size() == 0) break;
    // Wakes on a child's exit or a stop signal; the timeout is a safety net.
    timespec timeout{0, 250'000'000};
    const int sig = sigtimedwait(&waited, nullptr, &timeout);
    if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP) request_stop(sig);
  }
  return stop;
}

}  // namespace headlab::train
