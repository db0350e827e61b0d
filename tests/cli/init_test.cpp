// `train --init CHECKPOINT` starts from the checkpoint's model and weights:
// the model flags default to the checkpoint's, so a run from a 4-head
// bidirectional model stays one even though the defaults say 2 causal heads
// (tensors of the same shapes, which were once silently reinterpreted).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "tests/cli/fixtures.h"

namespace headlab::cli_test {
namespace {

TEST(Init, TakesTheModelFromTheCheckpoint) {
  TempDir cwd;
  const RunResult source =
      run_headlab(train_command(cwd / "source", {{"--heads", "4"}, {"--bidirectional", ""}}), cwd.path());
  ASSERT_EQ(source.exit_code, 0) << source.describe();
  const std::string ck = cwd / "source/checkpoint.safetensors";

  // No training steps: the new checkpoint holds the source's weights as they were.
  const RunResult r = run_headlab(train_command(cwd / "init", {{"--steps", "0"}, {"--init", ck}}), cwd.path());
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const RawSafetensors from = RawSafetensors::read(ck);
  const RawSafetensors to = RawSafetensors::read(cwd / "init/checkpoint.safetensors");
  EXPECT_EQ(to.meta_json("model"), from.meta_json("model"));
  EXPECT_EQ(to.meta_json("model").at("heads"), 4);
  EXPECT_EQ(to.meta_json("model").at("causal"), false);
  for (const char* name : {"blocks.0.attn.q.weight", "head.weight"})
    EXPECT_EQ(to.tensor_bytes(name), from.tensor_bytes(name)) << name;
  const nlohmann::json config = nlohmann::json::parse(read_bytes(cwd / "init/config.json"));
  EXPECT_EQ(config.at("heads"), 4);
  EXPECT_EQ(config.at("bidirectional"), true);

  // A flag that agrees with the checkpoint is fine.
  const RunResult agreeing =
      run_headlab(train_command(cwd / "agree", {{"--steps", "0"}, {"--heads", "4"}, {"--init", ck}}), cwd.path());
  EXPECT_EQ(agreeing.exit_code, 0) << agreeing.describe();
}

// An attention-only checkpoint's spec holds d_ff resolved (4 d_model): taken
// as the user's --d-ff, every --init run from it, and every resume of that
// run, warned "--d-ff 64 does nothing with --attn-only" of a flag nobody gave.
TEST(Init, FromAnAttentionOnlyModelWarnsOfNoSettingNotGiven) {
  TempDir cwd;
  const RunResult source = run_headlab(train_command(cwd / "source", {{"--attn-only", ""}, {"--steps", "2"}}), cwd.path());
  ASSERT_EQ(source.exit_code, 0) << source.describe();
  const RunResult r = run_headlab(train_command(cwd / "init", {{"--steps", "1"}, {"--init", cwd / "source"}}), cwd.path());
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(r.err.find("does nothing"), std::string::npos) << r.err;
  EXPECT_EQ(nlohmann::json::parse(read_bytes(cwd / "init/config.json")).at("d-ff"), 0);
  const RunResult resumed = run_headlab({"train", "--resume", cwd / "init", "--steps", "2"}, cwd.path());
  ASSERT_EQ(resumed.exit_code, 0) << resumed.describe();
  EXPECT_EQ(resumed.err.find("does nothing"), std::string::npos) << resumed.err;
  // Given (at the checkpoint's value: d_model 16), it is the user's, and said to do nothing.
  const RunResult given = run_headlab(
      train_command(cwd / "given", {{"--steps", "1"}, {"--init", cwd / "source"}, {"--d-ff", "64"}}), cwd.path());
  ASSERT_EQ(given.exit_code, 0) << given.describe();
  EXPECT_NE(given.err.find("--d-ff 64 does nothing with --attn-only"), std::string::npos) << given.err;
}

// --init R --out R --force would start from R's checkpoint and then remove
// it (--force clears the old run's files): config.json's "init" would name a
// file that no longer holds the weights the run started from. Refused, R as
// it was; a file of R that --force leaves alone may be the init.
TEST(Init, FromAFileThatForceRemovesIsRefused) {
  TempDir cwd;
  const std::string run = cwd / "run";
  ASSERT_EQ(run_headlab(train_command(run, {{"--snapshot-every", "10"}}), cwd.path()).exit_code, 0);
  const auto before = snapshot(run);
  for (const std::string& init : {run, run + "/checkpoint.safetensors", run + "/snapshots/step-000010.safetensors"}) {
    const RunResult r = run_headlab(train_command(run, {{"--init", init}, {"--force", ""}}), cwd.path());
    EXPECT_TRUE(clean_failure(r, 2, {"--init " + init, "--force removes", "Copy it out"}));
    EXPECT_EQ(snapshot(run), before) << init;
  }
  std::filesystem::copy_file(run + "/checkpoint.safetensors", run + "/kept.safetensors");
  const RunResult kept =
      run_headlab(train_command(run, {{"--init", run + "/kept.safetensors"}, {"--force", ""}, {"--steps", "2"}}), cwd.path());
  EXPECT_EQ(kept.exit_code, 0) << kept.describe();
}

// Every checkpoint of a run started with --init records what it started from
// -- the file's path, size and hash, and the checkpoint's step, task and
// settings -- so that the origin is known after that file changed.
TEST(Init, EveryCheckpointRecordsWhatTheRunStartedFrom) {
  TempDir cwd;
  const std::string source = cwd / "source", run = cwd / "run";
  ASSERT_EQ(run_headlab(train_command(source, {{"--seed", "7"}}), cwd.path()).exit_code, 0);
  const std::string ck = source + "/checkpoint.safetensors";
  const auto size = std::filesystem::file_size(ck);
  ASSERT_EQ(run_headlab(train_command(run, {{"--init", source}, {"--steps", "2"}}), cwd.path()).exit_code, 0);
  const nlohmann::json init = RawSafetensors::read(run + "/checkpoint.safetensors").meta_json("init");
  EXPECT_EQ(init.at("path"), std::filesystem::absolute(ck).lexically_normal().string());
  EXPECT_EQ(init.at("size"), size);
  EXPECT_TRUE(init.at("hash").is_number_unsigned());
  EXPECT_EQ(init.at("step"), 20);
  EXPECT_EQ(init.at("task"), "first-prev-pair");
  EXPECT_EQ(init.at("config").at("seed"), 7);
  EXPECT_NE(read_bytes(run + "/train.log").find("step 20 of first-prev-pair, " + std::to_string(size) + " bytes"),
            std::string::npos);

  // The source replaced by another run; a resume keeps the record as it was.
  ASSERT_EQ(run_headlab(train_command(source, {{"--seed", "8"}, {"--force", ""}}), cwd.path()).exit_code, 0);
  ASSERT_EQ(run_headlab({"train", "--resume", run, "--steps", "4"}, cwd.path()).exit_code, 0);
  EXPECT_EQ(RawSafetensors::read(run + "/checkpoint.safetensors").meta_json("init"), init);
}

}  // namespace
}  // namespace headlab::cli_test
