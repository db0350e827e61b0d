#include "attend.h"

#include <algorithm>
#include <stdexcept>

#include "analysis/patterns.h"

namespace headlab::python {

namespace {

std::string at_text(int64_t b, int64_t q) {
  return "query " + std::to_string(q) + " of sequence " + std::to_string(b);
}

analysis::AttendPattern from_keys(const PatternInput& in, const PatternBatch& batch) {
  const int64_t B = batch.batch, T = batch.seq_len;
  const std::string where = "patterns['" + in.name + "']: ";
  if (static_cast<int64_t>(in.offsets.size()) != B * T + 1 || in.offsets.front() != 0 ||
      in.offsets.back() != static_cast<int64_t>(in.keys.size()) || !std::is_sorted(in.offsets.begin(), in.offsets.end()))
    throw std::invalid_argument(where + "malformed key rows (expected " + std::to_string(B * T + 1) + " offsets)");
  analysis::AttendPattern p = analysis::AttendPattern::empty(in.name, B, T);
  for (int64_t b = 0; b < B; ++b) {
    const int64_t len = batch.lengths.empty() ? T : batch.lengths[static_cast<std::size_t>(b)];
    for (int64_t q = 0; q < T; ++q) {
      const auto i = static_cast<std::size_t>(b * T + q);
      const auto first = in.keys.begin() + in.offsets[i], last = in.keys.begin() + in.offsets[i + 1];
      if (first == last) continue;
      if (q >= len)
        throw std::invalid_argument(where + at_text(b, q) + " is padding (the sequence has " + std::to_string(len) +
                                    " tokens); a padded position is no query");
      const int64_t visible = batch.causal ? q : len - 1;
      for (auto k = first; k != last; ++k)
        if (*k < 0 || *k > visible)
          throw std::invalid_argument(where + "key " + std::to_string(*k) + " of " + at_text(b, q) +
                                      " is not a key it can see (0 .. " + std::to_string(visible) + ")" +
                                      (batch.causal && *k > q && *k < len ? ": the model is causal" : ""));
      p.keys[i].assign(first, last);
      std::sort(p.keys[i].begin(), p.keys[i].end());
      p.keys[i].erase(std::unique(p.keys[i].begin(), p.keys[i].end()), p.keys[i].end());
    }
  }
  return p;
}

}  // namespace

std::vector<analysis::AttendPattern> attend_patterns(const std::vector<PatternInput>& inputs, const PatternBatch& batch) {
  std::vector<analysis::AttendPattern> out;
  for (const PatternInput& in : inputs) {
    analysis::check_pattern_name(in.name);
    for (const analysis::AttendPattern& p : out)
      if (p.name == in.name) throw std::invalid_argument("patterns: the name '" + in.name + "' is given twice");
    analysis::AttendPattern p;
    try {
      p = in.spec.empty() ? from_keys(in, batch)
                          : analysis::positional_pattern(in.spec, batch.batch, batch.seq_len, batch.causal,
                                                         batch.targets, batch.lengths);
    } catch (const std::invalid_argument& e) {  // positional_pattern speaks of the CLI's --pattern
      std::string what = e.what();
      if (what.starts_with("patterns[")) throw;
      if (what.starts_with("--pattern ")) what.erase(0, 10);
      throw std::invalid_argument("patterns['" + in.name + "']: " + what);
    }
    p.name = in.name;
    if (!in.definition.empty()) p.definition = in.definition;
    // A pattern that scores no query would leave every head's score null, unsaid.
    if (!p.keyed())
      throw std::invalid_argument("patterns['" + in.name +
                                  "'] gives no query a key, so no head could be scored on it; give keys where the "
                                  "pattern applies (a mask's rows are cut to each sequence's length), or leave it out");
    out.push_back(std::move(p));
  }
  return out;
}

std::vector<analysis::ExpectedRole> expected_roles(const std::vector<std::pair<std::string, std::string>>& roles,
                                                   const std::vector<analysis::AttendPattern>& patterns) {
  std::vector<analysis::ExpectedRole> out;
  for (const auto& [role, pattern] : roles) {
    if (role.empty()) throw std::invalid_argument("roles: a role needs a name, such as \"previous token\"");
    bool known = std::any_of(patterns.begin(), patterns.end(), [&](const auto& p) { return p.name == pattern; });
    std::string names;
    for (const analysis::Pattern& p : analysis::kPatterns) {
      known = known || p.name == pattern;
      names += (names.empty() ? "" : ", ") + std::string(p.name);
    }
    for (const analysis::AttendPattern& p : patterns) names += ", " + p.name;
    if (!known)
      throw std::invalid_argument("roles['" + role + "']: '" + pattern + "' is no pattern; expected one of " + names);
    out.push_back({role, pattern});
  }
  return out;
}

std::vector<uint8_t> pattern_mask(const analysis::AttendPattern& p) {
  const int64_t T = p.seq_len;
  std::vector<uint8_t> mask(static_cast<std::size_t>(p.batch * T * T), 0);
  for (int64_t b = 0; b < p.batch; ++b)
    for (int64_t q = 0; q < T; ++q)
      for (int32_t k : p.at(b, q)) mask[static_cast<std::size_t>((b * T + q) * T + k)] = 1;
  return mask;
}

}  // namespace headlab::python
