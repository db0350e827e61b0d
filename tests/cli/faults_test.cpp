// Faults during training: a non-finite loss and a checkpoint that cannot be
// written each stop the run with one clear line and exit status 1, and the
// last good checkpoint stays intact and loadable.
#include <gtest/gtest.h>
#include <sys/mount.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "tests/cli/fixtures.h"

namespace headlab::cli_test {
namespace {

namespace fs = std::filesystem;

// Every F32 value of every tensor of a checkpoint is finite.
bool all_finite(const std::string& checkpoint) {
  const RawSafetensors raw = RawSafetensors::read(checkpoint);
  for (const auto& [name, entry] : raw.header.items()) {
    if (name == "__metadata__") continue;
    const std::string bytes = raw.tensor_bytes(name);
    for (std::size_t i = 0; i + 4 <= bytes.size(); i += 4) {
      float v;
      std::memcpy(&v, bytes.data() + i, 4);
      if (!std::isfinite(v)) return false;
    }
  }
  return true;
}

TEST(Faults, NonFiniteLossStopsNamingTheStepAndKeepsTheLastGoodCheckpoint) {
  TempDir dir;
  const std::string run = dir / "run";
  const RunResult r = run_headlab(
      train_command(run, {{"--lr", "1e30"}, {"--clip", "0"}, {"--checkpoint-every", "1"}, {"--log-every", "1"}, {"--steps", "50"}}),
      dir.path());
  ASSERT_TRUE(clean_failure(r, 1, {"step", "--lr"}));
  const std::string line = r.err_lines()[0];
  const auto at = line.find("at step ");
  ASSERT_NE(at, std::string::npos) << line;
  const int64_t failed = std::stoll(line.substr(at + 8));

  // The update of the failed step may already have ruined the model: then no
  // checkpoint exists at all; any that exists is finite and evaluates finitely.
  const std::string ck = run + "/checkpoint.safetensors";
  if (fs::exists(ck)) {
    EXPECT_LT(checkpoint_step(ck), failed) << "the checkpoint is of a step before the failure";
    EXPECT_TRUE(all_finite(ck)) << "the kept checkpoint holds no NaN or Inf";
    const RunResult loaded = run_headlab({"eval", ck, "--json"}, dir.path());
    ASSERT_EQ(loaded.exit_code, 0) << loaded.describe();
    EXPECT_TRUE(std::isfinite(nlohmann::json::parse(loaded.out)["loss"].get<double>())) << loaded.out;
  } else {
    EXPECT_NE(r.out.find("no checkpoint had been written"), std::string::npos) << r.describe();
  }
  for (const auto& line_json : metrics_without_timing(run))
    EXPECT_LT(line_json.at("step").get<int64_t>(), failed) << "no metrics for the failed step";
}

TEST(Faults, NonFiniteLossBeforeAnyCheckpointSaysNoneWasWritten) {
  TempDir dir;
  const std::string run = dir / "run";
  const RunResult r = run_headlab(train_command(run, {{"--lr", "1e30"}, {"--clip", "0"}, {"--steps", "50"}}), dir.path());
  EXPECT_TRUE(clean_failure(r, 1, {"step"}));
  EXPECT_FALSE(fs::exists(run + "/checkpoint.safetensors"));
  EXPECT_NE(read_bytes(run + "/train.log").find("no checkpoint"), std::string::npos)
      << "the log must not claim a checkpoint is kept: " << read_bytes(run + "/train.log");
}

// A snapshot is a whole checkpoint, and --resume goes on from the newest:
// a run that diverges after one names it, where it said "no checkpoint had
// been written yet" (and a checkpoint older than the snapshot as the one kept).
TEST(Faults, ADivergenceAfterASnapshotNamesItAsWhatResumeGoesOnFrom) {
  TempDir dir;
  const std::string run = dir / "run";
  const RunResult r = run_headlab(train_command(run, {{"--optimizer", "sgd"}, {"--lr", "30"}, {"--clip", "0"},
                                                      {"--snapshot-every", "1"}, {"--log-every", "1"},
                                                      {"--steps", "200"}}),
                                  dir.path());
  ASSERT_TRUE(clean_failure(r, 1, {"at step"})) << r.describe();
  const std::string line = r.err_lines()[0];
  const int64_t failed = std::stoll(line.substr(line.find("at step ") + 8));
  ASSERT_GT(failed, 1) << "the run must diverge after its first snapshot: " << line;
  char snapshot[64];
  std::snprintf(snapshot, sizeof snapshot, "/snapshots/step-%06lld.safetensors", static_cast<long long>(failed - 1));
  EXPECT_NE(r.out.find("the last good checkpoint, of step " + std::to_string(failed - 1) + " (" + run + snapshot +
                       "), is kept. Continue from it with a lower learning rate: headlab train --resume " + run),
            std::string::npos)
      << r.out;
  const RunResult resumed =
      run_headlab({"train", "--resume", run, "--lr", "0.01", "--steps", std::to_string(failed + 1)}, dir.path());
  ASSERT_EQ(resumed.exit_code, 0) << resumed.describe();
  EXPECT_NE(read_bytes(run + "/train.log").find("from its snapshot of step " + std::to_string(failed - 1)),
            std::string::npos);
}

TEST(Faults, CheckpointThatCannotBeWrittenStopsTheRunAndKeepsThePreviousOne) {
  TempDir dir;
  const std::string run = dir / "run";
  copy_dir(shared_run(), run);
  const std::string ck = run + "/checkpoint.safetensors";
  const std::string before = read_bytes(ck);

  // The checkpoint goes to checkpoint.safetensors.tmp.PID first; a folder of
  // that name makes the write fail as a full or read-only disk would.
  std::string blocker;
  {
    Child child(headlab_path(), {"train", "--resume", run, "--steps", "40", "--checkpoint-every", "1"}, dir.path(),
                dir.path());
    blocker = ck + ".tmp." + std::to_string(child.pid());
    fs::create_directory(blocker);
    const RunResult r = child.wait();
    EXPECT_TRUE(clean_failure(r, 1, {"checkpoint.safetensors"}));
  }
  // A write that failed is no divergence: no advice to lower the rate.
  const std::string log = read_bytes(run + "/train.log");
  EXPECT_EQ(log.find("lower learning rate"), std::string::npos) << log;
  EXPECT_NE(log.find("is kept: headlab train --resume " + run), std::string::npos) << log;
  EXPECT_EQ(read_bytes(ck), before) << "the previous checkpoint must stay exactly as it was";
  EXPECT_EQ(checkpoint_step(ck), 20);

  fs::remove(blocker);
  const RunResult resumed = run_headlab({"train", "--resume", run, "--steps", "40"}, dir.path());
  EXPECT_EQ(resumed.exit_code, 0) << resumed.describe();
  EXPECT_EQ(checkpoint_step(ck), 40);
}

// After a divergence the run goes on from its last good checkpoint with a
// smaller --lr: the only training setting a resume may change.
TEST(Faults, ResumeWithASmallerLrUsesItAndRecordsTheChange) {
  TempDir dir;
  const std::string run = dir / "run";
  copy_dir(shared_run(), run);
  const double old_lr = nlohmann::json::parse(read_bytes(run + "/config.json")).at("lr").get<double>();
  const double new_lr = old_lr / 4;
  const RunResult r =
      run_headlab({"train", "--resume", run, "--steps", "24", "--lr", std::to_string(new_lr), "--log-every", "1"},
                  dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(checkpoint_step(run + "/checkpoint.safetensors"), 24);
  EXPECT_DOUBLE_EQ(nlohmann::json::parse(read_bytes(run + "/config.json")).at("lr").get<double>(), new_lr)
      << "config.json gives the settings the run goes on with";
  EXPECT_NE(read_bytes(run + "/train.log").find("learning rate from"), std::string::npos)
      << "train.log records the change: " << read_bytes(run + "/train.log");
  int resumed_lines = 0;
  for (const auto& line : metrics_without_timing(run)) {
    const auto step = line.at("step").get<int64_t>();
    if (step <= 20) continue;
    ++resumed_lines;
    EXPECT_LE(line.at("lr").get<double>(), new_lr * (1 + 1e-9)) << "step " << step;
  }
  EXPECT_EQ(resumed_lines, 4) << "steps 21-24 are logged";
}

// A 100 KiB tmpfs holds one tiny checkpoint (62 KiB) but not a second one
// beside it. Mounting needs root; elsewhere the test is skipped.
class FullDisk : public ::testing::Test {
 protected:
  void SetUp() override {
    mount_point_ = dir_ / "disk";
    fs::create_directory(mount_point_);
    if (::mount("tmpfs", mount_point_.c_str(), "tmpfs", 0, "size=100k") != 0)
      GTEST_SKIP() << "cannot mount a small tmpfs here (" << std::strerror(errno) << ")";
    mounted_ = true;
  }
  void TearDown() override {
    if (mounted_) ::umount2(mount_point_.c_str(), MNT_DETACH);
  }
  TempDir dir_;
  std::string mount_point_;
  bool mounted_ = false;
};

TEST_F(FullDisk, FullDiskGivesAClearErrorAndKeepsThePreviousCheckpoint) {
  const std::string run = mount_point_ + "/run";
  const RunResult r =
      run_headlab(train_command(run, {{"--checkpoint-every", "1"}, {"--steps", "50"}}), dir_.path());
  EXPECT_TRUE(clean_failure(r, 1, {run}));
  const std::string ck = run + "/checkpoint.safetensors";
  ASSERT_TRUE(fs::exists(ck));
  const int64_t step = checkpoint_step(ck);
  EXPECT_GE(step, 1);
  EXPECT_LT(step, 50);
  const RunResult loaded = run_headlab({"eval", ck}, dir_.path());
  EXPECT_EQ(loaded.exit_code, 0) << loaded.describe();
}

}  // namespace
}  // namespace headlab::cli_test
