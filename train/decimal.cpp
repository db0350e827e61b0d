#include "train/decimal.h"

#include <charconv>
#include <cstdint>
#include <system_error>

namespace headlab::train {

std::string non_decimal_integer(std::string_view text) {
  std::string_view digits = text;
  const bool negative = digits.starts_with('-');
  if (negative || digits.starts_with('+')) digits.remove_prefix(1);
  if (digits.size() < 2 || digits[0] != '0') return "";
  int base = 0;
  const char* name = nullptr;
  switch (digits[1]) {
    case 'x': case 'X': base = 16; name = "hexadecimal"; break;
    case 'o': case 'O': base = 8; name = "octal"; break;
    case 'b': case 'B': base = 2; name = "binary"; break;
    default: return "";
  }
  digits.remove_prefix(2);
  const std::string said = "'" + std::string(text) + "' is " + name + ": write it in decimal";
  uint64_t value = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value, base);
  // "0xzz", or a value past 64 bits: no decimal to offer.
  if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size()) return said;
  return said + ", " + (negative && value != 0 ? "-" : "") + std::to_string(value);
}

}  // namespace headlab::train
