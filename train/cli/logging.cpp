#include "train/cli/logging.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/sinks/stdout_sinks.h>

#include <csignal>
#include <cstdio>

#include "train/errors.h"
#include "train/signals.h"

namespace headlab::cli {
namespace {

// The terminal's sink, watched: once a write to stdout fails (a closed pipe
// with SIGPIPE ignored, a closed terminal), the run is asked to stop as if by
// SIGPIPE, so it saves a checkpoint; train.log keeps every line.
class WatchedStdout final : public spdlog::sinks::sink {
 public:
  explicit WatchedStdout(spdlog::sink_ptr inner) : inner_(std::move(inner)) {}
  void log(const spdlog::details::log_msg& msg) override {
    if (failed_) return;
    inner_->log(msg);
    check();
  }
  void flush() override {
    if (failed_) return;
    inner_->flush();
    check();
  }
  void set_pattern(const std::string& pattern) override { inner_->set_pattern(pattern); }
  void set_formatter(std::unique_ptr<spdlog::formatter> formatter) override {
    inner_->set_formatter(std::move(formatter));
  }

 private:
  void check() {
    if (!std::ferror(stdout)) return;
    failed_ = true;
    train::request_stop(SIGPIPE);
  }
  spdlog::sink_ptr inner_;
  bool failed_ = false;
};

}  // namespace

std::shared_ptr<spdlog::logger> make_run_logger(const std::string& log_path, bool color) {
  std::vector<spdlog::sink_ptr> sinks;
  if (color) {
    sinks.push_back(std::make_shared<spdlog::sinks::stdout_color_sink_mt>());
  } else {
    sinks.push_back(std::make_shared<spdlog::sinks::stdout_sink_mt>());
  }
  sinks.back() = std::make_shared<WatchedStdout>(sinks.back());
  sinks.back()->set_pattern("[%H:%M:%S] %^%v%$");
  if (!log_path.empty()) {
    // spdlog opens by name and would follow a link: the log is first opened
    // (created) here without following one, and must be a regular file.
    const int fd = ::open(log_path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
    struct stat st {};
    const bool regular = fd >= 0 && ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
    const int error = errno;
    if (fd >= 0) ::close(fd);
    if (!regular)
      throw train::UsageError("cannot write the log " + log_path + ": " +
                              (fd >= 0 || error == ELOOP ? std::string("it is not a regular file (a symlink, FIFO or device)")
                                                         : std::string(std::strerror(error))) +
                              "; headlab writes no output through a link");
    auto file = std::make_shared<spdlog::sinks::basic_file_sink_mt>(log_path, false);
    file->set_pattern("[%Y-%m-%d %H:%M:%S.%e] [%l] %v");
    sinks.push_back(file);
  }
  auto logger = std::make_shared<spdlog::logger>("headlab", sinks.begin(), sinks.end());
  logger->set_level(spdlog::level::info);
  logger->flush_on(spdlog::level::info);
  return logger;
}

}  // namespace headlab::cli
