// The stylesheet and script of report.html: the files analysis/report/report.css
// and report.js, embedded at build time (headlab_embed in analysis/CMakeLists.txt).
#pragma once

#include <string_view>

namespace headlab::analysis {

extern const std::string_view kReportCss;
extern const std::string_view kReportJs;

}  // namespace headlab::analysis
