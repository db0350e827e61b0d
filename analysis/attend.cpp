#include "analysis/attend.h"

#include <algorithm>
#include <cctype>
#include <stdexcept>

#include "analysis/patterns.h"

namespace headlab::analysis {

AttendPattern AttendPattern::empty(std::string name, int64_t batch, int64_t seq_len) {
  AttendPattern p;
  p.name = std::move(name);
  p.batch = batch;
  p.seq_len = seq_len;
  p.keys.resize(static_cast<std::size_t>(batch * seq_len));
  return p;
}

namespace {
// Equal but for the case of letters.
bool same_letters(const std::string& a, const std::string& b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}
}  // namespace

void check_pattern_name(const std::string& name) {
  const auto bad = [&](const std::string& why) {
    throw std::invalid_argument("pattern name '" + name + "' " + why);
  };
  if (name.empty()) bad("is empty; give a name such as \"after-marker\"");
  if (name.size() > 40) bad("is longer than 40 characters");
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
                    c == '_' || c == ':' || c == '.';
    if (!ok) bad("has the character '" + std::string(1, c) + "'; use letters, digits, '-', '_', ':' and '.'");
  }
  for (const Pattern& p : kPatterns)
    if (p.name == name) bad("is a built-in pattern; its score is always there, under " + pattern_key(p));
  for (const char* reserved : {"diffuse", "mixed", "sink"})
    if (name == reserved) bad("is a label of its own; choose another name");
  // The words the terminal table, heads.json, report.html and sweep.json show
  // for a built-in pattern or label, in any case: a user pattern so called
  // would read as the built-in one ("first 0.96" for a head whose first-token
  // score is 0.17).
  for (const Pattern& p : kPatterns)
    for (const std::string& word : {std::string(p.name), std::string(p.short_name), pattern_key(p)})
      if (same_letters(name, word))
        bad("reads as the built-in pattern " + std::string(p.name) + ", which the reports call \"" + word +
            "\"; choose another name");
  for (const char* reserved : {"diffuse", "mixed", "sink"})
    if (same_letters(name, reserved))
      bad("reads as the label " + std::string(reserved) + "; choose another name");
  // The keys a head's record in metrics.jsonl already has (heads_json.h).
  for (const char* key : {"label", "score", "entropy", "distance", "importance", "importance_normalized", "copying",
                          "direct_logit", "user", "transformer_lens"})
    if (name == key) bad("is a key of a head's record; choose another name");
  for (const Pattern& p : kPatterns)
    if (name == pattern_key(p) || name == pattern_key(p) + "_all")
      bad("is the key of the built-in pattern " + std::string(p.name) + "; choose another name");
  if (name.starts_with("ablation_") || name.starts_with("task_"))
    bad("starts like a key of a head's record (ablation_, task_); choose another name");
}

AttendPattern positional_pattern(const std::string& spec, int64_t batch, int64_t seq_len, bool causal,
                                 std::span<const int32_t> targets, std::span<const int32_t> lengths) {
  const auto colon = spec.find(':');
  const std::string kind = spec.substr(0, colon == std::string::npos ? spec.size() : colon);
  const std::string forms = "; expected offset:K (attention on q - K) or position:K (attention on position K), K >= 0";
  if (colon == std::string::npos || (kind != "offset" && kind != "position"))
    throw std::invalid_argument("--pattern '" + spec + "' is not a positional pattern" + forms);
  const std::string digits = spec.substr(colon + 1);
  const bool whole = !digits.empty() && digits.find_first_not_of("0123456789") == std::string::npos;
  if (digits.size() > 1 && digits[0] == '-' && digits.find_first_not_of("0123456789", 1) == std::string::npos)
    throw std::invalid_argument(
        "--pattern '" + spec + "': K must be >= 0 (" +
        (kind == "offset" ? "offset:K reads the token K positions before the query); for later keys, such as a "
                            "bidirectional model's next token, give them as a data file's \"attend\" pattern or a "
                            "mask from Python"
                          : "position:K reads position K, the first being 0)"));
  if (whole && digits.size() > 9)
    throw std::invalid_argument("--pattern '" + spec + "': K " + digits + " is beyond any sequence's positions");
  // The name is the pattern's label: offset:01 would be offset:1 scored twice under two names.
  if (whole && digits.size() > 1 && digits[0] == '0')
    throw std::invalid_argument("--pattern '" + spec + "': write K without leading zeros (" + kind + ":" +
                                std::to_string(std::stoll(digits)) + "), the pattern's name");
  if (!whole) throw std::invalid_argument("--pattern '" + spec + "': '" + digits + "' is not a whole number" + forms);
  const int64_t k = std::stoll(digits);
  // Such a pattern gives no query a key: every head would score null, unsaid.
  if (k >= seq_len)
    throw std::invalid_argument("--pattern '" + spec + "': " + (kind == "offset" ? "offset " : "position ") + digits +
                                " is beyond the " + std::to_string(seq_len) + " positions of the sequences (K from 0 to " +
                                std::to_string(seq_len - 1) + ")");
  if (!targets.empty() && static_cast<int64_t>(targets.size()) != batch * seq_len)
    throw std::invalid_argument("positional_pattern: " + std::to_string(targets.size()) + " targets for a batch of " +
                                std::to_string(batch) + " x " + std::to_string(seq_len));
  if (!lengths.empty() && static_cast<int64_t>(lengths.size()) != batch)
    throw std::invalid_argument("positional_pattern: " + std::to_string(lengths.size()) + " lengths for a batch of " +
                                std::to_string(batch));
  AttendPattern p = AttendPattern::empty(spec, batch, seq_len);
  p.definition = kind == "offset" ? "attention of a query on the token " + digits + " position(s) before it."
                                  : "attention of a query on position " + digits + ".";
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t len = lengths.empty() ? seq_len : std::min<int64_t>(seq_len, lengths[static_cast<std::size_t>(b)]);
    for (int64_t q = 0; q < len; ++q) {
      const auto i = static_cast<std::size_t>(b * seq_len + q);
      if (!targets.empty() && targets[i] < 0) continue;
      const int64_t key = kind == "offset" ? q - k : k;
      if (key < 0 || key >= len || (causal && key > q)) continue;
      p.keys[i] = {static_cast<int32_t>(key)};
    }
  }
  return p;
}

void check_attend_pattern(const AttendPattern& p, const core::Tensor& attn, bool causal) {
  const std::string where = "pattern '" + p.name + "': ";
  if (attn.dim() != 4 || p.batch != attn.size(0) || p.seq_len != attn.size(2) ||
      static_cast<int64_t>(p.keys.size()) != p.batch * p.seq_len)
    throw std::invalid_argument(where + "made for a batch of " + std::to_string(p.batch) + " x " +
                                std::to_string(p.seq_len) + " queries, but the attention is " +
                                core::to_string(attn.shape()));
  for (int64_t b = 0; b < p.batch; ++b)
    for (int64_t q = 0; q < p.seq_len; ++q)
      for (int32_t k : p.at(b, q))
        if (k < 0 || k >= p.seq_len || (causal && k > q))
          throw std::invalid_argument(where + "key " + std::to_string(k) + " of query " + std::to_string(q) +
                                      " (example " + std::to_string(b) + ") is not a key it can see (0 .. " +
                                      std::to_string(causal ? q : p.seq_len - 1) + ")");
}

std::vector<std::optional<double>> attend_scores(const core::Tensor& attn, const AttendPattern& p, bool causal) {
  AttendScoreSums sums;
  sums.add(attn, p, causal);
  return sums.value();
}

void AttendScoreSums::add(const core::Tensor& attn, const AttendPattern& p, bool causal) {
  check_attend_pattern(p, attn, causal);
  // Read where it is, each value as a double (no float64 copy of the layer).
  const core::Tensor a = attn.contiguous();
  const int64_t B = attn.size(0), H = attn.size(1), T = attn.size(2);
  if (total_.empty()) {
    total_.assign(static_cast<std::size_t>(H), 0.0);
    examples_.assign(static_cast<std::size_t>(H), 0);
  }
  if (static_cast<int64_t>(total_.size()) != H)
    throw std::invalid_argument("pattern '" + p.name + "': a chunk of attention " + core::to_string(attn.shape()) +
                                " after chunks of " + std::to_string(total_.size()) + " heads");
  core::dispatch(a.dtype(), [&](auto zero) {
    using F = decltype(zero);
    const F* d = a.data<F>();
    for (int64_t h = 0; h < H; ++h) {
      double& total = total_[static_cast<std::size_t>(h)];
      int64_t& examples = examples_[static_cast<std::size_t>(h)];
      for (int64_t b = 0; b < B; ++b) {
        const F* m = d + (b * H + h) * T * T;
        double sum = 0;
        int64_t queries = 0;
        for (int64_t q = 0; q < T; ++q) {
          const std::vector<int32_t>& keys = p.at(b, q);
          if (keys.empty()) continue;
          for (int32_t k : keys) sum += static_cast<double>(m[q * T + k]);
          ++queries;
        }
        if (queries == 0) continue;
        total += sum / static_cast<double>(queries);
        ++examples;
      }
    }
  });
}

std::vector<std::optional<double>> AttendScoreSums::value() const {
  std::vector<std::optional<double>> out(total_.size());
  for (std::size_t h = 0; h < out.size(); ++h)
    if (examples_[h] > 0) out[h] = total_[h] / static_cast<double>(examples_[h]);
  return out;
}

AttendPattern attend_rows(const AttendPattern& p, int64_t first, int64_t count) {
  if (first < 0 || count < 0 || first + count > p.batch)
    throw std::invalid_argument("attend_rows: rows " + std::to_string(first) + " .. " +
                                std::to_string(first + count - 1) + " are outside the " + std::to_string(p.batch) +
                                " examples of pattern '" + p.name + "'");
  AttendPattern out = p;
  out.batch = count;
  out.keys.assign(p.keys.begin() + first * p.seq_len, p.keys.begin() + (first + count) * p.seq_len);
  return out;
}

}  // namespace headlab::analysis
