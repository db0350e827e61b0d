// Snapshot files by name: their steps, the one of a step (or a message that
// lists the steps there are) and --keep-snapshots' pruning; the report's
// views of the snapshots, computed in f32 under any precision.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/gemm.h"
#include "tests/precision.h"
#include "train/errors.h"
#include "train/session.h"
#include "train/snapshots.h"

namespace headlab::train {
namespace {

namespace fs = std::filesystem;

struct RunDir {
  fs::path path = fs::temp_directory_path() / ("snapshots_test_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
                                               "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
  RunDir() { fs::create_directories(path / "snapshots"); }
  ~RunDir() { fs::remove_all(path); }
  void touch(const std::string& name) const { std::ofstream(path / "snapshots" / name) << "x"; }
};

TEST(Snapshots, StepOfAFileName) {
  EXPECT_EQ(snapshot_step("step-000500.safetensors"), 500);
  EXPECT_EQ(snapshot_step("step-1234567.safetensors"), 1234567);
  for (const char* other : {"step-.safetensors", "step-12a.safetensors", "step-000500.safetensors.tmp.12",
                            "checkpoint.safetensors", "step--5.safetensors"})
    EXPECT_EQ(snapshot_step(other), -1) << other;
  EXPECT_EQ(fs::path(snapshot_path("run", 500)).filename(), "step-000500.safetensors");
}

TEST(Snapshots, FindListsTheStepsThereAreAndPruneKeepsTheNewest) {
  RunDir run;
  for (const char* name : {"step-000200.safetensors", "step-000100.safetensors", "step-000300.safetensors",
                           "step-000300.safetensors.tmp.99", "notes.txt"})
    run.touch(name);
  EXPECT_EQ(snapshot_steps(run.path.string()), (std::vector<int64_t>{100, 200, 300}));
  EXPECT_EQ(find_snapshot(run.path.string(), 200), snapshot_path(run.path.string(), 200));
  try {
    (void)find_snapshot(run.path.string(), 150);
    FAIL() << "no snapshot of step 150";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("100, 200, 300"), std::string::npos) << e.what();
  }
  prune_snapshots(run.path.string(), 2);
  EXPECT_EQ(snapshot_steps(run.path.string()), (std::vector<int64_t>{200, 300}));
  EXPECT_TRUE(fs::exists(run.path / "snapshots" / "notes.txt"));  // only snapshots are removed
}

TEST(Snapshots, ARunWithoutSnapshotsSaysHowToKeepThem) {
  RunDir run;
  fs::remove_all(run.path / "snapshots");
  try {
    (void)find_snapshot(run.path.string(), 10);
    FAIL() << "no snapshots at all";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("--snapshot-every"), std::string::npos) << e.what();
  }
}

// The slider's labels and attention are head analysis, so they are f32's
// under --precision bf16 too, exactly. Without the f32 guard the bf16
// forward changes the attention on a CPU with bf16 units, and throws on one
// without (oneDNN has no bf16 matmul there): no skip on either.
TEST(Snapshots, TheViewsAreF32sUnderBf16Precision) {
  RunDir run;
  TrainConfig c;
  c.model.d_model = 16;
  c.batch = 8;
  c.eval_batch = 8;
  Session s(c);
  s.step();
  s.save(snapshot_path(run.path.string(), s.steps_done()));
  auto views_in = [&](core::GemmPrecision precision) {
    const headlab::test::PrecisionScope scope(precision);
    return snapshot_views(run.path.string(), s.eval_batch(), 1);
  };
  const std::vector<analysis::SnapshotView> f32 = views_in(core::GemmPrecision::f32),
                                            bf16 = views_in(core::GemmPrecision::bf16);
  ASSERT_EQ(f32.size(), 1u);
  ASSERT_EQ(bf16.size(), 1u);
  EXPECT_EQ(bf16[0].step, f32[0].step);
  EXPECT_EQ(bf16[0].labels, f32[0].labels);
  EXPECT_EQ(bf16[0].example.tokens, f32[0].example.tokens);
  EXPECT_FALSE(f32[0].example.attention.empty());
  EXPECT_TRUE(bf16[0].example.attention == f32[0].example.attention) << "the example's attention differs in bf16";
}

}  // namespace
}  // namespace headlab::train
