#include "layers/hooks_finite.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <utility>
#include <vector>

namespace headlab::layers {

namespace {

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// How a point's values are read.
struct Reading {
  bool scores = false;  // attention scores: -inf hides a key
  bool causal = false;  // [B, h, T, T] whose entries after the query the pass ignores
  // [B, h, T, T] of a padded pass: 1 where key k of sequence b is real ([b * T + k]), empty: every key is read.
  std::vector<uint8_t> real_keys;
};

// real_keys of a [B, h, T, T] point of a pass with `padding_mask` [B, T]: what the pass reads of a replacement.
std::vector<uint8_t> real_keys_of(const core::Tensor* padding_mask) {
  std::vector<uint8_t> real;
  if (padding_mask == nullptr || !padding_mask->defined()) return real;
  for (double r : padding_mask->to_vector()) real.push_back(r != 0.0);
  return real;
}

// What a tensor holds that the pass cannot take.
struct Found {
  int64_t count = 0, first = -1;  // NaN or infinity (not a hidden key); the flat index of the first
  int64_t hidden_row = -1;        // scores: the first element of the first row whose every key is hidden
};

// Whether every value is finite: x - x is 0 for a finite x and NaN (unequal to itself) for the others. The
// integer OR of the comparisons vectorizes (std::isfinite's branch per value, or a bool OR, does not: 4.8x
// slower on 70M floats), so a clean replacement costs one pass at memory speed.
template <class T>
bool all_finite(const T* v, int64_t n) {
  int bad = 0;
  for (int64_t i = 0; i < n; ++i) bad |= (v[i] - v[i]) != (v[i] - v[i]);
  return bad == 0;
}

// Row by row (`keys` values each; in a causal [.., T, T] row q, keys 0..q count), so no index is divided.
template <class T>
Found scan(const T* v, int64_t n, int64_t keys, const Reading& r) {
  constexpr T hidden = -std::numeric_limits<T>::infinity();
  Found f;
  // Rows per sequence (h * T) when padded keys are skipped: real_keys holds T per sequence.
  const int64_t seq_rows = r.real_keys.empty() ? 1 : n / static_cast<int64_t>(r.real_keys.size());
  for (int64_t start = 0, row = 0; start < n; start += keys, ++row) {
    const int64_t counted = r.causal ? row % keys + 1 : keys;
    const uint8_t* real = r.real_keys.empty() ? nullptr : r.real_keys.data() + row / seq_rows * keys;
    int64_t shown = 0;  // keys not hidden
    for (int64_t k = 0; k < counted; ++k) {
      if (real != nullptr && !real[k]) continue;  // a padded key: hidden again whatever it holds
      const T x = v[start + k];
      if (!std::isfinite(x) && !(r.scores && x == hidden) && f.count++ == 0) f.first = start + k;
      shown += x != hidden;
    }
    if (r.scores && shown == 0 && f.hidden_row < 0) f.hidden_row = start;
  }
  return f;
}

Found find(const core::Tensor& t, const Reading& r) {
  const core::Tensor c = t.contiguous();
  const int64_t keys = r.scores || r.causal || !r.real_keys.empty() ? c.size(c.dim() - 1) : c.numel();
  return core::dispatch(c.dtype(), [&](auto tag) {
    using T = decltype(tag);
    return scan(c.template data<T>(), c.numel(), std::max<int64_t>(keys, 1), r);
  });
}

bool all_finite(const core::Tensor& t) {
  const core::Tensor c = t.contiguous();
  return core::dispatch(c.dtype(), [&](auto tag) { return all_finite(c.template data<decltype(tag)>(), c.numel()); });
}

// Whether `given` [B, h, T, T] is what a causal pass gives at the point: every entry after its query the mask's
// (-inf for scores, 0 for the pattern). The pass ignores those entries of a replacement.
bool causal_shaped(const core::Tensor& given, bool scores) {
  const core::Shape& s = given.shape();
  if (s.size() != 4 || s[2] != s[3]) return false;
  const core::Tensor c = given.contiguous();
  return core::dispatch(c.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T mask = scores ? -std::numeric_limits<T>::infinity() : T(0);
    const T* v = c.template data<T>();
    const int64_t keys = s[3];
    for (int64_t start = 0, row = 0; start < c.numel(); start += keys, ++row)
      for (int64_t k = row % keys + 1; k < keys; ++k)
        if (v[start + k] != mask) return false;
    return true;
  });
}

// "[1, 2, 3]": the first `dims` dimensions of the index of element `flat` of a contiguous tensor of `shape`.
std::string index_text(int64_t flat, const core::Shape& shape, std::size_t dims) {
  core::Shape index = core::unravel_index(flat, shape);
  index.resize(dims);
  return core::to_string(index);
}

// Throws when `out` (what `returned`, the hooks' result at `name`, holds) has more NaN or infinity than `in` (what
// the point was given), or hides every key of a query `in` did not.
void refuse_found(const std::string& name, const Reading& r, const core::Tensor& returned, const Found& out,
                  const Found& in) {
  const std::string hook = "hook '" + name + "' returned ";
  const core::Shape& shape = returned.shape();
  if (out.count > in.count)
    throw std::invalid_argument(
        hook + std::to_string(out.count) + (r.scores ? " NaN or +inf value" : " NaN or infinite value") +
        (out.count > 1 ? "s" : "") + " of " + std::to_string(returned.numel()) + " (the first at " +
        index_text(out.first, shape, shape.size()) +
        "), which would spread to every later activation, the logits and the loss; return finite values" +
        (r.scores ? " (-inf hides a key)" : " (to remove a component, zero it; to hide a key, -inf at hook_attn_scores)"));
  const bool padded = !r.real_keys.empty();  // whose padded keys stay hidden whatever the hooks wrote there
  if (out.hidden_row >= 0 && in.hidden_row < 0)
    throw std::invalid_argument(hook + "scores that hide every " + (padded ? "real " : "") + "key of query " +
                                index_text(out.hidden_row, shape, shape.size() - 1) + " (batch, head, query)" +
                                (padded ? "; the padded keys stay hidden, so" : ":") +
                                " its softmax would divide 0 by 0 (NaN); leave it at least one " +
                                (padded ? "real " : "") + "key that is not -inf");
}

Reading reading_of(const std::string& name, const core::Tensor& given, const core::Tensor* padding_mask) {
  Reading r;
  r.scores = ends_with(name, ".hook_attn_scores");
  const bool attention = r.scores || ends_with(name, ".hook_pattern");
  r.causal = attention && causal_shaped(given, r.scores);
  if (attention) r.real_keys = real_keys_of(padding_mask);
  return r;
}

}  // namespace

void refuse_non_finite(const std::string& name, const core::Tensor& given, const core::Tensor& returned,
                       const core::Tensor* padding_mask) {
  if (!ends_with(name, ".hook_attn_scores") && all_finite(returned)) return;  // the common case: one pass
  const Reading r = reading_of(name, given, padding_mask);
  const Found out = find(returned, r);
  if (out.count == 0 && out.hidden_row < 0) return;
  refuse_found(name, r, returned, out, find(given, r));
}

FiniteBefore::FiniteBefore(std::string name, const core::Tensor& given) : name_(std::move(name)) {
  const Reading r = reading_of(name_, given, nullptr);
  scores_ = r.scores;
  causal_ = r.causal;
  if (!scores_ && all_finite(given)) return;  // the common case: one pass, and nothing held
  const Found in = find(given, r);
  count_ = in.count;
  hidden_row_ = in.hidden_row;
}

void FiniteBefore::refuse_edit(const core::Tensor& edited) const {
  if (!scores_ && all_finite(edited)) return;
  const Reading r{.scores = scores_, .causal = causal_, .real_keys = {}};
  const Found out = find(edited, r);
  if (out.count == 0 && out.hidden_row < 0) return;
  refuse_found(name_, r, edited, out, Found{.count = count_, .first = -1, .hidden_row = hidden_row_});
}

}  // namespace headlab::layers
