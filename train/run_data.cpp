#include "train/run_data.h"

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <optional>

#include "train/errors.h"
#include "train/input_file.h"
#include "train/snapshots.h"

namespace headlab::train {
namespace {

namespace fs = std::filesystem;

// "12 bytes, hash 00ab..."
std::string describe(const Task::Fingerprint& f) {
  char hash[24];
  std::snprintf(hash, sizeof hash, "%016llx", static_cast<unsigned long long>(f.hash));
  return std::to_string(f.size) + " bytes, hash " + hash;
}

// `file`: "the data file X".
[[noreturn]] void refuse_changed_data(const std::string& file, const Task::Fingerprint& then,
                                      const Task::Fingerprint& now) {
  throw UsageError(file + " has changed since the checkpoint was written (then " + describe(then) + "; now " +
                   describe(now) + "): restore it, or train a new run on the new file");
}

bool missing(const std::string& path) {
  std::error_code ec;
  return !fs::exists(fs::symlink_status(path, ec));
}

std::string absolute(const std::string& path) {
  std::error_code ec;
  return fs::absolute(path, ec).lexically_normal().string();
}

// The size and hash of the file at `path`, or nothing when there is none.
std::optional<Task::Fingerprint> fingerprint(const std::string& flag, const std::string& path) {
  if (missing(path)) return std::nullopt;
  const ByteHash h = hash_file(path, "the run's " + flag + " " + path,
                               "its hash is checked against the checkpoint's before it is read; save it to a file");
  return Task::Fingerprint{h.size, h.hash};
}

// One of the run's files (`flag` names it), recorded at `file` as `then`;
// a note for stderr when the run folder's copy is read in its place.
std::string locate(const std::string& flag, std::string& file, const Task::Fingerprint& then,
                   const std::string& run_dir) {
  const std::optional<Task::Fingerprint> now = fingerprint(flag, file);
  if (now == then) return "";
  // The run folder's file of the same name, unless it is the recorded one.
  const std::string own = run_dir.empty() ? "" : absolute((fs::path(run_dir) / fs::path(file).filename()).string());
  std::error_code ec;
  const bool other = !own.empty() && own != absolute(file) && !fs::equivalent(own, file, ec);
  const std::optional<Task::Fingerprint> there = other ? fingerprint(flag, own) : std::nullopt;
  if (there == then) {
    const std::string note = "headlab: the run's " + flag + " is " + own + ", in place of " + file + " (" +
                             (now ? "changed since the checkpoint" : "missing") +
                             "): the run folder's own copy has the size and hash the checkpoint recorded\n";
    file = own;
    return note;
  }
  // Neither file is the recorded one: each is named with what it is now.
  std::string copy;
  if (other)
    copy = there ? ", and the run folder's own " + own + " is another file (now " + describe(*there) + ")"
                 : ", and so is the run folder's own " + own;
  if (now) {
    if (!other) refuse_changed_data("the " + flag + " file " + file, then, *now);
    if (!there) copy = ", and the run folder's own " + own + " is missing";
    throw UsageError("the " + flag + " file " + file + " has changed since the checkpoint was written (then " +
                     describe(then) + "; now " + describe(*now) + ")" + copy +
                     ": restore either file, or train a new run on the new file");
  }
  // A run records its data files by absolute path: a moved or copied run
  // folder still names the old one, and reads its own only if it is the same.
  throw UsageError("cannot read the run's " + flag + " " + file + ": it is missing" + copy +
                   ". A run names its data files by their absolute paths, and a run folder moved or copied reads its "
                   "own file of the same name instead when that one is unchanged (" + describe(then) +
                   "): put the file back at either path (a run trained from Python rows keeps it in its folder as " +
                   fs::path(file).filename().string() + ")");
}

}  // namespace

std::string run_folder_of(const std::string& checkpoint_path) {
  const fs::path path(checkpoint_path), folder = path.parent_path();
  const bool snapshot = snapshot_step(path.filename().string()) >= 0 && folder.filename() == "snapshots";
  const fs::path dir = snapshot ? folder.parent_path() : folder;
  return dir.empty() ? "." : dir.string();
}

void locate_run_data(const CheckpointInfo& info, TrainConfig& config, const std::string& run_dir, bool note) {
  std::string notes;  // printed once both files are found: a refusal stays its one line
  if (info.data_file && !config.data.empty()) notes += locate("--data", config.data, *info.data_file, run_dir);
  if (info.eval_data_file && !config.eval_data.empty())
    notes += locate("--eval-data", config.eval_data, *info.eval_data_file, run_dir);
  if (note) std::cerr << notes;
}

void check_data_unchanged(const CheckpointInfo& info, const TrainConfig& config, const Task& task) {
  const std::optional<Task::Fingerprint> now = task.fingerprint(), eval_now = task.eval_fingerprint();
  if (now && info.data_file && *now != *info.data_file)
    refuse_changed_data("the data file of " + task.name(), *info.data_file, *now);
  if (eval_now && info.eval_data_file && *eval_now != *info.eval_data_file)
    refuse_changed_data("the --eval-data file " + config.eval_data, *info.eval_data_file, *eval_now);
}

}  // namespace headlab::train
