// The progress line long commands redraw on a terminal's stderr (train's
// steps, analyze's chunks): "[########......................]  27%  step
// 270/1000  ETA 1m05s".
#pragma once

#include <chrono>
#include <string>

#include "analysis/analyze_model.h"

namespace headlab::cli {

// "[bar] pct%  <what>  ETA <eta>" for `fraction` in [0, 1].
std::string progress_line(double fraction, const std::string& what, double eta_seconds);

// "42s", "3m05s", "2h07m".
std::string format_duration(double seconds);

// The head analysis's progress line (analyze's, and train's final
// analysis): "sequence 128/512", with its pass when it reads the set twice.
class AnalysisProgressBar {
 public:
  explicit AnalysisProgressBar(bool shown) : shown_(shown), start_(std::chrono::steady_clock::now()) {}
  void show(const analysis::AnalysisProgress& p);
  void clear();  // the line erased, if drawn

 private:
  bool shown_, drawn_ = false;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace headlab::cli
