// A sweep's folder: only a folder a sweep wrote (sweep.lock) is written
// again, two sweeps never write one folder at once, shards share theirs, and
// a run's stdout.log is never opened through a link.
#include "train/sweep_folder.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "train/errors.h"
#include "train/sweep_supervisor.h"

namespace headlab::train {
namespace {

namespace fs = std::filesystem;

class SweepFolder : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("headlab-sweep-folder-" + std::to_string(getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string dir() const { return dir_.string(); }
  static std::string read(const fs::path& p) {
    std::ifstream in(p);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  static void write(const fs::path& p, const std::string& text) { std::ofstream(p) << text; }

  // Whether a lock of (`shard` of) the folder can be taken while another
  // process holds one of `held` (a lock is never in conflict with its own process's).
  bool can_lock_beside(std::optional<Shard> held, std::optional<Shard> shard) {
    int ready[2], done[2];
    if (pipe(ready) != 0 || pipe(done) != 0) return false;
    const pid_t child = fork();
    if (child == 0) {
      int status = 0;
      try {
        const SweepLock lock(dir(), held);
        char c = 1;
        (void)!write_fd(ready[1], c);
        (void)!::read(done[0], &c, 1);  // holds the lock until the parent is done
      } catch (...) {
        status = 1;
      }
      _exit(status);
    }
    char c = 0;
    (void)!::read(ready[0], &c, 1);
    bool ok = true;
    try {
      const SweepLock lock(dir(), shard);
    } catch (const UsageError& e) {
      ok = false;
      EXPECT_NE(std::string(e.what()).find("is being written by"), std::string::npos) << e.what();
    }
    (void)!write_fd(done[1], c);
    int status = 0;
    waitpid(child, &status, 0);
    for (const int fd : {ready[0], ready[1], done[0], done[1]}) close(fd);
    return ok;
  }
  static ssize_t write_fd(int fd, char c) { return ::write(fd, &c, 1); }

 private:
  fs::path dir_;
};

TEST_F(SweepFolder, AFolderOfUserFilesIsNeverWritten) {
  fs::create_directories(dir());
  write(fs::path(dir()) / "config.json", "mine");
  for (const bool force : {false, true}) {
    EXPECT_THROW((void)prepare_sweep_folder(dir(), force, std::nullopt), UsageError);
    EXPECT_THROW((void)prepare_sweep_folder(dir(), force, Shard{1, 1}), UsageError);
  }
  try {
    (void)prepare_sweep_folder(dir(), true, std::nullopt);
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("holds no sweep"), std::string::npos) << e.what();
  }
  EXPECT_EQ(read(fs::path(dir()) / "config.json"), "mine");
  EXPECT_FALSE(fs::exists(fs::path(dir()) / "sweep.lock"));
  EXPECT_FALSE(fs::exists(fs::path(dir()) / ".headlab"));
  // A run folder is marked only when the sweep makes it: never one of user files.
  prepare_run_folder(dir());
  EXPECT_FALSE(fs::exists(fs::path(dir()) / ".headlab"));
  prepare_run_folder(dir() + "/h2-s0");
  EXPECT_EQ(read(fs::path(dir()) / "h2-s0" / ".headlab"), "{\"headlab\":\"run\"}\n");
}

TEST_F(SweepFolder, ASweepsFolderNeedsForceAndTakesShards) {
  { const auto lock = prepare_sweep_folder(dir(), false, std::nullopt); }  // new: fine
  EXPECT_TRUE(is_sweep_folder(dir()));
  EXPECT_EQ(read(fs::path(dir()) / ".headlab"), "{\"headlab\":\"sweep\"}\n");
  EXPECT_THROW((void)prepare_sweep_folder(dir(), false, std::nullopt), UsageError);
  EXPECT_NO_THROW((void)prepare_sweep_folder(dir(), true, std::nullopt));
  EXPECT_NO_THROW((void)prepare_sweep_folder(dir(), false, Shard{2, 3}));
  // A link named sweep.lock marks nothing (nor a marker of another kind).
  write(fs::path(dir()) / ".headlab", "{\"headlab\":\"run\"}\n");
  fs::remove(fs::path(dir()) / "sweep.lock");
  fs::create_symlink("/dev/null", fs::path(dir()) / "sweep.lock");
  EXPECT_FALSE(is_sweep_folder(dir()));
  EXPECT_THROW((void)prepare_sweep_folder(dir(), true, std::nullopt), UsageError);
  // A run's folder with a stray sweep.lock (a refused --collect of an
  // older headlab left one) stays a run's.
  fs::remove(fs::path(dir()) / "sweep.lock");
  write(fs::path(dir()) / "sweep.lock", "");
  EXPECT_FALSE(is_sweep_folder(dir()));
  // A sweep of an older headlab, without marker or lock: its sweep.json marks it.
  fs::remove(fs::path(dir()) / "sweep.lock");
  fs::remove(fs::path(dir()) / ".headlab");
  write(fs::path(dir()) / "sweep.json", "{\"format\": \"headlab-sweep/1\"}");
  EXPECT_FALSE(is_sweep_folder(dir()));  // not as headlab writes it
  write(fs::path(dir()) / "sweep.json", "{\n  \"format\": \"headlab-sweep/1\",\n  \"task\": \"x\"\n}\n");
  EXPECT_TRUE(is_sweep_folder(dir()));
}

TEST_F(SweepFolder, OneSweepAtATimeButShardsTogether) {
  fs::create_directories(dir());
  EXPECT_FALSE(can_lock_beside(std::nullopt, std::nullopt));  // two sweeps
  EXPECT_FALSE(can_lock_beside(std::nullopt, Shard{1, 2}));   // a shard beside a whole sweep
  EXPECT_FALSE(can_lock_beside(Shard{1, 2}, std::nullopt));   // --collect beside a running shard
  EXPECT_FALSE(can_lock_beside(Shard{1, 2}, Shard{1, 2}));    // one shard twice
  EXPECT_TRUE(can_lock_beside(Shard{1, 2}, Shard{2, 2}));     // the shards of one sweep
}

TEST_F(SweepFolder, ARunsLogIsNeverOpenedThroughALink) {
  fs::create_directories(dir());
  const fs::path target = fs::path(dir()) / "precious.txt";
  write(target, "keep me");
  const fs::path log = fs::path(dir()) / "stdout.log";
  fs::create_symlink(target, log);
  EXPECT_EQ(open_log(log.c_str()), -1);
  EXPECT_EQ(read(target), "keep me");
  fs::remove(log);
  mkfifo(log.c_str(), 0644);  // nor anything but a file (a FIFO would block the child)
  EXPECT_EQ(open_log(log.c_str()), -1);
  fs::remove(log);
  write(log, "an old log");
  const int fd = open_log(log.c_str());
  ASSERT_GE(fd, 0);
  close(fd);
  EXPECT_EQ(read(log), "");  // truncated
}

}  // namespace
}  // namespace headlab::train
