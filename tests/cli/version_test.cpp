// `headlab --version` names the release and the commit it was built from.
#include <gtest/gtest.h>

#include <regex>
#include <string>

#include "tests/cli/fixtures.h"

namespace headlab::cli_test {
namespace {

TEST(Version, PrintsReleaseAndCommitOnOneLine) {
  TempDir cwd;
  const RunResult r = run_headlab({"--version"}, cwd.path());
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(r.err, "");
  // CMake's project(VERSION), then a short commit, "-dirty" if tracked files
  // had changes at build time, or "unknown" outside a git checkout.
  const std::string release = "headlab " HEADLAB_EXPECTED_VERSION " (git ";
  ASSERT_TRUE(r.out.starts_with(release)) << r.out;
  EXPECT_TRUE(std::regex_match(r.out.substr(release.size()), std::regex(R"(([0-9a-f]{7,40}(-dirty)?|unknown)\)\n)")))
      << r.out;
  EXPECT_TRUE(is_empty_dir(cwd.path()));
}

}  // namespace
}  // namespace headlab::cli_test
