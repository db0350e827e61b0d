// Numbers as the analysis prints them.
#pragma once

#include <cstdio>
#include <string>

namespace headlab::analysis {

// `value` with `decimals` digits after the point, as printf's "%.*f".
inline std::string fixed(double value, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, value);
  return buf;
}

}  // namespace headlab::analysis
