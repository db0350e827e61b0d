#include "train/json_input.h"

#include <set>
#include <stdexcept>
#include <vector>

namespace headlab::train {
namespace {

// The length of the well-formed UTF-8 sequence at text[i] (RFC 3629: no
// overlong forms, no surrogates, nothing above U+10FFFF), 0 if there is none.
std::size_t utf8_length(std::string_view text, std::size_t i) {
  const auto byte = [&](std::size_t k) { return i + k < text.size() ? static_cast<unsigned char>(text[i + k]) : 0u; };
  const unsigned b0 = byte(0);
  if (b0 < 0x80) return 1;
  const auto tail = [&](std::size_t k, unsigned low = 0x80, unsigned high = 0xbf) {
    return byte(k) >= low && byte(k) <= high;
  };
  if (b0 >= 0xc2 && b0 <= 0xdf) return tail(1) ? 2 : 0;
  if (b0 >= 0xe0 && b0 <= 0xef) {
    const bool second = b0 == 0xe0 ? tail(1, 0xa0) : b0 == 0xed ? tail(1, 0x80, 0x9f) : tail(1);
    return second && tail(2) ? 3 : 0;
  }
  if (b0 >= 0xf0 && b0 <= 0xf4) {
    const bool second = b0 == 0xf0 ? tail(1, 0x90) : b0 == 0xf4 ? tail(1, 0x80, 0x8f) : tail(1);
    return second && tail(2) && tail(3) ? 4 : 0;
  }
  return 0;
}

std::string hex_byte(unsigned char c) {
  static const char* digits = "0123456789abcdef";
  return std::string("0x") + digits[c >> 4] + digits[c & 15];
}

// Brackets outside strings: the deepest nesting, found without recursion;
// and the bytes: no NUL, UTF-8 only (named by offset: a message never
// echoes the raw bytes).
void check_depth_and_bytes(std::string_view text) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\0') throw std::invalid_argument("a NUL byte at byte " + std::to_string(i) + " (JSON text holds none)");
    if (static_cast<unsigned char>(c) >= 0x80) {
      const std::size_t n = utf8_length(text, i);
      if (n == 0)
        throw std::invalid_argument("invalid UTF-8 at byte " + std::to_string(i) + " (" +
                                    hex_byte(static_cast<unsigned char>(c)) + "; JSON text must be UTF-8)");
      i += n - 1;
      continue;
    }
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth)
        throw std::invalid_argument("nesting deeper than " + std::to_string(kMaxJsonDepth) + " levels at byte " +
                                    std::to_string(i));
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
}

std::string without_prefix(const std::string& what) {
  std::string text = without_json_prefix(what);
  const std::string inner_line = "at line 1, column";
  if (const auto at = text.find(inner_line); at != std::string::npos) text.replace(at, inner_line.size(), "at column");
  // The parser quotes what it last read: control characters as hex.
  std::string shown;
  for (const char c : text)
    shown += static_cast<unsigned char>(c) < 0x20 || c == 0x7f ? hex_byte(static_cast<unsigned char>(c)) : std::string(1, c);
  return shown;
}

}  // namespace

std::string without_json_prefix(const std::string& what) {
  const auto close = what.find("] ");
  return what.starts_with("[json.exception.") && close != std::string::npos ? what.substr(close + 2) : what;
}

nlohmann::json parse_user_json(std::string_view text) {
  check_depth_and_bytes(text);
  std::vector<std::set<std::string>> open_objects;  // keys seen so far in each object being parsed
  auto watch = [&](int, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    using Event = nlohmann::json::parse_event_t;
    if (event == Event::object_start) open_objects.emplace_back();
    if (event == Event::object_end) open_objects.pop_back();
    if (event == Event::key && !open_objects.back().insert(parsed.get<std::string>()).second)
      throw std::invalid_argument("the key \"" + brief_text(parsed.get<std::string>()) +
                                  "\" appears twice in one object");
    return true;
  };
  try {
    return nlohmann::json::parse(text.begin(), text.end(), watch);
  } catch (const nlohmann::json::exception& e) {
    throw std::invalid_argument(without_prefix(e.what()));
  }
}

std::string brief_text(const std::string& text, std::size_t max) {
  return text.size() <= max ? text : text.substr(0, max) + "...";
}

std::string brief_json(const nlohmann::json& value, std::size_t max) {
  return brief_text(value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), max);
}

}  // namespace headlab::train
