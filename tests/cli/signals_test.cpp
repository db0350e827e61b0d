// A run survives being stopped: SIGKILL at any moment leaves a checkpoint
// that loads and resumes; SIGINT and SIGTERM finish the step, save, and exit
// 130 and 143. Resumed runs end exactly where an uninterrupted one does: the
// same tensors byte for byte and the same metrics.jsonl apart from timing
// (--log-every 1, so no line averages steps from both sides of a stop).
#include <gtest/gtest.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <random>
#include <thread>

#include "tests/cli/fixtures.h"

namespace headlab::cli_test {
namespace {

namespace fs = std::filesystem;

bool has_metrics(const std::string& run) {
  return fs::exists(run + "/metrics.jsonl") && fs::file_size(run + "/metrics.jsonl") > 0;
}

void expect_same_run(const std::string& resumed, const std::string& reference) {
  EXPECT_EQ(tensors_of(resumed + "/checkpoint.safetensors"), tensors_of(reference + "/checkpoint.safetensors"))
      << "the resumed run's tensors differ from the uninterrupted run's";
  EXPECT_EQ(metrics_without_timing(resumed), metrics_without_timing(reference));
}

std::vector<std::string> temporaries_in(const std::string& dir) {
  std::vector<std::string> found;
  for (const auto& entry : fs::directory_iterator(dir))
    if (entry.path().filename().string().find(".tmp.") != std::string::npos) found.push_back(entry.path());
  return found;
}

// Lines of metrics.jsonl (one per step with --log-every 1).
int64_t steps_logged(const std::string& run) {
  const std::string path = run + "/metrics.jsonl";
  if (!fs::exists(path)) return 0;
  const std::string text = read_bytes(path);
  return static_cast<int64_t>(std::count(text.begin(), text.end(), '\n'));
}

TEST(Signals, SigkillAtRandomMomentsAlwaysLeavesACheckpointThatLoadsAndResumes) {
  TempDir dir;
  constexpr int64_t kSteps = 100;
  const std::vector<std::pair<std::string, std::string>> flags = {
      {"--steps", std::to_string(kSteps)}, {"--checkpoint-every", "1"}, {"--log-every", "1"}};
  const RunResult reference = run_headlab(train_command(dir / "reference", flags), dir.path());
  ASSERT_EQ(reference.exit_code, 0) << reference.describe();
  const std::string run = dir / "run";
  const std::string ck = run + "/checkpoint.safetensors";
  const unsigned seed = std::random_device{}();
  SCOPED_TRACE("kill moments drawn with seed " + std::to_string(seed));
  std::mt19937 rng(seed);

  // Each kill lands at a random moment: a few steps on from the last
  // checkpoint, then up to 3 ms into the next step (its forward, backward,
  // update, metrics line or checkpoint write).
  int64_t last_step = 0;
  for (int kill = 0; kill < 6; ++kill) {
    SCOPED_TRACE("kill " + std::to_string(kill + 1));
    const std::vector<std::string> args = kill == 0 ? train_command(run, flags) : std::vector<std::string>{"train", "--resume", run};
    const int64_t target = std::min<int64_t>(last_step + std::uniform_int_distribution<int64_t>(1, 12)(rng), kSteps - 5);
    Child child(headlab_path(), args, dir.path(), dir.path());
    // The first checkpoint is written just after the first metrics line; a kill
    // before it leaves nothing to resume, which is not what this test is about.
    ASSERT_TRUE(wait_until([&] { return (steps_logged(run) >= target && fs::exists(ck)) || child.finished(); }));
    std::this_thread::sleep_for(std::chrono::microseconds(std::uniform_int_distribution<int>(0, 3000)(rng)));
    child.signal(SIGKILL);
    const RunResult killed = child.wait();
    EXPECT_EQ(killed.signal, SIGKILL) << "the kill must land while the run trains: " << killed.describe();

    ASSERT_TRUE(fs::exists(ck));
    const RunResult loaded = run_headlab({"eval", run, "--json"}, dir.path());
    ASSERT_EQ(loaded.exit_code, 0) << "the checkpoint left by a kill must load: " << loaded.describe();
    const int64_t step = checkpoint_step(ck);
    EXPECT_GE(step, last_step) << "a checkpoint never goes back in time";
    last_step = step;
  }
  const RunResult finished = run_headlab({"train", "--resume", run}, dir.path());
  ASSERT_EQ(finished.exit_code, 0) << finished.describe();
  EXPECT_EQ(checkpoint_step(ck), kSteps);
  expect_same_run(run, dir / "reference");
  EXPECT_EQ(temporaries_in(run), std::vector<std::string>{}) << "a resumed run clears the temporaries of killed ones";
}

// Starts a run of `steps`, sends `sig` once it is training, and checks the
// stop: exit status, a saved checkpoint part way, and the hint to resume.
int64_t stop_with(int sig, int expected_status, const std::string& run, const std::string& cwd, int64_t steps) {
  Child child(headlab_path(), train_command(run, {{"--steps", std::to_string(steps)}, {"--log-every", "1"}}), cwd, cwd);
  EXPECT_TRUE(wait_until([&] { return has_metrics(run) || child.finished(); }));
  child.signal(sig);
  const RunResult r = child.wait();
  EXPECT_EQ(r.exit_code, expected_status) << r.describe();
  EXPECT_EQ(r.err, "") << "a requested stop is not an error";
  EXPECT_NE(r.out.find("--resume"), std::string::npos) << "the log says how to continue: " << r.out;
  if (!fs::exists(run + "/checkpoint.safetensors")) {
    ADD_FAILURE() << "no checkpoint saved on signal " << sig;
    return -1;
  }
  const int64_t step = checkpoint_step(run + "/checkpoint.safetensors");
  EXPECT_GT(step, 0);
  EXPECT_LT(step, steps) << "the stop came after the run finished; the test needs a longer run";
  return step;
}

TEST(Signals, SigintSavesACheckpointExits130AndResumeReachesTheTargetExactly) {
  TempDir dir;
  const int64_t steps = 300;
  const int64_t stopped = stop_with(SIGINT, 130, dir / "run", dir.path(), steps);
  ASSERT_GT(stopped, 0);
  const RunResult resumed = run_headlab({"train", "--resume", dir / "run"}, dir.path());
  ASSERT_EQ(resumed.exit_code, 0) << resumed.describe();
  EXPECT_EQ(checkpoint_step(dir / "run/checkpoint.safetensors"), steps) << "--resume continues to the run's own target";

  const RunResult reference =
      run_headlab(train_command(dir / "reference", {{"--steps", std::to_string(steps)}, {"--log-every", "1"}}), dir.path());
  ASSERT_EQ(reference.exit_code, 0) << reference.describe();
  expect_same_run(dir / "run", dir / "reference");
}

TEST(Signals, SigtermSavesACheckpointAndExits143) {
  TempDir dir;
  const int64_t stopped = stop_with(SIGTERM, 143, dir / "run", dir.path(), 300);
  ASSERT_GT(stopped, 0);
  const RunResult loaded = run_headlab({"eval", dir / "run"}, dir.path());
  EXPECT_EQ(loaded.exit_code, 0) << loaded.describe();
}

// The command a stopped run suggests is one a shell runs as printed, for a
// folder whose name a shell would split or cut at a quote.
TEST(Signals, TheSuggestedResumeCommandRunsInAShellForAFolderWithASpaceAndAQuote) {
  TempDir dir;
  const std::string run = "my run's ü";
  Child child(headlab_path(), train_command(run, {{"--steps", "300"}, {"--log-every", "1"}}), dir.path(), dir.path());
  ASSERT_TRUE(wait_until([&] { return has_metrics(dir / run) || child.finished(); }));
  child.signal(SIGINT);
  const RunResult stopped = child.wait();
  ASSERT_EQ(stopped.exit_code, 130) << stopped.describe();
  const std::string hint = "Continue with: headlab ";
  const std::size_t at = stopped.out.find(hint);
  ASSERT_NE(at, std::string::npos) << stopped.out;
  const std::string command = stopped.out.substr(at + hint.size(), stopped.out.find('\n', at) - at - hint.size());
  EXPECT_EQ(command, "train --resume 'my run'\\''s ü'");

  // The binary in the place of "headlab", as a user's PATH would find it.
  Child shell("/bin/sh", {"-c", "'" + headlab_path() + "' " + command}, dir.path(), dir.path());
  const RunResult resumed = shell.wait();
  ASSERT_EQ(resumed.exit_code, 0) << resumed.describe();
  EXPECT_EQ(checkpoint_step(dir / run + "/checkpoint.safetensors"), 300);
}

// The other commands train suggests for a run folder quote it alike: the
// run's extension when it is complete, and --resume when --out holds it.
TEST(Signals, EveryResumeCommandTrainSuggestsQuotesTheFolder) {
  TempDir dir;
  const std::string run = "my run's ü";
  ASSERT_EQ(run_headlab(train_command(run, {{"--steps", "5"}}), dir.path()).exit_code, 0);
  const RunResult complete = run_headlab({"train", "--resume", run}, dir.path());
  ASSERT_EQ(complete.exit_code, 0) << complete.describe();
  EXPECT_NE(complete.out.find("extend it with: headlab train --resume 'my run'\\''s ü' --steps 10"), std::string::npos)
      << complete.describe();
  const RunResult taken = run_headlab(train_command(run, {{"--steps", "5"}}), dir.path());
  EXPECT_TRUE(clean_failure(taken, 2, {"or --resume 'my run'\\''s ü' to continue it"}));
}

// SIGINT during eval's dumps ends it between batches, exit 130 with one line
// saying so, and leaves no dump nor any temporary file behind.
TEST(Signals, SigintDuringAnEvalsDumpsLeavesNothingBehind) {
  TempDir dir;
  std::string rows;
  for (int i = 0; i < 20000; ++i) rows += "{\"tokens\": [" + std::to_string(i % 8) + ", 1, 2, 3, 4, 5]}\n";
  write_bytes(dir / "rows.jsonl", rows);
  Child child(headlab_path(),
              {"eval", shared_run(), "--data", "rows.jsonl", "--batch", "4", "--dump-logits", "logits.safetensors",
               "--dump-activations", "acts.safetensors"},
              dir.path(), dir.path());
  ASSERT_TRUE(wait_until([&] { return !temporaries_in(dir.path()).empty() || child.finished(); }));
  child.signal(SIGINT);
  const RunResult r = child.wait();
  EXPECT_EQ(r.exit_code, 130) << r.describe();
  EXPECT_TRUE(clean_failure(r, 130, {"stopped by SIGINT", "nothing was written"}));
  EXPECT_EQ(temporaries_in(dir.path()), std::vector<std::string>{});
  EXPECT_FALSE(fs::exists(dir / "logits.safetensors"));
  EXPECT_FALSE(fs::exists(dir / "acts.safetensors"));
}

// SIGINT during analyze --data ends it between two forward passes, exit 130
// with one line saying so, and nothing written.
TEST(Signals, SigintDuringAnAnalysisEndsItAndWritesNothing) {
  TempDir dir;
  std::string rows;
  for (int i = 0; i < 20000; ++i) rows += "{\"tokens\": [" + std::to_string(i % 8) + ", 1, 2, 3, 4, 5]}\n";
  write_bytes(dir / "rows.jsonl", rows);
  Child child(headlab_path(), {"analyze", shared_run(), "--data", "rows.jsonl", "--batch", "4", "--out", "mine"},
              dir.path(), dir.path());
  // The file is some seconds' work; the signal comes once the analysis has
  // put its handler in place (just before its first chunk), while it runs.
  ASSERT_TRUE(wait_until([&] { return catches_signal(child.pid(), SIGINT) || child.finished(); }));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  child.signal(SIGINT);
  const auto signalled = std::chrono::steady_clock::now();
  const RunResult r = child.wait(30);
  EXPECT_LT(std::chrono::steady_clock::now() - signalled, std::chrono::seconds(5)) << "not stopped promptly";
  EXPECT_TRUE(clean_failure(r, 130, {"stopped by SIGINT", "nothing was written"}));
  EXPECT_FALSE(fs::exists(dir / "mine"));
}

}  // namespace
}  // namespace headlab::cli_test
