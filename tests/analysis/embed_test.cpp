// embed_file.cmake turns any file into the same bytes in the binary: what
// report.html's stylesheet and script rely on.
#include <gtest/gtest.h>

#include <cctype>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "analysis/analyze_model.h"
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

// QA20 F22: the README, docs/head-metrics.md and the report page's glossary
// each describe the importance the views show, as the code computes it: the
// margin's gradient over the sequences with a target among the first
// importance_examples, normalized per layer, heads.json's importance_normalized
// (not `importance`, the loss gradient, as the README said).
TEST(ImportanceDescription, TheReadmeTheDocsAndThePageDescribeWhatTheCodeComputes) {
  const std::string first = "among the first " + std::to_string(AnalysisOptions{}.importance_examples);
  // The text from `from` to `to`, each run of white space one space (the lines wrap anywhere).
  const auto part = [](const std::string& text, const std::string& from, const std::string& to) {
    const std::size_t begin = text.find(from);
    std::string out;
    if (begin == std::string::npos) return out;
    for (const char c : text.substr(begin, text.find(to, begin + 1) - begin)) {
      const bool space = std::isspace(static_cast<unsigned char>(c)) != 0;
      if (!space) out += c;
      else if (!out.empty() && out.back() != ' ') out += ' ';
    }
    return out;
  };
  const std::vector<std::pair<std::string, std::string>> places = {
      {"README.md", part(source_file("README.md"), "- **importance**", "\n- **")},
      {"docs/head-metrics.md", part(source_file("docs/head-metrics.md"), "- `importance = ", "## Pruning curve")},
      {"report.js", part(std::string(kReportJs), "['importance', ", "\n")}};
  for (const auto& [where, text] : places) {
    SCOPED_TRACE(where);
    ASSERT_FALSE(text.empty());
    EXPECT_NE(text.find(first), std::string::npos) << text;
    EXPECT_NE(text.find("importance_normalized"), std::string::npos) << text;
    EXPECT_NE(text.find("margin"), std::string::npos) << text;
    EXPECT_NE(text.find("Euclidean norm"), std::string::npos) << text;
  }
}

}  // namespace
}  // namespace headlab::analysis
