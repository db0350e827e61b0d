// The run's logger: the terminal and the run folder's train.log.
#pragma once

#include <spdlog/logger.h>

#include <memory>
#include <string>

namespace headlab::cli {

// quiet: the terminal gets only warnings and errors; train.log still gets every line.
std::shared_ptr<spdlog::logger> make_run_logger(const std::string& log_path, bool color, bool quiet = false);

}  // namespace headlab::cli
