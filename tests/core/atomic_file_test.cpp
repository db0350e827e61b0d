// The one writer of outputs and the one opener of appended logs: neither
// ever writes through a link, nor into anything but a regular file.
#include "core/atomic_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace headlab::core {
namespace {

namespace fs = std::filesystem;

class AtomicFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("headlab-atomic-" + std::to_string(getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  static std::string read(const std::string& p) {
    std::ifstream in(p);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  static void write(const std::string& p, const std::string& text) { std::ofstream(p) << text; }

 private:
  fs::path dir_;
};

// A hard link planted under the temporary name would be cut by O_TRUNC and
// written into: the writer makes a fresh file instead.
TEST_F(AtomicFile, AHardLinkAtTheTemporaryNameIsNeverWrittenInto) {
  write(path("other"), "keep me\n");
  fs::create_hard_link(path("other"), path("out.tmp." + std::to_string(getpid())));
  write_file_atomic(path("out"), "new\n");
  EXPECT_EQ(read(path("out")), "new\n");
  EXPECT_EQ(read(path("other")), "keep me\n");
}

TEST_F(AtomicFile, AppendingAddsToARegularFileAndCreatesANewOne) {
  for (int i = 0; i < 2; ++i) {
    const int fd = open_for_append(path("log"));
    append_to(fd, path("log"), "line\n");
    ::close(fd);
  }
  EXPECT_EQ(read(path("log")), "line\nline\n");
}

TEST_F(AtomicFile, AppendingRefusesALinkEvenADanglingOneAFifoAndAFolder) {
  write(path("target"), "keep me\n");
  fs::create_symlink(path("target"), path("link"));
  fs::create_symlink(path("missing"), path("dangling"));
  ASSERT_EQ(::mkfifo(path("fifo").c_str(), 0644), 0);
  fs::create_directory(path("folder"));
  for (const char* name : {"link", "dangling", "fifo", "folder"}) {
    try {
      ::close(open_for_append(path(name)));
      ADD_FAILURE() << name << " was opened for appending";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find(path(name)), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(read(path("target")), "keep me\n");
  EXPECT_FALSE(fs::exists(path("missing"))) << "the dangling link's target was created";
}

}  // namespace
}  // namespace headlab::core
