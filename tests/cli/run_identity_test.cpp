// A run folder's checkpoint must be its own run's: another run's
// checkpoint.safetensors copied into the folder is refused by --resume, and
// by eval and analyze where they take it for the run's, naming what differs
// (config.json's settings, its --steps, metrics.jsonl's loss at the
// checkpoint's last log line), and the folder stays as it was. The file
// itself is still evaluated, and analyzed into a folder of its own. Folders
// and checkpoints without those witnesses go on as before.
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

// `eval RUN` and `analyze RUN` read the folder as the run; `analyze` of its
// checkpoint file without --out writes the run's heads.json and report.html.
// Each is refused, saying what to give instead, and writes nothing.
TEST(RunIdentity, EvalAndAnalyzeRefuseAnotherRunsCheckpointAsTheRuns) {
  TempDir dir;
  const std::string run = dir / "run", ck = run + "/checkpoint.safetensors";
  copy_dir(shared_run(), run);
  const RunResult other = run_headlab(train_command(dir / "other", {{"--task", "previous"}, {"--steps", "30"}}), dir.path());
  ASSERT_EQ(other.exit_code, 0) << other.describe();
  fs::copy_file(dir / "other/checkpoint.safetensors", ck, fs::copy_options::overwrite_existing);
  const auto before = snapshot(run);
  const std::vector<std::string> mismatch = {ck + " is not the checkpoint of the run in " + run,
                                             "task \"previous\" in the checkpoint, \"first-prev-pair\" in config.json",
                                             "step 30, beyond the 20 steps of config.json"};
  const auto with = [&](std::vector<std::string> mentions, const std::vector<std::string>& more) {
    mentions.insert(mentions.end(), more.begin(), more.end());
    return mentions;
  };
  EXPECT_TRUE(clean_failure(run_headlab({"eval", run}, dir.path()), 2,
                            with(mismatch, {"headlab eval: error: " + ck, "evaluate the file as a checkpoint of its own: headlab eval " + ck})));
  const std::vector<std::string> analyze_fix = {"Its analysis is not the run's", "headlab analyze " + ck + " --out"};
  EXPECT_TRUE(clean_failure(run_headlab({"analyze", run}, dir.path()), 2,
                            with(mismatch, with({"headlab analyze: error: " + ck}, analyze_fix))));
  // The folder given as the run, even with --out: its report would show the run's snapshots.
  EXPECT_TRUE(clean_failure(run_headlab({"analyze", run, "--out", dir / "mine"}, dir.path()), 2, with(mismatch, analyze_fix)));
  EXPECT_TRUE(clean_failure(run_headlab({"analyze", ck}, dir.path()), 2, with(mismatch, analyze_fix)));
  EXPECT_TRUE(clean_failure(run_headlab({"analyze", "checkpoint.safetensors"}, run), 2,
                            {"checkpoint.safetensors is not the checkpoint of the run in .", mismatch[1],
                             "headlab analyze checkpoint.safetensors --out NEW_FOLDER"}));
  EXPECT_EQ(snapshot(run), before) << "a refused eval or analyze changes nothing";
  EXPECT_FALSE(fs::exists(dir / "mine"));

  // The file itself: evaluated, and analyzed into a folder of its own.
  const RunResult eval = run_headlab({"eval", ck, "--json"}, dir.path());
  ASSERT_EQ(eval.exit_code, 0) << eval.describe();
  EXPECT_EQ(nlohmann::json::parse(eval.out).at("task"), "previous");
  const RunResult analyzed = run_headlab({"analyze", ck, "--out", dir / "mine"}, dir.path());
  ASSERT_EQ(analyzed.exit_code, 0) << analyzed.describe();
  EXPECT_EQ(nlohmann::json::parse(read_bytes(dir / "mine/heads.json")).at("task"), "previous");
  EXPECT_EQ(snapshot(run), before);
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

// So do eval and analyze of such a folder, even with another run's
// checkpoint in it: nothing tells it from the run's.
TEST(RunIdentity, WithoutWitnessesEvalAndAnalyzeGoOn) {
  TempDir dir;
  const std::string run = dir / "run";
  copy_dir(shared_run(), run);
  const RunResult other = run_headlab(train_command(dir / "other", {{"--seed", "7"}}), dir.path());
  ASSERT_EQ(other.exit_code, 0) << other.describe();
  RawSafetensors ck = RawSafetensors::read(dir / "other/checkpoint.safetensors");
  nlohmann::json trainer = ck.meta_json("trainer");
  trainer.erase("logged");
  ck.set_meta_json("trainer", trainer);
  write_bytes(run + "/checkpoint.safetensors", ck.bytes());
  fs::remove(run + "/config.json");
  const RunResult eval = run_headlab({"eval", run, "--json"}, dir.path());
  EXPECT_EQ(eval.exit_code, 0) << eval.describe();
  const RunResult analyzed = run_headlab({"analyze", run, "--json"}, dir.path());
  EXPECT_EQ(analyzed.exit_code, 0) << analyzed.describe();
}

}  // namespace
}  // namespace headlab::cli_test
