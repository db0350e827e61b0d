#include "core/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>

namespace headlab::core {
namespace {

std::string quoted(const std::string& path) { return "'" + path + "'"; }

const char* kind_of(mode_t mode) {
  if (S_ISLNK(mode)) return "a symbolic link";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  if (S_ISDIR(mode)) return "a folder";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

// Makes the rename itself durable. Best effort: the file's content is
// already on disk, and some file systems refuse fsync on a directory.
void sync_directory_of(const std::string& path) {
  std::string folder = std::filesystem::path(path).parent_path().string();
  if (folder.empty()) folder = ".";
  const int fd = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

}  // namespace

void check_output_path(const std::string& path) {
  struct stat info {};
  if (::lstat(path.c_str(), &info) != 0) return;  // a new name (or an error the write will report)
  if (!S_ISREG(info.st_mode))
    throw std::runtime_error("refusing to write " + quoted(path) + ": it is " + kind_of(info.st_mode) +
                             ", not a regular file (give a new file name)");
}

AtomicFileWriter::AtomicFileWriter(const std::string& path) : path_(path) {
  check_output_path(path);
  // Same folder as the target, so that the rename stays on one file system.
  temporary_ = path + ".tmp." + std::to_string(::getpid());
  // A fresh file, never an existing one: O_EXCL refuses whatever is at the
  // temporary name (a symbolic link, or a hard link to another file that
  // O_TRUNC would cut) once this process's own leftover is removed.
  ::unlink(temporary_.c_str());
  fd_ = ::open(temporary_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
  if (fd_ < 0) throw failure("creating", errno);
}

AtomicFileWriter::~AtomicFileWriter() {
  if (fd_ < 0) return;
  ::close(fd_);
  ::unlink(temporary_.c_str());
}

std::runtime_error AtomicFileWriter::failure(const std::string& step, int error) const {
  return std::runtime_error("cannot write " + quoted(path_) + " (" + step + " " + quoted(temporary_) +
                            "): " + std::strerror(error));
}

void AtomicFileWriter::write_at(uint64_t offset, std::string_view bytes) {
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::pwrite(fd_, bytes.data() + done, bytes.size() - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw failure("writing", n < 0 ? errno : ENOSPC);
    done += static_cast<std::size_t>(n);
  }
}

void AtomicFileWriter::commit() {
  int error = 0;
  if (::fsync(fd_) != 0) error = errno;
  if (::close(fd_) != 0 && error == 0) error = errno;
  fd_ = -1;
  if (error == 0 && ::rename(temporary_.c_str(), path_.c_str()) != 0) error = errno;
  if (error != 0) {
    ::unlink(temporary_.c_str());
    throw failure("writing", error);
  }
  sync_directory_of(path_);
}

int open_for_append(const std::string& path) {
  // O_NONBLOCK: opening a FIFO must not wait for a reader before it is refused.
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0666);
  if (fd < 0) {
    const int error = errno;
    struct stat info {};
    if (error == ELOOP && ::lstat(path.c_str(), &info) == 0)
      throw std::runtime_error("refusing to append to " + quoted(path) + ": it is " + kind_of(info.st_mode) +
                               ", not a regular file");
    throw std::runtime_error("cannot append to " + quoted(path) + ": " + std::strerror(error));
  }
  struct stat info {};
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode) || ::fcntl(fd, F_SETFL, O_APPEND) != 0) {
    ::close(fd);
    throw std::runtime_error("refusing to append to " + quoted(path) + ": it is " + kind_of(info.st_mode) +
                             ", not a regular file");
  }
  return fd;
}

void append_to(int fd, const std::string& path, std::string_view bytes) {
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw std::runtime_error("cannot append to " + quoted(path) + ": " + std::strerror(n < 0 ? errno : ENOSPC));
    done += static_cast<std::size_t>(n);
  }
}

void append_file(const std::string& path, std::string_view bytes) {
  const int fd = open_for_append(path);
  try {
    append_to(fd, path, bytes);
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
}

void write_file_atomic(const std::string& path, std::string_view bytes) {
  AtomicFileWriter file(path);
  file.write_at(0, bytes);
  file.commit();
}

}  // namespace headlab::core
