// --log-every and --analyze-every are honoured each on its own: a step that
// only analyzes writes a metrics line of its own (its step and the head
// analysis, no loss), and train.log shows it under a heading.
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
  std::vector<int64_t> logged, analyzed, steps;
  for (const nlohmann::json& line : metrics_without_timing(cwd / "run")) {
    const auto step = line.at("step").get<int64_t>();
    steps.push_back(step);
    if (line.contains("loss")) logged.push_back(step);
    if (line.contains("heads")) analyzed.push_back(step);
  }
  EXPECT_EQ(logged, (std::vector<int64_t>{5, 10}));
  EXPECT_EQ(analyzed, (std::vector<int64_t>{3, 6, 9}));
  EXPECT_EQ(steps, (std::vector<int64_t>{3, 5, 6, 9, 10})) << "one line per step, in order";
  const std::string log = read_bytes(cwd / "run/train.log");
  EXPECT_NE(log.find("step      3  head analysis"), std::string::npos) << log;
  EXPECT_NE(log.find("L0H0"), std::string::npos) << log;
}

}  // namespace
}  // namespace headlab::cli_test
