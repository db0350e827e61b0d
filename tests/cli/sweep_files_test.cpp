// A sweep reads back files of its runs' folders: a finished run's heads.json
// (sweep --resume, --collect) and a failed run's last line of stdout.log. A
// FIFO planted at either is refused at once and named, never waited on: the
// sweep blocks its stop signals, so a wait there would last for good (each
// command runs under a deadline, so a hang fails the test instead of
// stalling it).
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <string>
#include <vector>

#include "tests/cli/fixtures.h"

namespace headlab::cli_test {
namespace {

namespace fs = std::filesystem;

// A finished sweep of two tiny runs, h2-s0 and h2-s1, in `dir`.
void two_run_sweep(const std::string& cwd, const std::string& dir) {
  std::vector<std::string> args = {"sweep", "--seeds", "0-1", "--jobs", "1", "--out", dir};
  for (const std::string& flag : tiny({{"--steps", "2"}, {"--threads", "-"}})) args.push_back(flag);
  const RunResult r = run_headlab(args, cwd);
  ASSERT_EQ(r.exit_code, 0) << r.describe();
}

void replace_by_fifo(const std::string& path) {
  fs::remove(path);
  ASSERT_EQ(::mkfifo(path.c_str(), 0644), 0) << path;
}

// --resume reads a finished run's heads.json: a FIFO there is no result, so
// the run is run again (its `train --resume` writes its analysis anew).
TEST(SweepFiles, AFifoAtAFinishedRunsHeadsJsonIsRefusedAndTheRunRunAgain) {
  TempDir cwd;
  const std::string sweep = cwd / "sweep", heads = sweep + "/h2-s0/heads.json";
  two_run_sweep(cwd.path(), sweep);
  replace_by_fifo(heads);
  const RunResult r = run_headlab({"sweep", "--resume", sweep}, cwd.path(), 60);
  ASSERT_FALSE(r.timed_out) << "the sweep waited on the FIFO at " << heads;
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_NE(r.err.find("cannot read " + heads + ": it is not a regular file (a pipe or a device)"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("running h2-s0 again"), std::string::npos) << r.err;
  EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(heads))) << "the run's analysis was written again";
}

// A run that fails has the last line of its stdout.log quoted: a FIFO there
// (which its child cannot write either) is named instead.
TEST(SweepFiles, AFifoAtAFailedRunsLogIsNamedNotWaitedOn) {
  TempDir cwd;
  const std::string sweep = cwd / "sweep", log = sweep + "/h2-s1/stdout.log";
  two_run_sweep(cwd.path(), sweep);
  fs::remove(sweep + "/h2-s1/heads.json");  // not finished: --resume starts it
  replace_by_fifo(log);
  const RunResult r = run_headlab({"sweep", "--resume", sweep}, cwd.path(), 60);
  ASSERT_FALSE(r.timed_out) << "the sweep waited on the FIFO at " << log;
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_NE(r.err.find(log + " is not a regular file (a pipe or a device)"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("1 of 2 runs failed"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace headlab::cli_test
