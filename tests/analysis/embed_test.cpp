// embed_file.cmake turns any file into the same bytes in the binary: what
// report.html's stylesheet and script rely on.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <string_view>

#include "analysis/html_report.h"
#include "analysis/report_assets.h"
#include "analysis/sweep_html.h"

namespace headlab::analysis {

extern const std::string_view kEmbedSample;  // embed_sample.txt, embedded by tests/analysis/CMakeLists.txt

namespace {

// A file of the source tree, byte for byte.
std::string source_file(const std::string& path) {
  std::ifstream in(std::string(HEADLAB_SOURCE_ROOT) + "/" + path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(EmbedFile, KeepsEveryByteIncludingRawStringDelimitersAndNonAscii) {
  const std::string file = source_file("tests/analysis/embed_sample.txt");
  ASSERT_FALSE(file.empty());
  ASSERT_NE(file.find(")\""), std::string::npos);
  EXPECT_EQ(kEmbedSample, file);
}

TEST(EmbedFile, TheReportCarriesTheStylesheetAndScriptFilesVerbatim) {
  EXPECT_EQ(kReportCss, source_file("analysis/report/report.css"));
  EXPECT_EQ(kReportJs, source_file("analysis/report/report.js"));
  const std::string html = report_html(RunAnalysis{}, {}, nullptr);
  EXPECT_NE(html.find(kReportCss), std::string::npos);
  EXPECT_NE(html.find(kReportJs), std::string::npos);
  EXPECT_NE(html.find(kPageJs), std::string::npos);
}

TEST(EmbedFile, TheSweepPageCarriesItsFilesVerbatim) {
  EXPECT_EQ(kPageJs, source_file("analysis/report/page.js"));
  EXPECT_EQ(kSweepCss, source_file("analysis/report/sweep.css"));
  EXPECT_EQ(kSweepJs, source_file("analysis/report/sweep.js"));
  const std::string html = sweep_html(nlohmann::ordered_json::object());
  for (const std::string_view part : {kReportCss, kSweepCss, kPageJs, kSweepJs}) EXPECT_NE(html.find(part), std::string::npos);
}

}  // namespace
}  // namespace headlab::analysis
