#include "train/cli/progress_bar.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>

namespace headlab::cli {

void AnalysisProgressBar::show(const analysis::AnalysisProgress& p) {
  if (!shown_) return;
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double eta = p.fraction > 0 ? seconds * (1 - p.fraction) / p.fraction : 0;
  std::string what = "sequence " + std::to_string(p.rows_done) + "/" + std::to_string(p.rows);
  if (p.passes > 1) what = "pass " + std::to_string(p.pass) + " of " + std::to_string(p.passes) + ", " + what;
  std::fprintf(stderr, "\r%s   ", progress_line(p.fraction, what, eta).c_str());
  std::fflush(stderr);
  drawn_ = true;
}

void AnalysisProgressBar::clear() {
  if (drawn_) std::fprintf(stderr, "\r\033[K");
  drawn_ = false;
}

std::string format_duration(double seconds) {
  const auto s = static_cast<int64_t>(seconds + 0.5);
  char buf[32];
  if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", static_cast<long long>(s / 3600), static_cast<long long>(s / 60 % 60));
  else if (s >= 60)
    std::snprintf(buf, sizeof buf, "%lldm%02llds", static_cast<long long>(s / 60), static_cast<long long>(s % 60));
  else
    std::snprintf(buf, sizeof buf, "%llds", static_cast<long long>(s));
  return buf;
}

std::string progress_line(double fraction, const std::string& what, double eta_seconds) {
  constexpr int kWidth = 30;
  const double frac = std::clamp(fraction, 0.0, 1.0);
  std::string bar(static_cast<std::size_t>(frac * kWidth), '#');
  bar.resize(kWidth, '.');
  char pct[16];
  std::snprintf(pct, sizeof pct, "%3.0f%%", frac * 100);
  return "[" + bar + "] " + pct + "  " + what + "  ETA " + format_duration(eta_seconds);
}

}  // namespace headlab::cli
