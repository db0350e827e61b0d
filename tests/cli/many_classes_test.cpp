// A model of many output classes (first-prev-pair has vocab^2: 40,000 at
// --vocab 200), whose head analysis scores every position against every class
// in each of its dozens of forward passes: train says so before it starts,
// and scoring the logits takes no float64 copy of them.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "tests/cli/fixtures.h"

namespace headlab::cli_test {
namespace {

namespace fs = std::filesystem;

TEST(ManyClasses, TrainWarnsUpFrontThatTheAnalysisWillBeSlow) {
  TempDir cwd, capture;
  // The analysis at its end would take half a minute: the warning comes
  // before the first step, and the run is killed once it has been seen.
  Child child(headlab_path(),
              train_command(cwd / "run", {{"--vocab", "200"}, {"--seq-len", "200"}, {"--d-model", "8"},
                                          {"--batch", "8"}, {"--eval-batch", "16"}, {"--steps", "2"}}),
              cwd.path(), capture.path());
  // Until the warning or, after it, the run's first line on stdout.
  std::string err, out;
  const bool started = wait_until(
      [&] {
        for (const auto& entry : fs::directory_iterator(capture.path()))
          (entry.path().extension() == ".err" ? err : out) = read_bytes(entry.path().string());
        return err.find('\n') != std::string::npos || out.find('\n') != std::string::npos || child.finished();
      },
      60);
  ASSERT_TRUE(started) << err;
  // Read again: the loop may have read stderr just before the warning and
  // stdout just after the line that follows it.
  for (const auto& entry : fs::directory_iterator(capture.path()))
    if (entry.path().extension() == ".err") err = read_bytes(entry.path().string());
  EXPECT_EQ(err.rfind("headlab train: warning: every head analysis", 0), 0u) << err;
  for (const char* part : {"16 x 200 positions x 40000 output classes (--vocab 200 squared)", "512 MB of logits",
                           "a smaller --vocab, --eval-batch or --seq-len"})
    EXPECT_NE(err.find(part), std::string::npos) << part << " in " << err;
}

TEST(ManyClasses, ScoringLogitsTakesNoFloat64CopyOfThem) {
  TempDir cwd;
  const std::string run = cwd / "run";
  const RunResult trained = run_headlab(train_command(run, {{"--vocab", "60"}, {"--seq-len", "64"}, {"--d-model", "8"},
                                                            {"--batch", "4"}, {"--eval-batch", "4"}, {"--steps", "1"}}),
                                        cwd.path());
  ASSERT_EQ(trained.exit_code, 0) << trained.describe();
  const RunResult small = run_headlab({"eval", run, "--batch", "8", "--threads", "1"}, cwd.path());
  const RunResult big = run_headlab({"eval", run, "--batch", "64", "--threads", "1"}, cwd.path());
  ASSERT_EQ(small.exit_code, 0) << small.describe();
  ASSERT_EQ(big.exit_code, 0) << big.describe();
  // The 56 more sequences' float32 logits: 56 x 64 positions x 3600 classes.
  const long logits_kib = 56L * 64 * 3600 * 4 / 1024;
  // The logits and the forward's copy of them; a float64 copy would add two more.
  EXPECT_LT(big.peak_rss_kib - small.peak_rss_kib, 3 * logits_kib)
      << big.peak_rss_kib << " KiB against " << small.peak_rss_kib << " KiB";
  EXPECT_GT(big.peak_rss_kib - small.peak_rss_kib, logits_kib) << "the comparison proves nothing";
}

}  // namespace
}  // namespace headlab::cli_test
