// JSON that comes from the user (a --config file, a --data line, a
// checkpoint's metadata), parsed so that no input can crash or mislead:
//   - nesting deeper than kMaxJsonDepth is refused by a scan before parsing,
//     so neither the parser nor a message that quotes the value recurses deep;
//   - a NUL byte is refused (nlohmann would stop reading at it);
//   - a key repeated in one object is refused (nlohmann keeps the last one).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace headlab::train {

inline constexpr int kMaxJsonDepth = 64;

// Throws std::invalid_argument saying what is wrong and where (byte offset),
// without nlohmann's "[json.exception...]" prefix.
nlohmann::json parse_user_json(std::string_view text);

// nlohmann's message `what` without its "[json.exception.type_error.302] "
// prefix: the user needs only what follows.
std::string without_json_prefix(const std::string& what);

// The JSON text of `value` cut to `max` characters, for messages.
std::string brief_json(const nlohmann::json& value, std::size_t max = 60);
// `text` cut to `max` characters, for messages.
std::string brief_text(const std::string& text, std::size_t max = 60);

}  // namespace headlab::train
