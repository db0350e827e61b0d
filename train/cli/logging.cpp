#include "train/cli/logging.h"

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/sinks/stdout_sinks.h>

namespace headlab::cli {

std::shared_ptr<spdlog::logger> make_run_logger(const std::string& log_path, bool color) {
  std::vector<spdlog::sink_ptr> sinks;
  if (color) {
    sinks.push_back(std::make_shared<spdlog::sinks::stdout_color_sink_mt>());
  } else {
    sinks.push_back(std::make_shared<spdlog::sinks::stdout_sink_mt>());
  }
  sinks.back()->set_pattern("[%H:%M:%S] %^%v%$");
  if (!log_path.empty()) {
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
