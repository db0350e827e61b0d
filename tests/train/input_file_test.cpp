// An input that is a named pipe (FIFO) never hangs the program: it is read
// as its writer writes, a pipe read more than once is refused at once, and a
// stop signal ends the wait for a writer whatever handles the signal -- a
// flag-only handler with SA_RESTART (which would restart a blocking open()
// for good), or a mask that blocks it (a sweep's).
#include "train/input_file.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <string>
#include <thread>

#include "test_util.h"
#include "train/data_file.h"
#include "train/errors.h"
#include "train/signals.h"

namespace headlab::train {
namespace {

using test::contains;

namespace fs = std::filesystem;

constexpr const char* kLines = "{\"tokens\": [1, 2, 3]}\n{\"tokens\": [3, 2, 1]}\n";

class InputFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() / ("headlab-input-" + std::to_string(getpid()) + "-" + test->name());
    fs::create_directories(dir_);
    fifo_ = (dir_ / "fifo").string();
    ASSERT_EQ(::mkfifo(fifo_.c_str(), 0644), 0);
  }
  void TearDown() override {
    reset_stop_signal();
    fs::remove_all(dir_);
  }

  // Reads the FIFO as a data file on a thread of its own, under `setup`
  // (run first on that thread), signalling that thread with SIGTERM every
  // 100 ms until the read ends. Returns how it ended: "stopped by SIGTERM",
  // or the message of another error. After 5 s a writer opens and closes the
  // FIFO, so that a read stuck in open() ends instead of hanging the test.
  std::string read_while_signalled(const std::function<void()>& setup) {
    std::promise<std::string> outcome;
    std::future<std::string> done = outcome.get_future();
    std::thread reader([&] {
      setup();
      try {
        DataFile data(fifo_, 8, 8, 6);
        outcome.set_value("read " + std::to_string(data.size()) + " sequences");
      } catch (const Stopped& e) {
        outcome.set_value(e.signal == SIGTERM ? "stopped by SIGTERM" : e.what());
      } catch (const std::exception& e) {
        outcome.set_value(e.what());
      }
    });
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (done.wait_for(std::chrono::milliseconds(100)) != std::future_status::ready &&
           std::chrono::steady_clock::now() < deadline)
      pthread_kill(reader.native_handle(), SIGTERM);
    if (done.wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
      const int writer = ::open(fifo_.c_str(), O_WRONLY | O_NONBLOCK);
      if (writer >= 0) ::close(writer);
    }
    reader.join();
    return done.get();
  }

  fs::path dir_;
  std::string fifo_;
};

// What a flag-only handler sees: it is never asked.
volatile std::sig_atomic_t g_foreign = 0;
extern "C" void foreign_handler(int) { g_foreign = 1; }

TEST_F(InputFileTest, AFifoIsReadAsItsWriterWritesIt) {
  std::thread writer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    std::ofstream(fifo_, std::ios::binary) << kLines;
  });
  const DataFile data(fifo_, 8, 8, 6);
  writer.join();
  EXPECT_EQ(data.size(), 2);
  EXPECT_TRUE(data.fingerprint().has_value());
}

TEST_F(InputFileTest, AFifoReadMoreThanOnceIsRefusedWithoutWaiting) {
  try {
    InputFile in(fifo_, "--data " + fifo_, "it is read twice");
    FAIL() << "opened";
  } catch (const UsageError& e) {
    EXPECT_TRUE(contains(e.what(), "--data " + fifo_ + " is not a regular file (a pipe or a device): it is read twice"))
        << e.what();
  }
  try {
    require_regular_file(fifo_, "--data " + fifo_, "it is read twice");
    FAIL() << "accepted";
  } catch (const UsageError& e) {
    EXPECT_TRUE(contains(e.what(), "not a regular file")) << e.what();
  }
  EXPECT_NO_THROW(require_regular_file((dir_ / "absent").string(), "--data", "x")) << "its reader names a missing file";
}

TEST_F(InputFileTest, AStopSignalEndsTheWaitForAWriterDespiteAFlagOnlyHandlerWithSaRestart) {
  struct sigaction foreign {}, previous {};
  foreign.sa_handler = foreign_handler;
  foreign.sa_flags = SA_RESTART;
  sigemptyset(&foreign.sa_mask);
  ASSERT_EQ(sigaction(SIGTERM, &foreign, &previous), 0);
  const std::string outcome = read_while_signalled([] {});
  struct sigaction after {};
  sigaction(SIGTERM, &previous, &after);
  EXPECT_EQ(outcome, "stopped by SIGTERM");
  EXPECT_EQ(after.sa_handler, foreign_handler) << "the program's own handler is restored after the wait";
}

TEST_F(InputFileTest, AStopSignalEndsTheWaitForAWriterWhileTheSignalIsBlocked) {
  // As in a sweep, which blocks its stop signals for its whole life.
  const std::string outcome = read_while_signalled([] {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
  });
  EXPECT_EQ(outcome, "stopped by SIGTERM");
}

TEST_F(InputFileTest, ReadInputStopsOneBytePastItsBound) {
  const std::string path = (dir_ / "big").string();
  std::ofstream(path, std::ios::binary) << std::string(5000, 'x');
  EXPECT_EQ(read_input(path, "big", 100).size(), 101u);
  EXPECT_EQ(read_input(path, "big", 10000).size(), 5000u);
}

}  // namespace
}  // namespace headlab::train
