#include "train/shell_word.h"

namespace headlab::train {

namespace {

bool plain(unsigned char c) {
  if (c >= 0x80) return true;
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  return std::string_view("_-./,:=+@%").find(static_cast<char>(c)) != std::string_view::npos;
}

}  // namespace

std::string shell_word(std::string_view word) {
  bool quote = word.empty();
  for (const char c : word) quote = quote || !plain(static_cast<unsigned char>(c));
  if (!quote) return std::string(word);
  std::string out = "'";
  for (const char c : word) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace headlab::train
