// A folder of the wrong kind given to a command (a sweep's to eval, a run's
// to sweep --resume, an analysis's to train --resume) is named as what it
// is, with what to give instead (QA25: "checkpoint 'sw/checkpoint.safetensors'
// cannot be opened", and `train --resume SWEEP` advised training it again).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "tests/cli/fixtures.h"

namespace headlab::cli_test {
namespace {

namespace fs = std::filesystem;

class WrongFolder : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir;
    std::vector<std::string> args = {"sweep", "--seeds", "0", "--jobs", "1", "--out", sweep()};
    for (const std::string& flag : tiny({{"--steps", "2"}, {"--threads", "-"}})) args.push_back(flag);
    const RunResult swept = run_headlab(args, dir_->path());
    ASSERT_EQ(swept.exit_code, 0) << swept.describe();
    copy_dir(shared_run(), run());
    const RunResult analyzed = run_headlab({"analyze", run(), "--out", analysis(), "--quiet"}, dir_->path());
    ASSERT_EQ(analyzed.exit_code, 0) << analyzed.describe();
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static std::string sweep() { return *dir_ / "sweep"; }
  static std::string sweep_run() { return *dir_ / "sweep/h2-s0"; }
  static std::string run() { return *dir_ / "run"; }
  static std::string analysis() { return *dir_ / "analysis"; }
  // The command's failure, which must leave `folder` as it was.
  static ::testing::AssertionResult refused(const std::vector<std::string>& args, const std::string& folder,
                                            const std::vector<std::string>& mentions) {
    const auto before = snapshot(folder);
    const ::testing::AssertionResult failure = clean_failure(run_headlab(args, dir_->path()), 2, mentions);
    if (!failure) return failure;
    if (snapshot(folder) != before) return ::testing::AssertionFailure() << folder << " changed";
    return ::testing::AssertionSuccess();
  }

  static TempDir* dir_;
};

TempDir* WrongFolder::dir_ = nullptr;

TEST_F(WrongFolder, ASweepsFolderWhereARunIsReadNamesOneOfItsRuns) {
  for (const char* command : {"eval", "analyze"})
    EXPECT_TRUE(refused({command, sweep()}, sweep(),
                        {sweep() + " is a sweep folder, not a run's", "give one of its runs (" + sweep_run()}))
        << command;
  EXPECT_TRUE(refused(train_command(*dir_ / "new", {{"--init", sweep()}}), sweep(),
                      {"--init " + sweep() + " is a sweep folder", sweep_run()}));
  // Not "train it again": the sweep goes on with sweep --resume, one of its runs with train --resume.
  EXPECT_TRUE(refused({"train", "--resume", sweep()}, sweep(),
                      {"--resume " + sweep() + " is a sweep folder, not a run's",
                       "headlab sweep --resume " + sweep(), "headlab train --resume " + sweep_run()}));
}

TEST_F(WrongFolder, ARunsFolderWhereASweepIsReadSaysWhatReadsIt) {
  EXPECT_TRUE(refused({"sweep", "--resume", run()}, run(),
                      {"--resume " + run() + " is a run folder, not a sweep's", "headlab train --resume " + run()}));
  for (const char* flag : {"--resume", "--collect", "--redraw"})
    EXPECT_TRUE(refused({"sweep", flag, sweep_run()}, sweep(),
                        {std::string(flag) + " " + sweep_run() + " is a run folder of a sweep",
                         "give " + std::string(flag) + " " + sweep()}))
        << flag;
  EXPECT_TRUE(refused({"sweep", "--redraw", *dir_ / "missing"}, dir_->path(), {"no such sweep folder"}));
}

TEST_F(WrongFolder, AnAnalysisFolderNamesTheCheckpointItAnalyzed) {
  const std::string checkpoint = fs::absolute(run() + "/checkpoint.safetensors").lexically_normal().string();
  for (const char* command : {"eval", "analyze"})
    EXPECT_TRUE(refused({command, analysis()}, analysis(), {"holds an analysis", "it analyzed " + checkpoint}))
        << command;
  EXPECT_TRUE(refused({"train", "--resume", analysis()}, analysis(),
                      {"--resume " + analysis() + " holds an analysis", "not a run", "it analyzed " + checkpoint}));
  EXPECT_TRUE(refused({"sweep", "--resume", analysis()}, analysis(), {"holds an analysis", "not a sweep"}));
  // A file of a run given as its folder: the folder it is in.
  EXPECT_TRUE(refused({"train", "--resume", run() + "/heads.json"}, run(),
                      {"is a file, not a run folder", "give the run's folder (" + run() + ")"}));
}

}  // namespace
}  // namespace headlab::cli_test
