// libFuzzer target for the checkpoint loader (train/checkpoint.cpp) and what
// the CLI builds from a checkpoint (train/session.cpp).
//
// Every input is a checkpoint file. It goes the way a user's file goes:
//   - eval (and train --init): read_checkpoint, a model of the checkpoint's
//     architecture, load_weights;
//   - analyze and train --resume: read_checkpoint, a Session from it (config,
//     task, model, optimizer state, data position), then one evaluation and
//     one training step from the restored state.
// Any exception is a clean rejection (the CLI prints it and exits 1 or 2);
// only crashes, sanitizer reports, leaks, OOMs and timeouts are bugs.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <string>
#include <string_view>

#include "core/threads.h"
#include "train/checkpoint.h"
#include "train/session.h"

namespace {

using namespace headlab;

// The data file of every checkpoint trained on --data: the one the seeds in
// corpus/checkpoint were trained on (vocab 4, seq-len 4), so their saved
// positions fit it. A path taken from the input could name any file
// (/dev/zero, /dev/stdin): reading that is not the loader's business.
constexpr std::string_view kDataFile =
    "{\"tokens\": [1, 2, 3]}\n"
    "{\"tokens\": [3, 2, 1, 0]}\n"
    "{\"tokens\": [0, 1], \"targets\": [1, -1]}\n"
    "{\"tokens\": [2]}\n";

// kDataFile in memory; /proc/self/fd/N gives it a path to open.
const std::string& data_file_path() {
  static const std::string path = [] {
    const int fd = ::memfd_create("checkpoint_fuzz_data", 0);
    if (fd < 0 || ::write(fd, kDataFile.data(), kDataFile.size()) != static_cast<ssize_t>(kDataFile.size()))
      std::abort();
    return "/proc/self/fd/" + std::to_string(fd);
  }();
  return path;
}

// A valid config may ask for any batch sizes the machine's memory allows; the
// time they take says nothing about the loader, so they are capped as
// `analyze --batch` would (training and evaluation still run).
constexpr int64_t kMaxBatch = 8;

void eval_path(const train::Checkpoint& ck) { (void)train::load_model(ck, "fuzz"); }

void session_path(train::Checkpoint& ck) {
  train::TrainConfig& config = ck.info.config;
  if (!config.data.empty()) config.data = data_file_path();
  config.batch = std::min(config.batch, kMaxBatch);
  config.eval_batch = std::min(config.eval_batch, kMaxBatch);
  train::Session session(ck);
  (void)train::evaluate(session.model(), session.eval_batch());
  (void)session.step();
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  core::set_num_threads(1);  // the same work every run, and no thread pool to wait on
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  try {
    train::Checkpoint ck = train::read_checkpoint({data, size}, "fuzz.safetensors");
    eval_path(ck);
    session_path(ck);
  } catch (const std::exception&) {
    return 0;  // a clean rejection
  }
  return 0;
}
