// Exactness, as the user sees it in the run folder:
//  - the same seed and thread count give a bit-identical checkpoint and
//    metrics.jsonl; the one field allowed to differ is the timing tokens_per_s;
//  - a run stopped at a logged step and resumed equals the uninterrupted run
//    (the signal tests cover stops at arbitrary steps);
//  - 1 and 2 threads sum in different orders (at 2 a step's batch runs as 2
//    slices side by side, one per thread), so they are promised to agree only
//    within a tolerance: final losses within 1e-4 (relative) after 40 steps;
//    2 threads give the bits of --micro-batches 2 at 1 thread, which
//    train.log says.
#include <gtest/gtest.h>

#include <cmath>
#include <utility>
#include <vector>

#include "core/gemm.h"
#include "tests/cli/fixtures.h"

namespace headlab::cli_test {
namespace {

TEST(Exactness, SameSeedAndThreadsGiveBitIdenticalRuns) {
  TempDir dir;
  // Two threads, head analysis in the metrics: the parts most likely to drift.
  const std::vector<std::pair<std::string, std::string>> flags = {
      {"--threads", "2"}, {"--analyze-every", "10"}, {"--log-every", "5"}, {"--seed", "7"}};
  for (const char* name : {"a", "b"}) {
    const RunResult r = run_headlab(train_command(dir / name, flags), dir.path());
    ASSERT_EQ(r.exit_code, 0) << r.describe();
  }
  EXPECT_EQ(read_bytes(dir / "a/checkpoint.safetensors"), read_bytes(dir / "b/checkpoint.safetensors"));
  const auto a = metrics_without_timing(dir / "a"), b = metrics_without_timing(dir / "b");
  ASSERT_EQ(a.size(), 4u);
  EXPECT_TRUE(a[1].contains("heads")) << "the step-10 line carries the head analysis: " << a[1].dump();
  EXPECT_EQ(a, b);
  EXPECT_EQ(read_bytes(dir / "a/heads.json"), read_bytes(dir / "b/heads.json"));
}

TEST(Exactness, ResumedRunEqualsTheUninterruptedOne) {
  TempDir dir;
  const std::vector<std::pair<std::string, std::string>> flags = {{"--log-every", "5"}, {"--analyze-every", "10"}};
  auto whole = flags, half = flags;
  whole.emplace_back("--steps", "20");
  half.emplace_back("--steps", "10");
  ASSERT_EQ(run_headlab(train_command(dir / "whole", whole), dir.path()).exit_code, 0);
  ASSERT_EQ(run_headlab(train_command(dir / "resumed", half), dir.path()).exit_code, 0);
  const RunResult r = run_headlab({"train", "--resume", dir / "resumed", "--steps", "20"}, dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.describe();

  // Byte for byte: tensors, optimizer state and metadata (the config too).
  EXPECT_EQ(read_bytes(dir / "resumed/checkpoint.safetensors"), read_bytes(dir / "whole/checkpoint.safetensors"));
  EXPECT_EQ(metrics_without_timing(dir / "resumed"), metrics_without_timing(dir / "whole"));
}

// The same in bf16 (--precision bf16, kept by --resume from config.json):
// exact within the precision, and not the f32 run's numbers.
TEST(Exactness, ResumedBf16RunEqualsTheUninterruptedOne) {
  if (!core::cpu_has_native_bf16()) GTEST_SKIP() << "this CPU has no bf16 units (AVX512_BF16 or AMX-BF16)";
  TempDir dir;
  const std::vector<std::pair<std::string, std::string>> flags = {{"--log-every", "5"}, {"--precision", "bf16"}};
  auto whole = flags, half = flags, f32 = flags;
  whole.emplace_back("--steps", "20");
  half.emplace_back("--steps", "10");
  f32 = whole;
  f32[1].second = "f32";
  for (const auto& [name, args] : {std::pair{"whole", whole}, {"resumed", half}, {"f32", f32}})
    ASSERT_EQ(run_headlab(train_command(dir / name, args), dir.path()).exit_code, 0) << name;
  const RunResult r = run_headlab({"train", "--resume", dir / "resumed", "--steps", "20"}, dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(read_bytes(dir / "resumed/checkpoint.safetensors"), read_bytes(dir / "whole/checkpoint.safetensors"));
  EXPECT_EQ(metrics_without_timing(dir / "resumed"), metrics_without_timing(dir / "whole"));
  EXPECT_NE(metrics_without_timing(dir / "f32").back().at("loss"), metrics_without_timing(dir / "whole").back().at("loss"));
}

double final_eval_loss(const std::string& run) { return metrics_without_timing(run).back().at("eval_loss"); }

TEST(Exactness, OneAndTwoThreadsAgreeWithinTolerance) {
  TempDir dir;
  for (const char* threads : {"1", "2"}) {
    const RunResult r =
        run_headlab(train_command(dir / threads, {{"--threads", threads}, {"--steps", "40"}, {"--lr", "3e-3"},
                                                  {"--d-model", "32"}, {"--batch", "64"}}),
                    dir.path());
    ASSERT_EQ(r.exit_code, 0) << r.describe();
  }
  const double one = final_eval_loss(dir / "1"), two = final_eval_loss(dir / "2");
  EXPECT_NEAR(one, two, 1e-4 * std::abs(one));
  const double train_one = metrics_without_timing(dir / "1").back().at("loss");
  const double train_two = metrics_without_timing(dir / "2").back().at("loss");
  EXPECT_NEAR(train_one, train_two, 1e-4 * std::abs(train_one));
}

TEST(Exactness, TwoThreadsTrainTheBitsOfTwoSlicesOnOneAndTheLogSaysSo) {
  TempDir dir;
  const std::vector<std::pair<std::string, std::string>> flags = {{"--steps", "20"}, {"--log-every", "5"}};
  auto lanes = flags, in_turn = flags;
  lanes.emplace_back("--threads", "2");
  in_turn.emplace_back("--threads", "1");
  in_turn.emplace_back("--micro-batches", "2");
  ASSERT_EQ(run_headlab(train_command(dir / "lanes", lanes), dir.path()).exit_code, 0);
  ASSERT_EQ(run_headlab(train_command(dir / "in_turn", in_turn), dir.path()).exit_code, 0);
  EXPECT_EQ(metrics_without_timing(dir / "lanes"), metrics_without_timing(dir / "in_turn"));
  EXPECT_NE(read_bytes(dir / "lanes/train.log")
                .find("each step: its 16 sequences as 2 slices side by side, one per thread (the bits of "
                      "--micro-batches 2 --threads 1)"),
            std::string::npos)
      << read_bytes(dir / "lanes/train.log");
}

}  // namespace
}  // namespace headlab::cli_test
