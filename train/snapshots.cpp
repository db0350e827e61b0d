#include "train/snapshots.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <system_error>

#include "train/errors.h"

namespace headlab::train {

namespace fs = std::filesystem;

std::string snapshots_dir(const std::string& run_dir) { return (fs::path(run_dir) / "snapshots").string(); }

std::string snapshot_path(const std::string& run_dir, int64_t step) {
  char name[48];
  std::snprintf(name, sizeof name, "step-%06lld.safetensors", static_cast<long long>(step));
  return (fs::path(snapshots_dir(run_dir)) / name).string();
}

int64_t snapshot_step(const std::string& file_name) {
  const std::string prefix = "step-", suffix = ".safetensors";
  if (!file_name.starts_with(prefix) || !file_name.ends_with(suffix)) return -1;
  const std::string digits = file_name.substr(prefix.size(), file_name.size() - prefix.size() - suffix.size());
  if (digits.empty() || digits.size() > 18 || digits.find_first_not_of("0123456789") != std::string::npos) return -1;
  return std::stoll(digits);
}

std::vector<int64_t> snapshot_steps(const std::string& run_dir) {
  std::vector<int64_t> steps;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(snapshots_dir(run_dir), ec)) {
    const int64_t step = snapshot_step(entry.path().filename().string());
    if (step >= 0 && entry.is_regular_file(ec)) steps.push_back(step);
  }
  std::sort(steps.begin(), steps.end());
  return steps;
}

std::string snapshot_analysis_dir(const std::string& run_dir, int64_t step) {
  std::string path = snapshot_path(run_dir, step);
  return path.substr(0, path.size() - std::string(".safetensors").size());
}

std::string find_snapshot(const std::string& run_dir, int64_t step) {
  const std::vector<int64_t> steps = snapshot_steps(run_dir);
  if (std::find(steps.begin(), steps.end(), step) != steps.end()) return snapshot_path(run_dir, step);
  // --keep-snapshots removes a snapshot but never the analysis of it a user asked for.
  std::error_code ec;
  const std::string analysis = snapshot_analysis_dir(run_dir, step);
  const std::string kept = fs::is_directory(analysis, ec) ? " (its snapshot is gone; the analysis an earlier "
                                                            "analyze --step " + std::to_string(step) +
                                                                " wrote is kept in " + analysis + ")"
                                                          : "";
  if (steps.empty())
    throw UsageError("--step " + std::to_string(step) + ": " + run_dir +
                     " keeps no snapshots (train it with --snapshot-every N to keep the weights of every N-th step)" +
                     kept);
  std::string list;
  for (const int64_t s : steps) list += (list.empty() ? "" : ", ") + std::to_string(s);
  throw UsageError("--step " + std::to_string(step) + ": " + run_dir + " has no snapshot of that step" + kept +
                   "; it has " + list);
}

void prune_snapshots(const std::string& run_dir, int64_t keep) {
  if (keep <= 0) return;
  const std::vector<int64_t> steps = snapshot_steps(run_dir);
  std::error_code ec;
  for (std::size_t i = 0; i + static_cast<std::size_t>(keep) < steps.size(); ++i)
    fs::remove(snapshot_path(run_dir, steps[i]), ec);
}

}  // namespace headlab::train
