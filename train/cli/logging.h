// The run's logger: the terminal and the run folder's train.log.
#pragma once

#include <spdlog/logger.h>

#include <memory>
#include <string>

namespace headlab::cli {

std::shared_ptr<spdlog::logger> make_run_logger(const std::string& log_path, bool color);

}  // namespace headlab::cli
