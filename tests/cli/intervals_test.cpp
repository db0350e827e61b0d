// --log-every and --analyze-every are honoured each on its own: a step that
// only analyzes writes a metrics line of its own (its step and the head
// analysis, no loss), and train.log shows it under a heading. The last step,
// off the analysis grid, gets the final analysis, marked "final".
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "tests/cli/fixtures.h"

namespace headlab::cli_test {
namespace {

TEST(Intervals, LoggingAndAnalysisKeepTheirOwnSteps) {
  TempDir cwd;
  const RunResult r = run_headlab(
      train_command(cwd / "run", {{"--steps", "10"}, {"--log-every", "5"}, {"--analyze-every", "3"}}), cwd.path());
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  std::vector<int64_t> logged, analyzed, final_steps, steps;
  for (const nlohmann::json& line : metrics_without_timing(cwd / "run")) {
    const auto step = line.at("step").get<int64_t>();
    steps.push_back(step);
    if (line.contains("loss")) logged.push_back(step);
    if (line.contains("heads")) analyzed.push_back(step);
    if (line.value("final", false)) final_steps.push_back(step);
  }
  EXPECT_EQ(logged, (std::vector<int64_t>{5, 10}));
  EXPECT_EQ(analyzed, (std::vector<int64_t>{3, 6, 9, 10}));
  EXPECT_EQ(final_steps, (std::vector<int64_t>{10}));
  EXPECT_EQ(steps, (std::vector<int64_t>{3, 5, 6, 9, 10})) << "one line per step, in order";
  const std::string log = read_bytes(cwd / "run/train.log");
  EXPECT_NE(log.find("step      3  head analysis"), std::string::npos) << log;
  EXPECT_NE(log.find("L0H0"), std::string::npos) << log;
}

// A setting that can do nothing in the run it is given to is not silently
// ignored: one warning line each on stderr, and the run trains as asked.
TEST(Intervals, SettingsThatDoNothingInTheRunAreWarnedOf) {
  TempDir cwd;
  const RunResult r = run_headlab(train_command(cwd / "run", {{"--steps", "5"},
                                                             {"--keep-snapshots", "3"},
                                                             {"--warmup", "100"}}),
                                  cwd.path());
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const std::vector<std::string> lines = r.err_lines();
  ASSERT_EQ(lines.size(), 2u) << r.describe();
  EXPECT_EQ(lines[0], "headlab train: warning: --keep-snapshots 3 does nothing without --snapshot-every N: no "
                      "snapshot is taken");
  EXPECT_EQ(lines[1], "headlab train: warning: --warmup 100 outlasts the run's --steps 5: the learning rate rises "
                      "only to 5e-05, short of --lr 0.001");
  const RunResult snapshots = run_headlab(
      train_command(cwd / "snap", {{"--steps", "5"}, {"--snapshot-every", "100"}}), cwd.path());
  ASSERT_EQ(snapshots.exit_code, 0) << snapshots.describe();
  EXPECT_EQ(snapshots.err, "headlab train: warning: --snapshot-every 100 takes no snapshot in a run of --steps 5: the "
                           "first would be at step 100\n");
  // Extended past them, the same settings do something: no warning.
  const RunResult resumed = run_headlab({"train", "--resume", cwd / "snap", "--steps", "100"}, cwd.path());
  ASSERT_EQ(resumed.exit_code, 0) << resumed.describe();
  EXPECT_EQ(resumed.err, "") << resumed.describe();
}

}  // namespace
}  // namespace headlab::cli_test
