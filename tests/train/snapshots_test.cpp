// Snapshot files by name: their steps, the one of a step (or a message that
// lists the steps there are) and --keep-snapshots' pruning.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "train/errors.h"
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

}  // namespace
}  // namespace headlab::train
