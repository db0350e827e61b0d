// --data files are user input too: a token outside the vocabulary, a target
// out of range, a line that is not JSON... stops `train --data` and
// `eval --data` with one line naming FILE:LINE and the value, exit 2, before
// anything is written.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "tests/cli/fixtures.h"

namespace headlab::cli_test {
namespace {

struct BadData {
  std::string name;
  std::string text;
  std::vector<std::string> mentions;
};

std::ostream& operator<<(std::ostream& os, const BadData& c) { return os << c.name; }

const char* kGood = "{\"tokens\": [1, 2, 3, 4]}\n";

const std::vector<BadData>& bad_data() {
  static const std::vector<BadData> all = {
      {"token_at_the_vocab_size", std::string(kGood) + "{\"tokens\": [1, 8, 3]}\n", {"data.jsonl:2", "8", "vocab"}},
      {"token_far_outside_the_vocab", "{\"tokens\": [4294967296]}\n", {"data.jsonl:1", "vocab"}},
      {"negative_token", "{\"tokens\": [1, -1, 3]}\n", {"data.jsonl:1", "-1"}},
      {"fractional_token", "{\"tokens\": [1, 2.5]}\n", {"data.jsonl:1", "2.5", "integer"}},
      {"number_beyond_a_double", "{\"tokens\": [1, 1e400]}\n", {"data.jsonl:1", "1e400"}},
      // Beyond both the 8 classes of a run trained on it and the 64 of the shared run.
      {"target_outside_the_classes", "{\"tokens\": [1, 2], \"targets\": [3, 64]}\n", {"data.jsonl:1", "64"}},
      {"targets_shorter_than_tokens", "{\"tokens\": [1, 2, 3], \"targets\": [3]}\n", {"data.jsonl:1", "targets"}},
      {"sequence_longer_than_seq_len", "{\"tokens\": [1, 2, 3, 4, 5, 6, 7]}\n", {"data.jsonl:1", "seq-len 6"}},
      {"line_not_json", std::string(kGood) + "{\"tokens\": [1, 2\n", {"data.jsonl:2", "JSON"}},
      {"unknown_key", "{\"tokens\": [1, 2], \"target\": [2, 3]}\n", {"data.jsonl:1", "target"}},
      {"no_tokens", "{\"targets\": [1, 2]}\n", {"data.jsonl:1", "tokens"}},
      {"empty_file", "", {"data.jsonl", "no sequences"}},
      {"binary_garbage", std::string("\x00\xff\xfe{", 4) + "\n", {"data.jsonl:1"}},
      // Could never be scored: refused before the first step, as headlab.analyze refuses it.
      {"attend_pattern_without_a_key",
       std::string(kGood) + "{\"tokens\": [1, 2, 3], \"attend\": {\"p\": [null, null, null]}}\n",
       {"data.jsonl:2", "\"attend\" pattern \"p\" gives no query a key in this line nor in any other"}},
  };
  return all;
}

class BadDataFile : public ::testing::TestWithParam<BadData> {};

TEST_P(BadDataFile, TrainAndEvalRefuseItCleanly) {
  const BadData& c = GetParam();
  TempDir cwd, files;
  const std::string data = files / "data.jsonl";
  write_bytes(data, c.text);
  const auto train = train_command(cwd / "out", {{"--data", data}, {"--vocab", "8"}, {"--seq-len", "6"}});

  const RunResult trained = run_headlab(train, cwd.path());
  EXPECT_TRUE(clean_failure(trained, 2, c.mentions));
  const RunResult evaluated =
      run_headlab({"eval", shared_run() + "/checkpoint.safetensors", "--data", data}, cwd.path());
  EXPECT_TRUE(clean_failure(evaluated, 2, c.mentions));
  EXPECT_TRUE(is_empty_dir(cwd.path()));
}

INSTANTIATE_TEST_SUITE_P(Cli, BadDataFile, ::testing::ValuesIn(bad_data()),
                         [](const ::testing::TestParamInfo<BadData>& p) { return p.param.name; });

// A data file that cannot be opened -- missing, a folder -- is named by the
// flag that gave it, with its path and the fix, by every command that takes
// one, before anything is read or written.
TEST(DataFile, AFileThatCannotBeOpenedIsNamedByItsFlag) {
  TempDir cwd;
  write_bytes(cwd / "ok.jsonl", kGood);
  std::filesystem::create_directory(cwd / "rows");
  write_bytes(cwd / "rows/b.jsonl", kGood);
  write_bytes(cwd / "rows/a.jsonl", kGood);
  std::filesystem::create_directory(cwd / "empty");
  write_bytes(cwd / "config.json", "{\"data\": \"gone.jsonl\"}\n");
  const std::string missing = "no such file (looked for " + cwd / "gone.jsonl" + ")";
  const std::string folder = "is a folder, not a file";
  const std::string run = shared_run();
  struct Case {
    std::vector<std::string> args, mentions;
  };
  const std::vector<Case> cases = {
      {train_command(cwd / "out", {{"--data", "gone.jsonl"}}), {"--data gone.jsonl: ", missing, "JSONL file"}},
      {train_command(cwd / "out", {{"--config", "config.json"}}),
       {"\"data\" of --config config.json gone.jsonl: ", missing}},
      {train_command(cwd / "out", {{"--eval-data", "rows"}}),
       {"--eval-data rows " + folder, "2 JSONL file(s), such as --eval-data rows/a.jsonl"}},
      {train_command(cwd / "out", {{"--data", "empty"}}), {"--data empty " + folder, "holds no .jsonl file"}},
      {{"eval", run, "--data", "gone.jsonl"}, {"--data gone.jsonl: ", missing}},
      {{"analyze", run, "--data", "rows", "--out", cwd / "out"}, {"--data rows " + folder, "--data rows/a.jsonl"}},
      {{"analyze", run, "--data", "ok.jsonl", "--corrupted", "gone.jsonl", "--out", cwd / "out"},
       {"--corrupted gone.jsonl: ", missing}},
      {{"sweep", "--data", "gone.jsonl", "--seeds", "0", "--steps", "1", "--out", cwd / "out"},
       {"--data gone.jsonl: ", missing}},
      {{"sweep", "--data", "ok.jsonl", "--eval-data", "empty", "--seeds", "0", "--steps", "1", "--out", cwd / "out"},
       {"--eval-data ", "empty " + folder}},
      {{"sweep", "--config", "config.json", "--seeds", "0", "--steps", "1", "--out", cwd / "out"},
       {"\"data\" of --config config.json gone.jsonl: ", missing}},
  };
  const auto before = snapshot(cwd.path());
  for (const Case& c : cases) {
    EXPECT_TRUE(clean_failure(run_headlab(c.args, cwd.path()), 2, c.mentions)) << c.args.front();
    EXPECT_EQ(snapshot(cwd.path()), before) << c.args.front() << " wrote something";
  }
}

TEST(DataFile, EvalReadsADataFileWithTheCheckpointsOwnSizes) {
  TempDir cwd;
  const std::string data = cwd / "data.jsonl";
  write_bytes(data, "{\"tokens\": [1, 2, 3, 4, 5]}\n{\"tokens\": [7, 6, 5]}\n{\"tokens\": [0, 0, 1, 1, 2, 2]}\n");
  const auto train = train_command(cwd / "run", {{"--data", data}, {"--vocab", "8"}, {"--seq-len", "6"}});
  const RunResult trained = run_headlab(train, cwd.path());
  ASSERT_EQ(trained.exit_code, 0) << trained.describe();

  // eval has no --vocab or --seq-len: the checkpoint's model supplies them.
  const RunResult evaluated = run_headlab({"eval", cwd / "run", "--data", data, "--json"}, cwd.path());
  ASSERT_EQ(evaluated.exit_code, 0) << evaluated.describe();
  const nlohmann::json result = nlohmann::json::parse(evaluated.out);
  EXPECT_EQ(result.at("sequences"), 3);
  EXPECT_EQ(result.at("positions"), 4 + 2 + 5) << "next-token targets: every position but the last of each line";
}

// Targets are checked against the model's classes, not its vocabulary: the
// shared run's first-prev-pair model (vocabulary 8, 64 classes) evaluates data
// of its own kind, and train --data --classes trains on such data.
TEST(DataFile, TargetsAreCheckedAgainstTheModelsClasses) {
  TempDir cwd;
  const std::string data = cwd / "pairs.jsonl";
  // x_0 * 8 + x_{i-1}, as first-prev-pair's targets.
  write_bytes(data, "{\"tokens\": [3, 0, 7], \"targets\": [-1, 24, 24]}\n{\"tokens\": [7, 7], \"targets\": [-1, 63]}\n");
  const RunResult evaluated = run_headlab({"eval", shared_run(), "--data", data, "--json"}, cwd.path());
  ASSERT_EQ(evaluated.exit_code, 0) << evaluated.describe();
  EXPECT_EQ(nlohmann::json::parse(evaluated.out).at("positions"), 3);

  const auto without = train_command(cwd / "tokens", {{"--data", data}, {"--vocab", "8"}, {"--seq-len", "6"}});
  EXPECT_TRUE(clean_failure(run_headlab(without, cwd.path()), 2, {"pairs.jsonl:1", "24", "[0, 8)"}));
  const auto with_classes =
      train_command(cwd / "pairs", {{"--data", data}, {"--vocab", "8"}, {"--seq-len", "6"}, {"--classes", "64"}});
  const RunResult trained = run_headlab(with_classes, cwd.path());
  ASSERT_EQ(trained.exit_code, 0) << trained.describe();
  EXPECT_EQ(RawSafetensors::read(cwd / "pairs/checkpoint.safetensors").meta_json("model").at("classes"), 64);
  const RunResult again = run_headlab({"eval", cwd / "pairs", "--data", data, "--json"}, cwd.path());
  ASSERT_EQ(again.exit_code, 0) << again.describe();
}

// A model of 64 classes cannot be scored on data whose targets go beyond them.
TEST(DataFile, EvalRefusesTargetsBeyondTheModelsClasses) {
  TempDir cwd;
  const std::string data = cwd / "data.jsonl";
  write_bytes(data, "{\"tokens\": [1, 2], \"targets\": [-1, 64]}\n");
  const RunResult r = run_headlab({"eval", shared_run(), "--data", data}, cwd.path());
  EXPECT_TRUE(clean_failure(r, 2, {"data.jsonl:1", "64", "[0, 64)"}));
}

// "attend" keys after their query are a bidirectional model's: train
// --bidirectional takes them, in --data and --eval-data, whether it reads
// --vocab and --seq-len from the file or is given them, and a causal model
// refuses them, saying why.
TEST(DataFile, KeysAfterTheQueryTrainABidirectionalModelWithOrWithoutItsSizes) {
  TempDir cwd;
  const std::string data = cwd / "data.jsonl";
  write_bytes(data, "{\"tokens\": [1, 2, 3, 4], \"attend\": {\"next\": [1, 2, 3, null]}}\n"
                    "{\"tokens\": [4, 3, 2, 1, 0], \"attend\": {\"next\": [1, 2, 3, 4, null]}}\n");
  for (const bool sized : {false, true}) {
    const std::string name = sized ? "sized" : "inferred";
    std::vector<std::pair<std::string, std::string>> flags{{"--data", data}, {"--steps", "2"}};
    if (sized) flags.insert(flags.end(), {{"--vocab", "8"}, {"--seq-len", "6"}});
    const RunResult causal = run_headlab(train_command(cwd / (name + "-causal"), flags), cwd.path());
    EXPECT_TRUE(clean_failure(causal, 2,
                              {"data.jsonl:1", "\"next\"[0] = 1", "keys are in [0, 0] under causal attention",
                               "--bidirectional"}))
        << name;
    flags.emplace_back("--bidirectional", "");
    flags.emplace_back("--eval-data", data);  // read with the model's attention too
    const RunResult trained = run_headlab(train_command(cwd / name, flags), cwd.path());
    EXPECT_EQ(trained.exit_code, 0) << name << ": " << trained.describe();
  }
}

// A data file's "attend" patterns are its expected roles: in the heads.json
// of a run trained on it, and in `analyze RUN --data FILE`'s, which agree.
TEST(DataFile, AnalyzeDataGivesTheFilesPatternsTheRolesOfARunTrainedOnIt) {
  TempDir cwd;
  const std::string data = cwd / "data.jsonl";
  write_bytes(data, "{\"tokens\": [1, 2, 3, 4], \"attend\": {\"one-back\": [null, 0, 1, 2], \"start\": [0, 0, 0, 0]}}\n"
                    "{\"tokens\": [4, 3, 2, 1, 0], \"attend\": {\"start\": [0, 0, 0, 0, 0]}}\n");
  const RunResult trained = run_headlab(train_command(cwd / "run", {{"--data", data}, {"--steps", "5"}}), cwd.path());
  ASSERT_EQ(trained.exit_code, 0) << trained.describe();
  const RunResult analyzed = run_headlab({"analyze", cwd / "run", "--data", data, "--out", cwd / "out"}, cwd.path());
  ASSERT_EQ(analyzed.exit_code, 0) << analyzed.describe();
  const nlohmann::json expected = nlohmann::json::parse(R"([{"role": "one-back", "pattern": "one-back"},
                                                            {"role": "start", "pattern": "start"}])");
  for (const std::string& heads : {cwd / "run/heads.json", cwd / "out/heads.json"}) {
    const nlohmann::json j = nlohmann::json::parse(read_bytes(heads));
    EXPECT_EQ(j.at("expected_roles"), expected) << heads;
    nlohmann::json roles = j.at("verdict").at("roles");
    for (nlohmann::json& role : roles) role.erase("heads");  // which heads: the analyses' numbers, not the file's
    EXPECT_EQ(roles, expected) << heads;
    EXPECT_TRUE(j.at("verdict").at("reasons").at(0).get<std::string>().starts_with("expected roles found: "))
        << heads << ": " << j.at("verdict").dump();
  }
}

// train and sweep take analyze's --scored-only and --expect: every analysis
// of the run counts the roles they say, its config.json keeps them, and a
// later `analyze RUN` (into another folder) counts the same. A name that fits
// no pattern is refused before anything is written; a resume cannot change them.
TEST(DataFile, TrainAndSweepTakeTheRolesToExpectAndAnalyzeKeepsThem) {
  TempDir cwd;
  const std::string data = cwd / "data.jsonl";
  write_bytes(data, "{\"tokens\": [1, 2, 3, 4], \"attend\": {\"one-back\": [null, 0, 1, 2], \"start\": [0, 0, 0, 0]}}\n"
                    "{\"tokens\": [4, 3, 2, 1, 0], \"attend\": {\"start\": [0, 0, 0, 0, 0]}}\n");
  const RunResult trained = run_headlab(
      train_command(cwd / "run", {{"--data", data}, {"--steps", "5"}, {"--scored-only", "start"}, {"--expect", "first-token"}}),
      cwd.path());
  ASSERT_EQ(trained.exit_code, 0) << trained.describe();
  EXPECT_NE(trained.out.find("expected roles found: "), std::string::npos) << trained.out;
  EXPECT_NE(trained.out.find(" of 2"), std::string::npos) << trained.out;
  const nlohmann::json expected = nlohmann::json::parse(R"([{"role": "one-back", "pattern": "one-back"},
                                                            {"role": "first-token", "pattern": "first-token"}])");
  const nlohmann::json config = nlohmann::json::parse(read_bytes(cwd / "run/config.json"));
  EXPECT_EQ(config.at("scored-only"), nlohmann::json::parse(R"(["start"])"));
  EXPECT_EQ(config.at("expect"), nlohmann::json::parse(R"(["first-token"])"));
  const RunResult analyzed = run_headlab({"analyze", cwd / "run", "--out", cwd / "out"}, cwd.path());
  ASSERT_EQ(analyzed.exit_code, 0) << analyzed.describe();
  for (const std::string& heads : {cwd / "run/heads.json", cwd / "out/heads.json"}) {
    const nlohmann::json j = nlohmann::json::parse(read_bytes(heads));
    EXPECT_EQ(j.at("expected_roles"), expected) << heads;
    EXPECT_EQ(j.at("patterns").size(), 2u) << heads << ": start is still scored";
    EXPECT_NE(j.at("verdict").at("reasons").at(0).get<std::string>().find(" of 2"), std::string::npos)
        << heads << ": " << j.at("verdict").dump();
  }
  const auto before = snapshot(cwd.path());
  EXPECT_TRUE(clean_failure(run_headlab(train_command(cwd / "bad", {{"--data", data}, {"--scored-only", "strat"}}), cwd.path()),
                            2, {"--scored-only strat", "'one-back', 'start'"}));
  EXPECT_TRUE(clean_failure(run_headlab({"sweep", "--data", data, "--seeds", "0", "--steps", "2", "--expect", "prev",
                                         "--out", cwd / "bad"},
                                        cwd.path()),
                            2, {"--expect prev", "'previous-token'"}));
  EXPECT_TRUE(clean_failure(run_headlab({"train", "--resume", cwd / "run", "--expect", "previous-token"}, cwd.path()), 2,
                            {"--expect", "cannot change when resuming"}));
  EXPECT_EQ(snapshot(cwd.path()), before);

  const RunResult swept = run_headlab({"sweep", "--data", data, "--seeds", "0", "--steps", "2", "--d-model", "16",
                                       "--jobs", "1", "--scored-only", "start", "--expect", "first-token", "--out",
                                       cwd / "sweep"},
                                      cwd.path());
  ASSERT_EQ(swept.exit_code, 0) << swept.describe();
  EXPECT_EQ(nlohmann::json::parse(read_bytes(cwd / "sweep/h2-s0/heads.json")).at("expected_roles"), expected);
}

// A file whose every token and target is 0 makes a model of one class,
// which died at its first head analysis (step 10) with an internal message,
// after --force had removed the run it replaced (QA19 F17): refused before
// anything is touched, naming the file and the fix; so is --classes 1.
TEST(DataFile, OneClassIsRefusedBeforeForceRemovesTheOldRun) {
  TempDir cwd;
  const std::string run = cwd / "run";
  copy_dir(shared_run(), run);
  const auto before = snapshot(run);
  std::string zeros;
  for (int i = 0; i < 20; ++i) zeros += "{\"tokens\": [0, 0, 0, 0], \"targets\": [0, 0, 0, 0]}\n";
  write_bytes(cwd / "zeros.jsonl", zeros);
  const RunResult one = run_headlab(
      train_command(run, {{"--data", cwd / "zeros.jsonl"}, {"--analyze-every", "10"}, {"--force", ""}}), cwd.path());
  EXPECT_TRUE(clean_failure(one, 2,
                            {"--data " + cwd / "zeros.jsonl", "vocab 1, classes 1 and seq-len 4 inferred from " + cwd / "zeros.jsonl",
                             "every token and target in it is 0", "gives the model 1 output class",
                             "give the file targets of 2 or more classes, or --classes 2 or more"}));
  EXPECT_EQ(snapshot(run), before) << "the old run is untouched";

  write_bytes(cwd / "rows.jsonl", "{\"tokens\": [1, 2, 3, 4], \"targets\": [0, 0, 0, 0]}\n");
  const RunResult given = run_headlab(
      train_command(run, {{"--data", cwd / "rows.jsonl"}, {"--classes", "1"}, {"--force", ""}}), cwd.path());
  EXPECT_TRUE(clean_failure(given, 2, {"--classes 1 gives the model 1 output class", "give --classes 2 or more"}));
  EXPECT_EQ(snapshot(run), before);
  // Two classes of which the file uses one are a model like any other.
  const RunResult two = run_headlab(
      train_command(cwd / "two", {{"--data", cwd / "rows.jsonl"}, {"--classes", "2"}, {"--analyze-every", "10"}}),
      cwd.path());
  EXPECT_EQ(two.exit_code, 0) << two.describe();
}

// Held-out rows without a target gave "eval loss 0.0000 acc 0.00%" at every
// log step and a verdict of "loss 0.0000" (QA19 F20): refused before the run
// starts, naming the rows; eval of such rows of a run says there is nothing
// to measure, and writes no dump.
TEST(DataFile, HeldOutRowsWithoutATargetAreRefusedNotScoredZero) {
  TempDir cwd;
  std::string rows, unscored;
  for (int i = 0; i < 8; ++i) rows += "{\"tokens\": [1, 2, 3, " + std::to_string(i % 5) + "]}\n";
  for (int i = 0; i < 4; ++i) unscored += "{\"tokens\": [1, 2, 3, " + std::to_string(i) + "], \"targets\": [-1, -1, -1, -1]}\n";
  write_bytes(cwd / "train.jsonl", rows);
  write_bytes(cwd / "held.jsonl", unscored + "{\"tokens\": [1, 2, 3, 4], \"targets\": [2, 3, 4, 0]}\n");
  const auto flags = [&](const std::string& eval_batch) {
    return std::vector<std::pair<std::string, std::string>>{
        {"--data", cwd / "train.jsonl"}, {"--eval-data", cwd / "held.jsonl"}, {"--eval-batch", eval_batch},
        {"--vocab", "5"}, {"--steps", "2"}};
  };
  const RunResult refused = run_headlab(train_command(cwd / "run", flags("4")), cwd.path());
  EXPECT_TRUE(clean_failure(refused, 2,
                            {"--eval-data " + cwd / "held.jsonl" + " (its first 4 sequences)",
                             "none of the 4 sequences the held-out metrics and the head analysis read has a target",
                             "would read 0 as if measured", "a larger --eval-batch",
                             "give those lines (lines 1, 2, 3 and 4 of " + cwd / "held.jsonl" + ") targets"}));
  EXPECT_FALSE(std::filesystem::exists(cwd / "run"));

  // The fifth line has targets: the run trains; eval of its first 2 rows has nothing to score.
  const RunResult trained = run_headlab(train_command(cwd / "run", flags("5")), cwd.path());
  ASSERT_EQ(trained.exit_code, 0) << trained.describe();
  const RunResult two = run_headlab(
      {"eval", cwd / "run", "--batch", "2", "--dump-logits", cwd / "logits.safetensors"}, cwd.path());
  EXPECT_TRUE(clean_failure(two, 2,
                            {"the 2 sequences evaluated (the run's --eval-data " + cwd / "held.jsonl" +
                                 ") have no target",
                             "no loss or accuracy to measure", "a larger --batch"}));
  EXPECT_FALSE(std::filesystem::exists(cwd / "logits.safetensors"));
  const RunResult all = run_headlab({"eval", cwd / "run", "--json"}, cwd.path());
  ASSERT_EQ(all.exit_code, 0) << all.describe();
  EXPECT_EQ(nlohmann::json::parse(all.out).at("positions"), 4);
}

// A --data line without a target trains nothing, and --eval-fraction could
// hold out every line that had one (QA19 F20): such lines are refused before
// anything is written, named, whatever the split, and before --force removes
// the run the new one would replace.
TEST(DataFile, TrainingLinesWithoutATargetAreRefusedBeforeForceRemovesTheOldRun) {
  TempDir cwd;
  const std::string run = cwd / "run";
  copy_dir(shared_run(), run);
  const auto before = snapshot(run);
  const auto rows = [](const std::string& missing) {
    std::string text;
    for (int i = 0; i < 6; ++i)
      text += "{\"tokens\": [1, 2, 3, " + std::to_string(i % 5) + "], \"targets\": " +
              (i < 2 ? "[2, 3, 4, 0]" : missing) + "}\n";
    return text;
  };
  write_bytes(cwd / "two.jsonl", rows("[-1, -1, -1, -1]"));
  const std::vector<std::string> refusal = {
      "--data " + cwd / "two.jsonl" + ": 4 of its 6 sequences have no target (lines 3, 4, 5 and 6: every target -1",
      "no training step would learn from them", "give them targets, or remove them from the file"};
  for (const std::string seed : {"", "0", "1", "2"}) {
    std::vector<std::pair<std::string, std::string>> flags = {
        {"--data", cwd / "two.jsonl"}, {"--vocab", "5"}, {"--steps", "1"}, {"--force", ""}};
    if (!seed.empty()) flags.insert(flags.end(), {{"--eval-fraction", "0.5"}, {"--split-seed", seed}});
    const RunResult r = run_headlab(train_command(run, flags), cwd.path());
    EXPECT_TRUE(clean_failure(r, 2, refusal)) << "split seed '" << seed << "'";
    EXPECT_EQ(snapshot(run), before) << "the old run is untouched (split seed '" << seed << "')";
  }
  // Given targets, the same lines train.
  write_bytes(cwd / "two.jsonl", rows("[3, 4, 0, 1]"));
  const RunResult trained = run_headlab(
      train_command(cwd / "new", {{"--data", cwd / "two.jsonl"}, {"--eval-fraction", "0.5"}, {"--vocab", "5"},
                                  {"--steps", "1"}}),
      cwd.path());
  EXPECT_EQ(trained.exit_code, 0) << trained.describe();
}

// The rows --eval-fraction holds out are a shuffled share of the file: when
// every one the analysis reads is too short, the refusal names the longest
// by the file's path and line, as the file's own errors do, not by its place
// in the held-out batch (QA25: "sequence 1 of 10"), and says what to add.
TEST(DataFile, TooShortHeldOutRowsAreNamedByTheirLineInTheFile) {
  TempDir cwd;
  const std::string data = cwd / "rows.jsonl";
  // Two lines of 5 tokens (lines 2 and 3, after a blank line), eighteen of 2.
  std::string text = "\n";
  for (int i = 0; i < 20; ++i)
    text += i < 2 ? "{\"tokens\": [1, 2, 3, 4, 5], \"targets\": [0, 1, 2, 0, 1]}\n"
                  : "{\"tokens\": [" + std::to_string(i % 7) + ", 3], \"targets\": [1, 2]}\n";
  write_bytes(data, text);
  // Split seed 3 holds out short lines first: the first 3 held-out rows have 2 tokens each.
  const RunResult r = run_headlab(train_command(cwd / "run", {{"--data", data}, {"--eval-fraction", "0.5"},
                                                              {"--split-seed", "3"}, {"--eval-batch", "3"}}),
                                  cwd.path());
  ASSERT_TRUE(clean_failure(r, 2, {"--eval-fraction 0.5", "shorter than 3 tokens", "(the longest, " + data + ":",
                                   ", has 2)", "add lines of 3 tokens or more to " + data}));
  EXPECT_EQ(r.err.find("sequence 1 of"), std::string::npos) << r.err;
  // The line it names is one of the file's 2-token lines (4 to 21).
  const std::size_t at = r.err.find(data + ":") + data.size() + 1;
  const int line = std::stoi(r.err.substr(at));
  EXPECT_GE(line, 4) << r.err;
  EXPECT_LE(line, 21) << r.err;
  EXPECT_FALSE(std::filesystem::exists(cwd / "run"));
}

// An --eval-data file whose pattern has the name of the task's own (sort's next-sorted) would replace the
// task's, and the task's role be judged on the file's keys (QA19 F11): refused before anything is written.
TEST(DataFile, EvalDataMayNotNameAPatternAsTheTasksOwn) {
  TempDir cwd;
  const std::string data = cwd / "sorted.jsonl";
  write_bytes(data, "{\"tokens\": [2, 1, 3, 1, 2], \"attend\": {\"next-sorted\": [null, null, 2, 2, null]}}\n");
  const RunResult r = run_headlab(
      train_command(cwd / "run", {{"--task", "sort"}, {"--vocab", "4"}, {"--seq-len", "5"}, {"--eval-data", data}}),
      cwd.path());
  EXPECT_TRUE(clean_failure(r, 2, {"--eval-data " + data, "\"next-sorted\"", "sort task's own pattern",
                                   "rename the file's pattern"}));
  EXPECT_FALSE(std::filesystem::exists(cwd / "run"));
}

// A pattern no line gives a key is refused by analyze --data before any work,
// as is a --pattern no sequence has the key of; one whose keys all lie in the
// file's second chunk is scored over the whole file, the first chunk adding
// nothing to it. And a run whose analysis reads
// only lines without a pattern's keys (its first --eval-batch) is refused
// before its first step, saying how to give it some.
TEST(DataFile, APatternIsRefusedOnlyWhenTheWholeSetHasNoKeyOfIt) {
  TempDir cwd, files;
  const std::string keyless = files / "keyless.jsonl", late = files / "late.jsonl";
  write_bytes(keyless, "{\"tokens\": [1, 2, 3, 4], \"attend\": {\"p\": [null, null, null, null]}}\n");
  const RunResult refused = run_headlab({"analyze", shared_run(), "--data", keyless, "--out", cwd / "a"}, cwd.path());
  EXPECT_TRUE(clean_failure(refused, 2, {"keyless.jsonl:1", "\"p\" gives no query a key in this line nor in any other"}));
  EXPECT_TRUE(is_empty_dir(cwd.path()));

  write_bytes(late, "{\"tokens\": [1, 2, 3, 4]}\n{\"tokens\": [4, 3, 2, 1], \"attend\": {\"p\": [null, 0, 1, 2]}}\n");
  const RunResult analyzed =
      run_headlab({"analyze", shared_run(), "--data", late, "--batch", "1", "--out", cwd / "a"}, cwd.path());
  ASSERT_EQ(analyzed.exit_code, 0) << analyzed.describe();
  const nlohmann::json heads = nlohmann::json::parse(read_bytes(cwd / "a/heads.json")).at("heads");
  ASSERT_FALSE(heads.empty());
  for (const nlohmann::json& head : heads) EXPECT_TRUE(head.at("scores").at("user").at("p").is_number()) << head;
  // So is a --pattern whose key no sequence of the file has.
  const RunResult beyond =
      run_headlab({"analyze", shared_run(), "--data", late, "--pattern", "position:5", "--out", cwd / "b"}, cwd.path());
  EXPECT_TRUE(clean_failure(beyond, 2, {"--pattern position:5 gives no query a key in the 2 sequences of --data"}));

  const auto train = train_command(cwd / "run", {{"--data", late}, {"--eval-batch", "1"}, {"--steps", "2"}});
  EXPECT_TRUE(clean_failure(run_headlab(train, cwd.path()), 2,
                            {"late.jsonl", "\"p\" gives no query a key in the 1 sequences", "--eval-batch"}));
  EXPECT_FALSE(std::filesystem::exists(cwd / "run"));
}

// Sizes no flag gave are read from the file (QA19 F1): train.log names them
// and the lines that set them, and one stray id or line too large for memory
// is named by its line in the refusal, with the flags that bound the sizes.
TEST(DataFile, SizesReadFromTheFileAreLoggedAndNamedWhenTheyCannotFit) {
  TempDir cwd;
  const auto with_line_11 = [](const std::string& line) {
    std::string rows;
    for (int i = 1; i <= 20; ++i) rows += i == 11 ? line + "\n" : "{\"tokens\": [0, 1, 2, 3, 4, 5, 6, 7]}\n";
    return rows;
  };
  write_bytes(cwd / "target.jsonl", with_line_11("{\"tokens\": [1, 2, 3], \"targets\": [-1, 2, 5000]}"));
  const RunResult trained =
      run_headlab(train_command(cwd / "run", {{"--data", cwd / "target.jsonl"}, {"--steps", "1"}}), cwd.path());
  ASSERT_EQ(trained.exit_code, 0) << trained.describe();
  const std::string log = read_bytes(cwd / "run/train.log");
  EXPECT_NE(log.find("vocab 5001, classes 5001 and seq-len 8 inferred from " + cwd / "target.jsonl" +
                     " (largest target 5000 at line 11; longest sequence 8 tokens at line 1)"),
            std::string::npos)
      << log;

  write_bytes(cwd / "token.jsonl", with_line_11("{\"tokens\": [1, 2, 2147483646, 3]}"));
  const RunResult huge_id =
      run_headlab(train_command(cwd / "huge", {{"--data", cwd / "token.jsonl"}, {"--steps", "1"}}), cwd.path());
  EXPECT_TRUE(clean_failure(huge_id, 2,
                            {"GB of memory", "vocab 2147483647", "inferred from " + cwd / "token.jsonl",
                             "largest token 2147483646 at line 11", "fix the line", "give --vocab and --seq-len"}));
  std::string long_line = "{\"tokens\": [1";
  for (int i = 1; i < 100000; ++i) long_line += ", 1";
  write_bytes(cwd / "long.jsonl", "{\"tokens\": [1, 2, 3]}\n" + long_line + "]}\n");
  const RunResult too_long =
      run_headlab(train_command(cwd / "long", {{"--data", cwd / "long.jsonl"}, {"--steps", "1"}}), cwd.path());
  EXPECT_TRUE(clean_failure(too_long, 2, {"GB of memory", "seq-len 100000", "longest sequence 100000 tokens at line 2"}));
  // Given, the sizes are no one's inference: the refusal says nothing of the file.
  const RunResult given = run_headlab(
      train_command(cwd / "given", {{"--data", cwd / "long.jsonl"}, {"--vocab", "8"}, {"--seq-len", "100000"}}),
      cwd.path());
  EXPECT_TRUE(clean_failure(given, 2, {"GB of memory"}));
  EXPECT_EQ(given.err.find("inferred"), std::string::npos) << given.err;
  EXPECT_FALSE(std::filesystem::exists(cwd / "huge"));
  EXPECT_FALSE(std::filesystem::exists(cwd / "long"));
  // An --eval-data line beyond the sizes inferred from --data alone is refused
  // with those sizes and the flags that fit both files, not only "longer than
  // the model's seq-len 8".
  write_bytes(cwd / "held.jsonl", "{\"tokens\": [0, 1, 2, 3, 4, 5, 6, 7, 1, 2]}\n");
  const RunResult held = run_headlab(
      train_command(cwd / "held", {{"--data", cwd / "target.jsonl"}, {"--eval-data", cwd / "held.jsonl"}}), cwd.path());
  EXPECT_TRUE(clean_failure(held, 2,
                            {cwd / "held.jsonl" + ":1: 10 tokens, longer than the model's seq-len 8",
                             "seq-len 8 inferred from " + cwd / "target.jsonl", "give --seq-len"}));
  EXPECT_FALSE(std::filesystem::exists(cwd / "held"));
}

// Rows of 6 tokens whose targets, given, are the previous token.
std::string previous_token_rows(bool with_targets) {
  std::string rows;
  for (int i = 0; i < 24; ++i) {
    std::string tokens, targets = "-1";
    for (int j = 0; j < 6; ++j) {
      tokens += (j ? ", " : "") + std::to_string((i * 3 + j * (i % 5 + 1)) % 8);
      if (j > 0) targets += ", " + std::to_string((i * 3 + (j - 1) * (i % 5 + 1)) % 8);
    }
    rows += "{\"tokens\": [" + tokens + "]" + (with_targets ? ", \"targets\": [" + targets + "]" : "") + "}\n";
  }
  return rows;
}

// A file without "targets" is scored on the next token: eval and analyze say
// so when the model learned other targets, as headlab.analyze warns (QA19 F9),
// and say nothing when the file gives its targets.
TEST(DataFile, NextTokenScoresOfAModelTrainedOnOtherTargetsAreWarnedOf) {
  TempDir cwd;
  write_bytes(cwd / "previous.jsonl", previous_token_rows(true));
  write_bytes(cwd / "bare.jsonl", previous_token_rows(false));
  const RunResult trained = run_headlab(
      train_command(cwd / "run", {{"--data", cwd / "previous.jsonl"}, {"--vocab", "8"}, {"--seq-len", "6"},
                                  {"--steps", "2"}}),
      cwd.path());
  ASSERT_EQ(trained.exit_code, 0) << trained.describe();
  const std::vector<std::string> warned = {"warning: --data " + cwd / "bare.jsonl",
                                           "no \"targets\" on 24 of its 24 lines", "of the 120 targets",
                                           "are not the next token"};
  for (const std::vector<std::string>& command :
       {std::vector<std::string>{"eval", cwd / "run", "--data", cwd / "bare.jsonl"},
        std::vector<std::string>{"analyze", cwd / "run", "--data", cwd / "bare.jsonl", "--out", cwd / "a", "--quiet"}}) {
    const RunResult r = run_headlab(command, cwd.path());
    ASSERT_EQ(r.exit_code, 0) << r.describe();
    for (const std::string& mention : warned) EXPECT_NE(r.err.find(mention), std::string::npos) << mention << "\n" << r.err;
  }
  const RunResult own = run_headlab({"eval", cwd / "run", "--data", cwd / "previous.jsonl"}, cwd.path());
  ASSERT_EQ(own.exit_code, 0) << own.describe();
  EXPECT_EQ(own.err, "");
}

// A --batch over the file's lines wraps within each step (QA22 N4): said
// once, on stderr; --batch full and a batch that fits say nothing.
TEST(DataFile, ABatchOverTheFilesLinesIsWarnedOf) {
  TempDir cwd;
  write_bytes(cwd / "previous.jsonl", previous_token_rows(true));  // 24 lines
  const auto train = [&](const std::string& batch) {
    return run_headlab(train_command(cwd / ("run" + batch), {{"--data", cwd / "previous.jsonl"}, {"--vocab", "8"},
                                                             {"--seq-len", "6"}, {"--steps", "2"}, {"--batch", batch}}),
                       cwd.path());
  };
  const RunResult over = train("30");
  ASSERT_EQ(over.exit_code, 0) << over.describe();
  EXPECT_NE(over.err.find("warning: --batch 30 is more than the 24 training sequences"), std::string::npos)
      << over.err;
  for (const std::string batch : {"full", "24"}) {
    const RunResult fits = train(batch);
    ASSERT_EQ(fits.exit_code, 0) << fits.describe();
    EXPECT_EQ(fits.err.find("--batch"), std::string::npos) << batch << "\n" << fits.err;
  }
}

// analyze --data records what it read (QA19 F12): the file's size and hash,
// its sequences and target positions; --json prints that heads.json whole
// (F13.9); and an analysis folder of another checkpoint, or of this one on
// other sequences, is never replaced (F14), while the same analysis is.
TEST(DataFile, AnalyzeDataRecordsWhatItReadAndKeepsOtherAnalyses) {
  TempDir cwd;
  write_bytes(cwd / "rows.jsonl", "{\"tokens\": [3, 0, 7, 1, 2, 5]}\n{\"tokens\": [7, 0, 1]}\n");
  write_bytes(cwd / "other.jsonl", "{\"tokens\": [1, 2, 3, 4]}\n");
  const std::vector<std::string> analyze = {"analyze", shared_run(), "--data", cwd / "rows.jsonl", "--out", cwd / "x"};
  std::vector<std::string> printing = analyze;
  printing.push_back("--json");
  const RunResult first = run_headlab(printing, cwd.path());
  ASSERT_EQ(first.exit_code, 0) << first.describe();
  EXPECT_EQ(first.out, read_bytes(cwd / "x/heads.json")) << "--json prints heads.json, every key of it";
  const nlohmann::json heads = nlohmann::json::parse(read_bytes(cwd / "x/heads.json"));
  EXPECT_EQ(heads.at("data"), cwd / "rows.jsonl");
  const nlohmann::json& record = heads.at("data_file");
  EXPECT_EQ(record.at("path"), cwd / "rows.jsonl");
  EXPECT_EQ(record.at("sequences"), 2);
  EXPECT_EQ(record.at("positions"), 5 + 2);
  EXPECT_EQ(record.at("size"), read_bytes(cwd / "rows.jsonl").size());
  EXPECT_TRUE(record.at("hash").is_number_unsigned());
  EXPECT_EQ(record.at("pipe"), false);
  // The report's settings are the run's config.json, what the model trained
  // on; its title says what was analyzed instead (it showed the file as the
  // run's data, and its eval-batch as the file's rows).
  const nlohmann::json page = page_data(read_bytes(cwd / "x/report.html"));
  EXPECT_EQ(page.at("config"), nlohmann::json::parse(read_bytes(shared_run() + "/config.json")));
  EXPECT_EQ(page.at("title"), "x · analyzed on rows.jsonl · headlab");

  const RunResult again = run_headlab(analyze, cwd.path());
  EXPECT_EQ(again.exit_code, 0) << "the same analysis replaces its own: " << again.describe();
  const auto before = snapshot(cwd / "x");
  std::filesystem::copy_file(shared_run() + "/checkpoint.safetensors", cwd / "copy.safetensors");
  const RunResult other_checkpoint =
      run_headlab({"analyze", cwd / "copy.safetensors", "--data", cwd / "rows.jsonl", "--out", cwd / "x"}, cwd.path());
  EXPECT_TRUE(clean_failure(other_checkpoint, 2,
                            {"--out " + cwd / "x", "another checkpoint", "checkpoint.safetensors", "new folder"}));
  const RunResult other_data =
      run_headlab({"analyze", shared_run(), "--data", cwd / "other.jsonl", "--out", cwd / "x"}, cwd.path());
  EXPECT_TRUE(clean_failure(other_data, 2, {"of this checkpoint on data:" + cwd / "rows.jsonl", "new folder"}));
  EXPECT_EQ(snapshot(cwd / "x"), before);
}

// A hypothesis in a data file is an expected role unless the analysis is
// told it is scored only, and a built-in pattern or a --pattern is one only
// when told it is expected (QA26: only Python could say either):
// --scored-only NAME keeps its scores and drops its role from the verdict,
// --expect NAME adds one; both refuse a name that would change nothing, and
// the run's own heads.json.
TEST(DataFile, AnalyzeScoredOnlyAndExpectChangeTheRolesNotTheScores) {
  TempDir cwd;
  write_bytes(cwd / "rows.jsonl",
              "{\"tokens\": [1, 2, 3, 4], \"attend\": {\"one-back\": [null, 0, 1, 2], \"start\": [0, 0, 0, 0]}}\n"
              "{\"tokens\": [4, 3, 2, 1, 0], \"attend\": {\"start\": [0, 0, 0, 0, 0]}}\n");
  const std::vector<std::string> analyze = {"analyze", shared_run(), "--data", cwd / "rows.jsonl", "--out"};
  auto both = analyze, one = analyze;
  both.push_back(cwd / "both");
  one.insert(one.end(), {cwd / "one", "--scored-only", "start"});
  const RunResult a = run_headlab(both, cwd.path()), b = run_headlab(one, cwd.path());
  ASSERT_EQ(a.exit_code, 0) << a.describe();
  ASSERT_EQ(b.exit_code, 0) << b.describe();
  const nlohmann::json expected = nlohmann::json::parse(read_bytes(cwd / "both/heads.json"));
  const nlohmann::json scored = nlohmann::json::parse(read_bytes(cwd / "one/heads.json"));
  EXPECT_EQ(expected.at("expected_roles").size(), 2u);
  EXPECT_EQ(scored.at("expected_roles"), nlohmann::json::parse(R"([{"role": "one-back", "pattern": "one-back"}])"));
  EXPECT_EQ(scored.at("patterns").size(), 2u) << "both are still scored";
  for (std::size_t h = 0; h < expected.at("heads").size(); ++h)
    EXPECT_EQ(scored.at("heads")[h].at("scores").at("user"), expected.at("heads")[h].at("scores").at("user"));
  EXPECT_NE(scored.at("verdict").at("reasons").at(0).get<std::string>().find("of 1"), std::string::npos)
      << scored.at("verdict").dump();

  // --expect adds a role: a built-in pattern, or a --pattern once given.
  auto more = analyze;
  more.insert(more.end(), {cwd / "more", "--expect", "first-token", "--pattern", "offset:2", "--expect", "offset:2"});
  const RunResult c = run_headlab(more, cwd.path());
  ASSERT_EQ(c.exit_code, 0) << c.describe();
  const nlohmann::json roles = nlohmann::json::parse(read_bytes(cwd / "more/heads.json")).at("expected_roles");
  EXPECT_EQ(roles, nlohmann::json::parse(R"([{"role": "one-back", "pattern": "one-back"},
    {"role": "start", "pattern": "start"}, {"role": "first-token", "pattern": "first-token"},
    {"role": "offset:2", "pattern": "offset:2"}])"));

  const auto refused = [&](std::vector<std::string> flags, const std::vector<std::string>& mentions) {
    auto args = analyze;
    args.push_back(cwd / "x");
    args.insert(args.end(), flags.begin(), flags.end());
    return clean_failure(run_headlab(args, cwd.path()), 2, mentions);
  };
  EXPECT_TRUE(refused({"--scored-only", "strat"}, {"--scored-only strat", "'one-back', 'start'"}));
  EXPECT_TRUE(refused({"--expect", "offset:2"}, {"--expect offset:2 is no pattern", "--pattern offset:K"}));
  EXPECT_TRUE(refused({"--expect", "start"}, {"--expect start", "expects it already"}));
  EXPECT_TRUE(refused({"--expect", "prev"}, {"--expect prev", "'previous-token'"}));
  EXPECT_TRUE(refused({"--expect", "self", "--scored-only", "self"}, {"opposite"}));
  const std::string run = cwd / "run";
  std::filesystem::copy(shared_run(), run);
  const auto before = snapshot(run);
  const RunResult own = run_headlab({"analyze", run, "--scored-only", "start"}, cwd.path());
  EXPECT_TRUE(clean_failure(own, 2, {"--scored-only start", "run's own heads.json", "--out NEW_FOLDER"}));
  EXPECT_EQ(snapshot(run), before);
  EXPECT_FALSE(std::filesystem::exists(cwd / "x"));
}

// A researcher's own corrupted inputs patch from the CLI as from Python
// (QA26: only the task's next-row corruption could): `--corrupted FILE`
// pairs its line b with --data's line b. Written as that next-row corruption
// (rows of one length: row b takes row b + 1's tokens), it must give what
// --patch computes by its own path, head for head; a file that does not pair
// line for line is refused with nothing written.
TEST(DataFile, AnalyzeCorruptedPatchesIntoTheUsersOwnSequences) {
  TempDir cwd;
  const std::vector<std::string> rows = {"[3, 0, 7, 1, 2, 5]", "[7, 0, 1, 4, 4, 2]", "[1, 1, 6, 0, 3, 7]",
                                         "[5, 2, 2, 6, 1, 0]", "[0, 4, 3, 3, 7, 6]"};
  std::string clean, corrupted;
  for (std::size_t b = 0; b < rows.size(); ++b) {
    clean += "{\"tokens\": " + rows[b] + "}\n";
    corrupted += "{\"tokens\": " + rows[(b + 1) % rows.size()] + "}\n";
  }
  write_bytes(cwd / "clean.jsonl", clean);
  write_bytes(cwd / "corrupted.jsonl", corrupted);
  const std::vector<std::string> analyze = {"analyze", shared_run(), "--data", cwd / "clean.jsonl", "--batch", "2"};
  const auto with = [&](std::vector<std::string> args, std::vector<std::string> more) {
    args.insert(args.end(), more.begin(), more.end());
    return args;
  };
  const RunResult task = run_headlab(with(analyze, {"--patch", "--out", cwd / "task"}), cwd.path());
  ASSERT_EQ(task.exit_code, 0) << task.describe();
  const RunResult own = run_headlab(with(analyze, {"--corrupted", cwd / "corrupted.jsonl", "--out", cwd / "own"}), cwd.path());
  ASSERT_EQ(own.exit_code, 0) << own.describe();
  EXPECT_NE(own.out.find("corrupted.jsonl, line for line"), std::string::npos) << "--corrupted implies --patch: " << own.out;
  const nlohmann::json a = nlohmann::json::parse(read_bytes(cwd / "task/heads.json"));
  const nlohmann::json b = nlohmann::json::parse(read_bytes(cwd / "own/heads.json"));
  EXPECT_NEAR(a.at("patching").at("corrupted_loss").get<double>(), b.at("patching").at("corrupted_loss").get<double>(),
              1e-6);
  ASSERT_EQ(a.at("heads").size(), b.at("heads").size());
  for (std::size_t h = 0; h < a.at("heads").size(); ++h) {
    ASSERT_TRUE(a.at("heads")[h].at("patch_restored").is_number()) << a.at("heads")[h].dump();
    EXPECT_NEAR(a.at("heads")[h].at("patch_restored").get<double>(), b.at("heads")[h].at("patch_restored").get<double>(),
                1e-6)
        << "head " << h;
  }
  // The file is what the corrupted run reads: the clean rows themselves corrupt nothing.
  const RunResult same = run_headlab(with(analyze, {"--corrupted", cwd / "clean.jsonl", "--out", cwd / "same"}), cwd.path());
  ASSERT_EQ(same.exit_code, 0) << same.describe();
  const nlohmann::json c = nlohmann::json::parse(read_bytes(cwd / "same/heads.json")).at("patching");
  EXPECT_NEAR(c.at("corrupted_loss").get<double>(), c.at("clean_loss").get<double>(), 1e-6) << c.dump();
  EXPECT_GT(std::abs(a.at("patching").at("corrupted_loss").get<double>() - c.at("clean_loss").get<double>()), 1e-3);
  EXPECT_EQ(b.at("data_file").at("corrupted").at("path"), cwd / "corrupted.jsonl");
  EXPECT_EQ(b.at("data_file").at("corrupted").at("size"), corrupted.size());

  write_bytes(cwd / "fewer.jsonl", "{\"tokens\": " + rows[1] + "}\n");
  std::string shorter = corrupted;
  shorter.replace(shorter.find(", 5]"), 4, "]");  // line 5 (row 0's tokens) one token short
  write_bytes(cwd / "shorter.jsonl", shorter);
  const RunResult fewer = run_headlab(with(analyze, {"--corrupted", cwd / "fewer.jsonl", "--out", cwd / "x"}), cwd.path());
  EXPECT_TRUE(clean_failure(fewer, 2, {"--corrupted", "holds 1 sequences", "5"}));
  const RunResult short_line =
      run_headlab(with(analyze, {"--corrupted", cwd / "shorter.jsonl", "--out", cwd / "x"}), cwd.path());
  EXPECT_TRUE(clean_failure(short_line, 2, {"shorter.jsonl:5 has 5 tokens", "clean.jsonl:5, 6", "exactly as long"}));
  // Read as a data file: what its rules refuse (no target anywhere) says that only the tokens are used.
  std::string no_target;
  for (std::size_t r = 0; r < rows.size(); ++r)
    no_target += "{\"tokens\": " + rows[(r + 1) % rows.size()] + ", \"targets\": [-1, -1, -1, -1, -1, -1]}\n";
  write_bytes(cwd / "no-targets.jsonl", no_target);
  const RunResult no_targets =
      run_headlab(with(analyze, {"--corrupted", cwd / "no-targets.jsonl", "--out", cwd / "x"}), cwd.path());
  EXPECT_TRUE(clean_failure(no_targets, 2, {"--corrupted", "only the tokens are used", "no position has a target"}));
  const RunResult no_data =
      run_headlab({"analyze", shared_run(), "--corrupted", cwd / "corrupted.jsonl", "--out", cwd / "x"}, cwd.path());
  EXPECT_TRUE(clean_failure(no_data, 2, {"--corrupted", "needs --data"}));
  EXPECT_FALSE(std::filesystem::exists(cwd / "x"));
  // `headlab tasks`, where a data file's corruption is said, names the way to one's own.
  const RunResult tasks = run_headlab({"tasks"}, cwd.path());
  EXPECT_NE(tasks.out.find("analyze --data FILE --corrupted FILE2"), std::string::npos) << tasks.out;
  EXPECT_NE(tasks.out.find("analyze --scored-only NAME"), std::string::npos) << tasks.out;
}

// A pipe (`--data <(cmd)`) is named /dev/fd/N, which says nothing later
// (QA19 F13.3): heads.json records it as a pipe with its rows, size and hash,
// and the report is titled "pipe".
TEST(DataFile, AnAnalysisOfAPipeRecordsWhatItHeld) {
  TempDir cwd;
  const std::string rows = "{\"tokens\": [3, 0, 7, 1, 2, 5]}\n{\"tokens\": [7, 0, 1]}\n";
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  ASSERT_EQ(::fcntl(fds[1], F_SETFD, FD_CLOEXEC), 0);  // the child holds the read end only: it sees the end
  ASSERT_EQ(::write(fds[1], rows.data(), rows.size()), static_cast<ssize_t>(rows.size()));
  ::close(fds[1]);
  const RunResult r = run_headlab(
      {"analyze", shared_run(), "--data", "/dev/fd/" + std::to_string(fds[0]), "--out", cwd / "p", "--quiet"},
      cwd.path());
  ::close(fds[0]);
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const nlohmann::json record = nlohmann::json::parse(read_bytes(cwd / "p/heads.json")).at("data_file");
  EXPECT_EQ(record.at("pipe"), true);
  EXPECT_EQ(record.at("sequences"), 2);
  EXPECT_EQ(record.at("size"), rows.size());
  EXPECT_NE(read_bytes(cwd / "p/report.html").find("<title>p · analyzed on pipe · headlab</title>"), std::string::npos);
}

// `train --data /dev/stdin < rows.jsonl` reads a regular file, but config.json
// recorded /dev/stdin, which a resume, eval or analyze of the run then read
// as their own stdin (QA19 F13.4): a descriptor's name is refused, with the
// file's own path. A descriptor the test holds open on the file stands for
// the redirected stdin.
TEST(DataFile, TrainRefusesAFileNamedByADescriptor) {
  TempDir cwd;
  std::string rows;
  for (int i = 0; i < 8; ++i) rows += "{\"tokens\": [1, 2, 3, " + std::to_string(i % 5) + "]}\n";
  write_bytes(cwd / "rows.jsonl", rows);
  const int fd = ::open((cwd / "rows.jsonl").c_str(), O_RDONLY);  // inherited by the child
  ASSERT_GE(fd, 0);
  const std::string own = std::filesystem::canonical(cwd / "rows.jsonl").string();
  for (const std::string& name : {"/dev/fd/" + std::to_string(fd), "/proc/self/fd/" + std::to_string(fd)}) {
    for (const char* flag : {"--data", "--eval-data"}) {
      const RunResult r = run_headlab(
          train_command(cwd / "run", {{"--data", cwd / "rows.jsonl"}, {flag, name}, {"--vocab", "5"}}), cwd.path());
      EXPECT_TRUE(clean_failure(r, 2, {std::string(flag) + " " + name + " names its file by a descriptor of this "
                                           "process", "save it to a file and give its path", "its own path is " + own}));
    }
  }
  ::close(fd);
  EXPECT_FALSE(std::filesystem::exists(cwd / "run"));
}

}  // namespace
}  // namespace headlab::cli_test
