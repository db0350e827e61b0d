// libFuzzer target for the --data reader (train/data_file.cpp).
//
// Every input is a JSONL file for a model of vocab 16, 16 classes and
// seq-len 8. It must either load or be rejected with a UsageError: never
// crash, leak, hang or throw anything else. What loads must keep the
// reader's promises: every batch holds tokens in [0, vocab) and targets in
// [-1, classes), and a position saved mid-epoch (with the generator's state)
// replays the same batches, which is what an exact resume relies on.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include "train/data_file.h"
#include "train/errors.h"

namespace {

using headlab::core::Generator;
using headlab::train::Batch;
using headlab::train::DataFile;

constexpr int64_t kVocab = 16, kClasses = 16, kSeqLen = 8;

void require(bool ok) {
  if (!ok) std::abort();
}

void check_batch(const Batch& b, int64_t rows) {
  require(b.batch == rows && b.seq_len == kSeqLen);
  require(b.tokens.size() == static_cast<std::size_t>(rows * kSeqLen) && b.targets.size() == b.tokens.size());
  for (std::size_t i = 0; i < b.tokens.size(); ++i) {
    require(b.tokens[i] >= 0 && b.tokens[i] < kVocab);
    require(b.targets[i] >= -1 && b.targets[i] < kClasses);
  }
}

bool same(const Batch& a, const Batch& b) { return a.tokens == b.tokens && a.targets == b.targets; }

// The file lives in memory; /proc/self/fd/N gives it a path to open.
const std::string& memory_file(const uint8_t* data, std::size_t size) {
  static const int fd = ::memfd_create("data_file_fuzz", 0);
  static const std::string path = "/proc/self/fd/" + std::to_string(fd);
  require(fd >= 0 && ::ftruncate(fd, 0) == 0);
  for (std::size_t written = 0; written < size;) {
    const ssize_t n = ::pwrite(fd, data + written, size - written, static_cast<off_t>(written));
    require(n > 0);
    written += static_cast<std::size_t>(n);
  }
  return path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  const std::string& path = memory_file(data, size);
  const bool shuffle = size % 2 == 1;  // both orders, from the same corpus
  try {
    DataFile file(path, kVocab, kClasses, kSeqLen, shuffle);
    require(file.size() >= 1);
    check_batch(file.rows(0, file.size()), file.size());

    // Across more than one epoch: save the position and the generator part
    // way, then a copy restored there must draw the same batches.
    Generator gen(size);
    const int64_t rows = 1 + static_cast<int64_t>(size % 5);
    check_batch(file.sample(rows, gen), rows);
    const DataFile::Position saved = *file.position();
    const Generator::State state = gen.state();
    DataFile restored = file;
    const Batch next = file.sample(rows, gen), after = file.sample(2 * rows + file.size(), gen);
    check_batch(next, rows);
    check_batch(after, 2 * rows + file.size());
    Generator regen(0);
    regen.set_state(state);
    restored.set_position(saved);
    require(same(restored.sample(rows, regen), next));
    require(same(restored.sample(2 * rows + file.size(), regen), after));
  } catch (const headlab::train::UsageError&) {
    return 0;  // a clean rejection
  }
  return 0;
}
