// Shared pieces of the CLI tests: temporary folders, the tiny model every
// test trains, a trained run to read from, and byte-level access to files.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/cli/subprocess.h"

namespace headlab::cli_test {

// A fresh folder under the system's temporary folder, removed with everything
// in it when this goes out of scope.
class TempDir {
 public:
  TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir();
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// The flags of the tiny model the tests train (well under a second):
// first-prev-pair, d_model 16, batch 16, eval batch 32, 20 steps, no head
// analysis during training, one thread. `changes` edit them: {"--steps", "50"}
// replaces a flag's value or adds the flag, "" adds a flag without a value
// (--force), "-" removes the flag. (CLI11 rejects a repeated flag, so tests
// must change flags rather than append them.)
std::vector<std::string> tiny(const std::vector<std::pair<std::string, std::string>>& changes = {});
// train --out OUT and the tiny flags with `changes`.
std::vector<std::string> train_command(const std::string& out,
                                       const std::vector<std::pair<std::string, std::string>>& changes = {});

// The CLI's promise for a failure: exit status `status` (not a signal or a
// hang), exactly one line on stderr that starts with "headlab" and contains
// every string of `mentions`, and none of the marks of a crash or of an
// internal message leaking out (std::, what(), sanitizer reports).
::testing::AssertionResult clean_failure(const RunResult& r, int status, const std::vector<std::string>& mentions);

// A finished tiny run (20 steps), trained once per build of headlab and
// shared by the tests that only read it. Do not write into it: copy it.
const std::string& shared_run();

// Files.
std::string read_bytes(const std::string& path);
void write_bytes(const std::string& path, const std::string& bytes);
bool is_empty_dir(const std::string& path);
// name -> size and modification time of every file under `dir`, to check that
// a failed command left a folder exactly as it was.
std::map<std::string, std::string> snapshot(const std::string& dir);
void copy_dir(const std::string& from, const std::string& to);

// The JSON document a report.html or sweep.html embeds (html_page.h: '<',
// '>', '&' \u-escaped); null when the page holds none.
nlohmann::json page_data(const std::string& html);

// metrics.jsonl as JSON objects, each without the timing field tokens_per_s
// (the only field that may differ between two identical runs).
std::vector<nlohmann::json> metrics_without_timing(const std::string& run_dir);

// A safetensors file taken apart, to be edited and written back: the header
// JSON in file order and the raw data buffer.
struct RawSafetensors {
  nlohmann::ordered_json header;
  std::string data;

  static RawSafetensors read(const std::string& path);
  std::string bytes() const;  // serialized with the right header length
  // A metadata JSON string (e.g. "model"), parsed / replaced.
  nlohmann::json meta_json(const std::string& key) const;
  void set_meta_json(const std::string& key, const nlohmann::json& value);
  // The raw bytes of one tensor.
  std::string tensor_bytes(const std::string& name) const;
  // Drops a tensor and its bytes (later offsets move down).
  void remove(const std::string& name);
  // Appends a tensor at the end of the data.
  void add(const std::string& name, const std::string& dtype, const std::vector<int64_t>& shape,
           const std::string& bytes);
};

// Every tensor of a checkpoint, name -> raw bytes (dtype and shape included
// in the key's value prefix), for byte-for-byte comparisons.
std::map<std::string, std::string> tensors_of(const std::string& checkpoint);

// Polls `ready` every millisecond until it holds (true) or `timeout_s` pass (false).
bool wait_until(const std::function<bool()>& ready, double timeout_s = 60);

// Whether process `pid` has a handler of its own for `sig` (/proc's SigCgt):
// a test that signals a child waits for this, not for a fixed time, which a
// slow start (a sanitizer build) outlasts.
bool catches_signal(pid_t pid, int sig);


// The "step" stored in a checkpoint's metadata.
int64_t checkpoint_step(const std::string& checkpoint);

}  // namespace headlab::cli_test
