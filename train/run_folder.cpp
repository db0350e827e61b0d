#include "train/run_folder.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "train/errors.h"

namespace headlab::train {

namespace fs = std::filesystem;

std::string RunFolder::name() const {
  const fs::path path = fs::path(dir).lexically_normal();
  return (path.has_filename() ? path.filename() : path.parent_path().filename()).string();
}

std::string default_run_dir(const std::string& task) {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  localtime_r(&now, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
  std::string name = task;
  for (char& c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-') c = '-';
  const std::string base = "runs/" + name + "-" + stamp;
  std::string dir = base;
  for (int i = 2; fs::exists(dir); ++i) dir = base + "-" + std::to_string(i);
  return dir;
}

RunFolder create_run_folder(const std::string& dir, bool force) {
  std::error_code ec;
  if (fs::exists(dir, ec)) {
    if (!fs::is_directory(dir, ec)) throw UsageError("--out " + dir + " exists and is not a folder");
    if (!fs::is_empty(dir, ec) && !force)
      throw UsageError("--out " + dir + " already holds a run; pass --force to overwrite it, or --resume " + dir +
                       " to continue it");
  }
  fs::create_directories(dir, ec);
  if (ec) throw UsageError("cannot create --out " + dir + ": " + ec.message());
  if (access(dir.c_str(), W_OK) != 0) throw UsageError("cannot write to --out " + dir + ": " + std::strerror(errno));
  RunFolder run{dir};
  if (force)
    for (const std::string& f : {run.metrics(), run.heads(), run.report(), run.log()}) fs::remove(f, ec);
  return run;
}

namespace {

// A run killed while writing leaves FILE.tmp.PID behind (the atomic writes'
// temporary files); those of processes that no longer exist are litter.
void remove_stale_temporaries(const RunFolder& run) {
  std::error_code ec;
  for (const std::string& file : {run.checkpoint(), run.metrics(), run.config(), run.heads(), run.report()}) {
    const std::string prefix = fs::path(file).filename().string() + ".tmp.";
    for (const auto& entry : fs::directory_iterator(run.dir, ec)) {
      const std::string name = entry.path().filename().string();
      if (!name.starts_with(prefix)) continue;
      const std::string pid = name.substr(prefix.size());
      if (pid.empty() || pid.size() > 9 || pid.find_first_not_of("0123456789") != std::string::npos) continue;
      if (::kill(static_cast<pid_t>(std::stol(pid)), 0) != 0 && errno == ESRCH) fs::remove(entry.path(), ec);
    }
  }
}

}  // namespace

RunFolder open_run_folder(const std::string& dir) {
  RunFolder run{dir};
  if (!fs::is_directory(dir)) throw UsageError("--resume " + dir + ": no such run folder");
  if (!fs::exists(run.checkpoint()))
    throw UsageError("--resume " + dir + ": the folder has no checkpoint.safetensors to resume from");
  remove_stale_temporaries(run);
  return run;
}

void write_file_atomic(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp." + std::to_string(getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    out.flush();
    if (!out) {
      std::error_code ec;
      fs::remove(tmp, ec);
      throw std::runtime_error("cannot write " + path + ": " + std::strerror(errno));
    }
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    fs::remove(tmp, ec);
    throw std::runtime_error("cannot write " + path + ": " + ec.message());
  }
}

std::vector<nlohmann::json> read_metrics(const std::string& path) {
  std::vector<nlohmann::json> lines;
  std::ifstream in(path);
  std::string line;
  for (int64_t n = 1; std::getline(in, line); ++n) {
    if (line.empty()) continue;
    try {
      lines.push_back(nlohmann::json::parse(line));
    } catch (const nlohmann::json::exception&) {
      // A line cut short by a kill is the only way a malformed line appears: drop the rest.
      break;
    }
  }
  return lines;
}

void truncate_metrics(const std::string& path, int64_t max_step) {
  if (!fs::exists(path)) return;
  std::ostringstream kept;
  for (const auto& j : read_metrics(path))
    if (j.value("step", int64_t{0}) <= max_step) kept << j.dump() << '\n';
  write_file_atomic(path, kept.str());
}

}  // namespace headlab::train
