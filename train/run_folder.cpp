#include "train/run_folder.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <chrono>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <limits>
#include <optional>
#include <sstream>

#include "core/atomic_file.h"
#include "train/errors.h"
#include "train/folder_kind.h"
#include "train/input_file.h"
#include "train/shell_word.h"
#include "train/snapshots.h"

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

// The atomic writer's temporary name for `path` in this process.
std::string temporary_of(const std::string& path) { return path + ".tmp." + std::to_string(::getpid()); }

// The first of `dir` and its parents that does not exist yet ("" if `dir`
// exists): removing it undoes create_directories(dir).
fs::path first_missing(const fs::path& dir) {
  std::error_code ec;
  fs::path missing;
  for (fs::path p = fs::absolute(dir, ec).lexically_normal(); !p.empty() && !fs::exists(fs::symlink_status(p, ec));
       p = p.parent_path()) {
    missing = p;
    if (p == p.parent_path()) break;
  }
  return missing;
}

// The system's reason a file could not be made at `path`, or 0 if it can be.
int probe(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return errno == EEXIST ? 0 : errno;
  ::close(fd);
  ::unlink(path.c_str());
  return 0;
}

// For a file in a folder that does not exist yet (snapshots/): the lengths
// the system would refuse.
int length_probe(const std::string& path) {
  if (path.size() >= PATH_MAX) return ENAMETOOLONG;
  for (const fs::path& part : fs::path(path))
    if (part.string().size() > NAME_MAX) return ENAMETOOLONG;
  return 0;
}

}  // namespace

std::string shown_path(const std::string& path) {
  constexpr std::size_t kWhole = 160, kEnd = 60;
  if (path.size() <= kWhole) return path;
  return path.substr(0, kEnd) + "..." + path.substr(path.size() - kEnd) + " (" + std::to_string(path.size()) +
         " characters)";
}

void check_run_paths(const RunFolder& run, int64_t last_snapshot) {
  for (const std::string& file : {run.checkpoint(), run.config(), run.metrics(), run.heads(), run.report(), run.log()})
    if (const int error = probe(temporary_of(file)))
      throw UsageError("cannot write " + shown_path(file) + ": " + std::strerror(error) +
                       (error == ENAMETOOLONG ? " (give a shorter --out)" : ""));
  if (last_snapshot < 0) return;
  const std::string snapshot = snapshot_path(run.dir, last_snapshot);
  std::error_code ec;
  const int error = fs::is_directory(snapshots_dir(run.dir), ec) ? probe(temporary_of(snapshot))
                                                                  : length_probe(temporary_of(snapshot));
  if (error)
    throw UsageError("cannot write the snapshot " + shown_path(snapshot) + ": " + std::strerror(error) +
                     (error == ENAMETOOLONG ? " (give a shorter --out, or no --snapshot-every)" : ""));
}

namespace {

// A write lock on one byte of train.lock.
struct flock byte_lock(off_t byte) {
  struct flock lock {};
  lock.l_type = F_WRLCK;
  lock.l_whence = SEEK_SET;
  lock.l_start = byte;
  lock.l_len = 1;
  return lock;
}

}  // namespace

RunLock::RunLock(const std::string& dir) {
  const std::string path = dir + "/train.lock";
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd_ < 0) throw std::runtime_error("cannot lock the run folder " + dir + " (" + path + "): " + std::strerror(errno));
  // Byte 0: an open file description lock, the exclusion. Not a classic
  // POSIX record lock: those never conflict within one process, and the
  // Python package can run two commands of one process into one folder (an
  // OFD lock also conflicts with the whole-file classic lock of an older
  // headlab). Byte 1: a classic lock, which names its PID to F_OFD_GETLK
  // where an OFD lock names none, so a refusal can say who writes (this
  // process included) without the lock file ever being written.
  struct flock exclusive = byte_lock(0), marker = byte_lock(1);
  if (::fcntl(fd_, F_OFD_SETLK, &exclusive) == 0 && ::fcntl(fd_, F_SETLK, &marker) == 0) return;
  const int error = errno;
  struct flock holder = byte_lock(1);
  const pid_t pid = ::fcntl(fd_, F_OFD_GETLK, &holder) == 0 && holder.l_type != F_UNLCK ? holder.l_pid : -1;
  // Closing drops every classic lock this process holds on the file, the
  // marker of a writer in this process too: its exclusion stays, and a later
  // refusal says "PID unknown".
  ::close(fd_);
  fd_ = -1;
  if (error != EAGAIN && error != EACCES)
    throw std::runtime_error("cannot lock the run folder " + dir + ": " + std::strerror(error));
  if (pid == ::getpid())
    throw std::runtime_error("the run folder " + dir + " is being written by this process (PID " + std::to_string(pid) +
                             ", another command running in it); wait for that to end first (one writer per run folder)");
  throw std::runtime_error("the run folder " + dir + " is being written by another headlab process (PID " +
                           (pid > 0 ? std::to_string(pid) : std::string("unknown")) +
                           "); wait for it to end or stop it first (one writer per run folder)");
}

RunLock::~RunLock() {
  if (fd_ >= 0) ::close(fd_);  // releases the lock; the file stays (removing it would race a new locker)
}

void write_folder_marker(const std::string& dir, const std::string& kind) {
  write_file_atomic((fs::path(dir) / kFolderMarker).string(), nlohmann::json{{"headlab", kind}}.dump() + "\n");
}

std::string folder_marker(const std::string& dir) {
  // A marker is some 20 bytes: a larger file is not one headlab wrote.
  constexpr std::size_t kMaxBytes = 256;
  const std::optional<std::string> text =
      read_regular_file_head((fs::path(dir) / kFolderMarker).string(), kMaxBytes + 1);
  if (!text || text->size() > kMaxBytes) return "";
  const nlohmann::json j = nlohmann::json::parse(*text, nullptr, false);
  return j.is_object() && j.size() == 1 && j.contains("headlab") && j["headlab"].is_string()
             ? j["headlab"].get<std::string>()
             : "";
}

void check_output_is_no_input(const std::string& flag, const std::string& path, const std::vector<NamedInput>& inputs) {
  std::error_code ec;
  const fs::path out = fs::absolute(path, ec).lexically_normal();
  const fs::path folder = out.parent_path();
  for (const NamedInput& in : inputs) {
    if (in.path.empty()) continue;
    if (fs::equivalent(out, in.path, ec) || (fs::is_directory(in.path, ec) && fs::equivalent(folder, in.path, ec)))
      throw UsageError(flag + " " + path + " is " + in.what + " (" + in.path +
                       (fs::is_directory(in.path, ec) ? ", or in its folder" : "") +
                       "), an input of this command; write the dump elsewhere");
  }
  const std::string kind = folder_marker(folder.string());
  const bool sweep = kind == "sweep" || fs::exists(folder / "sweep.json", ec);
  if (sweep || kind == "run" || fs::exists(folder / "checkpoint.safetensors", ec))
    throw UsageError(flag + " " + path + " is inside the " + (sweep ? "sweep" : "run") + " folder " +
                     folder.string() + ", whose files are headlab's own; write the dump elsewhere");
  try {
    core::check_output_path(path);
  } catch (const std::runtime_error& e) {
    throw UsageError(flag + ": " + e.what());
  }
  if (!fs::is_directory(folder, ec))
    throw UsageError(flag + " " + path + ": " + folder.string() +
                     (fs::exists(folder, ec) ? " is not a folder" : " does not exist; create it first"));
}

namespace {

// Whether `dir` holds nothing but train.lock: a run's start that ended
// before it marked the folder (killed) leaves that much.
bool holds_only_lock(const std::string& dir) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec))
    if (entry.path().filename() != "train.lock") return false;
  return !ec;
}

}  // namespace

RunFolder create_run_folder(const std::string& dir, bool force, int64_t last_snapshot) {
  std::error_code ec;
  std::shared_ptr<RunLock> lock;
  if (fs::exists(dir, ec)) {
    if (!fs::is_directory(dir, ec)) throw UsageError("--out " + dir + " exists and is not a folder");
    // Another headlab process starting a run here holds the lock before it
    // writes the marker: its folder is refused as being written, not judged
    // by files it has yet to write.
    if (fs::exists(fs::path(dir) / "train.lock", ec)) lock = std::make_shared<RunLock>(dir);
    if (!fs::is_empty(dir, ec) && !holds_only_lock(dir)) {
      const std::string kind = folder_marker(dir);
      if (kind == "sweep")
        throw UsageError("--out " + dir + " holds a sweep, not a run; choose another --out");
      if (kind != "run")
        throw UsageError("--out " + dir + " holds files that are not a headlab run" +
                         (force ? " (--force replaces only a run headlab wrote)" : "") +
                         "; choose an empty or new folder");
      if (!force)
        throw UsageError("--out " + dir + " already holds a run; pass --force to overwrite it, or --resume " +
                         shell_word(dir) + " to continue it");
    }
  }
  const fs::path created = first_missing(dir);
  fs::create_directories(dir, ec);
  if (ec) throw UsageError("cannot create --out " + shown_path(dir) + ": " + ec.message());
  RunFolder run{dir, nullptr};
  try {
    if (access(dir.c_str(), W_OK) != 0)
      throw UsageError("cannot write to --out " + shown_path(dir) + ": " + std::strerror(errno));
    // Locked before anything else is written into it, so that a second run
    // started into the same new folder finds it held (above). A lock held by
    // another process throws a runtime_error, which removes nothing.
    run.lock = lock ? lock : std::make_shared<RunLock>(dir);
    check_run_paths(run, last_snapshot);
  } catch (const UsageError&) {
    run.lock.reset();
    if (!created.empty()) fs::remove_all(created, ec);
    throw;
  }
  write_folder_marker(dir, "run");
  if (force) {
    // Before the new run writes anything: an old checkpoint left beside the
    // new config.json would be taken for the new run's by eval and --resume.
    for (const std::string& f : {run.checkpoint(), run.config(), run.metrics(), run.heads(), run.report(), run.log()})
      fs::remove(f, ec);
    for (const int64_t step : snapshot_steps(dir)) fs::remove(snapshot_path(dir, step), ec);
    // And the analyses of the old run's model (analyze's analysis-TASK/, a
    // snapshot's step-NNNNNN/), which would sit beside the new run's
    // snapshots of the same steps: the folders marked as headlab's analyses
    // only, never a folder of the user's.
    for (const fs::path& parent : {fs::path(dir), fs::path(dir) / "snapshots"})
      for (const fs::directory_entry& e : fs::directory_iterator(parent, ec))
        if (e.is_directory(ec) && !e.is_symlink(ec) && folder_marker(e.path().string()) == "analysis")
          fs::remove_all(e.path(), ec);
    remove_stale_temporaries(run);
  }
  return run;
}

RunFolder open_run_folder(const std::string& dir) {
  RunFolder run{dir, nullptr};
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw UsageError("--resume " + dir +
                     (fs::exists(dir, ec) ? " is a file, not a run folder: give the run's folder (" +
                                                fs::path(dir).lexically_normal().parent_path().string() + ")"
                                          : ": no such run folder"));
  // Another kind of headlab folder: what it is, and what continues it.
  if (const std::string kind = folder_kind(dir); kind == "sweep") {
    const std::string one = a_run_of(dir);
    throw UsageError("--resume " + dir + " is a sweep folder, not a run's: continue the sweep with headlab sweep "
                     "--resume " + shell_word(dir) +
                     (one.empty() ? "" : ", or one of its runs with headlab train --resume " + shell_word(one)));
  } else if (kind == "analysis") {
    throw UsageError("--resume " + dir + " holds an analysis (heads.json, report.html), not a run: give the run "
                     "folder it came from" + analyzed_from(dir));
  }
  // Without a checkpoint, a snapshot (resume_checkpoint in cmd_train.cpp) is as whole a one.
  if (!fs::exists(run.checkpoint()) && snapshot_steps(dir).empty())
    throw UsageError("--resume " + dir +
                     ": the folder has no checkpoint.safetensors and no snapshot to resume from (a run writes its "
                     "checkpoint every --checkpoint-every N steps, on a stop signal and at its end; one killed "
                     "before that keeps none unless --snapshot-every wrote some); train it again");
  run.lock = std::make_shared<RunLock>(dir);
  remove_stale_temporaries(run);
  return run;
}

void write_file_atomic(const std::string& path, const std::string& text) { core::write_file_atomic(path, text); }

std::vector<nlohmann::json> read_metrics(const std::string& path) {
  std::vector<nlohmann::json> lines;
  std::error_code ec;
  if (!fs::exists(path, ec)) return lines;
  // Never a FIFO left in its place, which would block the read (input_file.h).
  std::istringstream in(read_input(path, "the run's metrics " + path, std::numeric_limits<std::size_t>::max() - 1,
                                   "a run's metrics.jsonl is the file its trainer appends to"));
  std::string line;
  int64_t malformed = 0;  // the line number of a malformed line, if any
  for (int64_t n = 1; std::getline(in, line); ++n) {
    if (line.empty()) continue;
    if (malformed > 0)
      throw UsageError(path + ":" + std::to_string(malformed) +
                       " is not a JSON line, and lines follow it: the file was edited or damaged (a kill can cut "
                       "only the last line short); mend or remove that line");
    try {
      lines.push_back(nlohmann::json::parse(line));
    } catch (const nlohmann::json::exception&) {
      malformed = n;
    }
  }
  return lines;
}

std::string still_training_without_checkpoint(const std::string& dir) {
  std::error_code ec;
  if (fs::exists(fs::path(dir) / "checkpoint.safetensors", ec)) return "";
  // Asked, not taken: a reader never holds the lock, and opens no file it would create.
  const int fd = ::open((fs::path(dir) / "train.lock").c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return "";
  struct flock exclusion = byte_lock(0), marker = byte_lock(1);
  const bool held = ::fcntl(fd, F_OFD_GETLK, &exclusion) == 0 && exclusion.l_type != F_UNLCK;
  const pid_t pid = held && ::fcntl(fd, F_OFD_GETLK, &marker) == 0 && marker.l_type != F_UNLCK ? marker.l_pid : -1;
  ::close(fd);
  if (!held) return "";
  // When its first checkpoint comes, from the settings it started with.
  const std::optional<std::string> text = read_regular_file_head((fs::path(dir) / "config.json").string(), 1 << 20);
  const nlohmann::json config = text ? nlohmann::json::parse(*text, nullptr, false) : nlohmann::json();
  const auto number = [&](const char* key) {
    return config.is_object() && config.contains(key) && config[key].is_number_integer() ? config[key].get<int64_t>()
                                                                                        : int64_t{-1};
  };
  const int64_t steps = number("steps"), every = number("checkpoint-every"), snapshots = number("snapshot-every");
  std::string when = "until the end of its training";
  if (every > 0 && (steps < 0 || every < steps)) when = "until step " + std::to_string(every) + " (--checkpoint-every " +
                                                        std::to_string(every) + ")";
  else if (steps >= 0) when = "until its last step, " + std::to_string(steps) + " (--checkpoint-every 0: only at the end)";
  return dir + " is a run still training (PID " + (pid > 0 ? std::to_string(pid) : std::string("unknown")) +
         " holds its train.lock): it has no checkpoint.safetensors " + when + "; wait for it, or train with "
         "--checkpoint-every N to read a run while it trains" +
         (snapshots > 0 ? " (its snapshots, every " + std::to_string(snapshots) +
                              " steps, are read with analyze --step N or headlab.Run(...).model(step=N))"
                        : "");
}

std::vector<int64_t> truncate_metrics(const std::string& path, int64_t max_step,
                                      const std::vector<std::string>& drop_at_max) {
  std::vector<int64_t> dropped;
  if (!fs::exists(path)) return dropped;
  std::ostringstream kept;
  for (nlohmann::json& j : read_metrics(path)) {
    const int64_t step = j.value("step", int64_t{0});
    if (step > max_step) {
      dropped.push_back(step);
      continue;
    }
    if (step == max_step && !drop_at_max.empty()) {
      for (const std::string& key : drop_at_max) j.erase(key);
      if (j.size() <= 1) continue;  // its step alone
    }
    kept << j.dump() << '\n';
  }
  write_file_atomic(path, kept.str());
  return dropped;
}

bool complete_metrics_line(const std::string& path, int64_t step, const nlohmann::json& fields) {
  if (!fs::exists(path)) return false;
  std::vector<nlohmann::json> lines = read_metrics(path);
  bool changed = false;
  for (nlohmann::json& j : lines) {
    if (j.value("step", int64_t{-1}) != step) continue;
    bool any = false;
    for (const auto& [key, value] : fields.items()) any = any || j.contains(key);
    if (any) return false;
    j.update(fields);
    changed = true;
  }
  if (!changed) return false;
  std::ostringstream out;
  for (const nlohmann::json& j : lines) out << j.dump() << '\n';
  write_file_atomic(path, out.str());
  return true;
}

}  // namespace headlab::train
