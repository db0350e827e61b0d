// The one way headlab writes an output file (checkpoints, dumps, run files):
// a temporary file in the same folder, flushed and fsync'ed, renamed over the
// path. A reader sees the old content or the new one, never a part of either.
// The logs it appends to are opened here too (open_for_append). No output is
// ever written through a link.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

namespace headlab::core {

// Writes `bytes` to `path` atomically. `path` must be a new name or a regular
// file: anything else there (a symbolic link, a FIFO, a device, a folder) is
// refused with std::runtime_error and left as it was, so an output can never
// replace /dev/null or write through a link. On any failure the previous file
// is untouched and no temporary file remains.
void write_file_atomic(const std::string& path, std::string_view bytes);

// The same, in pieces: bytes written at offsets into a temporary file in
// the path's folder; commit() makes it the path (fsync, rename). Destroyed
// without commit() (an error midway), it removes the temporary file and the
// previous file stays as it was. For outputs too large to hold in memory.
class AtomicFileWriter {
 public:
  explicit AtomicFileWriter(const std::string& path);  // refuses what write_file_atomic refuses
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  void write_at(uint64_t offset, std::string_view bytes);
  void commit();

 private:
  std::runtime_error failure(const std::string& step, int error) const;
  std::string path_, temporary_;
  int fd_ = -1;
};

// Throws the error write_file_atomic would for a path that exists and is not
// a regular file; nothing otherwise. For checking outputs before the work.
void check_output_path(const std::string& path);

// The files headlab appends to (train.log, metrics.jsonl): `path` opened for
// appending, created if new, without following a link. Returns the
// descriptor (the caller closes it); throws std::runtime_error naming the
// path for anything there but a regular file, or the system's error.
int open_for_append(const std::string& path);
// Writes all of `bytes` to a descriptor of open_for_append (`path` names it
// in the error).
void append_to(int fd, const std::string& path, std::string_view bytes);
// Both, for one append: opens `path` as open_for_append does, writes `bytes`
// and closes it.
void append_file(const std::string& path, std::string_view bytes);

}  // namespace headlab::core
