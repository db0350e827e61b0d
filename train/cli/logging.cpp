#include "train/cli/logging.h"

#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <mutex>
#include <string_view>

#include <spdlog/sinks/base_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/sinks/stdout_sinks.h>

#include "core/atomic_file.h"
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

// train.log. spdlog's file sink opens by name and would follow a link
// planted after any check: this one writes to the descriptor that
// core::open_for_append opened without following one.
class DescriptorSink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  DescriptorSink(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  ~DescriptorSink() override { ::close(fd_); }
  DescriptorSink(const DescriptorSink&) = delete;
  DescriptorSink& operator=(const DescriptorSink&) = delete;

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    spdlog::memory_buf_t line;
    formatter_->format(msg, line);
    core::append_to(fd_, path_, std::string_view(line.data(), line.size()));
  }
  void flush_() override {}  // every line is written at once

 private:
  int fd_;
  std::string path_;
};

}  // namespace

std::shared_ptr<spdlog::logger> make_run_logger(const std::string& log_path, bool color, bool quiet) {
  std::vector<spdlog::sink_ptr> sinks;
  if (color) {
    sinks.push_back(std::make_shared<spdlog::sinks::stdout_color_sink_mt>());
  } else {
    sinks.push_back(std::make_shared<spdlog::sinks::stdout_sink_mt>());
  }
  sinks.back() = std::make_shared<WatchedStdout>(sinks.back());
  sinks.back()->set_pattern("[%H:%M:%S] %^%v%$");
  if (quiet) sinks.back()->set_level(spdlog::level::warn);
  if (!log_path.empty()) {
    int fd = -1;
    try {
      fd = core::open_for_append(log_path);
    } catch (const std::runtime_error& e) {
      throw train::UsageError(std::string(e.what()) + " (train.log; headlab writes no output through a link)");
    }
    auto file = std::make_shared<DescriptorSink>(fd, log_path);
    file->set_pattern("[%Y-%m-%d %H:%M:%S.%e] [%l] %v");
    sinks.push_back(file);
  }
  auto logger = std::make_shared<spdlog::logger>("headlab", sinks.begin(), sinks.end());
  logger->set_level(spdlog::level::info);
  logger->flush_on(spdlog::level::info);
  return logger;
}

}  // namespace headlab::cli
