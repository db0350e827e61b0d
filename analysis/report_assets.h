// The stylesheets and scripts of report.html and sweep.html: the files of
// analysis/report/, embedded at build time (headlab_embed in analysis/CMakeLists.txt).
// page.js is the part both pages share (analysis/html_page.h).
#pragma once

#include <string_view>

namespace headlab::analysis {

extern const std::string_view kReportCss;
extern const std::string_view kReportJs;
extern const std::string_view kSnapshotsJs;  // report.html's slider over the snapshots
extern const std::string_view kPageJs;
extern const std::string_view kSweepCss;
extern const std::string_view kSweepJs;

}  // namespace headlab::analysis
