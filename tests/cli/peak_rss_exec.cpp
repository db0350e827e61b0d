// peak_rss_exec RSS_FILE PROGRAM [ARGS...]: runs PROGRAM as its own child,
// writes that child's peak resident set (KiB, its ru_maxrss) to RSS_FILE, and
// exits as PROGRAM did (its exit status, or the signal that ended it).
//
// Why a process in between: Linux carries the high-water RSS of the process
// that forks into its child through exec, so a child forked by a test
// process reports at least the test process's own peak (a whole shard of
// tests run in one sanitized process reaches 100 MB). This process is small
// when it forks, so its child's ru_maxrss is the program's own.
// Signals sent to this process (INT, TERM, HUP, QUIT, USR1, USR2) are passed
// on; if it is killed, the child is killed with it (PR_SET_PDEATHSIG).
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>

namespace {

volatile pid_t g_child = 0;

void pass_on(int sig) {
  if (g_child > 0) ::kill(g_child, sig);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: peak_rss_exec RSS_FILE PROGRAM [ARGS...]\n");
    return 125;
  }
  const int passed[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
  for (const int sig : passed) std::signal(sig, pass_on);
  const pid_t self = ::getpid();
  const pid_t child = ::fork();
  if (child < 0) {
    std::perror("peak_rss_exec: fork");
    return 125;
  }
  if (child == 0) {  // exec resets the handlers above to their defaults
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != self) ::_exit(125);  // the parent died before prctl
    ::execv(argv[2], argv + 2);
    ::_exit(127);
  }
  g_child = child;
  int status = 0;
  rusage usage{};
  while (::wait4(child, &status, 0, &usage) < 0)
    if (errno != EINTR) {
      std::perror("peak_rss_exec: wait4");
      return 125;
    }
  if (std::FILE* f = std::fopen(argv[1], "w")) {
    std::fprintf(f, "%ld\n", usage.ru_maxrss);
    std::fclose(f);
  }
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    std::signal(sig, SIG_DFL);
    sigset_t only{};
    sigemptyset(&only);
    sigaddset(&only, sig);
    sigprocmask(SIG_UNBLOCK, &only, nullptr);
    std::raise(sig);
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 125;
}
