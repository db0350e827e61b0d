// A run's files are never poisoned or lost: a diverged run keeps its last
// finite checkpoint and resumes from it with a lower --lr; one writer at a
// time (two of one process included) writes a run folder, and a run starting
// in it is named as its writer; --force clears the old run first; outputs never
// replace what is not a regular file; a data file edited since the checkpoint
// is refused.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "tests/cli/fixtures.h"
#include "train/run_folder.h"

namespace headlab::cli_test {
namespace {

namespace fs = std::filesystem;

// Every float of every tensor of a checkpoint is finite.
::testing::AssertionResult all_finite(const std::string& checkpoint) {
  const RawSafetensors raw = RawSafetensors::read(checkpoint);
  for (const auto& [name, entry] : raw.header.items()) {
    if (name == "__metadata__") continue;
    const std::string bytes = raw.tensor_bytes(name);
    const bool f32 = entry["dtype"] == "F32";
    const std::size_t size = f32 ? 4 : 8;
    for (std::size_t i = 0; i + size <= bytes.size(); i += size) {
      double v = 0;
      if (f32) {
        float f = 0;
        std::memcpy(&f, bytes.data() + i, 4);
        v = f;
      } else {
        std::memcpy(&v, bytes.data() + i, 8);
      }
      if (!std::isfinite(v)) return ::testing::AssertionFailure() << name << " holds " << v << " at byte " << i;
    }
  }
  return ::testing::AssertionSuccess();
}

TEST(NonFiniteStop, KeepsTheLastFiniteCheckpointAndResumesFromItWithALowerLr) {
  TempDir dir;
  const std::string run = dir / "run";
  const std::string ck = run + "/checkpoint.safetensors";
  ASSERT_EQ(run_headlab(train_command(run, {{"--steps", "5"}, {"--checkpoint-every", "1"}}), dir.path()).exit_code, 0);
  // The first update at this rate makes the model non-finite (or its loss).
  const RunResult diverged = run_headlab({"train", "--resume", run, "--steps", "10", "--lr", "1e30"}, dir.path());
  ASSERT_EQ(diverged.exit_code, 1) << diverged.describe();
  EXPECT_TRUE(all_finite(ck));
  EXPECT_EQ(checkpoint_step(ck), 5) << "the poisoned state of step 6 was written";
  EXPECT_NE(diverged.out.find("last good checkpoint, of step 5"), std::string::npos) << diverged.describe();

  const RunResult eval = run_headlab({"eval", run, "--json"}, dir.path());
  ASSERT_EQ(eval.exit_code, 0) << eval.describe();
  EXPECT_TRUE(std::isfinite(nlohmann::json::parse(eval.out)["loss"].get<double>())) << eval.out;

  const RunResult resumed = run_headlab({"train", "--resume", run, "--steps", "10", "--lr", "1e-3"}, dir.path());
  EXPECT_EQ(resumed.exit_code, 0) << resumed.describe();
  EXPECT_EQ(checkpoint_step(ck), 10);
  EXPECT_TRUE(all_finite(ck));
}

TEST(NonFiniteStop, OneStepThatEndsNonFiniteWritesNoCheckpoint) {
  TempDir dir;
  const std::string run = dir / "run";
  const RunResult r = run_headlab(train_command(run, {{"--lr", "1e30"}, {"--steps", "1"}}), dir.path());
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_FALSE(fs::exists(run + "/checkpoint.safetensors")) << "a non-finite model must never be written";
  EXPECT_NE(r.out.find("no checkpoint had been written"), std::string::npos) << r.describe();
}

TEST(RunLock, ASecondWriterIsRefusedNamingThePidWhileReadersWork) {
  TempDir dir;
  const std::string run = dir / "run";
  Child first(headlab_path(), train_command(run, {{"--steps", "1000000"}, {"--checkpoint-every", "1"}}), dir.path(),
              dir.path());
  ASSERT_TRUE(wait_until([&] { return fs::exists(run + "/checkpoint.safetensors"); }));

  const RunResult resume = run_headlab({"train", "--resume", run}, dir.path());
  EXPECT_TRUE(clean_failure(resume, 1, {run, "PID " + std::to_string(first.pid())}));
  const RunResult force = run_headlab(train_command(run, {{"--force", ""}}), dir.path());
  EXPECT_TRUE(clean_failure(force, 1, {run, "PID " + std::to_string(first.pid())}));
  EXPECT_TRUE(fs::exists(run + "/checkpoint.safetensors")) << "a refused --force must not clear the running run";
  const RunResult eval = run_headlab({"eval", run}, dir.path());
  EXPECT_EQ(eval.exit_code, 0) << eval.describe();
  const RunResult analyze = run_headlab({"analyze", run, "--out", dir / "analysis"}, dir.path());
  EXPECT_EQ(analyze.exit_code, 0) << analyze.describe();

  // SIGKILL: the kernel drops the lock with the process; nothing stale remains.
  first.signal(SIGKILL);
  first.wait();
  const int64_t step = checkpoint_step(run + "/checkpoint.safetensors");
  const RunResult resumed = run_headlab({"train", "--resume", run, "--steps", std::to_string(step + 5)}, dir.path());
  EXPECT_EQ(resumed.exit_code, 0) << resumed.describe();
}

// Two writers of one process (two headlab.train() calls of one Python
// session, on two threads) exclude each other too; the lock is free once the
// first is gone.
TEST(RunLock, ASecondLockInTheSameProcessIsRefusedUntilTheFirstIsReleased) {
  TempDir dir;
  {
    const train::RunLock first(dir.path());
    try {
      const train::RunLock second(dir.path());
      ADD_FAILURE() << "a second lock of " << dir.path() << " in this process was granted";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find(dir.path() + " is being written by this process (PID " +
                                           std::to_string(::getpid())),
                std::string::npos)
          << e.what();
    }
  }
  EXPECT_NO_THROW(train::RunLock again(dir.path()));
}

// Two runs started at once into one new --out: the second finds the folder
// as the first leaves it before its marker (train.lock held, the temporary
// file of a path probe) and says it is being written, naming the PID -- not
// that it holds files that are not a run. A start killed before its marker
// leaves only train.lock, held by nobody: a new run takes the folder.
TEST(RunLock, ARunStartingInANewFolderIsNamedAsTheWriter) {
  TempDir dir;
  const std::string run = dir / "run";
  fs::create_directory(run);
  const std::string probe = run + "/config.json.tmp." + std::to_string(::getpid());
  {
    const train::RunLock starting(run);
    write_bytes(probe, "");
    const auto before = snapshot(run);
    for (const auto& changes : std::vector<std::vector<std::pair<std::string, std::string>>>{{}, {{"--force", ""}}}) {
      const RunResult r = run_headlab(train_command(run, changes), dir.path());
      EXPECT_TRUE(clean_failure(
          r, 1, {run, "being written by another headlab process (PID " + std::to_string(::getpid()) + ")"}));
    }
    EXPECT_EQ(snapshot(run), before);
  }
  fs::remove(probe);
  const RunResult fresh = run_headlab(train_command(run), dir.path());
  ASSERT_EQ(fresh.exit_code, 0) << fresh.describe();
  EXPECT_EQ(train::folder_marker(run), "run");
}

TEST(Force, ClearsTheOldRunBeforeTheNewOneWritesAnything) {
  TempDir dir;
  const std::string run = dir / "run";
  ASSERT_EQ(run_headlab(train_command(run), dir.path()).exit_code, 0);
  // The new run diverges at once and never writes a checkpoint of its own.
  const RunResult r =
      run_headlab(train_command(run, {{"--force", ""}, {"--lr", "1e30"}, {"--steps", "1"}}), dir.path());
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_FALSE(fs::exists(run + "/checkpoint.safetensors")) << "the old run's checkpoint outlived --force";
  EXPECT_FALSE(fs::exists(run + "/heads.json"));
  EXPECT_FALSE(fs::exists(run + "/report.html"));
  const RunResult eval = run_headlab({"eval", run}, dir.path());
  EXPECT_EQ(eval.exit_code, 2) << "eval must not find the old run's model: " << eval.describe();
}

// The old run's analyses go with it (analyze's analysis-TASK/, a snapshot's
// step-NNNNNN/): left, they sat beside the new run's snapshot of the same
// step as if of it. A folder of the user's inside the run stays.
TEST(Force, RemovesTheOldRunsAnalysesButNotTheUsersFolders) {
  TempDir dir;
  const std::string run = dir / "run";
  ASSERT_EQ(run_headlab(train_command(run, {{"--task", "previous"}, {"--steps", "10"}, {"--snapshot-every", "10"}}),
                        dir.path())
                .exit_code,
            0);
  ASSERT_EQ(run_headlab({"analyze", run, "--step", "10", "--quiet", "--threads", "1"}, dir.path()).exit_code, 0);
  ASSERT_EQ(run_headlab({"analyze", run, "--task", "first", "--quiet", "--threads", "1"}, dir.path()).exit_code, 0);
  ASSERT_TRUE(fs::exists(run + "/snapshots/step-000010/heads.json"));
  ASSERT_TRUE(fs::exists(run + "/analysis-first/heads.json"));
  fs::create_directory(run + "/notes");
  write_bytes(run + "/notes/mine.txt", "the user's\n");
  const RunResult r =
      run_headlab(train_command(run, {{"--task", "previous"}, {"--force", ""}, {"--steps", "5"}}), dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_FALSE(fs::exists(run + "/snapshots/step-000010")) << "the old snapshot's analysis outlived --force";
  EXPECT_FALSE(fs::exists(run + "/analysis-first")) << "the old run's analysis on first outlived --force";
  EXPECT_EQ(read_bytes(run + "/notes/mine.txt"), "the user's\n");
}

// A folder of the user's files is not a run: neither --force nor a plain
// --out touches it, and the refusal does not call it a run.
TEST(Force, NeverTouchesAFolderHeadlabDidNotMarkAsARun) {
  TempDir dir;
  const std::string user = dir / "user";
  fs::create_directory(user);
  for (const char* name : {"config.json", "train.log", "report.html", "metrics.jsonl", "report.html.tmp.999999"})
    write_bytes(user + "/" + name, std::string("the user's ") + name + "\n");
  const auto before = snapshot(user);
  const RunResult plain = run_headlab(train_command(user), dir.path());
  EXPECT_TRUE(clean_failure(plain, 2, {user, "not a headlab run"}));
  EXPECT_EQ(plain.err.find("already holds a run"), std::string::npos) << plain.err;
  const RunResult forced = run_headlab(train_command(user, {{"--force", ""}}), dir.path());
  EXPECT_TRUE(clean_failure(forced, 2, {user, "not a headlab run", "--force"}));
  EXPECT_EQ(snapshot(user), before) << "the user's files were changed";
  EXPECT_EQ(read_bytes(user + "/config.json"), "the user's config.json\n");
}

// A dump never lands on the checkpoint it reads nor in any run folder.
TEST(Outputs, DumpsNeverOverwriteTheCheckpointOrARunsFiles) {
  TempDir dir;
  const std::string run = dir / "run";
  copy_dir(shared_run(), run);
  const auto before = snapshot(run);
  for (const char* flag : {"--dump-logits", "--dump-grads"})
    for (const std::string& target : {run + "/checkpoint.safetensors", run + "/config.json", run + "/new.safetensors"}) {
      SCOPED_TRACE(std::string(flag) + " " + target);
      const RunResult r = run_headlab({"eval", run, flag, target}, dir.path(), 60);
      EXPECT_TRUE(clean_failure(r, 2, {flag, target}));
    }
  write_bytes(dir / "lone.safetensors", read_bytes(run + "/checkpoint.safetensors"));
  const RunResult same = run_headlab({"eval", dir / "lone.safetensors", "--dump-logits", dir / "lone.safetensors"},
                                     dir.path(), 60);
  EXPECT_TRUE(clean_failure(same, 2, {"is the checkpoint", "an input of this command"}));
  EXPECT_EQ(snapshot(run), before) << "a run's files were changed";
}

// Nor on what the eval reads besides (--data, the files the run trained and
// was evaluated on), nor in a sweep folder; two dumps never share a file.
// Each refusal comes before any work, with exit 2.
TEST(Outputs, DumpsNeverOverwriteTheDataFilesASweepOrEachOther) {
  TempDir dir;
  std::string rows;
  for (int i = 0; i < 40; ++i) {
    rows += "{\"tokens\": [";
    for (int j = 0; j < 6; ++j) rows += (j ? ", " : "") + std::to_string((i * 3 + j * (i % 5 + 1)) % 8);
    rows += "]}\n";
  }
  for (const char* name : {"train.jsonl", "held.jsonl", "other.jsonl"}) write_bytes(dir / name, rows);
  const RunResult trained = run_headlab(
      train_command(dir / "run", {{"--data", dir / "train.jsonl"}, {"--eval-data", dir / "held.jsonl"}}), dir.path());
  ASSERT_EQ(trained.exit_code, 0) << trained.describe();
  for (const char* flag : {"--dump-logits", "--dump-grads", "--dump-activations"}) {
    SCOPED_TRACE(flag);
    EXPECT_TRUE(clean_failure(run_headlab({"eval", dir / "run", flag, dir / "train.jsonl"}, dir.path()), 2,
                              {flag, "the run's --data"}));
    EXPECT_TRUE(clean_failure(run_headlab({"eval", dir / "run", flag, "held.jsonl"}, dir.path()), 2,
                              {flag, "the run's --eval-data"}));
    EXPECT_TRUE(clean_failure(
        run_headlab({"eval", dir / "run", "--data", "other.jsonl", flag, dir / "other.jsonl"}, dir.path()), 2,
        {flag, "is --data"}));
  }
  for (const char* name : {"train.jsonl", "held.jsonl", "other.jsonl"}) EXPECT_EQ(read_bytes(dir / name), rows) << name;
  // What eval scores by default is the --eval-data file's rows, and it says so.
  const RunResult scored = run_headlab({"eval", dir / "run"}, dir.path());
  ASSERT_EQ(scored.exit_code, 0) << scored.describe();
  EXPECT_EQ(scored.out.rfind("data:" + dir / "held.jsonl" + ":", 0), 0u) << scored.out;

  fs::create_directory(dir / "sweep");
  write_bytes(dir / "sweep/sweep.json", "{}\n");
  EXPECT_TRUE(clean_failure(run_headlab({"eval", dir / "run", "--dump-logits", "sweep/x.safetensors"}, dir.path()), 2,
                            {"--dump-logits", "sweep folder"}));
  EXPECT_TRUE(clean_failure(
      run_headlab({"eval", dir / "run", "--dump-logits", "same.safetensors", "--dump-activations", "./same.safetensors"},
                  dir.path()),
      2, {"--dump-activations", "is also --dump-logits"}));
  EXPECT_TRUE(clean_failure(run_headlab({"eval", dir / "run", "--dump-grads", "nowhere/g.safetensors"}, dir.path()), 2,
                            {"--dump-grads", "does not exist"}));
  EXPECT_FALSE(fs::exists(dir / "sweep/x.safetensors"));
  EXPECT_FALSE(fs::exists(dir / "same.safetensors"));
}

// analyze --out writes only into a new or empty folder or one an analysis
// wrote: never over another run's analysis, a sweep's files or the user's.
// And the run's own folder not while a trainer holds it.
TEST(Outputs, AnalyzeWritesOnlyIntoItsRunsOrAnAnalysisFolder) {
  TempDir dir;
  copy_dir(shared_run(), dir / "a");
  copy_dir(shared_run(), dir / "b");
  const auto b_before = snapshot(dir / "b");
  EXPECT_TRUE(clean_failure(run_headlab({"analyze", dir / "a", "--out", dir / "b"}, dir.path()), 2,
                            {dir / "b", "another run's folder"}));
  EXPECT_EQ(snapshot(dir / "b"), b_before);
  fs::create_directory(dir / "mine");
  write_bytes(dir / "mine/report.html", "precious\n");
  EXPECT_TRUE(clean_failure(run_headlab({"analyze", dir / "a", "--out", dir / "mine"}, dir.path()), 2,
                            {dir / "mine", "report.html", "empty or new folder"}));
  EXPECT_EQ(read_bytes(dir / "mine/report.html"), "precious\n");
  fs::create_directory(dir / "sweep");
  write_bytes(dir / "sweep/sweep.json", "{}\n");
  EXPECT_TRUE(clean_failure(run_headlab({"analyze", dir / "a", "--out", dir / "sweep"}, dir.path()), 2,
                            {"a sweep's folder"}));
  // A new folder, then the same one again (it is an analysis's now).
  for (int i = 0; i < 2; ++i) {
    const RunResult r = run_headlab({"analyze", dir / "a", "--out", dir / "new"}, dir.path());
    ASSERT_EQ(r.exit_code, 0) << r.describe();
    EXPECT_TRUE(fs::exists(dir / "new/heads.json"));
  }
  // A trainer's lock on the run folder keeps analyze out of it.
  const auto a_before = snapshot(dir / "a");
  {
    train::RunLock held(dir / "a");
    const RunResult locked = run_headlab({"analyze", dir / "a"}, dir.path());
    EXPECT_TRUE(clean_failure(locked, 1, {"being written by another headlab process"}));
  }
  EXPECT_EQ(snapshot(dir / "a"), a_before);
}

// A resume rewrites metrics.jsonl up to its checkpoint. A cut last line (a
// kill mid-append) is dropped; a damaged line with lines after it stops the
// resume, naming the line, and the history after it is kept.
TEST(Outputs, ADamagedMetricsLineIsNamedNotTheHistoryAfterItDropped) {
  TempDir dir;
  const std::string run = dir / "run";
  copy_dir(shared_run(), run);
  std::string text = read_bytes(run + "/metrics.jsonl");
  ASSERT_GE(std::count(text.begin(), text.end(), '\n'), 3) << text;
  text.erase(40, text.find('\n') - 40);  // the first line cut at 40 characters
  write_bytes(run + "/metrics.jsonl", text);
  const RunResult r = run_headlab({"train", "--resume", run, "--steps", "25"}, dir.path());
  EXPECT_TRUE(clean_failure(r, 2, {"metrics.jsonl:1", "mend or remove that line"}));
  EXPECT_EQ(read_bytes(run + "/metrics.jsonl"), text);
  // The same line cut short last: dropped, and the run goes on.
  const std::size_t end = text.find('\n') + 1;
  write_bytes(run + "/metrics.jsonl", text.substr(end) + text.substr(0, end - 1));
  const RunResult resumed = run_headlab({"train", "--resume", run, "--steps", "25"}, dir.path());
  ASSERT_EQ(resumed.exit_code, 0) << resumed.describe();
  EXPECT_EQ(metrics_without_timing(run).back()["step"], 25);
}

// sweep --collect of a run's folder is refused and leaves the folder as it
// was: no sweep.lock, which would make a later sweep --out --force take it
// for a sweep and overwrite the run's config.json.
TEST(Outputs, CollectRefusesARunsFolderAndLeavesItAsItWas) {
  TempDir dir;
  copy_dir(shared_run(), dir / "run");
  const auto before = snapshot(dir / "run");
  EXPECT_TRUE(clean_failure(run_headlab({"sweep", "--collect", dir / "run"}, dir.path()), 2,
                            {"--collect " + dir / "run" + " is a run folder, not a sweep's"}));
  EXPECT_EQ(snapshot(dir / "run"), before);
}

// A FIFO given as a checkpoint, or as a run's data file (read again by
// --resume, eval and analyze), is refused at once rather than waited on for a
// writer that never comes.
TEST(Inputs, AFifoIsRefusedNotWaitedOn) {
  TempDir dir;
  fs::create_directory(dir / "run");
  ASSERT_EQ(::mkfifo((dir / "run/checkpoint.safetensors").c_str(), 0644), 0);
  ASSERT_EQ(::mkfifo((dir / "data.jsonl").c_str(), 0644), 0);
  EXPECT_TRUE(clean_failure(run_headlab({"eval", dir / "run"}, dir.path(), 20), 2, {"not a regular file"}));
  EXPECT_TRUE(clean_failure(run_headlab(train_command(dir / "out", {{"--data", dir / "data.jsonl"}}), dir.path(), 20),
                            2, {"--data", "not a regular file", "resumed"}));
}

// train.log is appended to by spdlog, which would follow a link.
TEST(Outputs, TheLogIsNeverWrittenThroughASymlink) {
  TempDir dir;
  const std::string run = dir / "run";
  copy_dir(shared_run(), run);
  write_bytes(dir / "target", "keep me\n");
  fs::remove(run + "/train.log");
  fs::create_symlink(dir / "target", run + "/train.log");
  const RunResult r = run_headlab({"train", "--resume", run, "--steps", "25"}, dir.path());
  EXPECT_TRUE(clean_failure(r, 2, {"train.log", "link"}));
  EXPECT_EQ(read_bytes(dir / "target"), "keep me\n");
}

// metrics.jsonl is appended to as the run goes: a link there, even one whose
// target does not exist yet, is refused and its target never created.
TEST(Outputs, TheMetricsAreNeverAppendedThroughASymlink) {
  TempDir dir;
  const std::string run = dir / "run";
  copy_dir(shared_run(), run);
  fs::remove(run + "/metrics.jsonl");
  fs::create_symlink(dir / "created", run + "/metrics.jsonl");
  const RunResult r = run_headlab({"train", "--resume", run, "--steps", "25"}, dir.path());
  EXPECT_NE(r.exit_code, 0) << r.describe();
  EXPECT_NE(r.err.find("metrics.jsonl"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir / "created")) << "written through the link";
}

// Each output refuses a path that is not a regular file or a new name.
TEST(Outputs, NeverReplaceASymlinkAFifoOrAFolder) {
  TempDir dir;
  const std::string ck = shared_run() + "/checkpoint.safetensors";
  write_bytes(dir / "target", "keep me\n");
  fs::create_symlink(dir / "target", dir / "link");
  ASSERT_EQ(::mkfifo((dir / "fifo").c_str(), 0644), 0);
  fs::create_directory(dir / "folder");
  for (const std::string name : {"link", "fifo", "folder"}) {
    SCOPED_TRACE(name);
    const std::string path = dir / name;
    for (const char* flag : {"--dump-logits", "--dump-grads", "--dump-activations"}) {
      const RunResult r = run_headlab({"eval", ck, flag, path}, dir.path(), 60);
      EXPECT_TRUE(clean_failure(r, 2, {flag, path, "not a regular file"}));
    }
    EXPECT_EQ(fs::symlink_status(path).type(), name == "link"   ? fs::file_type::symlink
                                               : name == "fifo" ? fs::file_type::fifo
                                                                : fs::file_type::directory);
  }
  EXPECT_EQ(read_bytes(dir / "target"), "keep me\n");
  // The run's own files go through the same writer.
  TempDir runs;
  copy_dir(shared_run(), runs / "run");
  fs::remove(runs / "run/heads.json");
  fs::create_symlink(dir / "target", runs / "run/heads.json");
  const RunResult analyze = run_headlab({"analyze", runs / "run"}, runs.path());
  EXPECT_TRUE(clean_failure(analyze, 1, {"heads.json", "symbolic link"}));
  EXPECT_EQ(read_bytes(dir / "target"), "keep me\n");
  // A regular file is replaced.
  const RunResult dump = run_headlab({"eval", ck, "--dump-logits", dir / "target"}, dir.path());
  EXPECT_EQ(dump.exit_code, 0) << dump.describe();
  EXPECT_NE(read_bytes(dir / "target"), "keep me\n");
}

// 60 sequences of 6 tokens in [0, 8), next-token targets.
std::string data_lines(int count, int salt) {
  std::string text;
  for (int i = 0; i < count; ++i) {
    text += "{\"tokens\": [";
    for (int j = 0; j < 6; ++j) text += (j ? ", " : "") + std::to_string((i * 7 + j * 3 + salt) % 8);
    text += "]}\n";
  }
  return text;
}

TEST(DataFile, ARunWorksFromAnotherFolderAndRefusesItsFileOnceChanged) {
  TempDir dir, elsewhere;
  write_bytes(dir / "data.jsonl", data_lines(60, 0));
  const std::string run = dir / "run";
  // A relative --data path, from the run's own folder.
  const RunResult trained = run_headlab(
      train_command(run, {{"--data", "data.jsonl"}, {"--vocab", "8"}, {"--seq-len", "6"}, {"--steps", "10"}}),
      dir.path());
  ASSERT_EQ(trained.exit_code, 0) << trained.describe();
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"eval", run}, {"analyze", run, "--out", elsewhere / "analysis"},
        {"train", "--resume", run, "--steps", "15"}}) {
    const RunResult r = run_headlab(args, elsewhere.path());
    EXPECT_EQ(r.exit_code, 0) << args[0] << " from another folder: " << r.describe();
  }
  const std::string before = read_bytes(run + "/checkpoint.safetensors");
  // Edited (same length), grown and shrunk, no longer JSON, and with tokens
  // and sequences the model cannot take: each is refused with exit 2 as
  // changed (the hash is checked before the file is parsed), not as a line
  // that no longer parses or a model that no longer fits.
  for (const std::string& edited :
       {data_lines(60, 1), data_lines(61, 0), data_lines(3, 0), std::string("\0\0\0", 3),
        std::string("{\"tokens\": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]}\n")}) {
    write_bytes(dir / "data.jsonl", edited);
    const RunResult resume = run_headlab({"train", "--resume", run, "--steps", "20"}, elsewhere.path());
    EXPECT_TRUE(clean_failure(resume, 2, {dir / "data.jsonl", "has changed since the checkpoint"}));
    const RunResult eval = run_headlab({"eval", run}, elsewhere.path());
    EXPECT_TRUE(clean_failure(eval, 2, {"has changed since the checkpoint"}));
    const RunResult analyze = run_headlab({"analyze", run, "--out", elsewhere / "changed"}, elsewhere.path());
    EXPECT_TRUE(clean_failure(analyze, 2, {"has changed since the checkpoint"}));
  }
  EXPECT_EQ(read_bytes(run + "/checkpoint.safetensors"), before);
}

// A run's --eval-data is its file as --data is: named absolutely, so that a
// relative path still resolves from another folder, and hashed, so that the
// file is refused, named, once it has changed. A run from before the record
// (its --eval-data relative, no hash in its checkpoint) still resumes.
TEST(DataFile, ARunsEvalDataWorksFromAnotherFolderAndIsRefusedOnceChanged) {
  TempDir dir, elsewhere;
  write_bytes(dir / "data.jsonl", data_lines(60, 0));
  write_bytes(dir / "held.jsonl", data_lines(10, 1));
  const std::string run = dir / "run", ck = run + "/checkpoint.safetensors", held = dir / "held.jsonl";
  const RunResult trained = run_headlab(train_command(run, {{"--data", "data.jsonl"}, {"--eval-data", "held.jsonl"},
                                                            {"--vocab", "8"}, {"--seq-len", "6"}, {"--steps", "10"}}),
                                        dir.path());
  ASSERT_EQ(trained.exit_code, 0) << trained.describe();
  EXPECT_EQ(nlohmann::json::parse(read_bytes(run + "/config.json")).at("eval-data"), held);
  EXPECT_EQ(RawSafetensors::read(ck).meta_json("eval_data.file").at("path"), held);
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"eval", run}, {"analyze", run, "--out", elsewhere / "analysis"},
        {"train", "--resume", run, "--steps", "15"}}) {
    const RunResult r = run_headlab(args, elsewhere.path());
    EXPECT_EQ(r.exit_code, 0) << args[0] << " from another folder: " << r.describe();
  }
  const std::string before = read_bytes(ck);
  write_bytes(held, data_lines(10, 2));
  const std::vector<std::string> changed{"the --eval-data file " + held, "has changed since the checkpoint"};
  EXPECT_TRUE(clean_failure(run_headlab({"train", "--resume", run, "--steps", "20"}, elsewhere.path()), 2, changed));
  EXPECT_TRUE(clean_failure(run_headlab({"eval", run}, elsewhere.path()), 2, changed));
  const RunResult analyzed = run_headlab({"analyze", run, "--out", elsewhere / "changed"}, elsewhere.path());
  EXPECT_TRUE(clean_failure(analyzed, 2, changed));
  EXPECT_TRUE(read_bytes(ck) == before) << "a refused resume leaves the checkpoint as it was";

  // As an older run wrote it: --eval-data as given, in config.json and the
  // checkpoint, and no record of its bytes. Resumed from its folder, on
  // whatever the file now holds.
  RawSafetensors old = RawSafetensors::read(ck);
  old.header["__metadata__"].erase("eval_data.file");
  nlohmann::json config = old.meta_json("config");
  config["eval-data"] = "held.jsonl";
  old.set_meta_json("config", config);
  write_bytes(ck, old.bytes());
  nlohmann::json json_file = nlohmann::json::parse(read_bytes(run + "/config.json"));
  json_file["eval-data"] = "held.jsonl";
  write_bytes(run + "/config.json", json_file.dump(2));
  const RunResult resumed = run_headlab({"train", "--resume", run, "--steps", "20"}, dir.path());
  ASSERT_EQ(resumed.exit_code, 0) << resumed.describe();
  EXPECT_EQ(checkpoint_step(ck), 20);
}

TEST(StopSignals, SighupStopsARunWithACheckpointLikeSigterm) {
  TempDir dir;
  const std::string run = dir / "run";
  Child child(headlab_path(), train_command(run, {{"--steps", "1000000"}, {"--log-every", "1"}}), dir.path(),
              dir.path());
  ASSERT_TRUE(wait_until([&] { return fs::exists(run + "/metrics.jsonl") && fs::file_size(run + "/metrics.jsonl") > 0; }));
  child.signal(SIGHUP);
  const RunResult r = child.wait(60);
  EXPECT_EQ(r.exit_code, 128 + SIGHUP) << r.describe();
  ASSERT_TRUE(fs::exists(run + "/checkpoint.safetensors"));
  EXPECT_GT(checkpoint_step(run + "/checkpoint.safetensors"), 0);
}

TEST(StopSignals, AClosedStdoutStopsARunWithACheckpoint) {
  TempDir dir;
  const std::string run = dir / "run";
  std::string command = "'" + headlab_path() + "'";
  for (const std::string& a : train_command(run, {{"--steps", "1000000"}, {"--log-every", "1"}})) command += " '" + a + "'";
  // head exits after one line; the run's next writes fail.
  command += " | head -n 1 >/dev/null; echo ${PIPESTATUS[0]} >'" + dir / "status" + "'";
  Child shell("/bin/bash", {"-c", command}, dir.path(), dir.path());
  const RunResult r = shell.wait(120);
  ASSERT_FALSE(r.timed_out) << r.describe();
  EXPECT_EQ(read_bytes(dir / "status"), std::to_string(128 + SIGPIPE) + "\n");
  ASSERT_TRUE(fs::exists(run + "/checkpoint.safetensors")) << "the run died without a checkpoint";
  EXPECT_NE(read_bytes(run + "/train.log").find("stopped by a failed write to stdout"), std::string::npos);
}

TEST(EvalData, ScoresAFileInBatchesWithinBoundedMemory) {
  TempDir dir;
  const std::string run = dir / "run";
  ASSERT_EQ(run_headlab(train_command(run, {{"--task", "previous"}}), dir.path()).exit_code, 0);
  // Scored at once, 300000 sequences take over 2 GB; a batch at a time, tens
  // of MB. AddressSanitizer reserves terabytes of address space, so there the
  // memory is not limited and a small file checks the batching alone.
#if defined(__SANITIZE_ADDRESS__)
  const std::string limit;
  const int sequences = 16000;
#else
  const std::string limit = "ulimit -v 1000000; ";
  const int sequences = 300000;
#endif
  std::string text;
  for (int i = 0; i < sequences; ++i) text += "{\"tokens\": [" + std::to_string(i % 8) + ", 1, 2, 3, 4, " +
                                              std::to_string(i / 8 % 8) + "]}\n";
  write_bytes(dir / "big.jsonl", text);
  const std::string command = limit + "exec '" + headlab_path() + "' eval '" + run +
                              "' --data big.jsonl --threads 1 --json";
  Child limited("/bin/bash", {"-c", command}, dir.path(), dir.path());
  const RunResult r = limited.wait(300);
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const auto whole = nlohmann::json::parse(r.out);
  EXPECT_EQ(whole["sequences"], sequences);
  EXPECT_EQ(whole["positions"], 5 * sequences);
  // The batch size does not change the result (on at most the first 30000
  // lines: two or more batches of either size show it, at a tenth of the cost).
  std::size_t end = 0;
  for (int i = 0; i < std::min(sequences, 30000); ++i) end = text.find('\n', end) + 1;
  write_bytes(dir / "slice.jsonl", text.substr(0, end));
  const auto scored = [&](const std::vector<std::string>& extra) {
    std::vector<std::string> args{"eval", run, "--data", "slice.jsonl", "--threads", "1", "--json"};
    args.insert(args.end(), extra.begin(), extra.end());
    const RunResult scoring = run_headlab(args, dir.path());
    EXPECT_EQ(scoring.exit_code, 0) << scoring.describe();
    return nlohmann::json::parse(scoring.out);
  };
  const nlohmann::json by_default = scored({}), by_7777 = scored({"--batch", "7777"});
  EXPECT_GT(by_default["sequences"].get<int>(), 7777 * 2);
  EXPECT_NEAR(by_7777["loss"].get<double>(), by_default["loss"].get<double>(), 1e-9);
  EXPECT_NEAR(by_7777["accuracy"].get<double>(), by_default["accuracy"].get<double>(), 1e-12);
}

TEST(Stdout, AFailedWriteIsAnError) {
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  TempDir dir;
  const std::string command = "exec '" + headlab_path() + "' eval '" + shared_run() + "' --json >/dev/full";
  Child child("/bin/bash", {"-c", command}, dir.path(), dir.path());
  const RunResult r = child.wait(60);
  EXPECT_TRUE(clean_failure(r, 1, {"standard output"}));
}

// A large evaluation batch: the final analysis takes seconds in Release
// (a minute under the sanitizers); a stop signal ends it between two forward
// passes, as it ends analyze, with the checkpoint saved and nothing of the
// analysis written (train --resume writes it: output_test's resume of a run
// without its final analysis).
TEST(StopSignals, SigtermDuringTheFinalAnalysisEndsItWithTheRunSaved) {
  TempDir dir;
  const std::string run = dir / "run";
  Child child(headlab_path(), train_command(run, {{"--eval-batch", "4096"}, {"--d-model", "64"}, {"--steps", "5"}}),
              dir.path(), dir.path());
  ASSERT_TRUE(wait_until([&] {
    return fs::exists(run + "/train.log") && read_bytes(run + "/train.log").find("trained 5 steps") != std::string::npos;
  }));
  child.signal(SIGTERM);
  const RunResult r = child.wait(180);
  EXPECT_EQ(r.exit_code, 128 + SIGTERM) << r.describe();
  EXPECT_EQ(checkpoint_step(run + "/checkpoint.safetensors"), 5);
  EXPECT_FALSE(fs::exists(run + "/heads.json")) << "the analysis ran to its end after the signal";
  EXPECT_NE((r.out + r.err).find("headlab train --resume " + run + " writes it"), std::string::npos) << r.describe();
}

TEST(Extend, AFinishedRunOffTheLogGridGoesOnAsIfItHadNeverStopped) {
  TempDir dir;
  const auto flags = [](const char* steps) {
    return std::vector<std::pair<std::string, std::string>>{{"--steps", steps}, {"--log-every", "10"}};
  };
  ASSERT_EQ(run_headlab(train_command(dir / "reference", flags("40")), dir.path()).exit_code, 0);
  ASSERT_EQ(run_headlab(train_command(dir / "run", flags("25")), dir.path()).exit_code, 0);
  ASSERT_EQ(run_headlab({"train", "--resume", dir / "run", "--steps", "40"}, dir.path()).exit_code, 0);
  EXPECT_EQ(metrics_without_timing(dir / "run"), metrics_without_timing(dir / "reference"));
}

TEST(Utf8, AConfigStringThatIsNotUtf8IsAUsageError) {
  TempDir dir;
  const std::string name = std::string("data-") + '\xff' + ".jsonl";
  write_bytes(dir / name, "{\"tokens\": [1, 2, 3, 4]}\n");
  const RunResult r =
      run_headlab(train_command(dir / "run", {{"--data", name}, {"--vocab", "8"}, {"--seq-len", "6"}}), dir.path());
  EXPECT_TRUE(clean_failure(r, 2, {"--data", "UTF-8"}));
  EXPECT_EQ(r.err.find("json.exception"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir / "run"));
}

// A config kept beside its data names it relatively ("data": "rows.jsonl");
// read from another folder that was "cannot read data file '/cwd/rows.jsonl'",
// the config unnamed. Said as what it is, with the path that would read it.
TEST(Config, ARelativePathThatOnlyTheConfigsFolderHasIsNamedWithTheWayToWriteIt) {
  TempDir dir;
  fs::create_directories(dir / "exp");
  write_bytes(dir / "exp/rows.jsonl", "{\"tokens\": [1, 2, 3, 4]}\n");
  write_bytes(dir / "exp/config.json", "{\"data\": \"rows.jsonl\", \"steps\": 1}\n");
  const RunResult r = run_headlab({"train", "--config", "exp/config.json", "--out", dir / "run"}, dir.path());
  EXPECT_TRUE(clean_failure(r, 2, {"--config exp/config.json", "\"data\": \"rows.jsonl\"", "current folder",
                                   "write \"exp/rows.jsonl\""}));
  EXPECT_FALSE(fs::exists(dir / "run"));
  // From the config's own folder it is the file it names.
  const RunResult there =
      run_headlab({"train", "--config", "config.json", "--out", dir / "run", "--d-model", "16", "--eval-batch", "1",
                   "--threads", "1"},
                  dir / "exp");
  EXPECT_EQ(there.exit_code, 0) << there.describe();
}

}  // namespace
}  // namespace headlab::cli_test
