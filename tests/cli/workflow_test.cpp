// Going back in time and extending a run: snapshots (--snapshot-every,
// --keep-snapshots, analyze --step, and a snapshot read by eval and --init),
// --init from a run folder recorded in config.json and train.log, and the
// schedule's horizon kept when --resume --steps extends a decaying run.
#include <gtest/gtest.h>

#include <pty.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <string>
#include <vector>

#include "tests/cli/fixtures.h"

namespace headlab::cli_test {
namespace {

namespace fs = std::filesystem;

TEST(Snapshots, KeptPrunedAnalyzedAndRead) {
  TempDir cwd;
  const std::string run = cwd / "run";
  const RunResult trained =
      run_headlab(train_command(run, {{"--snapshot-every", "5"}, {"--keep-snapshots", "3"}}), cwd.path());
  ASSERT_EQ(trained.exit_code, 0) << trained.describe();
  // Steps 5 to 20, the oldest beyond three removed.
  EXPECT_FALSE(fs::exists(run + "/snapshots/step-000005.safetensors"));
  for (const char* name : {"step-000010.safetensors", "step-000015.safetensors", "step-000020.safetensors"})
    EXPECT_TRUE(fs::exists(run + "/snapshots/" + name)) << name;
  EXPECT_EQ(checkpoint_step(run + "/snapshots/step-000010.safetensors"), 10);

  // The report steps each head's map through the snapshots.
  const nlohmann::json data = page_data(read_bytes(run + "/report.html"));
  ASSERT_TRUE(data.contains("snapshots"));
  ASSERT_EQ(data.at("snapshots").size(), 3u);
  EXPECT_EQ(data.at("snapshots")[0].at("step"), 10);
  EXPECT_EQ(data.at("snapshots")[0].at("attention").size(), 1u);     // layers
  EXPECT_EQ(data.at("snapshots")[0].at("attention")[0].size(), 2u);  // heads
  EXPECT_EQ(data.at("snapshots")[0].at("labels").size(), 2u);

  // analyze --step: beside the snapshot, the run's own files untouched.
  const std::string heads_before = read_bytes(run + "/heads.json");
  const RunResult analyzed = run_headlab({"analyze", run, "--step", "10", "--no-color"}, cwd.path());
  ASSERT_EQ(analyzed.exit_code, 0) << analyzed.describe();
  EXPECT_TRUE(fs::exists(run + "/snapshots/step-000010/heads.json"));
  EXPECT_EQ(read_bytes(run + "/heads.json"), heads_before);
  const RunResult missing = run_headlab({"analyze", run, "--step", "5"}, cwd.path());
  EXPECT_TRUE(clean_failure(missing, 2, {"--step 5", "10, 15, 20"}));

  // eval and --init read a snapshot as any checkpoint.
  const RunResult evaluated = run_headlab({"eval", run + "/snapshots/step-000015.safetensors"}, cwd.path());
  EXPECT_EQ(evaluated.exit_code, 0) << evaluated.describe();
  const RunResult init = run_headlab(
      train_command(cwd / "from", {{"--steps", "0"}, {"--init", run + "/snapshots/step-000015.safetensors"}}),
      cwd.path());
  ASSERT_EQ(init.exit_code, 0) << init.describe();
  const RawSafetensors from = RawSafetensors::read(run + "/snapshots/step-000015.safetensors");
  EXPECT_EQ(RawSafetensors::read(cwd / "from/checkpoint.safetensors").tensor_bytes("head.weight"),
            from.tensor_bytes("head.weight"));
}

// analyze --step N with another --task or --batch is not the snapshot's
// own analysis: it goes beside it (snapshots/step-NNNNNN/analysis-TASK/), as
// in a run folder, says where, and the snapshot's own files stay as they were.
TEST(Snapshots, AnotherTaskOrBatchGoesBesideTheSnapshotsOwnAnalysis) {
  TempDir cwd;
  const std::string run = cwd / "run";
  // previous predicts tokens, so another such task (first) fits its model.
  const RunResult trained =
      run_headlab(train_command(run, {{"--task", "previous"}, {"--snapshot-every", "10"}}), cwd.path());
  ASSERT_EQ(trained.exit_code, 0) << trained.describe();
  const std::string own = run + "/snapshots/step-000010";
  ASSERT_EQ(run_headlab({"analyze", run, "--step", "10"}, cwd.path()).exit_code, 0);
  const std::string heads = read_bytes(own + "/heads.json"), report = read_bytes(own + "/report.html");

  const RunResult task = run_headlab({"analyze", run, "--step", "10", "--task", "first", "--no-color"}, cwd.path());
  ASSERT_EQ(task.exit_code, 0) << task.describe();
  EXPECT_NE(task.err.find("its analysis on first goes to " + own + "/analysis-first"), std::string::npos)
      << task.err;
  EXPECT_NE(task.out.find("heads:  " + own + "/analysis-first/heads.json"), std::string::npos) << task.out;
  EXPECT_EQ(nlohmann::json::parse(read_bytes(own + "/analysis-first/heads.json")).at("analyzed"), "first");
  const RunResult batch = run_headlab({"analyze", run, "--step", "10", "--batch", "4"}, cwd.path());
  ASSERT_EQ(batch.exit_code, 0) << batch.describe();
  EXPECT_NE(batch.err.find("this one of 4 sequences goes to " + own + "/analysis-batch-4"), std::string::npos)
      << batch.err;
  EXPECT_TRUE(fs::exists(own + "/analysis-batch-4/heads.json"));
  EXPECT_EQ(read_bytes(own + "/heads.json"), heads) << "the snapshot's own analysis was replaced";
  EXPECT_EQ(read_bytes(own + "/report.html"), report);
}

// --keep-snapshots removes old snapshot files, never the analysis a user
// asked for of one: the folder stays, and whatever lists or reads snapshots
// (analyze --step, report.html's slider, --resume) goes on beside it.
TEST(Snapshots, AnAnalysisOutlivesItsPrunedSnapshot) {
  TempDir cwd;
  const std::string run = cwd / "run";
  ASSERT_EQ(run_headlab(train_command(run, {{"--snapshot-every", "10"}, {"--keep-snapshots", "2"}}), cwd.path())
                .exit_code,
            0);
  ASSERT_EQ(run_headlab({"analyze", run, "--step", "10"}, cwd.path()).exit_code, 0);
  const std::string analysis = run + "/snapshots/step-000010";
  const std::string heads = read_bytes(analysis + "/heads.json");
  const RunResult resumed = run_headlab({"train", "--resume", run, "--steps", "30"}, cwd.path());
  ASSERT_EQ(resumed.exit_code, 0) << resumed.describe();
  EXPECT_FALSE(fs::exists(run + "/snapshots/step-000010.safetensors")) << "pruned";
  EXPECT_EQ(read_bytes(analysis + "/heads.json"), heads) << "the analysis went with its snapshot";
  const nlohmann::json data = page_data(read_bytes(run + "/report.html"));
  ASSERT_EQ(data.at("snapshots").size(), 2u);
  EXPECT_EQ(data.at("snapshots")[0].at("step"), 20);
  EXPECT_TRUE(clean_failure(run_headlab({"analyze", run, "--step", "10"}, cwd.path()), 2,
                            {"--step 10", "its snapshot is gone", "kept in " + analysis, "it has 20, 30"}));
  // The kept folder itself, given as the run: named for what it is.
  EXPECT_TRUE(clean_failure(run_headlab({"analyze", analysis}, cwd.path()), 2,
                            {analysis + " holds the analysis of step 10's snapshot, which is gone",
                             "its heads.json and report.html are still there"}));
  // --out naming the run for a snapshot's analysis: the run's own folder, not "another run's".
  EXPECT_TRUE(clean_failure(run_headlab({"analyze", run, "--step", "20", "--out", run}, cwd.path()), 2,
                            {"--out " + run + " is the run's own folder",
                             "this analysis then goes to " + run + "/snapshots/step-000020"}));
}

TEST(Snapshots, StepOfARunWithoutSnapshotsSaysHowToGetThem) {
  TempDir cwd;
  const RunResult r = run_headlab({"analyze", shared_run(), "--step", "10"}, cwd.path());
  EXPECT_TRUE(clean_failure(r, 2, {"--step 10", "--snapshot-every"}));
}

// A run before its first checkpoint is one still training, not "no such run
// folder" (QA19 F7): analyze and eval name the PID, when the checkpoint comes
// and --checkpoint-every.
TEST(Snapshots, ARunBeforeItsFirstCheckpointIsSaidToBeTraining) {
  TempDir dir;
  Child child(headlab_path(), train_command(dir / "live", {{"--steps", "100000"}, {"--log-every", "1"}}), dir.path(),
              dir.path());
  ASSERT_TRUE(wait_until([&] { return fs::exists(dir / "live/metrics.jsonl") || child.finished(); }));
  ASSERT_FALSE(child.finished()) << child.wait().describe();
  for (const char* command : {"analyze", "eval"})
    EXPECT_TRUE(clean_failure(run_headlab({command, dir / "live"}, dir.path()), 2,
                              {dir / "live is a run still training", "PID " + std::to_string(child.pid()),
                               "until its last step, 100000", "--checkpoint-every N"}))
        << command;
  child.signal(SIGKILL);
  child.wait();
  // Once it has ended, a folder without a checkpoint is said to be that.
  EXPECT_TRUE(clean_failure(run_headlab({"analyze", dir / "live"}, dir.path()), 2, {"without a checkpoint"}));
}

TEST(InitSource, RunFolderRecordedInConfigAndLog) {
  TempDir cwd;
  const RunResult r = run_headlab(train_command(cwd / "init", {{"--steps", "0"}, {"--init", shared_run()}}), cwd.path());
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const nlohmann::json config = nlohmann::json::parse(read_bytes(cwd / "init/config.json"));
  EXPECT_EQ(config.at("init"), fs::absolute(shared_run() + "/checkpoint.safetensors").lexically_normal().string());
  EXPECT_NE(read_bytes(cwd / "init/train.log").find("weights from --init " + shared_run()), std::string::npos);
}

TEST(InitSource, AMismatchNamesTheCheckpointNotAFlagNeverGiven) {
  TempDir cwd;
  // The shared run's model has first-prev-pair's 64 classes; previous has 8.
  const RunResult r =
      run_headlab(train_command(cwd / "init", {{"--init", shared_run()}, {"--task", "previous"}}), cwd.path());
  EXPECT_TRUE(clean_failure(r, 2, {"--init", "checkpoint's model"}));
  EXPECT_EQ(r.err.find("--classes"), std::string::npos) << r.err;
}

TEST(ScheduleHorizon, ExtendingACosineRunKeepsItsDecayAndSaysSo) {
  TempDir cwd;
  const std::string run = cwd / "run";
  ASSERT_EQ(run_headlab(train_command(run, {{"--schedule", "cosine"}, {"--log-every", "10"}}), cwd.path()).exit_code, 0);
  EXPECT_EQ(nlohmann::json::parse(read_bytes(run + "/config.json")).at("schedule-steps"), 20);
  const RunResult extended = run_headlab({"train", "--resume", run, "--steps", "30"}, cwd.path());
  ASSERT_EQ(extended.exit_code, 0) << extended.describe();
  EXPECT_NE(read_bytes(run + "/train.log").find("goes past the cosine schedule's horizon"), std::string::npos);
  // Past the horizon the learning rate stays at the floor (--min-lr 0), never back up to --lr.
  for (const nlohmann::json& line : metrics_without_timing(run)) {
    if (line.at("step").get<int64_t>() > 20 && line.contains("lr")) {
      EXPECT_EQ(line.at("lr"), 0.0) << line.dump();
    }
  }

  const RunResult stretched =
      run_headlab({"train", "--resume", run, "--steps", "40", "--schedule-steps", "40"}, cwd.path());
  ASSERT_EQ(stretched.exit_code, 0) << stretched.describe();
  EXPECT_NE(read_bytes(run + "/train.log").find("--schedule-steps 40 moves the cosine schedule's horizon from step 20"),
            std::string::npos);
}

TEST(LogEvery, ZeroLogsOnlyAtTheEndAsAnalyzeEveryZeroAnalyzes) {
  TempDir cwd;
  const RunResult r = run_headlab(train_command(cwd / "run", {{"--log-every", "0"}}), cwd.path());
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const std::vector<nlohmann::json> lines = metrics_without_timing(cwd / "run");
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].at("step"), 20);
  EXPECT_TRUE(lines[0].contains("eval_loss"));
}

}  // namespace
}  // namespace headlab::cli_test

namespace headlab::cli_test {
namespace {

TEST(SuggestedModel, TasksShowItAndAShortRunIsToldTheFlags) {
  TempDir cwd;
  const RunResult tasks = run_headlab({"tasks"}, cwd.path());
  ASSERT_EQ(tasks.exit_code, 0) << tasks.describe();
  EXPECT_NE(tasks.out.find("suggested model: headlab train --task induction --layers 2"), std::string::npos)
      << tasks.out;
  const RunResult r = run_headlab(train_command(cwd / "run", {{"--task", "induction"}, {"--steps", "2"}}), cwd.path());
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const std::string log = read_bytes(cwd / "run/train.log");
  EXPECT_NE(log.find("task induction needs a bigger model than --layers 1"), std::string::npos) << log;
  EXPECT_NE(log.find("--layers 2 --attn-only"), std::string::npos) << log;
}

}  // namespace
}  // namespace headlab::cli_test

namespace headlab::cli_test {
namespace {

// 40 sequences of 4 to 7 tokens in [0, 10), next-token targets.
std::string write_data(const TempDir& dir) {
  std::string text;
  for (int i = 0; i < 40; ++i) {
    text += "{\"tokens\": [";
    for (int j = 0; j < 4 + i % 4; ++j) text += (j ? ", " : "") + std::to_string((i + 3 * j) % 10);
    text += "]}\n";
  }
  write_bytes(dir / "seqs.jsonl", text);
  return dir / "seqs.jsonl";
}

TEST(DataRun, SizesFromTheFileAndTheFileNamedEverywhere) {
  TempDir cwd;
  const std::string data = write_data(cwd);
  const RunResult r = run_headlab(train_command(cwd / "run", {{"--data", data}, {"--steps", "4"}}), cwd.path());
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const std::string log = read_bytes(cwd / "run/train.log");
  EXPECT_NE(log.find("7 tokens"), std::string::npos) << log;  // the longest sequence
  EXPECT_NE(log.find("which it also trains on"), std::string::npos) << log;
  EXPECT_NE(log.find("--eval-fraction"), std::string::npos) << log;
  EXPECT_EQ(nlohmann::json::parse(read_bytes(cwd / "run/heads.json")).at("data"),
            fs::absolute(data).lexically_normal().string());
  const std::string html = read_bytes(cwd / "run/report.html");
  EXPECT_NE(html.find("<title>run · seqs.jsonl"), std::string::npos);

  // --eval-fraction holds a share out: no warning, and a usage error beyond the file.
  const RunResult held =
      run_headlab(train_command(cwd / "held", {{"--data", data}, {"--steps", "4"}, {"--eval-fraction", "0.25"}}),
                  cwd.path());
  ASSERT_EQ(held.exit_code, 0) << held.describe();
  EXPECT_EQ(read_bytes(cwd / "held/train.log").find("which it also trains on"), std::string::npos);
  const RunResult bad =
      run_headlab(train_command(cwd / "bad", {{"--data", data}, {"--eval-fraction", "0.001"}}), cwd.path());
  EXPECT_TRUE(clean_failure(bad, 2, {"--eval-fraction", "40 sequences"}));
  const RunResult no_data = run_headlab(train_command(cwd / "nodata", {{"--eval-fraction", "0.5"}}), cwd.path());
  EXPECT_TRUE(clean_failure(no_data, 2, {"--eval-fraction", "--data"}));
}

// A run names its data file by its absolute path: when the file is gone and
// the run folder has no copy of it, the refusal names both and what to do.
TEST(DataRun, AMissingDataFileIsNamedWithTheWayBack) {
  TempDir cwd;
  const std::string data = write_data(cwd);
  const RunResult trained = run_headlab(train_command(cwd / "run", {{"--data", data}, {"--steps", "2"}}), cwd.path());
  ASSERT_EQ(trained.exit_code, 0) << trained.describe();
  fs::rename(data, cwd / "elsewhere.jsonl");
  const std::string absolute = fs::absolute(data).lexically_normal().string();
  const std::string own = fs::absolute(cwd / "run/seqs.jsonl").lexically_normal().string();
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"eval", cwd / "run"}, {"analyze", cwd / "run"}, {"train", "--resume", cwd / "run", "--steps", "4"}})
    EXPECT_TRUE(clean_failure(run_headlab(args, cwd.path()), 2,
                              {"--data " + absolute + ": it is missing, and so is the run folder's own " + own,
                               "absolute paths", "put the file back"}))
        << args[0];
}

// A run trained on a file inside its folder, as train(data=rows) writes it.
std::string train_with_own_data(const TempDir& cwd, const std::string& run) {
  fs::create_directories(run);
  write_bytes(run + "/.headlab", "{\"headlab\":\"run\"}\n");  // a run folder's marker: --force may use it
  fs::rename(write_data(cwd), run + "/data.jsonl");
  const RunResult trained = run_headlab(
      train_command(run, {{"--data", run + "/data.jsonl"}, {"--steps", "2"}, {"--force", ""}}), cwd.path());
  EXPECT_EQ(trained.exit_code, 0) << trained.describe();
  return fs::absolute(run + "/data.jsonl").lexically_normal().string();
}

// A run folder moved whole reads its own copy of its data file (the recorded
// hash), saying so; eval and analyze write nothing of it into the folder, and
// --resume records the file where it now is.
TEST(DataRun, AMovedRunFolderReadsItsOwnDataFile) {
  TempDir cwd;
  const std::string old_path = train_with_own_data(cwd, cwd / "run");
  fs::rename(cwd / "run", cwd / "moved");
  const std::string moved = cwd / "moved";
  const std::string new_path = fs::absolute(moved + "/data.jsonl").lexically_normal().string();
  const std::string checkpoint = read_bytes(moved + "/checkpoint.safetensors");
  const std::string config = read_bytes(moved + "/config.json");
  const std::string note = "--data is " + new_path + ", in place of " + old_path + " (missing)";
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"eval", moved}, {"analyze", moved, "--no-color"}}) {
    const RunResult r = run_headlab(args, cwd.path());
    ASSERT_EQ(r.exit_code, 0) << r.describe();
    EXPECT_NE(r.err.find(note), std::string::npos) << r.describe();
  }
  EXPECT_EQ(read_bytes(moved + "/checkpoint.safetensors"), checkpoint);
  EXPECT_EQ(read_bytes(moved + "/config.json"), config);
  EXPECT_EQ(nlohmann::json::parse(read_bytes(moved + "/heads.json")).at("data"), new_path);

  // A resume stopped before its first checkpoint leaves config.json naming
  // the new path, the checkpoint the old one: still the run's.
  nlohmann::json edited = nlohmann::json::parse(config);
  edited["data"] = new_path;
  write_bytes(moved + "/config.json", edited.dump(2) + "\n");
  const RunResult between = run_headlab({"eval", moved}, cwd.path());
  EXPECT_EQ(between.exit_code, 0) << between.describe();

  const RunResult resumed = run_headlab({"train", "--resume", moved, "--steps", "4"}, cwd.path());
  ASSERT_EQ(resumed.exit_code, 0) << resumed.describe();
  EXPECT_NE(resumed.err.find(note), std::string::npos) << resumed.describe();
  EXPECT_EQ(RawSafetensors::read(moved + "/checkpoint.safetensors").meta_json("data.file").at("path"), new_path);
  EXPECT_EQ(nlohmann::json::parse(read_bytes(moved + "/config.json")).at("data"), new_path);
  const RunResult again = run_headlab({"eval", moved}, cwd.path());
  ASSERT_EQ(again.exit_code, 0) << again.describe();
  EXPECT_EQ(again.err.find("in place of"), std::string::npos) << again.describe();
}

// A copy's own data file is read only when it has the recorded hash: an
// edited one is refused, named beside the recorded file.
TEST(DataRun, ACopiedRunFolderWithAnEditedDataFileIsRefused) {
  TempDir cwd;
  const std::string old_path = train_with_own_data(cwd, cwd / "run");
  copy_dir(cwd / "run", cwd / "copy");
  write_bytes(cwd / "copy/data.jsonl", read_bytes(cwd / "copy/data.jsonl") + "{\"tokens\": [1, 2, 3, 4]}\n");
  const std::string own = fs::absolute(cwd / "copy/data.jsonl").lexically_normal().string();
  // The original changed too: neither is the file the run trained on.
  write_bytes(old_path, "{\"tokens\": [1, 2, 3, 4]}\n");
  EXPECT_TRUE(clean_failure(run_headlab({"eval", cwd / "copy"}, cwd.path()), 2,
                            {"--data file " + old_path + " has changed", "the run folder's own " + own +
                             " is another file", "restore either file"}));
  fs::remove(old_path);
  EXPECT_TRUE(clean_failure(run_headlab({"analyze", cwd / "copy"}, cwd.path()), 2,
                            {"--data " + old_path + ": it is missing, and the run folder's own " + own +
                             " is another file"}));
}

// eval and analyze of a --data file read all of it, whatever share of its own
// file the run held out (--eval-fraction belongs to the run's sets, not to
// another source's).
TEST(DataRun, EvalAndAnalyzeOfAFileReadAllOfItWhateverTheRunHeldOut) {
  TempDir cwd;
  const std::string data = write_data(cwd);  // 40 sequences
  const RunResult held =
      run_headlab(train_command(cwd / "held", {{"--data", data}, {"--steps", "4"}, {"--eval-fraction", "0.25"}}),
                  cwd.path());
  ASSERT_EQ(held.exit_code, 0) << held.describe();
  const RunResult eval = run_headlab({"eval", cwd / "held", "--data", data, "--json"}, cwd.path());
  ASSERT_EQ(eval.exit_code, 0) << eval.describe();
  const nlohmann::json scored = nlohmann::json::parse(eval.out);
  EXPECT_EQ(scored.at("sequences"), 40);
  const RunResult analyzed = run_headlab({"analyze", cwd / "held", "--data", data, "--out", cwd / "all"}, cwd.path());
  ASSERT_EQ(analyzed.exit_code, 0) << analyzed.describe();
  // The analysis's clean loss is eval's over the same 40 sequences, not over the held-out 10.
  EXPECT_NEAR(nlohmann::json::parse(read_bytes(cwd / "all/heads.json")).at("loss").get<double>(),
              scored.at("loss").get<double>(), 1e-6);
}

// A --data run's config.json holds "task" (the unused default's) beside
// "data", as every run folder trained on a file has: it resumes, evaluates and
// analyzes; its readers are shown the file, never the default task. eval
// --seed does nothing on a file (a warning says so) and never redraws the
// run's held-out share; another task than the run's, shorter than the
// model's positions, is evaluated and analyzed at its own length.
TEST(DataRun, AFileRunNamesItsFileAndReadsShorterTasks) {
  TempDir cwd;
  std::string text;  // 40 sequences of 8 tokens in [0, 8): the sizes of task first, but 8 positions
  for (int i = 0; i < 40; ++i) {
    text += "{\"tokens\": [";
    for (int j = 0; j < 8; ++j) text += (j ? ", " : "") + std::to_string((i + 3 * j) % 8);
    text += "]}\n";
  }
  write_bytes(cwd / "eight.jsonl", text);
  const std::string run = cwd / "run";
  const RunResult trained = run_headlab(
      train_command(run, {{"--data", cwd / "eight.jsonl"}, {"--steps", "4"}, {"--eval-fraction", "0.25"}}), cwd.path());
  ASSERT_EQ(trained.exit_code, 0) << trained.describe();
  const nlohmann::json config = nlohmann::json::parse(read_bytes(run + "/config.json"));
  EXPECT_EQ(config.at("task"), "first-prev-pair");
  EXPECT_EQ(config.at("data"), fs::absolute(cwd / "eight.jsonl").lexically_normal().string());
  EXPECT_EQ(page_data(read_bytes(run + "/report.html")).at("config").at("data"), config.at("data"));

  const RunResult resumed = run_headlab({"train", "--resume", run, "--steps", "6"}, cwd.path());
  ASSERT_EQ(resumed.exit_code, 0) << resumed.describe();
  const RunResult analyzed = run_headlab({"analyze", run}, cwd.path());
  ASSERT_EQ(analyzed.exit_code, 0) << analyzed.describe();

  const RunResult eval = run_headlab({"eval", run, "--json"}, cwd.path());
  ASSERT_EQ(eval.exit_code, 0) << eval.describe();
  EXPECT_EQ(eval.err, "");
  const RunResult seeded = run_headlab({"eval", run, "--json", "--seed", "5"}, cwd.path());
  ASSERT_EQ(seeded.exit_code, 0) << seeded.describe();
  EXPECT_EQ(std::count(seeded.err.begin(), seeded.err.end(), '\n'), 1) << seeded.err;
  EXPECT_NE(seeded.err.find("warning: --seed 5 does nothing here"), std::string::npos) << seeded.err;
  EXPECT_EQ(nlohmann::json::parse(seeded.out), nlohmann::json::parse(eval.out)) << "--seed redrew the held-out share";

  // Task first has 6 positions; the model 8.
  const RunResult first = run_headlab({"eval", run, "--task", "first", "--json", "--seed", "5"}, cwd.path());
  ASSERT_EQ(first.exit_code, 0) << first.describe();
  EXPECT_EQ(first.err, "") << "a task's batch is drawn with --seed";
  EXPECT_EQ(nlohmann::json::parse(first.out).at("task"), "first");
  const RunResult on_first = run_headlab({"analyze", run, "--task", "first"}, cwd.path());
  ASSERT_EQ(on_first.exit_code, 0) << on_first.describe();
  const nlohmann::json heads = nlohmann::json::parse(read_bytes(run + "/analysis-first/heads.json"));
  EXPECT_EQ(heads.at("task"), "first");
  EXPECT_EQ(heads.at("example").at("tokens").size(), 6u) << heads.at("example").dump();
  // Its report shows the run's settings (the file it trained on), and says in
  // its title that task first was analyzed instead.
  const nlohmann::json page = page_data(read_bytes(run + "/analysis-first/report.html"));
  EXPECT_EQ(page.at("config"), nlohmann::json::parse(read_bytes(run + "/config.json")));
  EXPECT_EQ(page.at("title"), "analysis-first · analyzed on first · headlab");
}

// What `headlab ARGS` prints to a terminal (a pseudo-terminal), with NO_COLOR
// set to `no_color` or unset (nullptr).
std::string on_terminal(const std::vector<std::string>& args, const char* no_color) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e)
    if (!std::string(*e).starts_with("NO_COLOR=")) env.emplace_back(*e);
  if (no_color != nullptr) env.push_back(std::string("NO_COLOR=") + no_color);
  std::vector<char*> argv{const_cast<char*>(headlab_path().c_str())}, envp;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (std::string& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  int master = -1;
  const pid_t pid = forkpty(&master, nullptr, nullptr, nullptr);
  if (pid == 0) {
    execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  std::string out;
  char buffer[4096];
  for (ssize_t n; (n = read(master, buffer, sizeof buffer)) > 0;) out.append(buffer, static_cast<std::size_t>(n));
  close(master);
  int status = 0;
  waitpid(pid, &status, 0);
  return out;
}

TEST(Output, NoColorGivesNoAnsiCodesOnATerminal) {
  TempDir out;
  const std::vector<std::string> analyze = {"analyze", shared_run(), "--out", out.path()};
  EXPECT_NE(on_terminal(analyze, nullptr).find("\033["), std::string::npos) << "no colours on a terminal at all";
  EXPECT_EQ(on_terminal(analyze, "1").find("\033["), std::string::npos);
  EXPECT_NE(on_terminal(analyze, "").find("\033["), std::string::npos) << "NO_COLOR= (empty) still has colours";
}

}  // namespace
}  // namespace headlab::cli_test
