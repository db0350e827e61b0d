// Files the user names as inputs (--data, --eval-data, --config, a run's
// metrics.jsonl, a sweep's files), opened so that none can hang the program
// beyond a stop signal:
//   - the open never blocks (O_NONBLOCK): a named pipe (FIFO) with no writer
//     would otherwise block in open(), where a flag-only signal handler
//     installed with SA_RESTART leaves it for good;
//   - an input read more than once (a hash before a parse; again by
//     --resume) must be a regular file: anything else is a UsageError naming
//     it and why, before anything waits on it;
//   - an input read once may be a pipe or a device: `eval --data <(cmd)`, a
//     FIFO a producer writes. A FIFO with no writer yet is waited for, as cat
//     waits, but SIGINT, SIGTERM and SIGHUP end the wait (train::Stopped,
//     exit 128 + signal), whatever handler the program has for them, and
//     after a second of waiting stderr says what headlab waits for.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "train/signals.h"

namespace headlab::train {

class InputFile {
 public:
  // `what` names the input, path included, in messages ("data file 'x.jsonl'",
  // "--config x.json"). With `read_again_because` non-empty the file must be
  // a regular one, and the refusal ends with that reason. Throws UsageError
  // when the file cannot be opened (missing, a folder, not readable) or is
  // refused.
  InputFile(const std::string& path, const std::string& what, const std::string& read_again_because = "");
  ~InputFile();
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  // Up to `size` bytes into `data`; 0 at the end of the file (a pipe: once
  // every writer closed it). Throws Stopped on a stop signal while waiting,
  // UsageError on a read error.
  std::size_t read(char* data, std::size_t size);

 private:
  bool wait_readable();  // false: nothing came within the poll interval
  std::string what_;
  int fd_ = -1;
  bool regular_ = false;
  bool quiet_ = false;  // no note that headlab waits: printed once, or the pipe has delivered
  int waited_ms_ = 0;
  std::unique_ptr<StopSignalsCaught> caught_;  // a pipe's or a device's reads only
};

// The bytes of a stream, counted and hashed (64-bit FNV-1a): what a
// checkpoint records of its data file, to refuse the file once it changed.
struct ByteHash {
  uint64_t size = 0;
  uint64_t hash = 0xcbf29ce484222325ULL;
  void add(const char* data, std::size_t n);
};
// The hash of a whole file (named by `what`, as InputFile does; a regular one
// when `read_again_because` says why).
ByteHash hash_file(const std::string& path, const std::string& what, const std::string& read_again_because = "");

// A regular file by a name that lasts, or a UsageError naming it ("--data x
// is not a regular file (a pipe or a device): `because`"; a name through a
// descriptor of this process, /dev/stdin or /dev/fd/N, is refused with its
// own path). A missing path or a folder passes: its reader says what is
// wrong with it.
void require_regular_file(const std::string& path, const std::string& what, const std::string& because);

// A data file the user named by `flag` ("--data", "--eval-data",
// "--corrupted"), checked before anything is read or written: a UsageError
// naming the flag, the path (and where a relative one was looked for), the
// system's reason and the fix, when it is missing, a folder (with the JSONL
// files in it) or not readable. Only looked at (stat, access), never opened:
// a pipe or a FIFO is left to its reader.
void check_data_path(const std::string& flag, const std::string& path);

// A small input whole, but never more than max_bytes + 1 bytes of it: a
// longer text tells the caller the file is too large (a config that is
// /dev/zero by mistake) without reading all of it.
std::string read_input(const std::string& path, const std::string& what, std::size_t max_bytes,
                       const std::string& read_again_because = "");

// The first `max_bytes` bytes of the regular file at `path`, or nothing when
// there is none (missing, a link, a folder, a FIFO, a device, unreadable):
// for the small files that tell what a folder is (its .headlab marker, the
// start of a sweep.json). Opened first (O_NOFOLLOW, O_NONBLOCK), then the
// open descriptor is looked at (fstat) and read: a FIFO swapped in after a
// check of the path could not block the read, nor a link lead elsewhere.
std::optional<std::string> read_regular_file_head(const std::string& path, std::size_t max_bytes);

}  // namespace headlab::train
