#include "train/data_file.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <string_view>
#include <utility>

#include "train/errors.h"
#include "train/input_file.h"
#include "train/json_input.h"

namespace headlab::train {
namespace {

using nlohmann::json;

// The integer a JSON value holds, or nothing if it is not an integer (floats,
// strings, booleans...). Unsigned values beyond int64 saturate: they are out of
// any vocab anyway, and messages quote the JSON text, not this number.
std::optional<int64_t> integer_of(const json& value) {
  if (value.is_number_unsigned()) {
    const auto u = value.get<uint64_t>();
    return u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ? std::numeric_limits<int64_t>::max()
                                                                          : static_cast<int64_t>(u);
  }
  if (value.is_number_integer()) return value.get<int64_t>();
  return std::nullopt;
}

// Whether `value` is an integer literal beyond 64 bits, which nlohmann reads
// as a double (99999999999999999999 as 1e+20): integer_of refuses it, and a
// message says it is out of range, not that it is no integer.
bool is_huge_integer(const json& value) {
  if (!value.is_number_float()) return false;
  const double v = value.get<double>();
  return std::isfinite(v) && std::trunc(v) == v && std::fabs(v) >= 0x1p63;
}

// `value` as a message shows it: a huge integer as the integer the double
// holds (100000000000000000000, not 1e+20), anything else as its JSON text.
std::string shown(const json& value) {
  if (!is_huge_integer(value)) return brief_json(value);
  char text[400];
  std::snprintf(text, sizeof text, "%.0f", value.get<double>());
  return text;
}

// Why integer_of refused `value`, after the value in a message.
std::string not_an_integer(const json& value) {
  return is_huge_integer(value) ? " is out of the range of a 64-bit integer" : " is not an integer";
}

// Why a causal model's "attend" key cannot lie after its query; a file with
// such keys is one for a bidirectional model, which `train` makes on request.
constexpr const char* kCausalKeys =
    " under causal attention (a query sees itself and earlier positions; a --bidirectional model's keys may lie "
    "after the query)";

bool is_blank(const std::string& line) { return line.find_first_not_of(" \t\r\n\f\v") == std::string::npos; }

// The encoding a UTF-16 or UTF-32 byte order mark at the start of `text`
// names, or null. UTF-32's little-endian mark begins with UTF-16's: the
// longer is looked for first.
const char* utf16_or_32(std::string_view text) {
  using namespace std::string_view_literals;
  for (const auto& [mark, name] : {std::pair{"\x00\x00\xfe\xff"sv, "UTF-32 (big-endian)"},
                                   std::pair{"\xff\xfe\x00\x00"sv, "UTF-32 (little-endian)"},
                                   std::pair{"\xfe\xff"sv, "UTF-16 (big-endian)"},
                                   std::pair{"\xff\xfe"sv, "UTF-16 (little-endian)"}})
    if (text.starts_with(mark)) return name;
  return nullptr;
}

// The encoding a first line's NUL bytes give away when it has no byte order
// mark: JSON text starts with an ASCII byte ('{' or a blank), which UTF-16
// and UTF-32 widen with NUL bytes on one side. Null when the first four bytes
// have no such pattern (or are not read yet).
const char* utf16_or_32_unmarked(std::string_view text) {
  if (text.size() < 4) return nullptr;
  const auto nul = [&](std::size_t i) { return text[i] == '\0'; };
  if (!nul(0) && nul(1) && nul(2) && nul(3)) return "UTF-32 (little-endian)";
  if (nul(0) && nul(1) && nul(2) && !nul(3)) return "UTF-32 (big-endian)";
  if (!nul(0) && nul(1) && !nul(2) && nul(3)) return "UTF-16 (little-endian)";
  if (nul(0) && !nul(1) && nul(2) && !nul(3)) return "UTF-16 (big-endian)";
  return nullptr;
}

// Whether the line so far shows that it is no JSON object: its first byte
// after blanks and a UTF-8 byte order mark (which the parser skips) is not
// '{'. Throws UsageError if so; false while the line is too short to tell.
// At the file's start (`first_line`), a UTF-16 or UTF-32 byte order mark is
// named as such: an editor's "Unicode" is UTF-16 (Windows' Notepad, and
// PowerShell's > before version 6), which reads as bytes 0xff 0xfe here;
// one without the mark by the NUL bytes that pad its first characters.
bool check_line_start(const std::string& line, const std::string& where, bool first_line) {
  if (const char* encoding = first_line ? utf16_or_32(line) : nullptr)
    throw UsageError(where + "the file is " + encoding + " (it starts with that byte order mark); save it as UTF-8");
  if (const char* encoding = first_line ? utf16_or_32_unmarked(line) : nullptr)
    throw UsageError(where + "the file looks like " + encoding +
                     " without a byte order mark (NUL bytes pad its first characters); save it as UTF-8");
  constexpr std::string_view kBom = "\xef\xbb\xbf";
  std::size_t at = line.find_first_not_of(" \t\r\f\v");
  if (at == std::string::npos) return false;
  const std::string_view rest = std::string_view(line).substr(at);
  if (rest.size() < kBom.size() && kBom.starts_with(rest)) return false;
  if (rest.starts_with(kBom)) {
    at = line.find_first_not_of(" \t\r\f\v", at + kBom.size());
    if (at == std::string::npos) return false;
  }
  const auto c = static_cast<unsigned char>(line[at]);
  if (c == '{') return true;
  static const char* digits = "0123456789abcdef";
  const std::string shown = c > 0x20 && c < 0x7f ? std::string("'") + static_cast<char>(c) + "'"
                                                 : std::string("byte 0x") + digits[c >> 4] + digits[c & 15];
  throw UsageError(where + "expected a JSON object {\"tokens\": [...]} on each line, but the line starts with " + shown +
                   " (is this a JSONL file, one sequence per line?)");
}

DataFile::Sizes every_size_given(int64_t vocab, int64_t classes, int64_t seq_len) {
  if (vocab < 1 || classes < 1 || seq_len < 1)
    throw std::invalid_argument("DataFile: vocab " + std::to_string(vocab) + ", num_classes " +
                                std::to_string(classes) + " and seq_len " + std::to_string(seq_len) +
                                " must be positive");
  return {vocab, classes, seq_len};
}

}  // namespace

DataFile::DataFile(std::string path, int64_t vocab, int64_t num_classes, int64_t seq_len, bool shuffle, bool causal)
    : DataFile(std::move(path), every_size_given(vocab, num_classes, seq_len), shuffle, causal) {}

DataFile::DataFile(std::string path, Sizes sizes, bool shuffle, bool causal)
    : path_(std::move(path)), causal_(causal), asked_(sizes) {
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
  if (sizes.vocab < 0 || sizes.vocab > kMax || sizes.classes < 0 || sizes.classes > kMax || sizes.seq_len < 0 ||
      sizes.least_seq_len < 1)
    throw std::invalid_argument("DataFile: vocab " + std::to_string(sizes.vocab) + ", classes " +
                                std::to_string(sizes.classes) + " and seq_len " + std::to_string(sizes.seq_len) +
                                " must be 0 (read from the file) or positive (vocab and classes at most 2^31-1), "
                                "least_seq_len positive");
  // While the file is read, a size it sets bounds nothing.
  vocab_ = sizes.vocab > 0 ? sizes.vocab : kMax;
  num_classes_ = sizes.classes > 0 ? sizes.classes : sizes.vocab > 0 ? sizes.vocab : kMax;
  seq_len_ = sizes.seq_len > 0 ? sizes.seq_len : kMaxLinePositions;
  read(sizes.seq_len > 0 ? sizes.seq_len : kInferredPositions);
  if (sequences_.empty()) {
    throw UsageError(path_ + ": no sequences (the file is empty or holds only blank lines)");
  }
  const bool any_target = std::any_of(sequences_.begin(), sequences_.end(), [](const Sequence& s) {
    return std::any_of(s.targets.begin(), s.targets.end(), [](int32_t t) { return t >= 0; });
  });
  if (!any_target) {
    throw UsageError(path_ +
                     ": no position has a target (all targets are -1, or every sequence is a single "
                     "token without \"targets\"), so there is nothing to learn or score");
  }
  for (std::size_t p = 0; p < pattern_names_.size(); ++p)
    if (!pattern_keyed_[p])
      throw UsageError(path_ + ":" + std::to_string(pattern_lines_[p]) + ": \"attend\" pattern \"" +
                       pattern_names_[p] +
                       "\" gives no query a key in this line nor in any other (all its entries are null), so no head "
                       "could be scored on it; give keys where the pattern applies (a key position or a list of "
                       "them), or leave the pattern out");
  measure();
  if (sizes.vocab == 0) vocab_ = std::max(needs_.vocab, sizes.classes > 0 ? int64_t{1} : needs_.classes);
  if (sizes.classes == 0) num_classes_ = vocab_;
  if (sizes.seq_len == 0) seq_len_ = std::max(needs_.seq_len, sizes.least_seq_len);
  order_ = EpochOrder(size(), shuffle);
}

std::vector<int64_t> DataFile::lines_with_no_target() const {
  std::vector<int64_t> lines;
  for (const Sequence& s : sequences_)
    if (std::none_of(s.targets.begin(), s.targets.end(), [](int32_t t) { return t >= 0; })) lines.push_back(s.line);
  return lines;
}

void DataFile::read(int64_t line_positions) {
  // Lines are cut from raw chunks, so that the fingerprint hashes the exact
  // bytes and no line grows past its bound.
  const std::size_t max_line = max_line_bytes(line_positions);
  ByteHash hash;
  std::string line;
  int64_t line_number = 0;
  std::vector<char> chunk(1 << 16);
  bool line_started = false;  // the line's first bytes are those of a JSON object
  auto end_line = [&] {
    ++line_number;
    if (!is_blank(line)) parse_line(line, line_number);
    line.clear();
    line_started = false;
  };
  InputFile in(path_, "data file '" + path_ + "'");
  while (const std::size_t got = in.read(chunk.data(), chunk.size())) {
    hash.add(chunk.data(), got);
    for (std::size_t begin = 0; begin < got;) {
      const char* newline = static_cast<const char*>(std::memchr(chunk.data() + begin, '\n', got - begin));
      const std::size_t end = newline ? static_cast<std::size_t>(newline - chunk.data()) : got;
      line.append(chunk.data() + begin, end - begin);
      // A line is refused at its first byte that cannot start a JSON object:
      // a binary file (a checkpoint given by mistake, /dev/zero) costs
      // nothing, however long its first "line".
      if (!line_started)
        line_started = check_line_start(line, path_ + ":" + std::to_string(line_number + 1) + ": ", line_number == 0);
      if (line.size() > max_line)
        throw UsageError(path_ + ":" + std::to_string(line_number + 1) + ": the line is longer than " +
                         std::to_string(max_line) + " bytes, the most a sequence of " +
                         std::to_string(line_positions) + " tokens takes" +
                         " (is this a JSONL file, one sequence per line?" +
                         (asked_.seq_len == 0 ? " --seq-len N bounds the lines for longer sequences)" : ")"));
      if (newline) end_line();
      begin = end + 1;
    }
  }
  if (!line.empty()) end_line();
  fingerprint_ = {hash.size, hash.hash};
}

std::size_t DataFile::max_line_bytes(int64_t positions) {
  return (std::size_t{1} << 20) + 64 * static_cast<std::size_t>(std::clamp<int64_t>(positions, 1, kMaxLinePositions));
}

void DataFile::measure() {
  // The first line that reaches a new largest size names it.
  const auto grow = [](int64_t& size, int64_t& line, int64_t value, int64_t at) {
    if (value > size) {
      size = value;
      line = at;
    }
  };
  for (const Sequence& s : sequences_) {
    grow(needs_.seq_len, needs_.seq_len_line, static_cast<int64_t>(s.tokens.size()), s.line);
    for (const int32_t t : s.tokens) grow(needs_.vocab, needs_.vocab_line, int64_t{t} + 1, s.line);
    for (const int32_t t : s.targets) grow(needs_.classes, needs_.classes_line, int64_t{t} + 1, s.line);
  }
}

std::string DataFile::inferred_sizes() const {
  std::vector<std::string> sizes, sources;
  if (asked_.vocab == 0) {
    sizes.push_back("vocab " + std::to_string(vocab_));
    // Without classes the targets are tokens too: the larger of the two sets the vocab.
    const bool by_target = asked_.classes == 0 && needs_.classes > needs_.vocab;
    sources.push_back(by_target ? "largest target " + std::to_string(needs_.classes - 1) + " at line " +
                                      std::to_string(needs_.classes_line)
                                : "largest token " + std::to_string(needs_.vocab - 1) + " at line " +
                                      std::to_string(needs_.vocab_line));
    if (asked_.classes == 0) sizes.push_back("classes " + std::to_string(num_classes_));
  }
  if (asked_.seq_len == 0) {
    sizes.push_back("seq-len " + std::to_string(seq_len_));
    sources.push_back("longest sequence " + std::to_string(needs_.seq_len) + " tokens at line " +
                      std::to_string(needs_.seq_len_line) +
                      (seq_len_ > needs_.seq_len ? ", raised to the analysis's least " + std::to_string(seq_len_) : ""));
  }
  if (sizes.empty()) return "";
  std::string text = sizes[0];
  for (std::size_t i = 1; i < sizes.size(); ++i) text += (i + 1 == sizes.size() ? " and " : ", ") + sizes[i];
  text += " inferred from " + path_ + " (" + sources[0];
  for (std::size_t i = 1; i < sources.size(); ++i) text += "; " + sources[i];
  return text + ")";
}

void DataFile::parse_line(const std::string& line, int64_t line_number) {
  const std::string where = path_ + ":" + std::to_string(line_number) + ": ";
  json object;
  try {
    object = parse_user_json(line);
  } catch (const std::invalid_argument& e) {
    throw UsageError(where + "invalid JSON: " + e.what());
  }
  if (!object.is_object()) {
    throw UsageError(where + "expected a JSON object {\"tokens\": [...]}, got " + std::string(object.type_name()));
  }
  for (const auto& item : object.items()) {
    if (item.key() != "tokens" && item.key() != "targets" && item.key() != "attend") {
      throw UsageError(where + "unknown key \"" + brief_text(item.key()) +
                       "\" (expected \"tokens\" and optionally \"targets\" and \"attend\")");
    }
  }
  const auto tokens = object.find("tokens");
  if (tokens == object.end()) throw UsageError(where + "missing \"tokens\"");
  if (!tokens->is_array()) throw UsageError(where + "\"tokens\" must be an array of integers");
  if (tokens->empty()) throw UsageError(where + "\"tokens\" is empty");
  const auto length = static_cast<int64_t>(tokens->size());
  if (length > seq_len_) {
    throw UsageError(where + std::to_string(length) + " tokens, longer than the model's seq-len " +
                     std::to_string(seq_len_));
  }

  Sequence sequence;
  sequence.line = line_number;
  const bool inferred_vocab = asked_.vocab == 0;
  for (std::size_t i = 0; i < tokens->size(); ++i) {
    const json& value = (*tokens)[i];
    const auto token = integer_of(value);
    const std::string what = "token " + shown(value) + " (tokens[" + std::to_string(i) + "])";
    // A vocab read from the file bounds nothing yet but int32: say what an id may be instead.
    const std::string vocab = inferred_vocab ? ": tokens are ids from 0 to " + std::to_string(vocab_ - 1)
                                             : ": tokens must be in [0, " + std::to_string(vocab_) + ")";
    if (!token) throw UsageError(where + what + not_an_integer(value) + (is_huge_integer(value) ? vocab : ""));
    if (inferred_vocab && *token < 0) throw UsageError(where + what + " is negative: tokens are ids 0 or more");
    if (inferred_vocab && *token >= vocab_)
      throw UsageError(where + what + " is beyond the largest vocab, " + std::to_string(vocab_));
    if (*token < 0 || *token >= vocab_) throw UsageError(where + what + " is out of the vocab" + vocab);
    sequence.tokens.push_back(static_cast<int32_t>(*token));
  }

  const bool inferred_classes = asked_.classes == 0 && inferred_vocab;
  const std::string classes = inferred_classes ? ": targets are ids from 0 to " + std::to_string(num_classes_ - 1) +
                                                     ", or -1 (none)"
                                               : ": targets must be -1 (none) or in [0, " +
                                                     std::to_string(num_classes_) + ")";
  const auto check_target = [&](int64_t target, const std::string& what) {
    if (inferred_classes && target < -1)
      throw UsageError(where + what + " is negative: targets are ids 0 or more, or -1 (none)");
    if (inferred_classes && target >= num_classes_)
      throw UsageError(where + what + " is beyond the largest number of classes, " + std::to_string(num_classes_));
    if (target < -1 || target >= num_classes_) throw UsageError(where + what + " is out of range" + classes);
  };
  const auto targets = object.find("targets");
  if (targets == object.end()) {
    // Next-token targets; the last position has no next token.
    ++lines_without_targets_;
    for (std::size_t i = 0; i + 1 < sequence.tokens.size(); ++i) {
      check_target(sequence.tokens[i + 1], "next-token target " + std::to_string(sequence.tokens[i + 1]) + " (tokens[" +
                                               std::to_string(i + 1) + "])");
      sequence.targets.push_back(sequence.tokens[i + 1]);
    }
    sequence.targets.push_back(-1);
  } else {
    if (!targets->is_array()) throw UsageError(where + "\"targets\" must be an array of integers");
    if (targets->size() != tokens->size()) {
      throw UsageError(where + std::to_string(targets->size()) + " targets for " + std::to_string(length) +
                       " tokens: \"targets\" must be as long as \"tokens\"");
    }
    for (std::size_t i = 0; i < targets->size(); ++i) {
      const json& value = (*targets)[i];
      const auto target = integer_of(value);
      const std::string what = "target " + shown(value) + " (targets[" + std::to_string(i) + "])";
      if (!target) throw UsageError(where + what + not_an_integer(value) + (is_huge_integer(value) ? classes : ""));
      check_target(*target, what);
      sequence.targets.push_back(static_cast<int32_t>(*target));
    }
  }
  if (const auto attend = object.find("attend"); attend != object.end())
    parse_attend(*attend, sequence, line_number, where);
  sequences_.push_back(std::move(sequence));
}

void DataFile::parse_attend(const json& attend, Sequence& sequence, int64_t line_number, const std::string& where) {
  if (!attend.is_object())
    throw UsageError(where + "\"attend\" must be an object {\"NAME\": [one entry per position]}, got " +
                     std::string(attend.type_name()));
  const auto length = static_cast<int64_t>(sequence.tokens.size());
  for (const auto& item : attend.items()) {
    const std::string name = item.key();
    try {
      analysis::check_pattern_name(name);
    } catch (const std::invalid_argument& e) {
      throw UsageError(where + "\"attend\": " + e.what());
    }
    const std::string what = "\"attend\" pattern \"" + brief_text(name) + "\"";
    const json& entries = item.value();
    if (!entries.is_array())
      throw UsageError(where + what + " must be an array with one entry per position (a key position, a list of "
                       "them, or null)");
    if (static_cast<int64_t>(entries.size()) != length)
      throw UsageError(where + what + " has " + std::to_string(entries.size()) + " entries for " +
                       std::to_string(length) + " tokens: give one per position (null where the query is not scored)");
    std::vector<std::vector<int32_t>> keys(entries.size());
    for (std::size_t q = 0; q < entries.size(); ++q) {
      const json& entry = entries[q];
      if (entry.is_null()) continue;
      const auto key_at = [&](const json& value) {
        const auto key = integer_of(value);
        const std::string at = what + "[" + std::to_string(q) + "] = " + shown(value);
        if (!key)
          throw UsageError(where + at +
                           (is_huge_integer(value) ? not_an_integer(value)
                                                   : " is not a key position (an integer, a list of them, or null)"));
        const int64_t last = causal_ ? static_cast<int64_t>(q) : length - 1;
        if (*key < 0 || *key > last)
          throw UsageError(where + at + " is not a key query " + std::to_string(q) + " can see: keys are in [0, " +
                           std::to_string(last) + "]" + (causal_ ? kCausalKeys : ""));
        return static_cast<int32_t>(*key);
      };
      if (entry.is_array()) {
        if (entry.empty())
          throw UsageError(where + what + "[" + std::to_string(q) + "] is an empty list: use null for a query that "
                           "is not scored");
        for (const json& value : entry) keys[q].push_back(key_at(value));
        std::sort(keys[q].begin(), keys[q].end());
        if (std::adjacent_find(keys[q].begin(), keys[q].end()) != keys[q].end())
          throw UsageError(where + what + "[" + std::to_string(q) + "] lists a key twice");
      } else {
        keys[q].push_back(key_at(entry));
      }
    }
    const auto known = std::find(pattern_names_.begin(), pattern_names_.end(), name);
    const auto index = static_cast<std::size_t>(known - pattern_names_.begin());
    if (known == pattern_names_.end()) {
      pattern_names_.push_back(name);
      pattern_lines_.push_back(line_number);
      pattern_keyed_.push_back(false);
    }
    if (std::any_of(keys.begin(), keys.end(), [](const auto& k) { return !k.empty(); })) pattern_keyed_[index] = true;
    sequence.attend.emplace_back(index, std::move(keys));
  }
}

void DataFile::describe(Batch& batch) const {
  if (batch.roles.empty())
    for (const analysis::AttendPattern& p : batch.attend) batch.roles.push_back({p.name, p.name});
}

void DataFile::fill_row(Batch& out, int64_t row, const Sequence& sequence) const {
  const auto begin = static_cast<std::ptrdiff_t>(row * seq_len_);
  std::copy(sequence.tokens.begin(), sequence.tokens.end(), out.tokens.begin() + begin);
  std::copy(sequence.targets.begin(), sequence.targets.end(), out.targets.begin() + begin);
  out.lengths[static_cast<std::size_t>(row)] = static_cast<int32_t>(sequence.tokens.size());
}

Batch DataFile::rows(int64_t first, int64_t count) const {
  if (first < 0 || count < 1 || count > size() - first) {
    throw std::invalid_argument("DataFile::rows: rows [" + std::to_string(first) + ", " +
                                std::to_string(first + count) + ") are not a non-empty range within the " +
                                std::to_string(size()) + " sequences of " + path_);
  }
  const auto n = static_cast<std::size_t>(count * seq_len_);
  Batch out{count, seq_len_, std::vector<int32_t>(n, 0), std::vector<int32_t>(n, -1),
            std::vector<int32_t>(static_cast<std::size_t>(count))};
  for (int64_t row = 0; row < count; ++row) {
    fill_row(out, row, sequences_[static_cast<std::size_t>(first + row)]);
    out.lines.push_back(sequences_[static_cast<std::size_t>(first + row)].line);
  }
  for (std::size_t p = 0; p < pattern_names_.size(); ++p) {
    analysis::AttendPattern pattern = analysis::AttendPattern::empty(pattern_names_[p], count, seq_len_);
    pattern.definition = "the data file's \"attend\" pattern \"" + pattern_names_[p] + "\".";
    for (int64_t row = 0; row < count; ++row)
      for (const auto& [index, keys] : sequences_[static_cast<std::size_t>(first + row)].attend)
        if (index == p)
          std::copy(keys.begin(), keys.end(), pattern.keys.begin() + static_cast<std::ptrdiff_t>(row * seq_len_));
    out.attend.push_back(std::move(pattern));
  }
  return out;
}

Batch DataFile::eval_batch(int64_t rows_wanted, uint64_t /*seed*/) { return rows(0, eval_rows(rows_wanted)); }

Batch DataFile::sample(int64_t batch, core::Generator& gen) {
  if (batch < 1 || batch > std::numeric_limits<int32_t>::max() / seq_len_) {
    throw std::invalid_argument("DataFile::sample: batch " + std::to_string(batch) + " must be in [1, " +
                                std::to_string(std::numeric_limits<int32_t>::max() / seq_len_) + "] at seq-len " +
                                std::to_string(seq_len_));
  }
  const auto n = static_cast<std::size_t>(batch * seq_len_);
  Batch out{batch, seq_len_, std::vector<int32_t>(n, 0), std::vector<int32_t>(n, -1),
            std::vector<int32_t>(static_cast<std::size_t>(batch))};
  for (int64_t row = 0; row < batch; ++row)
    fill_row(out, row, sequences_[static_cast<std::size_t>(order_.next(gen))]);
  return out;
}

void DataFile::set_position(const Position& position) {
  if (position.next < 0 || position.next > size()) {
    throw std::invalid_argument("the data position " + std::to_string(position.next) + " is beyond the " +
                                std::to_string(size()) + " sequences of " + path_ + " (has the file changed?)");
  }
  order_.set_position(position);
}

}  // namespace headlab::train
