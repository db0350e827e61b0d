#include "train/sweep_folder.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>

#include "train/errors.h"
#include "train/input_file.h"
#include "train/json_input.h"
#include "train/run_folder.h"

namespace headlab::train {
namespace {

namespace fs = std::filesystem;

// The bytes of sweep.lock whose record locks mean: 0 the folder (shared by
// shards, exclusive for a whole sweep), 1 the shards' shared files, 2 + K shard K.
constexpr off_t kFolderByte = 0, kSetupByte = 1, kFirstShardByte = 2;

std::string lock_path(const std::string& dir) { return (fs::path(dir) / "sweep.lock").string(); }

// Takes a record lock of one byte; returns 0, or the holder's PID (-1 unknown)
// when another process holds a conflicting one.
pid_t try_lock(int fd, short type, off_t byte, bool wait) {
  struct flock lock {};
  lock.l_type = type;
  lock.l_whence = SEEK_SET;
  lock.l_start = byte;
  lock.l_len = 1;
  while (::fcntl(fd, wait ? F_SETLKW : F_SETLK, &lock) != 0) {
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EACCES) throw std::runtime_error(std::string("cannot lock: ") + std::strerror(errno));
    struct flock holder = lock;
    return ::fcntl(fd, F_GETLK, &holder) == 0 && holder.l_type != F_UNLCK ? holder.l_pid : -1;
  }
  return 0;
}

}  // namespace

SweepLock::SweepLock(const std::string& dir, std::optional<Shard> shard) {
  const std::string path = lock_path(dir);
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
  struct stat st {};
  if (fd_ >= 0 && (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode))) {
    ::close(fd_);
    fd_ = -1;
    errno = EINVAL;
  }
  if (fd_ < 0) throw UsageError("cannot lock the sweep folder " + dir + " (" + path + "): " + std::strerror(errno));
  const auto refuse = [&](pid_t holder, const std::string& what) {
    ::close(fd_);
    fd_ = -1;
    throw UsageError("the sweep folder " + dir + " is being written by " + what + " (PID " +
                     (holder > 0 ? std::to_string(holder) : std::string("unknown")) +
                     "); wait for it to end or stop it first (one sweep per folder)");
  };
  if (const pid_t holder = try_lock(fd_, shard ? F_RDLCK : F_WRLCK, kFolderByte, false); holder != 0)
    refuse(holder, shard ? "a sweep that is not sharded" : "another sweep or shard");
  if (shard)
    if (const pid_t holder = try_lock(fd_, F_WRLCK, kFirstShardByte + shard->index, false); holder != 0)
      refuse(holder, "another process running shard " + std::to_string(shard->index));
}

SweepLock::~SweepLock() {
  if (fd_ >= 0) ::close(fd_);  // releases the locks; the file stays, the folder's mark
}

void SweepLock::setup(bool lock) { try_lock(fd_, lock ? F_WRLCK : F_UNLCK, kSetupByte, true); }

bool is_sweep_folder(const std::string& dir) {
  struct stat st {};
  const std::string kind = folder_marker(dir);
  if (kind == "sweep") return true;
  if (!kind.empty()) return false;  // a run's folder, whatever else lies in it
  if (::lstat(lock_path(dir).c_str(), &st) == 0) return S_ISREG(st.st_mode);
  // A sweep of a headlab before sweep.lock: its sweep.json, a regular file, says so at its start.
  const std::optional<std::string> head = read_regular_file_head((fs::path(dir) / "sweep.json").string(), 64);
  return head && head->starts_with("{\n  \"format\": \"headlab-sweep/1\"");
}

std::unique_ptr<SweepLock> prepare_sweep_folder(const std::string& dir, bool force, std::optional<Shard> shard) {
  std::error_code ec;
  if (fs::exists(fs::symlink_status(dir, ec))) {
    if (!fs::is_directory(dir, ec)) throw UsageError("--out " + dir + " exists and is not a folder");
    if (!fs::is_empty(dir, ec)) {
      if (!is_sweep_folder(dir))
        throw UsageError("--out " + dir + " is not empty and holds no sweep (no sweep.lock): headlab writes only into a "
                         "new or empty folder, or one of its own sweeps; give another --out");
      if (!force && !shard)
        throw UsageError("--out " + dir + " is not empty; pass --force to run the sweep there anyway (it holds a "
                         "sweep, whose runs' folders are overwritten), or --resume " + dir + " to continue it");
    }
  }
  fs::create_directories(dir, ec);
  if (ec) throw UsageError("cannot create --out " + dir + ": " + ec.message());
  if (access(dir.c_str(), W_OK) != 0) throw UsageError("cannot write to --out " + dir + ": " + std::strerror(errno));
  auto lock = std::make_unique<SweepLock>(dir, shard);
  if (folder_marker(dir) != "sweep") write_folder_marker(dir, "sweep");
  return lock;
}

void prepare_run_folder(const std::string& dir) {
  std::error_code ec;
  const bool fresh = !fs::exists(fs::symlink_status(dir, ec)) || (fs::is_directory(dir, ec) && fs::is_empty(dir, ec));
  fs::create_directories(dir, ec);
  if (ec) throw std::runtime_error("sweep: cannot create " + dir + ": " + ec.message());
  if (fresh) write_folder_marker(dir, "run");
}

namespace {

// The files a sweep names: its flag, its key in the record, and its path in `config`.
struct DataFileFlag {
  const char* flag;
  const char* key;
  const std::string TrainConfig::*path;
};
constexpr DataFileFlag kDataFileFlags[] = {{"--data", "data", &TrainConfig::data},
                                           {"--eval-data", "eval_data", &TrainConfig::eval_data}};

ByteHash hash_data_file(const std::string& flag, const std::string& path) {
  return hash_file(path, "the sweep's " + flag + " " + path,
                   "a sweep compares it with the size and hash it recorded when it started; save it to a file");
}

// "264000 bytes, hash 00ab...", as a run's checkpoint describes its file.
std::string describe(uint64_t size, uint64_t hash) {
  char hex[24];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(hash));
  return std::to_string(size) + " bytes, hash " + hex;
}

}  // namespace

nlohmann::ordered_json data_files_record(const TrainConfig& config) {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  for (const DataFileFlag& f : kDataFileFlags) {
    const std::string& path = config.*f.path;
    if (path.empty()) continue;
    const ByteHash h = hash_data_file(f.flag, path);
    out[f.key] = {{"path", path}, {"size", h.size}, {"hash", h.hash}};
  }
  return out;
}

void check_data_files(const nlohmann::json& recorded, const TrainConfig& config, const std::string& where) {
  // headlab's own file, edited or damaged: nothing says which bytes the runs so far trained on.
  const std::string damaged = " (" + std::string(kDataFilesName) + ", which the sweep wrote when it started, is damaged: "
                              "restore it, or start a new sweep with another --out)";
  if (!recorded.is_object())
    throw UsageError(where + ": the record of the sweep's data files is not a JSON object" + damaged);
  for (const DataFileFlag& f : kDataFileFlags) {
    const auto it = recorded.find(f.key);
    if (it == recorded.end()) continue;
    const nlohmann::json& r = *it;
    if (!r.is_object() || !r.contains("path") || !r.at("path").is_string() || !r.contains("size") ||
        !r.at("size").is_number_unsigned() || !r.contains("hash") || !r.at("hash").is_number_unsigned())
      throw UsageError(where + ": the record of the sweep's " + f.flag +
                       " file must be {\"path\", \"size\": unsigned, \"hash\": unsigned}, got " + brief_json(r, 80) +
                       damaged);
    const std::string then_path = r.at("path").get<std::string>(), now_path = config.*f.path;
    const std::string then = describe(r.at("size").get<uint64_t>(), r.at("hash").get<uint64_t>());
    std::error_code ec;
    // The same file by another spelling (an older sweep's relative path, a link) is the same file.
    if (now_path != then_path && !fs::equivalent(now_path, then_path, ec))
      throw UsageError(where + ": the sweep started on the " + f.flag + " file " + then_path + " (" + then +
                       "), not " + (now_path.empty() ? std::string("on none") : now_path) +
                       ": every run of a sweep trains on the same file; start a new sweep with another --out");
    if (!fs::exists(fs::symlink_status(now_path, ec)))
      throw UsageError(where + ": cannot read the sweep's " + f.flag + " file " + now_path + ": it is missing; put it "
                       "back (" + then + ", as when the sweep started) and run this again");
    const ByteHash h = hash_data_file(f.flag, now_path);
    if (h.size != r.at("size").get<uint64_t>() || h.hash != r.at("hash").get<uint64_t>())
      throw UsageError(where + ": the " + f.flag + " file " + now_path + " has changed since the sweep started (then " +
                       then + "; now " + describe(h.size, h.hash) +
                       "): its runs so far trained on the earlier file, and no run is started on this one. Restore "
                       "the file, or start a new sweep on it with another --out");
  }
}

}  // namespace headlab::train
