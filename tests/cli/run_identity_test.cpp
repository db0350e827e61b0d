// A run folder's checkpoint must be its own run's: another run's
// checkpoint.safetensors copied into the folder is refused by --resume,
// naming what differs (config.json's settings, its --steps, metrics.jsonl's
// loss at the checkpoint's last log line), and the folder stays as it was.
// Folders and checkpoints without those witnesses still resume.
#include <gtest/gtest.h>

#include <filesystem>

#include "tests/cli/fixtures.h"

namespace headlab::cli_test {
namespace {

namespace fs = std::filesystem;

TEST(RunIdentity, AnotherRunsCheckpointIsNotResumed) {
  TempDir dir;
  const std::string run = dir / "run";
  copy_dir(shared_run(), run);
  const RunResult other = run_headlab(train_command(dir / "other", {{"--task", "previous"}, {"--steps", "30"}}), dir.path());
  ASSERT_EQ(other.exit_code, 0) << other.describe();
  fs::copy_file(dir / "other/checkpoint.safetensors", run + "/checkpoint.safetensors",
                fs::copy_options::overwrite_existing);
  const auto before = snapshot(run);
  const RunResult r = run_headlab({"train", "--resume", run, "--steps", "40"}, dir.path());
  EXPECT_TRUE(clean_failure(r, 2, {run + "/checkpoint.safetensors", "is not the checkpoint of the run",
                                   "task \"previous\" in the checkpoint, \"first-prev-pair\" in config.json",
                                   "step 30, beyond the 20 steps of config.json"}));
  EXPECT_EQ(snapshot(run), before) << "a refused resume changes nothing";
}

// Two copies of one run, extended apart (another --lr is a resume flag, so
// config.json cannot tell them apart): metrics.jsonl's loss at the step the
// checkpoint last logged can.
TEST(RunIdentity, AForkedRunsCheckpointIsToldByTheMetrics) {
  TempDir dir;
  const std::string run = dir / "run", fork = dir / "fork";
  ASSERT_EQ(run_headlab(train_command(run, {{"--log-every", "5"}}), dir.path()).exit_code, 0);
  copy_dir(run, fork);
  ASSERT_EQ(run_headlab({"train", "--resume", fork, "--steps", "25", "--lr", "0.01"}, dir.path()).exit_code, 0);
  ASSERT_EQ(run_headlab({"train", "--resume", run, "--steps", "30"}, dir.path()).exit_code, 0);
  fs::copy_file(fork + "/checkpoint.safetensors", run + "/checkpoint.safetensors", fs::copy_options::overwrite_existing);
  const RunResult r = run_headlab({"train", "--resume", run, "--steps", "40"}, dir.path());
  EXPECT_TRUE(clean_failure(r, 2, {"is not the checkpoint of the run", "metrics.jsonl has loss", "at step 25"}));
  // Its own folder resumes it.
  EXPECT_EQ(run_headlab({"train", "--resume", fork, "--steps", "30"}, dir.path()).exit_code, 0);
}

// A checkpoint from before the "logged" record, in a folder without
// config.json, has no witness to disagree with: it resumes.
TEST(RunIdentity, WithoutWitnessesAResumeGoesOn) {
  TempDir dir;
  const std::string run = dir / "run";
  copy_dir(shared_run(), run);
  RawSafetensors ck = RawSafetensors::read(run + "/checkpoint.safetensors");
  nlohmann::json trainer = ck.meta_json("trainer");
  trainer.erase("logged");
  ck.set_meta_json("trainer", trainer);
  write_bytes(run + "/checkpoint.safetensors", ck.bytes());
  fs::remove(run + "/config.json");
  const RunResult r = run_headlab({"train", "--resume", run, "--steps", "25"}, dir.path());
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(checkpoint_step(run + "/checkpoint.safetensors"), 25);
}

}  // namespace
}  // namespace headlab::cli_test
