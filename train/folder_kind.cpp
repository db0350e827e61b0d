#include "train/folder_kind.h"

#include <algorithm>
#include <filesystem>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "train/input_file.h"
#include "train/run_folder.h"
#include "train/snapshots.h"
#include "train/sweep_folder.h"

namespace headlab::train {

namespace fs = std::filesystem;

std::string folder_kind(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return "";
  if (is_sweep_folder(dir)) return "sweep";
  return folder_marker(dir);
}

std::string a_run_of(const std::string& sweep_dir) {
  std::vector<std::string> runs;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(sweep_dir, ec))
    if (e.is_directory(ec) && !e.is_symlink(ec) && folder_marker(e.path().string()) == "run")
      runs.push_back(e.path().filename().string());
  if (runs.empty()) return "";
  return (fs::path(sweep_dir) / *std::min_element(runs.begin(), runs.end())).string();
}

std::string analyzed_from(const std::string& dir) {
  const std::optional<std::string> text = read_regular_file_head((fs::path(dir) / "heads.json").string(), 1 << 30);
  const nlohmann::json heads = text ? nlohmann::json::parse(*text, nullptr, false) : nlohmann::json();
  const auto checkpoint = heads.is_object() ? heads.find("checkpoint") : heads.end();
  return checkpoint != heads.end() && checkpoint->is_string() ? " (it analyzed " + checkpoint->get<std::string>() + ")"
                                                              : "";
}

std::string no_checkpoint(const std::string& target, const std::string& fix) {
  std::error_code ec;
  if (!fs::is_directory(target, ec)) return target + ": no such run folder or checkpoint";
  if (std::string training = still_training_without_checkpoint(target); !training.empty()) return training;
  const std::string kind = folder_kind(target);
  if (kind == "sweep") {
    const std::string run = a_run_of(target);
    return target + " is a sweep folder, not a run's: give one of its runs" +
           (run.empty() ? " (the folders in it, once they have trained)" : " (" + run + ", ...)");
  }
  if (kind == "analysis") {
    const fs::path folder = fs::path(target).lexically_normal();
    const fs::path dir = folder.has_filename() ? folder : folder.parent_path();
    const int64_t step = snapshot_step(dir.filename().string() + ".safetensors");
    if (step >= 0 && dir.parent_path().filename() == "snapshots")
      return target + " holds the analysis of step " + std::to_string(step) + "'s snapshot, which is gone (" +
             (dir.parent_path() / (dir.filename().string() + ".safetensors")).string() +
             "; --keep-snapshots removes the oldest): its heads.json and report.html are still there to read";
    return target + " holds an analysis (heads.json, report.html), not a checkpoint: give the run folder or "
                    "checkpoint it came from" + analyzed_from(target);
  }
  return target + " is a folder without a checkpoint.safetensors: " + fix;
}

}  // namespace headlab::train
