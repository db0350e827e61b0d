#include "train/input_file.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <vector>

#include "train/errors.h"
#include "train/shell_word.h"

namespace headlab::train {
namespace {

namespace fs = std::filesystem;

// How long one wait lasts before the stop flag is looked at again: a signal
// that reaches another thread, or one a sweep blocks, interrupts nothing here.
constexpr int kPollMs = 100;
// After this long with nothing to read from a pipe, stderr says why headlab waits.
constexpr int kNoteAfterMs = 1000;

std::string not_regular(const std::string& what, const std::string& because) {
  return what + " is not a regular file (a pipe or a device): " + because;
}

// Whether `path`, or a link it leads through, names a file by a process's
// descriptor (/dev/stdin, /dev/fd/N, /proc/self/fd/N, /proc/PID/task/TID/fd/N):
// the name opens another file, or none, in another process.
bool names_a_descriptor(const std::string& path) {
  std::error_code ec;
  fs::path at = fs::absolute(path, ec).lexically_normal();
  for (int hop = 0; hop < 40 && !ec; ++hop) {
    std::vector<std::string> parts;
    for (const fs::path& part : at.relative_path()) parts.push_back(part.string());
    const auto is = [&](std::size_t i, const char* name) { return parts.size() > i && parts[i] == name; };
    if (is(0, "dev") && (is(1, "fd") || is(1, "stdin") || is(1, "stdout") || is(1, "stderr"))) return true;
    if (is(0, "proc") && (is(2, "fd") || (is(2, "task") && is(4, "fd")))) return true;
    if (!fs::is_symlink(at, ec)) return false;
    const fs::path target = fs::read_symlink(at, ec);
    at = (target.is_absolute() ? target : at.parent_path() / target).lexically_normal();
  }
  return false;
}

}  // namespace

InputFile::InputFile(const std::string& path, const std::string& what, const std::string& read_again_because)
    : what_(what) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd_ < 0) throw UsageError("cannot read " + what + ": " + std::strerror(errno));
  struct stat info {};
  if (::fstat(fd_, &info) != 0) {
    const int error = errno;
    ::close(fd_);
    throw UsageError("cannot read " + what + ": " + std::strerror(error));
  }
  regular_ = S_ISREG(info.st_mode);
  std::string refusal;
  if (S_ISDIR(info.st_mode)) refusal = "cannot read " + what + ": it is a directory";
  else if (!regular_ && !read_again_because.empty()) refusal = not_regular(what, read_again_because);
  if (!refusal.empty()) {
    ::close(fd_);
    throw UsageError(refusal);
  }
  if (!regular_) caught_ = std::make_unique<StopSignalsCaught>();
}

InputFile::~InputFile() { ::close(fd_); }

bool InputFile::wait_readable() {
  pollfd p{fd_, POLLIN, 0};
  const int ready = ::poll(&p, 1, kPollMs);
  const int error = errno;
  if (const int sig = pending_stop_signal()) throw Stopped(sig);
  if (ready > 0) return true;
  if (ready < 0 && error != EINTR) throw UsageError("cannot read " + what_ + ": " + std::strerror(error));
  waited_ms_ += kPollMs;
  if (!quiet_ && waited_ms_ >= kNoteAfterMs) {
    quiet_ = true;
    std::fprintf(stderr, "headlab: waiting for %s, a pipe with nothing to read yet (Ctrl-C stops)\n", what_.c_str());
  }
  return false;
}

std::size_t InputFile::read(char* data, std::size_t size) {
  for (;;) {
    // A pipe (named or not) is read only once poll says so: before its first
    // writer opens it, read() would report the end of the file.
    if (!regular_ && !wait_readable()) continue;
    const ssize_t got = ::read(fd_, data, size);
    if (got >= 0) {
      if (got > 0) quiet_ = true;  // a stream under way: a slow writer gets no note
      return static_cast<std::size_t>(got);
    }
    if (errno == EINTR || errno == EAGAIN) {
      if (const int sig = pending_stop_signal(); sig != 0 && !regular_) throw Stopped(sig);
      continue;
    }
    throw UsageError("cannot read " + what_ + ": " + std::strerror(errno));
  }
}

void require_regular_file(const std::string& path, const std::string& what, const std::string& because) {
  struct stat info {};
  // stat, not open: it never waits on a FIFO.
  if (::stat(path.c_str(), &info) == 0 && !S_ISREG(info.st_mode) && !S_ISDIR(info.st_mode))
    throw UsageError(not_regular(what, because));
  // A file redirected to stdin is regular, but /dev/stdin names another file
  // (or none) when the run is read again.
  if (names_a_descriptor(path)) {
    std::error_code ec;
    const std::string own = S_ISREG(info.st_mode) ? fs::canonical(path, ec).string() : "";
    throw UsageError(what + " names its file by a descriptor of this process, which names another file, or none, "
                     "later: " + because + (own.empty() || ec ? "" : "; its own path is " + own));
  }
}

void check_data_path(const std::string& flag, const std::string& path) {
  const std::string named = flag + " " + shell_word(path);
  const std::string give = "give the path of a JSONL file, one sequence a line (README.md, \"Your own data, pattern "
                           "and question\")";
  std::error_code ec;
  const std::string absolute = fs::absolute(path, ec).lexically_normal().string();
  const std::string looked = absolute == path ? "" : " (looked for " + absolute + ")";
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) {
    const int error = errno;
    struct stat link {};
    if (error == ENOENT && ::lstat(path.c_str(), &link) == 0)
      throw UsageError(named + " is a link to " + fs::read_symlink(path, ec).string() +
                       ", which does not exist" + looked + ": " + give);
    if (error == ENOENT) throw UsageError(named + ": no such file" + looked + "; " + give);
    throw UsageError(named + ": cannot read it" + looked + " (" + std::strerror(error) + "); " + give);
  }
  if (S_ISDIR(info.st_mode)) {
    // A JSONL file in it, as the fix names it (the first by name).
    std::vector<std::string> files;
    for (const fs::directory_entry& e : fs::directory_iterator(path, ec))
      if (e.path().extension() == ".jsonl") files.push_back(e.path().filename().string());
    const auto first = std::min_element(files.begin(), files.end());
    throw UsageError(named + " is a folder, not a file: " +
                     (first == files.end() ? give + " (it holds no .jsonl file)"
                                           : "give one of its " + std::to_string(files.size()) +
                                                 " JSONL file(s), such as " + flag + " " +
                                                 shell_word((fs::path(path) / *first).string())));
  }
  if (::access(path.c_str(), R_OK) != 0) {
    const int error = errno;
    throw UsageError(named + ": cannot read it" + looked + " (" + std::strerror(error) +
                     "): make it readable (chmod u+r " + shell_word(path) + ") or give a copy you can read");
  }
}

void ByteHash::add(const char* data, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) hash = (hash ^ static_cast<unsigned char>(data[i])) * 0x100000001b3ULL;
  size += n;
}

ByteHash hash_file(const std::string& path, const std::string& what, const std::string& read_again_because) {
  InputFile in(path, what, read_again_because);
  ByteHash out;
  std::vector<char> chunk(1 << 16);
  while (const std::size_t got = in.read(chunk.data(), chunk.size())) out.add(chunk.data(), got);
  return out;
}

std::string read_input(const std::string& path, const std::string& what, std::size_t max_bytes,
                       const std::string& read_again_because) {
  InputFile in(path, what, read_again_because);
  std::string text;
  char chunk[1 << 16];
  while (text.size() <= max_bytes) {
    const std::size_t got = in.read(chunk, std::min(sizeof chunk, max_bytes + 1 - text.size()));
    if (got == 0) break;
    text.append(chunk, got);
  }
  return text;
}

std::optional<std::string> read_regular_file_head(const std::string& path, std::size_t max_bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  struct stat info {};
  std::optional<std::string> text;
  if (::fstat(fd, &info) == 0 && S_ISREG(info.st_mode)) {
    // Sized from the file, not the cap: a generous cap costs nothing on a small file.
    text.emplace(std::min(max_bytes, static_cast<std::size_t>(info.st_size) + 1), '\0');
    std::size_t got = 0;
    while (got < max_bytes) {
      if (got == text->size()) text->resize(std::min(max_bytes, 2 * got + 4096));  // it grew since fstat
      const ssize_t n = ::read(fd, text->data() + got, text->size() - got);
      if (n == 0) break;
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        text.reset();
        break;
      }
      got += static_cast<std::size_t>(n);
    }
    if (text) text->resize(got);
  }
  ::close(fd);
  return text;
}

}  // namespace headlab::train
