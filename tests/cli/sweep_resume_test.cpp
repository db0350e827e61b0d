// Sweep folders from before the precision key. `sweep --resume`: its runs so
// far trained in f32, and so must those it starts or resumes now, even where
// HEADLAB_PRECISION=bf16 makes bf16 the default of a new sweep. `sweep
// --collect`: a shard without the key trained in f32, as an f32 shard did.
// A --data sweep's settings leave out the unused "task"; an older sweep.json
// that holds it still resumes.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "tests/cli/fixtures.h"

namespace headlab::cli_test {
namespace {

namespace fs = std::filesystem;

TEST(SweepResume, AFolderWithoutThePrecisionKeyGoesOnInF32WhateverHeadlabPrecision) {
  TempDir cwd;
  const std::string sweep = cwd / "sweep";
  // In f32 even in the suite's bf16 pass: as every sweep before the key.
  std::vector<std::string> args = {"sweep", "--seeds", "0-2", "--jobs", "1", "--out", sweep, "--precision", "f32"};
  for (const std::string& flag : tiny({{"--steps", "2"}, {"--threads", "-"}})) args.push_back(flag);
  const RunResult first = run_headlab(args, cwd.path());
  ASSERT_EQ(first.exit_code, 0) << first.describe();

  // The folder as an older headlab leaves a stopped sweep: no "precision"
  // anywhere, h2-s1 stopped after its checkpoint, h2-s2 not started.
  const auto drop_precision = [](nlohmann::json& config) { EXPECT_EQ(config.erase("precision"), 1u); };
  for (const std::string& path : {sweep + "/config.json", sweep + "/h2-s0/config.json", sweep + "/h2-s1/config.json"}) {
    nlohmann::json config = nlohmann::json::parse(read_bytes(path));
    drop_precision(config);
    write_bytes(path, config.dump(2) + "\n");
  }
  nlohmann::json plan = nlohmann::json::parse(read_bytes(sweep + "/sweep.json"));
  drop_precision(plan.at("config"));
  write_bytes(sweep + "/sweep.json", plan.dump(2) + "\n");
  RawSafetensors checkpoint = RawSafetensors::read(sweep + "/h2-s1/checkpoint.safetensors");
  nlohmann::json stored = checkpoint.meta_json("config");
  drop_precision(stored);
  checkpoint.set_meta_json("config", stored);
  write_bytes(sweep + "/h2-s1/checkpoint.safetensors", checkpoint.bytes());
  fs::remove(sweep + "/h2-s1/heads.json");
  fs::remove_all(sweep + "/h2-s2");

  // HEADLAB_NO_CPU_BF16=1 refuses bf16 on any CPU (core::cpu_has_native_bf16):
  // a run that took the bf16 default would fail on every machine, not only
  // on one without bf16 units.
  std::vector<std::pair<const char*, std::optional<std::string>>> saved;
  for (const char* name : {"HEADLAB_PRECISION", "HEADLAB_NO_CPU_BF16"})
    saved.emplace_back(name, std::getenv(name) ? std::optional<std::string>(std::getenv(name)) : std::nullopt);
  ::setenv("HEADLAB_PRECISION", "bf16", 1);
  ::setenv("HEADLAB_NO_CPU_BF16", "1", 1);
  const RunResult resumed = run_headlab({"sweep", "--resume", sweep}, cwd.path());
  for (const auto& [name, value] : saved) {
    if (value)
      ::setenv(name, value->c_str(), 1);
    else
      ::unsetenv(name);
  }
  ASSERT_EQ(resumed.exit_code, 0) << resumed.describe();

  EXPECT_TRUE(fs::exists(sweep + "/h2-s1/heads.json")) << "h2-s1 went on from its checkpoint";
  EXPECT_EQ(nlohmann::json::parse(read_bytes(sweep + "/h2-s2/config.json")).at("precision"), "f32");
  EXPECT_EQ(RawSafetensors::read(sweep + "/h2-s2/checkpoint.safetensors").meta_json("config").at("precision"), "f32");
  // The sweep's own files now say what its runs trained in.
  EXPECT_EQ(nlohmann::json::parse(read_bytes(sweep + "/config.json")).at("precision"), "f32");
  EXPECT_EQ(nlohmann::json::parse(read_bytes(sweep + "/sweep.json")).at("config").at("precision"), "f32");
}

TEST(SweepCollect, AShardWithoutThePrecisionKeyJoinsAnF32ShardButNotABf16One) {
  TempDir cwd;
  const std::string sweep = cwd / "sweep";
  for (const char* shard : {"1/2", "2/2"}) {
    std::vector<std::string> args = {"sweep", "--seeds", "0-1", "--jobs", "1", "--shard", shard,
                                     "--out", sweep, "--precision", "f32"};
    for (const std::string& flag : tiny({{"--steps", "2"}, {"--threads", "-"}})) args.push_back(flag);
    const RunResult r = run_headlab(args, cwd.path());
    ASSERT_EQ(r.exit_code, 0) << r.describe();
  }
  // Shard 1 as an older headlab wrote it.
  const std::string shard_file = sweep + "/shard-1-of-2.json";
  nlohmann::json shard = nlohmann::json::parse(read_bytes(shard_file));
  ASSERT_EQ(shard.at("config").erase("precision"), 1u);
  write_bytes(shard_file, shard.dump(2) + "\n");
  const RunResult collected = run_headlab({"sweep", "--collect", sweep}, cwd.path());
  ASSERT_EQ(collected.exit_code, 0) << collected.describe();
  EXPECT_EQ(nlohmann::json::parse(read_bytes(sweep + "/sweep.json")).at("runs").size(), 2u);

  // A shard that did train in another precision is still told apart.
  shard.at("config")["precision"] = "bf16";
  write_bytes(shard_file, shard.dump(2) + "\n");
  EXPECT_TRUE(clean_failure(run_headlab({"sweep", "--collect", sweep}, cwd.path()), 2,
                            {"other settings than", "precision"}));
}

// A --data sweep names its file, never the unused default task: sweep.json's
// settings leave "task" out, and its page's title says the file. A folder
// whose sweep.json settings hold it (as an older headlab wrote them) still
// resumes and redraws.
TEST(SweepResume, ADataSweepNamesItsFileAndAnOlderOneWithTheTaskKeyGoesOn) {
  TempDir cwd;
  write_bytes(cwd / "seqs.jsonl", "{\"tokens\": [1, 2, 3, 4]}\n{\"tokens\": [4, 3, 2, 1]}\n");
  const std::string sweep = cwd / "sweep";
  std::vector<std::string> args = {"sweep", "--seeds", "0-1", "--jobs", "1", "--out", sweep, "--data", "seqs.jsonl"};
  for (const std::string& flag : tiny({{"--steps", "2"}, {"--threads", "-"}, {"--batch", "2"}})) args.push_back(flag);
  const RunResult first = run_headlab(args, cwd.path());
  ASSERT_EQ(first.exit_code, 0) << first.describe();
  EXPECT_NE(first.out.find("data seqs.jsonl: 2 of 2 runs"), std::string::npos) << first.out;
  nlohmann::json plan = nlohmann::json::parse(read_bytes(sweep + "/sweep.json"));
  EXPECT_FALSE(plan.at("config").contains("task")) << plan.at("config").dump();
  EXPECT_EQ(plan.at("config").at("data"), "seqs.jsonl");
  EXPECT_NE(read_bytes(sweep + "/sweep.html").find("<title>headlab sweep: data seqs.jsonl</title>"), std::string::npos);

  plan.at("config")["task"] = "first-prev-pair";
  write_bytes(sweep + "/sweep.json", plan.dump(2) + "\n");
  fs::remove_all(sweep + "/h2-s1");
  const RunResult resumed = run_headlab({"sweep", "--resume", sweep}, cwd.path());
  ASSERT_EQ(resumed.exit_code, 0) << resumed.describe();
  EXPECT_TRUE(fs::exists(sweep + "/h2-s1/heads.json"));
  EXPECT_FALSE(nlohmann::json::parse(read_bytes(sweep + "/sweep.json")).at("config").contains("task"));
  const RunResult redrawn = run_headlab({"sweep", "--redraw", sweep}, cwd.path());
  ASSERT_EQ(redrawn.exit_code, 0) << redrawn.describe();
}

}  // namespace
}  // namespace headlab::cli_test
