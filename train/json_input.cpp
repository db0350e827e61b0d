#include "train/json_input.h"

#include <set>
#include <stdexcept>
#include <vector>

namespace headlab::train {
namespace {

// Brackets outside strings: the deepest nesting, found without recursion.
void check_depth_and_bytes(std::string_view text) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\0') throw std::invalid_argument("a NUL byte at byte " + std::to_string(i) + " (JSON text holds none)");
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
  const auto close = what.find("] ");
  std::string text = what.starts_with("[json.exception.") && close != std::string::npos ? what.substr(close + 2) : what;
  const std::string inner_line = "at line 1, column";
  if (const auto at = text.find(inner_line); at != std::string::npos) text.replace(at, inner_line.size(), "at column");
  return text;
}

}  // namespace

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
