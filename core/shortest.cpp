#include "core/shortest.h"

#include <charconv>
#include <cmath>

namespace headlab::core {

std::string shortest(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value < 0 ? "-inf" : "inf";
  char buf[32];
  // std::to_chars without a precision is the shortest round-trip form.
  const auto result = std::to_chars(buf, buf + sizeof buf, value);
  return std::string(buf, result.ptr);
}

}  // namespace headlab::core
