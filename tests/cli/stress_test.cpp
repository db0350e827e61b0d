// Stress: SIGTERM against two runs training side by side, many times over.
// A stop signal handled while oneDNN's JIT GEMM ran once corrupted the heap
// (exit 134 or 139, no checkpoint) in about one process of eight; 36 rounds
// of two processes, each sent a burst of SIGTERMs mid-step, miss a failure
// that rare with a chance under (7/8)^72, about 1e-4. Long: not built for
// the sanitizer pass (tests/cli/CMakeLists.txt).
#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <memory>
#include <random>
#include <thread>

#include "tests/cli/fixtures.h"

namespace headlab::cli_test {
namespace {

namespace fs = std::filesystem;

TEST(Stress, SigtermBurstsAgainstTwoRunsAlwaysStopCleanlyWithACheckpoint) {
  TempDir dir;
  const unsigned seed = std::random_device{}();
  SCOPED_TRACE("signal moments drawn with seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  constexpr int kRounds = 36;
  for (int round = 0; round < kRounds; ++round) {
    SCOPED_TRACE("round " + std::to_string(round + 1));
    std::vector<std::string> runs;
    std::vector<std::unique_ptr<Child>> children;
    for (const char* name : {"a", "b"}) {
      runs.push_back(dir / (std::to_string(round) + name));
      // d_model 64: the products are large enough for oneDNN's JIT GEMM kernels.
      children.push_back(std::make_unique<Child>(
          headlab_path(),
          train_command(runs.back(), {{"--steps", "100000"}, {"--log-every", "1"}, {"--d-model", "64"}}),
          dir.path(), dir.path()));
    }
    for (std::size_t i = 0; i < runs.size(); ++i)
      ASSERT_TRUE(wait_until([&] { return fs::exists(runs[i] + "/metrics.jsonl") || children[i]->finished(); }));
    std::this_thread::sleep_for(std::chrono::microseconds(std::uniform_int_distribution<int>(0, 5000)(rng)));
    // A burst, as a supervisor that repeats its request sends: every signal
    // lands at another moment of the step, each one a chance to hit a kernel.
    for (int burst = 0; burst < 30; ++burst) {
      for (const auto& child : children) child->signal(SIGTERM);
      std::this_thread::sleep_for(std::chrono::microseconds(300));
    }
    for (std::size_t i = 0; i < runs.size(); ++i) {
      const RunResult r = children[i]->wait();
      ASSERT_EQ(r.exit_code, 143) << runs[i] << ": " << r.describe();
      EXPECT_NE(r.out.find("stopped by"), std::string::npos) << r.describe();
      EXPECT_TRUE(fs::exists(runs[i] + "/checkpoint.safetensors"));
      fs::remove_all(runs[i]);
    }
  }
}

}  // namespace
}  // namespace headlab::cli_test
