// A resumed or extended run keeps its history (README, "--resume DIR"):
//  - the line metrics.jsonl has of the checkpoint's step stays when that step
//    is off the --log-every grid: its head analysis (no later step writes it
//    again), and the whole line when the old --log-every wrote it on its grid;
//    only an early last log line's fields go, whose window the next log line
//    of the extension covers, so the run equals the uninterrupted one;
//  - a run killed with snapshots but no (or an older) checkpoint goes on from
//    its newest snapshot, bit for bit, and says so, and which lines of the
//    lost steps after it metrics.jsonl dropped;
//  - a setting config.json fixes may be given again at its own value.
#include <gtest/gtest.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <vector>

#include "tests/cli/fixtures.h"

namespace headlab::cli_test {
namespace {

namespace fs = std::filesystem;

std::vector<int64_t> steps_of(const std::vector<nlohmann::json>& lines) {
  std::vector<int64_t> steps;
  for (const nlohmann::json& line : lines) steps.push_back(line.at("step").get<int64_t>());
  return steps;
}

// Analysis at steps 4, 8, 12, 16, 20 (and the log-spaced ones before 4), logs at 5, 10, 15, 20.
const std::vector<std::pair<std::string, std::string>> kGrids = {{"--log-every", "5"}, {"--analyze-every", "4"}};

// On those grids, DIR/whole trains its 20 steps and DIR/extended stops at `steps`, to be extended.
::testing::AssertionResult whole_and_short_runs(const TempDir& dir, const std::string& steps) {
  auto short_run = kGrids;
  short_run.emplace_back("--steps", steps);
  for (const auto& [name, flags] : {std::pair{"whole", kGrids}, std::pair{"extended", short_run}}) {
    const RunResult r = run_headlab(train_command(dir / name, flags), dir.path());
    if (r.exit_code != 0) return ::testing::AssertionFailure() << r.describe();
  }
  return ::testing::AssertionSuccess();
}

// Repro 2 of QA19 F3: a run that ended at step 12 (an analysis step off the log grid: its last line holds its
// analysis and an early log), extended to 20, equals the 20-step run, which has step 12's analysis.
TEST(ResumeHistory, ExtendingFromAnAnalysisStepOffTheLogGridKeepsItsAnalysis) {
  TempDir dir;
  ASSERT_TRUE(whole_and_short_runs(dir, "12"));
  ASSERT_TRUE(metrics_without_timing(dir / "extended").back().contains("eval_loss")) << "the last step logs early";
  const RunResult r = run_headlab({"train", "--resume", dir / "extended", "--steps", "20"}, dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.describe();

  const auto lines = metrics_without_timing(dir / "extended"), reference = metrics_without_timing(dir / "whole");
  EXPECT_EQ(steps_of(lines), steps_of(reference));
  EXPECT_EQ(lines, reference);
  EXPECT_EQ(read_bytes(dir / "extended/checkpoint.safetensors"), read_bytes(dir / "whole/checkpoint.safetensors"));
}

// A run that ended at step 13, off both grids, holds its final analysis in its last line (marked "final", with the
// heads.json it matches); extended to 20 it equals the 20-step run, which has no line at step 13.
TEST(ResumeHistory, ExtendingPastAFinalAnalysisOffTheGridDropsIt) {
  TempDir dir;
  ASSERT_TRUE(whole_and_short_runs(dir, "13"));
  const nlohmann::json last = metrics_without_timing(dir / "extended").back();
  ASSERT_EQ(last.at("step"), 13);
  EXPECT_EQ(last.value("final", false), true);
  const nlohmann::json heads = nlohmann::json::parse(read_bytes(dir / "extended/heads.json"));
  EXPECT_EQ(last.at("specialized"), heads.at("verdict").at("specialized"));
  const RunResult r = run_headlab({"train", "--resume", dir / "extended", "--steps", "20"}, dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(metrics_without_timing(dir / "extended"), metrics_without_timing(dir / "whole"));
}

// Repro 4 of QA19 F3: --log-every changed on resume keeps the line the old grid wrote at the checkpoint's step,
// although that step is off the new grid.
TEST(ResumeHistory, ANewLogEveryKeepsTheLineTheOldGridWrote) {
  TempDir dir;
  const std::string run = dir / "run";
  ASSERT_EQ(run_headlab(train_command(run, {{"--steps", "10"}, {"--log-every", "5"}}), dir.path()).exit_code, 0);
  const std::vector<nlohmann::json> before = metrics_without_timing(run);
  ASSERT_EQ(steps_of(before), (std::vector<int64_t>{5, 10}));
  const RunResult r = run_headlab({"train", "--resume", run, "--steps", "20", "--log-every", "3"}, dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.describe();

  const std::vector<nlohmann::json> after = metrics_without_timing(run);
  EXPECT_EQ(steps_of(after), (std::vector<int64_t>{5, 10, 12, 15, 18, 20}));
  ASSERT_GE(after.size(), 2u);
  EXPECT_EQ(after[1], before[1]) << "step 10's line, loss and eval loss included, is the old run's";
}

// QA19 F15 with F3's repro 3: a run killed (SIGKILL) after its step-12 snapshot, before any checkpoint
// (--checkpoint-every 0), and one whose checkpoint is older than its newest snapshot, go on from that snapshot and
// end as the uninterrupted run, step 12's analysis line (off the log grid) included. Built from a finished run:
// what a kill leaves is the snapshots, metrics.jsonl past the snapshot, and no heads.json.
TEST(ResumeHistory, AKilledRunGoesOnFromItsNewestSnapshot) {
  TempDir dir;
  auto flags = kGrids;
  flags.emplace_back("--snapshot-every", "6");
  ASSERT_EQ(run_headlab(train_command(dir / "whole", flags), dir.path()).exit_code, 0);
  for (const bool older_checkpoint : {false, true}) {
    SCOPED_TRACE(older_checkpoint ? "a checkpoint of step 6" : "no checkpoint");
    const std::string run = dir / (older_checkpoint ? "older" : "none");
    copy_dir(dir / "whole", run);
    fs::remove(run + "/snapshots/step-000018.safetensors");
    fs::remove(run + "/heads.json");
    fs::remove(run + "/checkpoint.safetensors");
    if (older_checkpoint) fs::copy_file(run + "/snapshots/step-000006.safetensors", run + "/checkpoint.safetensors");

    const RunResult r = run_headlab({"train", "--resume", run}, dir.path());
    ASSERT_EQ(r.exit_code, 0) << r.describe();
    const std::string said = std::string("resuming from the run's newest snapshot, ") + run +
                             "/snapshots/step-000012.safetensors (step 12): " +
                             (older_checkpoint ? "its checkpoint.safetensors is of step 6"
                                               : "the folder has no checkpoint.safetensors");
    EXPECT_NE(r.err.find("headlab train: warning: " + said), std::string::npos) << r.describe();
    EXPECT_NE(read_bytes(run + "/train.log").find("in " + run + " from its snapshot of step 12: "), std::string::npos);
    EXPECT_EQ(read_bytes(run + "/checkpoint.safetensors"), read_bytes(dir / "whole/checkpoint.safetensors"));
    EXPECT_EQ(read_bytes(run + "/snapshots/step-000018.safetensors"),
              read_bytes(dir / "whole/snapshots/step-000018.safetensors"));
    EXPECT_EQ(metrics_without_timing(run), metrics_without_timing(dir / "whole"));
    // The lines of the steps after 12 (analyses at 16 and 20, logs at 15 and 20) were the lost run's: said so.
    const std::string dropped = "metrics.jsonl held 3 line(s) of steps 15 to 20, after step 12 which this run goes "
                                "on from";
    EXPECT_NE(read_bytes(run + "/train.log").find(dropped), std::string::npos) << read_bytes(run + "/train.log");
    EXPECT_NE(r.out.find(dropped), std::string::npos) << r.describe();
  }
}

std::vector<int64_t> steps_of_snapshots(const std::string& run) {
  std::vector<int64_t> steps;
  for (const auto& entry : fs::directory_iterator(run + "/snapshots"))
    steps.push_back(std::stoll(entry.path().filename().string().substr(5, 6)));
  std::sort(steps.begin(), steps.end());
  return steps;
}

// QA19 F19: a run killed (SIGKILL) past its last checkpoint left snapshots of
// steps beyond it, which the resumed run then listed as its own history. It
// goes on from the newest snapshot instead, so that the snapshots are its
// own, bit for bit, and says which steps of the lost run it trains again.
TEST(ResumeHistory, AfterAKillTheSnapshotsAndMetricsAreTheUninterruptedRunsAndTheLostStepsAreSaid) {
  TempDir dir;
  const std::vector<std::pair<std::string, std::string>> flags = {
      {"--steps", "600"}, {"--checkpoint-every", "50"}, {"--snapshot-every", "35"}, {"--log-every", "1"}};
  ASSERT_EQ(run_headlab(train_command(dir / "whole", flags), dir.path()).exit_code, 0);
  const std::string run = dir / "run";
  {
    Child child(headlab_path(), train_command(run, flags), dir.path(), dir.path());
    // Past a checkpoint and a snapshot after it (step 70 after 50), and killed before the end.
    // Complete lines only: the run may be writing the last one as it is read.
    ASSERT_TRUE(wait_until([&] {
      if (child.finished()) return true;
      if (!fs::exists(run + "/metrics.jsonl")) return false;
      const std::string metrics = read_bytes(run + "/metrics.jsonl");
      return metrics.find("{\"accuracy\"") != std::string::npos &&
             std::count(metrics.begin(), metrics.end(), '\n') >= 75;
    }));
    child.signal(SIGKILL);
    ASSERT_EQ(child.wait().signal, SIGKILL) << "the run ended before the kill; it needs more steps";
  }
  const std::vector<int64_t> snapshots = steps_of_snapshots(run);
  ASSERT_FALSE(snapshots.empty());
  const int64_t saved = std::max(snapshots.back(), checkpoint_step(run + "/checkpoint.safetensors"));
  const int64_t reached = metrics_without_timing(run).back().at("step").get<int64_t>();
  const RunResult r = run_headlab({"train", "--resume", run}, dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(steps_of_snapshots(run), steps_of_snapshots(dir / "whole"));
  for (const int64_t step : steps_of_snapshots(run)) {
    char name[40];
    std::snprintf(name, sizeof name, "/snapshots/step-%06lld.safetensors", static_cast<long long>(step));
    EXPECT_EQ(tensors_of(run + name), tensors_of(dir / "whole" + name)) << name;
  }
  EXPECT_EQ(metrics_without_timing(run), metrics_without_timing(dir / "whole"));
  EXPECT_EQ(tensors_of(run + "/checkpoint.safetensors"), tensors_of(dir / "whole/checkpoint.safetensors"));
  const std::string log = read_bytes(run + "/train.log");
  if (reached > saved)
    EXPECT_NE(log.find("line(s) of steps " + std::to_string(saved + 1) + " to " + std::to_string(reached) +
                       ", after step " + std::to_string(saved) + " which this run goes on from"),
              std::string::npos)
        << log;
  else
    EXPECT_EQ(log.find("metrics.jsonl held"), std::string::npos) << log;
}

// Neither a checkpoint nor a snapshot: nothing to resume, and the message says why a run can have none.
TEST(ResumeHistory, NoCheckpointAndNoSnapshotIsRefusedSayingWhy) {
  TempDir dir;
  const std::string run = dir / "run";
  copy_dir(shared_run(), run);
  fs::remove(run + "/checkpoint.safetensors");
  const auto before = snapshot(run);
  const RunResult r = run_headlab({"train", "--resume", run}, dir.path());
  EXPECT_TRUE(clean_failure(r, 2, {run, "no checkpoint.safetensors and no snapshot", "--checkpoint-every"}));
  EXPECT_EQ(snapshot(run), before);
}

// QA19 F13 item 2: --seed (or --data) at config.json's own value changes nothing and is accepted; another value is
// refused naming both.
TEST(ResumeHistory, AFixedSettingAtItsOwnValueIsAcceptedAnotherIsRefused) {
  TempDir dir;
  const std::string run = dir / "run";
  copy_dir(shared_run(), run);
  const int64_t seed = nlohmann::json::parse(read_bytes(run + "/config.json")).at("seed").get<int64_t>();
  const auto before = snapshot(run);
  const RunResult other = run_headlab({"train", "--resume", run, "--seed", std::to_string(seed + 1)}, dir.path());
  EXPECT_TRUE(clean_failure(other, 2,
                            {"--seed " + std::to_string(seed + 1) + " cannot change when resuming",
                             "config.json has " + std::to_string(seed), "drop --seed"}));
  EXPECT_EQ(snapshot(run), before);
  const RunResult same = run_headlab({"train", "--resume", run, "--seed", std::to_string(seed)}, dir.path());
  EXPECT_EQ(same.exit_code, 0) << same.describe();
  EXPECT_NE(same.out.find("is complete at step 20"), std::string::npos) << same.describe();

  // config.json names the data file absolutely: the same file spelled relatively is the run's; it stays absolute.
  std::string text;
  for (int i = 0; i < 40; ++i) text += "{\"tokens\": [" + std::to_string(i % 7) + ", 1, 2, 3]}\n";
  write_bytes(dir / "seqs.jsonl", text);
  write_bytes(dir / "other.jsonl", text);
  const std::string data_run = dir / "data-run";
  const RunResult trained = run_headlab(train_command(data_run, {{"--data", "seqs.jsonl"}, {"--steps", "2"}}), dir.path());
  ASSERT_EQ(trained.exit_code, 0) << trained.describe();
  const RunResult relative =
      run_headlab({"train", "--resume", data_run, "--data", "seqs.jsonl", "--steps", "3"}, dir.path());
  EXPECT_EQ(relative.exit_code, 0) << relative.describe();
  EXPECT_EQ(nlohmann::json::parse(read_bytes(data_run + "/config.json")).at("data"), dir / "seqs.jsonl");
  const RunResult another = run_headlab({"train", "--resume", data_run, "--data", "other.jsonl"}, dir.path());
  EXPECT_TRUE(clean_failure(another, 2, {"--data other.jsonl cannot change", "config.json has " + dir / "seqs.jsonl"}));
}

}  // namespace
}  // namespace headlab::cli_test
