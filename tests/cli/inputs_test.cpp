// Inputs that are not plain files: a named pipe (FIFO) or a process
// substitution `<(cmd)` is read where the command reads its input once (eval
// --data, --config); a run's own files (--data, --eval-data), which --resume,
// eval and analyze read again, must be regular files; a FIFO with no writer
// is waited for, as cat waits, but a stop signal ends the wait (exit 128 +
// signal), in a sweep too, which blocks its stop signals. A binary file given
// as --data is refused at its first byte, in little memory.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <thread>

#include "tests/cli/fixtures.h"

namespace headlab::cli_test {
namespace {

namespace fs = std::filesystem;

constexpr const char* kLines = "{\"tokens\": [1, 2, 3, 4]}\n{\"tokens\": [4, 3, 2, 1, 0]}\n";

// `headlab ARGS...` as bash runs it, so that ARGS may hold `<(cmd)`.
RunResult run_in_bash(const std::string& args, const std::string& cwd) {
  Child shell("/bin/bash", {"-c", "'" + headlab_path() + "' " + args}, cwd, cwd);
  return shell.wait(60);
}

TEST(Inputs, APipeReadOnceIsRead) {
  TempDir dir;
  write_bytes(dir / "data.jsonl", kLines);
  const RunResult eval = run_in_bash("eval '" + shared_run() + "' --data <(cat data.jsonl) --json", dir.path());
  ASSERT_EQ(eval.exit_code, 0) << eval.describe();
  EXPECT_EQ(nlohmann::json::parse(eval.out).at("sequences"), 2);
  const RunResult train = run_in_bash(
      "train --config <(echo '{\"steps\": 2, \"d-model\": 8, \"eval-batch\": 8, \"threads\": 1}') --out run", dir.path());
  ASSERT_EQ(train.exit_code, 0) << train.describe();
  EXPECT_EQ(nlohmann::json::parse(read_bytes(dir / "run/config.json")).at("steps"), 2);
}

TEST(Inputs, AFifoIsReadAsItsWriterWritesIt) {
  TempDir dir;
  const std::string fifo = dir / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  std::thread writer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    std::ofstream(fifo, std::ios::binary) << kLines;
  });
  const RunResult eval = run_headlab({"eval", shared_run(), "--data", fifo, "--json"}, dir.path(), 60);
  writer.join();
  ASSERT_EQ(eval.exit_code, 0) << eval.describe();
  EXPECT_EQ(nlohmann::json::parse(eval.out).at("sequences"), 2);
}

// A run names its --data and --eval-data in config.json and its checkpoint:
// a pipe there would be empty, or another stream, when --resume, eval or
// analyze read it again. Refused at once, never waited on.
TEST(Inputs, ARunsFilesMustBeRegularFiles) {
  TempDir dir;
  write_bytes(dir / "data.jsonl", kLines);
  const std::string fifo = dir / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  const std::vector<std::pair<std::string, std::string>> sizes{{"--vocab", "8"}, {"--seq-len", "6"}};
  auto with = [&](std::vector<std::pair<std::string, std::string>> changes) {
    changes.insert(changes.end(), sizes.begin(), sizes.end());
    return train_command(dir / "out", changes);
  };
  EXPECT_TRUE(clean_failure(run_headlab(with({{"--data", fifo}}), dir.path(), 20), 2,
                            {"--data " + fifo, "not a regular file", "resumed"}));
  EXPECT_TRUE(clean_failure(run_headlab(with({{"--data", dir / "data.jsonl"}, {"--eval-data", fifo}}), dir.path(), 20),
                            2, {"--eval-data " + fifo, "not a regular file"}));
  const RunResult piped = run_in_bash("train --data <(cat data.jsonl) --vocab 8 --seq-len 6 --steps 2 --out out", dir.path());
  EXPECT_TRUE(clean_failure(piped, 2, {"--data /dev/fd/", "not a regular file"}));
  EXPECT_FALSE(fs::exists(dir / "out"));
}

// --resume of a finished run reads its heads.json to see whether the final
// analysis was written: a FIFO planted there is no analysis, read at once,
// never waited on; writing the analysis then refuses to replace the FIFO.
TEST(Inputs, AFifoAtAFinishedRunsHeadsJsonIsNotWaitedOnByResume) {
  TempDir dir;
  const RunResult first = run_headlab(train_command(dir / "run", {{"--steps", "2"}}), dir.path(), 60);
  ASSERT_EQ(first.exit_code, 0) << first.describe();
  const std::string heads = dir / "run/heads.json";
  fs::remove(heads);
  ASSERT_EQ(::mkfifo(heads.c_str(), 0644), 0);
  const RunResult resumed = run_headlab({"train", "--resume", dir / "run"}, dir.path(), 60);
  ASSERT_FALSE(resumed.timed_out) << "--resume waited on the FIFO at " << heads;
  EXPECT_TRUE(clean_failure(resumed, 1, {heads, "FIFO"}));
  EXPECT_NE(resumed.out.find("no steps left to train (at step 2 of --steps 2)"), std::string::npos) << resumed.out;
}

// The files that hold the wait's note.
bool any_file_mentions(const std::string& dir, const std::string& text) {
  for (const auto& entry : fs::directory_iterator(dir))
    if (read_bytes(entry.path().string()).find(text) != std::string::npos) return true;
  return false;
}

struct Waiting {
  std::string name;
  std::vector<std::string> args;  // "{fifo}" is the FIFO
  int signal;
};

std::ostream& operator<<(std::ostream& os, const Waiting& w) { return os << w.name; }

class FifoWithoutWriter : public ::testing::TestWithParam<Waiting> {};

TEST_P(FifoWithoutWriter, WaitsAndSaysSoUntilAStopSignal) {
  const Waiting& w = GetParam();
  TempDir dir, capture;
  const std::string fifo = dir / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  std::vector<std::string> args;
  for (const std::string& a : w.args)
    args.push_back(a == "{fifo}" ? fifo : a == "{run}" ? shared_run() : a == "{out}" ? dir / "out" : a);
  Child child(headlab_path(), args, dir.path(), capture.path());
  ASSERT_TRUE(wait_until([&] { return any_file_mentions(capture.path(), "waiting for"); }, 30))
      << "no note that it waits on " << fifo;
  child.signal(w.signal);
  const RunResult r = child.wait(20);
  EXPECT_EQ(r.exit_code, 128 + w.signal) << r.describe();
  EXPECT_NE(r.err.find(fifo), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir / "out"));
}

INSTANTIATE_TEST_SUITE_P(
    Inputs, FifoWithoutWriter,
    ::testing::Values(Waiting{"eval_data", {"eval", "{run}", "--data", "{fifo}"}, SIGINT},
                      Waiting{"train_config", {"train", "--config", "{fifo}", "--out", "{out}"}, SIGTERM},
                      // A sweep blocks its stop signals for its whole life.
                      Waiting{"sweep_config", {"sweep", "--config", "{fifo}", "--seeds", "0", "--out", "{out}"}, SIGTERM},
                      Waiting{"sweep_config_sigint", {"sweep", "--config", "{fifo}", "--seeds", "0", "--out", "{out}"},
                              SIGINT}),
    [](const ::testing::TestParamInfo<Waiting>& p) { return p.param.name; });

// A binary file given as --data (a checkpoint by mistake, a large file of
// zeros) is refused at its first byte: not read up to a line bound of up to
// 1 GiB first, which took 2 GB of memory.
TEST(Inputs, ABinaryDataFileIsRefusedAtItsFirstByteInLittleMemory) {
  TempDir dir;
  const std::string zeros = dir / "zeros.bin";
  write_bytes(zeros, "");
  fs::resize_file(zeros, std::uintmax_t{400} << 20);  // sparse: no disk used
  const RunResult r = run_headlab(train_command(dir / "out", {{"--data", zeros}}), dir.path(), 60);
  EXPECT_TRUE(clean_failure(r, 2, {"zeros.bin:1", "expected a JSON object", "byte 0x00"}));
  // Against headlab's own footprint, which a sanitized build puts near 100 MB before it reads a byte.
  const RunResult idle = run_headlab({"--version"}, dir.path());
  EXPECT_LT(r.peak_rss_kib, idle.peak_rss_kib + 64 * 1024)
      << "read before it was refused (headlab --version: " << idle.peak_rss_kib << " KiB)";
  const RunResult ck = run_headlab(train_command(dir / "out", {{"--data", shared_run() + "/checkpoint.safetensors"}}),
                                   dir.path(), 60);
  EXPECT_TRUE(clean_failure(ck, 2, {"checkpoint.safetensors:1", "expected a JSON object"}));
  const RunResult eval = run_headlab({"eval", shared_run(), "--data", "/dev/zero"}, dir.path(), 60);
  EXPECT_TRUE(clean_failure(eval, 2, {"/dev/zero:1", "byte 0x00"}));
}

}  // namespace
}  // namespace headlab::cli_test
