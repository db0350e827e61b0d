// run_headlab's peak_rss_kib is headlab's own, however large the test
// process has grown: the memory bounds of the other tests rest on it.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <vector>

#include "tests/cli/subprocess.h"

namespace headlab::cli_test {
namespace {

TEST(PeakRss, IsTheChildsOwnNotTheTestProcesss) {
  std::vector<char> held(std::size_t{256} << 20);
  std::memset(held.data(), 1, held.size());  // resident, not only reserved
  const long held_kib = static_cast<long>(held.size() >> 10);
  const RunResult r = run_headlab({"--version"}, ".");
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_GT(r.peak_rss_kib, 0);
  EXPECT_LT(r.peak_rss_kib, held_kib / 2) << "the test process's memory counted as headlab's";
  // A child forked straight from this process reports this process's peak:
  // what the measurement goes around.
  Child direct(headlab_path(), {"--version"}, ".", std::filesystem::temp_directory_path().string());
  const RunResult d = direct.wait();
  ASSERT_EQ(d.exit_code, 0) << d.describe();
  EXPECT_GE(d.peak_rss_kib, held_kib) << "the comparison proves nothing";
  EXPECT_EQ(held[held.size() / 2], 1);
}

}  // namespace
}  // namespace headlab::cli_test
