// A reader that went away (`headlab eval RUN | head -1`) is no failure of
// the command's: every command finishes the files it writes, says nothing,
// and exits 128 + SIGPIPE, as a Unix tool killed by SIGPIPE does, without
// being killed by it (QA25: eval and analyze said "error: cannot write to
// standard output" and exited 1). A write that fails otherwise (/dev/full)
// stays an error: integrity_test's Stdout.AFailedWriteIsAnError.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <string>
#include <vector>

#include "tests/cli/fixtures.h"

namespace headlab::cli_test {
namespace {

namespace fs = std::filesystem;

// A pipe whose read end is closed before the command starts: its every
// write to stdout fails with EPIPE (or would raise SIGPIPE), whatever the
// timing, where `| true` may or may not have exited by then.
class ReaderGone {
 public:
  ReaderGone() {
    int fds[2];
    EXPECT_EQ(::pipe(fds), 0);
    ::close(fds[0]);
    write_end_ = fds[1];
  }
  ~ReaderGone() { ::close(write_end_); }
  ReaderGone(const ReaderGone&) = delete;
  ReaderGone& operator=(const ReaderGone&) = delete;

  // headlab ARGS in `cwd` with that pipe as its stdout (stderr captured).
  RunResult run(const std::vector<std::string>& args, const std::string& cwd) const {
    std::string command = "exec '" + headlab_path() + "'";
    for (const std::string& a : args) command += " '" + a + "'";
    command += " >&" + std::to_string(write_end_);
    Child child("/bin/bash", {"-c", command}, cwd, cwd);
    return child.wait(120);
  }

 private:
  int write_end_ = -1;
};

// Exit 128 + SIGPIPE, not killed by the signal, and nothing on stderr.
::testing::AssertionResult quiet_sigpipe_exit(const RunResult& r) {
  if (r.signal != 0 || r.exit_code != 128 + SIGPIPE || !r.err.empty())
    return ::testing::AssertionFailure() << "wanted a quiet exit " << 128 + SIGPIPE << ": " << r.describe();
  return ::testing::AssertionSuccess();
}

TEST(ClosedStdout, EvalWritesItsDumpsAndExitsQuietly) {
  TempDir cwd;
  const ReaderGone stdout_pipe;
  for (const char* json : {"", "--json"}) {
    const std::string logits = cwd / (std::string("logits") + json + ".safetensors");
    std::vector<std::string> args = {"eval", shared_run(), "--dump-logits", logits, "--dump-grads", cwd / "grads.safetensors"};
    if (*json != '\0') args.emplace_back(json);
    fs::remove(cwd / "grads.safetensors");
    EXPECT_TRUE(quiet_sigpipe_exit(stdout_pipe.run(args, cwd.path()))) << json;
    // Whole files, as a reader finds them.
    EXPECT_FALSE(RawSafetensors::read(logits).tensor_bytes("logits").empty()) << json;
    EXPECT_FALSE(RawSafetensors::read(cwd / "grads.safetensors").header.empty()) << json;
  }
}

TEST(ClosedStdout, AnalyzeWritesItsFilesAndExitsQuietly) {
  TempDir cwd;
  const std::string run = cwd / "run";
  copy_dir(shared_run(), run);
  fs::remove(run + "/heads.json");
  fs::remove(run + "/report.html");
  const ReaderGone stdout_pipe;
  EXPECT_TRUE(quiet_sigpipe_exit(stdout_pipe.run({"analyze", run}, cwd.path())));
  EXPECT_EQ(nlohmann::json::parse(read_bytes(run + "/heads.json")).at("step"), checkpoint_step(run + "/checkpoint.safetensors"));
  EXPECT_NE(read_bytes(run + "/report.html").find("</html>"), std::string::npos);
  // And what --json would have printed is in the file all the same.
  fs::remove(run + "/heads.json");
  EXPECT_TRUE(quiet_sigpipe_exit(stdout_pipe.run({"analyze", run, "--json"}, cwd.path())));
  EXPECT_TRUE(fs::exists(run + "/heads.json"));
}

TEST(ClosedStdout, ASweepWritesItsSummaryAndExitsQuietly) {
  TempDir cwd;
  const std::string sweep = cwd / "sweep";
  std::vector<std::string> args = {"sweep", "--seeds", "0", "--jobs", "1", "--out", sweep};
  for (const std::string& flag : tiny({{"--steps", "2"}, {"--threads", "-"}})) args.push_back(flag);
  const ReaderGone stdout_pipe;
  const RunResult r = stdout_pipe.run(args, cwd.path());
  // Its progress goes to stderr, as ever; no error among it.
  EXPECT_EQ(r.exit_code, 128 + SIGPIPE) << r.describe();
  EXPECT_EQ(r.err.find("error"), std::string::npos) << r.describe();
  EXPECT_EQ(nlohmann::json::parse(read_bytes(sweep + "/sweep.json")).at("runs").size(), 1u);
  EXPECT_TRUE(fs::exists(sweep + "/sweep.html"));
}

// One policy for every command: those that only print, and help and version.
TEST(ClosedStdout, EveryCommandThatPrintsExitsQuietly) {
  TempDir cwd;
  const ReaderGone stdout_pipe;
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"tasks"},
           {"gradcheck", "--filter", "softmax"},
           {"bench", "--warmup-steps", "0", "--bench-steps", "1", "--runs", "1", "--threads", "1"},
           {"eval", "--help"},
           {"--help"},
           {"--version"}})
    EXPECT_TRUE(quiet_sigpipe_exit(stdout_pipe.run(args, cwd.path()))) << args[0] << " " << args.back();
}

}  // namespace
}  // namespace headlab::cli_test
