// The progress line long commands redraw on a terminal's stderr (train's
// steps, analyze's chunks): "[########......................]  27%  step
// 270/1000  ETA 1m05s".
#pragma once

#include <string>

namespace headlab::cli {

// "[bar] pct%  <what>  ETA <eta>" for `fraction` in [0, 1].
std::string progress_line(double fraction, const std::string& what, double eta_seconds);

// "42s", "3m05s", "2h07m".
std::string format_duration(double seconds);

}  // namespace headlab::cli
