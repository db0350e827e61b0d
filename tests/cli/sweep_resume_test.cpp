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
  EXPECT_NE(first.out.find("seqs.jsonl: 2 of 2 runs"), std::string::npos) << first.out;
  nlohmann::json plan = nlohmann::json::parse(read_bytes(sweep + "/sweep.json"));
  EXPECT_FALSE(plan.at("config").contains("task")) << plan.at("config").dump();
  const std::string absolute = fs::absolute(cwd / "seqs.jsonl").lexically_normal().string();
  EXPECT_EQ(plan.at("config").at("data"), absolute);
  EXPECT_NE(read_bytes(sweep + "/sweep.html").find("<title>headlab sweep: data " + absolute + "</title>"),
            std::string::npos);

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

std::vector<std::string> tiny_sweep(std::vector<std::string> args,
                                    const std::vector<std::pair<std::string, std::string>>& changes = {}) {
  std::vector<std::pair<std::string, std::string>> all = {{"--steps", "2"}, {"--threads", "-"}};
  all.insert(all.end(), changes.begin(), changes.end());
  for (const std::string& flag : tiny(all)) args.push_back(flag);
  return args;
}

// A sweep records its data file (absolute path, size, hash) when it starts;
// --resume from another folder finds it, and refuses it once it changed,
// before any run starts: the runs left would train on other bytes than the
// first ones.
TEST(SweepResume, AChangedDataFileIsRefusedBeforeAnyRunStartsAndTheFileIsFoundFromAnyFolder) {
  TempDir cwd, elsewhere;
  const std::string file = cwd / "seqs.jsonl", bytes = "{\"tokens\": [1, 2, 3, 4]}\n{\"tokens\": [4, 3, 2, 1]}\n";
  write_bytes(file, bytes);
  const std::string sweep = cwd / "sweep";
  const RunResult first = run_headlab(
      tiny_sweep({"sweep", "--seeds", "0-1", "--jobs", "1", "--out", "sweep", "--data", "./seqs.jsonl"},
                 {{"--batch", "2"}}),
      cwd.path());
  ASSERT_EQ(first.exit_code, 0) << first.describe();
  const std::string absolute = fs::absolute(file).lexically_normal().string();
  EXPECT_EQ(nlohmann::json::parse(read_bytes(sweep + "/config.json")).at("data"), absolute);
  const nlohmann::json record = nlohmann::json::parse(read_bytes(sweep + "/data-files.json"));
  EXPECT_EQ(record.at("data").at("path"), absolute);
  EXPECT_EQ(record.at("data").at("size"), bytes.size());
  EXPECT_EQ(nlohmann::json::parse(read_bytes(sweep + "/sweep.json")).at("data_files"), record);

  fs::remove_all(sweep + "/h2-s1");
  write_bytes(file, bytes + "{\"tokens\": [1, 1, 1, 1]}\n");
  const auto before = snapshot(sweep);
  EXPECT_TRUE(clean_failure(
      run_headlab({"sweep", "--resume", sweep}, elsewhere.path()), 2,
      {absolute, "has changed since the sweep started", std::to_string(bytes.size()) + " bytes"}));
  EXPECT_EQ(snapshot(sweep), before) << "no run started, nothing written";

  write_bytes(file, bytes);
  // The record itself damaged: said so, and how to go on.
  const std::string recorded = read_bytes(sweep + "/data-files.json");
  write_bytes(sweep + "/data-files.json", "{\"data\": {\"path\": \"" + absolute + "\"}}\n");
  EXPECT_TRUE(clean_failure(run_headlab({"sweep", "--resume", sweep}, elsewhere.path()), 2,
                            {"the record of the sweep's --data file must be", "data-files.json", "is damaged",
                             "restore it, or start a new sweep with another --out"}));
  write_bytes(sweep + "/data-files.json", recorded);
  const RunResult resumed = run_headlab({"sweep", "--resume", sweep}, elsewhere.path());
  ASSERT_EQ(resumed.exit_code, 0) << resumed.describe();
  EXPECT_EQ(RawSafetensors::read(sweep + "/h2-s1/checkpoint.safetensors").meta_json("config").at("data"), absolute);
}

// A run changed outside the sweep is not pooled with the sweep's own: one
// extended with `train --resume RUN --steps N`, one whose heads.json
// `analyze RUN --pattern` or `analyze RUN --threshold` rewrote.
TEST(SweepResume, ARunExtendedOrReanalyzedOutsideTheSweepIsRefusedNamingRunAndKey) {
  TempDir cwd;
  const std::string sweep = cwd / "sweep";
  const RunResult first =
      run_headlab(tiny_sweep({"sweep", "--seeds", "0-1", "--jobs", "1", "--out", sweep}), cwd.path());
  ASSERT_EQ(first.exit_code, 0) << first.describe();
  const RunResult extended = run_headlab({"train", "--resume", sweep + "/h2-s0", "--steps", "3"}, cwd.path());
  ASSERT_EQ(extended.exit_code, 0) << extended.describe();
  const auto before = snapshot(sweep);
  EXPECT_TRUE(clean_failure(run_headlab({"sweep", "--resume", sweep}, cwd.path()), 2,
                            {"h2-s0 (the plan vs its config.json: steps 2 vs 3)", "Move such a run folder out"}));
  EXPECT_EQ(snapshot(sweep), before);

  // Moved out, the run is trained again as planned.
  fs::rename(sweep + "/h2-s0", cwd / "h2-s0-extended");
  const RunResult analyzed = run_headlab({"analyze", sweep + "/h2-s1", "--pattern", "offset:2"}, cwd.path());
  ASSERT_EQ(analyzed.exit_code, 0) << analyzed.describe();
  EXPECT_TRUE(clean_failure(
      run_headlab({"sweep", "--resume", sweep}, cwd.path()), 2,
      {"h2-s1 (its heads.json scores the pattern offset:2", "headlab analyze " + sweep + "/h2-s1`"}));
  // Re-labelled with another threshold alone: heads.json records it.
  const RunResult relabelled = run_headlab({"analyze", sweep + "/h2-s1", "--threshold", "0.6"}, cwd.path());
  ASSERT_EQ(relabelled.exit_code, 0) << relabelled.describe();
  EXPECT_TRUE(clean_failure(run_headlab({"sweep", "--resume", sweep}, cwd.path()), 2,
                            {"h2-s1 (its heads.json was labelled with --threshold 0.6 (not 0.5)"}));
  const RunResult again = run_headlab({"analyze", sweep + "/h2-s1"}, cwd.path());
  ASSERT_EQ(again.exit_code, 0) << again.describe();
  const RunResult resumed = run_headlab({"sweep", "--resume", sweep}, cwd.path());
  ASSERT_EQ(resumed.exit_code, 0) << resumed.describe();
  EXPECT_EQ(nlohmann::json::parse(read_bytes(sweep + "/h2-s0/config.json")).at("steps"), 2);
}

// Shards started from two folders, one naming the file relatively and one
// absolutely, are one sweep; --collect refuses a run extended or
// re-analyzed with another pattern since.
TEST(SweepCollect, ShardsNameTheirFileAnyWayAndARunExtendedOrReanalyzedSinceIsRefused) {
  TempDir cwd, elsewhere;
  write_bytes(cwd / "seqs.jsonl", "{\"tokens\": [1, 2, 3, 4]}\n{\"tokens\": [4, 3, 2, 1]}\n");
  const std::string sweep = cwd / "sweep", absolute = fs::absolute(cwd / "seqs.jsonl").lexically_normal().string();
  const auto shard = [&](const char* k_of_n, const std::string& data) {
    return tiny_sweep({"sweep", "--seeds", "0-1", "--jobs", "1", "--shard", k_of_n, "--out", sweep, "--data", data},
                      {{"--batch", "2"}});
  };
  const RunResult one = run_headlab(shard("1/2", "seqs.jsonl"), cwd.path());
  ASSERT_EQ(one.exit_code, 0) << one.describe();
  const RunResult two = run_headlab(shard("2/2", absolute), elsewhere.path());
  ASSERT_EQ(two.exit_code, 0) << two.describe();
  const RunResult extended = run_headlab({"train", "--resume", sweep + "/h2-s1", "--steps", "3"}, elsewhere.path());
  ASSERT_EQ(extended.exit_code, 0) << extended.describe();
  EXPECT_TRUE(clean_failure(run_headlab({"sweep", "--collect", sweep}, elsewhere.path()), 2,
                            {"h2-s1 (the plan vs its config.json: steps 2 vs 3)"}));
  const RunResult analyzed = run_headlab({"analyze", sweep + "/h2-s0", "--pattern", "offset:2"}, cwd.path());
  ASSERT_EQ(analyzed.exit_code, 0) << analyzed.describe();
  fs::rename(sweep + "/h2-s1", cwd / "h2-s1-extended");
  EXPECT_TRUE(clean_failure(run_headlab({"sweep", "--collect", sweep}, elsewhere.path()), 2,
                            {"h2-s0 (its heads.json scores the pattern offset:2"}));
}

// One file per sweep, and the configuration of a grid that cannot read it named.
TEST(SweepUsage, AListOfDataFilesAndAGridHalfThatCannotReadTheFileAreNamed) {
  TempDir cwd;
  write_bytes(cwd / "next.jsonl", "{\"tokens\": [1, 2, 3], \"attend\": {\"next\": [1, 2, null]}}\n"
                                  "{\"tokens\": [3, 2, 1], \"attend\": {\"next\": [1, 2, null]}}\n");
  EXPECT_TRUE(clean_failure(
      run_headlab(tiny_sweep({"sweep", "--seeds", "0", "--data", "next.jsonl,other.jsonl", "--out", cwd / "s1"}),
                  cwd.path()),
      2, {"--data 'next.jsonl,other.jsonl'", "one --data file", "run one sweep per file"}));
  EXPECT_TRUE(clean_failure(run_headlab(tiny_sweep({"sweep", "--seeds", "0", "--data", "next.jsonl", "--bidirectional",
                                                    "true,false", "--out", cwd / "s2"},
                                                   {{"--batch", "2"}}),
                                        cwd.path()),
                            2, {"the configuration bidirectional off, h2 (one of the sweep's 2)", "causal"}));
  EXPECT_FALSE(fs::exists(cwd / "s1"));
  EXPECT_FALSE(fs::exists(cwd / "s2"));
}

}  // namespace
}  // namespace headlab::cli_test
