// `headlab --version` names the release and the commit it was built from.
#include <gtest/gtest.h>

#include <string>

#include "tests/cli/fixtures.h"

namespace headlab::cli_test {
namespace {

TEST(Version, PrintsReleaseAndCommitOnOneLine) {
  TempDir cwd;
  const RunResult r = run_headlab({"--version"}, cwd.path());
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(r.err, "");
  // CMake's project(VERSION), then a short commit, "-dirty, changes <hash>"
  // if the compiled sources had uncommitted changes at build time (the hash
  // of their diff: 8 hex digits), or "unknown" outside a git checkout.
  const std::string release = "headlab " HEADLAB_EXPECTED_VERSION " (git ";
  ASSERT_TRUE(r.out.starts_with(release)) << r.out;
  const std::string rest = r.out.substr(release.size());
  ASSERT_TRUE(rest.ends_with(")\n")) << r.out;
  std::string commit = rest.substr(0, rest.size() - 2);
  const auto is_hex = [](const std::string& s) { return s.find_first_not_of("0123456789abcdef") == std::string::npos; };
  if (const std::size_t dirty = commit.find("-dirty, changes "); dirty != std::string::npos) {
    const std::string hash = commit.substr(dirty + 16);
    EXPECT_TRUE(hash.size() == 8 && is_hex(hash)) << r.out;
    commit.resize(dirty);
  }
  const bool hex = commit.size() >= 7 && commit.size() <= 40 && is_hex(commit);
  EXPECT_TRUE(hex || rest == "unknown)\n") << r.out;
  EXPECT_TRUE(is_empty_dir(cwd.path()));
}

}  // namespace
}  // namespace headlab::cli_test
