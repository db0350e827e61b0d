// The small files that tell what a folder is -- its .headlab marker, the
// start of an old sweep's sweep.json -- are read only if they are regular
// files, and the file looked at is the one read: opened first, then its
// descriptor checked. A check of the path followed by an open would let a
// FIFO swapped in between block the read for good.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <string>
#include <thread>

#include "train/input_file.h"
#include "train/run_folder.h"
#include "train/sweep_folder.h"

namespace headlab::train {
namespace {

namespace fs = std::filesystem;

class FolderMarker : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("headlab-marker-" + std::to_string(getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  static void write(const std::string& p, const std::string& text) { std::ofstream(p, std::ios::binary) << text; }

  fs::path dir_;
};

TEST_F(FolderMarker, OnlyARegularFileIsRead) {
  write(path("file"), "0123456789");
  EXPECT_EQ(read_regular_file_head(path("file"), 4), "0123");
  EXPECT_EQ(read_regular_file_head(path("file"), 100), "0123456789");
  ASSERT_EQ(::mkfifo(path("fifo").c_str(), 0644), 0);
  EXPECT_FALSE(read_regular_file_head(path("fifo"), 4)) << "a FIFO without a writer, not waited on";
  fs::create_symlink(path("file"), path("link"));
  EXPECT_FALSE(read_regular_file_head(path("link"), 4)) << "a link is not followed";
  EXPECT_FALSE(read_regular_file_head(path("absent"), 4));
  EXPECT_FALSE(read_regular_file_head(dir_.string(), 4)) << "a folder";
}

TEST_F(FolderMarker, AMarkerIsARegularFileHoldingItsKind) {
  write_folder_marker(dir_.string(), "run");
  EXPECT_EQ(folder_marker(dir_.string()), "run");
  EXPECT_FALSE(is_sweep_folder(dir_.string()));
  write(path(kFolderMarker), "{\"headlab\": \"sweep\"}" + std::string(300, ' '));
  EXPECT_EQ(folder_marker(dir_.string()), "") << "larger than a marker headlab writes";
  fs::remove(path(kFolderMarker));
  ASSERT_EQ(::mkfifo(path(kFolderMarker).c_str(), 0644), 0);
  EXPECT_EQ(folder_marker(dir_.string()), "");
  // A sweep of a headlab before the marker and sweep.lock, told by its sweep.json.
  fs::remove(path(kFolderMarker));
  write(path("sweep.json"), "{\n  \"format\": \"headlab-sweep/1\",\n  \"runs\": []\n}\n");
  EXPECT_TRUE(is_sweep_folder(dir_.string()));
  fs::remove(path("sweep.json"));
  ASSERT_EQ(::mkfifo(path("sweep.json").c_str(), 0644), 0);
  EXPECT_FALSE(is_sweep_folder(dir_.string()));
}

// The marker swapped between a regular file and a FIFO (both kept under
// other names, so that the FIFO can be opened to release a stuck reader)
// while it is read over and over: every read gives the kind or "", and none
// waits on the FIFO. A stat of the path before the open fails this within
// a few thousand reads.
TEST_F(FolderMarker, AFifoSwappedInIsNeverWaitedOn) {
  const std::string marker = path(kFolderMarker), fifo = path("fifo"), file = path("file"), next = path("next");
  write(file, "{\"headlab\": \"run\"}\n");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  ASSERT_EQ(::link(file.c_str(), marker.c_str()), 0);
  std::atomic<bool> stop{false};
  std::thread swapper([&] {
    for (bool to_fifo = true; !stop; to_fifo = !to_fifo) {
      if (::link((to_fifo ? fifo : file).c_str(), next.c_str()) != 0 || ::rename(next.c_str(), marker.c_str()) != 0)
        return;
    }
  });
  std::atomic<int> reads{0}, others{0};
  std::future<void> reader = std::async(std::launch::async, [&] {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (std::chrono::steady_clock::now() < until) {
      const std::string kind = folder_marker(dir_.string());
      if (kind != "run" && !kind.empty()) ++others;
      ++reads;
    }
  });
  const bool ended = reader.wait_for(std::chrono::seconds(20)) == std::future_status::ready;
  stop = true;
  swapper.join();
  if (!ended) {
    // Releases the read stuck on the FIFO, so that the test fails instead of hanging.
    const int writer = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
    if (writer >= 0) ::close(writer);
  }
  reader.wait();
  EXPECT_TRUE(ended) << "a read of the marker waited on the FIFO swapped in, after " << reads << " reads";
  EXPECT_EQ(others, 0);
  EXPECT_GT(reads, 100);
}

}  // namespace
}  // namespace headlab::train
