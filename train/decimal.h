// The command line's integers are written in decimal. CLI11 reads an integer
// flag with strtoll's base 0, so `train --steps 0x10` trained 16 steps and
// `--steps 010` 8 (octal), while sweep's lists refused 0x40 and read 010 as
// 10: one rule for every integer a command line gives, the one a researcher
// expects: decimal only, leading zeros included ("010" is 10), and another
// base refused with its value in decimal.
#pragma once

#include <string>
#include <string_view>

namespace headlab::train {

// Why `text` cannot be read as a decimal integer when it is one written in
// another base (0x, 0o or 0b, after an optional sign): "'0x10' is hexadecimal:
// write it in decimal, 16"; "" for anything else, a decimal integer or no
// integer at all (the caller's own check names that).
std::string non_decimal_integer(std::string_view text);

}  // namespace headlab::train
