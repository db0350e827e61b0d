#include "analysis/head_metrics.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "analysis/mean.h"

namespace headlab::analysis {
namespace {

// Number of keys query q of an example of `len` real positions can see.
int64_t visible_keys(int64_t q, int64_t len, bool causal) { return causal ? q + 1 : len; }

std::string shape_of(const core::Tensor& t) { return core::to_string(t.shape()); }

// TransformerLens's "mul" head-detector score of one head on one example:
// the mass on the detection pattern D summed over all T query rows, over the
// total mass (T, as rows sum to 1). D: previous (q, q-1); duplicate (q, j)
// for j < q with x_j = x_q; induction (q, j+1) for those j (j + 1 <= q).
// A one-token example has no earlier key to show any of them: it counts in
// none (absent), rather than adding zeros.
DetectorScores detector_scores(const HeadMap& a) {
  if (a.tokens.empty() || a.len < 2) return {};
  double prev = 0, dup = 0, ind = 0, mass = 0;
  for (int64_t q = 0; q < a.len; ++q) {
    for (int64_t k = 0; k < a.len; ++k) mass += a(q, k);
    if (q >= 1) prev += a(q, q - 1);
    for (int64_t j = 0; j < q; ++j)
      if (a.tokens[static_cast<std::size_t>(j)] == a.tokens[static_cast<std::size_t>(q)]) {
        dup += a(q, j);
        ind += a(q, j + 1);
      }
  }
  return {prev / mass, dup / mass, ind / mass};
}

// Scores of one head on one example, which the batch functions average.
// spread: some query sees two keys or more (len >= 2); only then do the
// example's entropy and distance count (one key is no choice of where to look).
struct ExampleScores {
  HeadScores scores;
  bool spread = false;
};

// `a` carries the targets (judged queries); the all-query scores drop them.
ExampleScores example_scores(const HeadMap& a) {
  HeadScores s;
  HeadMap all = a;
  all.targets = {};
  std::vector<int32_t> buffer;
  for (std::size_t i = 0; i < kPatternCount; ++i) {
    s.patterns_all[i] = pattern_score(kPatterns[i], all, buffer);
    s.patterns[i] = a.targets.empty() ? s.patterns_all[i] : pattern_score(kPatterns[i], a, buffer);
  }
  s.detector = detector_scores(all);

  const int64_t len = a.len;
  double entropy = 0, distance = 0;
  int64_t n_entropy = 0;
  for (int64_t q = 0; q < len; ++q) {
    const int64_t keys = visible_keys(q, len, a.causal);
    double hq = 0, dq = 0;
    for (int64_t k = 0; k < keys; ++k) {
      const double v = a(q, k);
      if (v > 0) hq -= v * std::log(v);
      dq += v * static_cast<double>(q > k ? q - k : k - q);
    }
    distance += dq;
    if (keys >= 2) {
      entropy += hq / std::log(static_cast<double>(keys));
      ++n_entropy;
    }
  }
  s.entropy = n_entropy > 0 ? entropy / static_cast<double>(n_entropy) : 0.0;
  s.distance = distance / static_cast<double>(len);
  return {s, len >= 2};
}

// One layer's attention [B, h, T, T], with the map of one head on one
// example as doubles (exact for f32). Each map is converted when it is asked
// for, into a buffer of its own [T, T]: a whole float64 copy of the layer
// was 537 MB at 512 sequences of 128 tokens and 8 heads, made again by
// every check and every score of every layer.
struct LayerMaps {
  core::Tensor probs;  // contiguous, f32 or f64
  std::span<const int32_t> tokens;
  bool causal;
  std::span<const int32_t> targets = {};
  std::span<const int32_t> lengths = {};  // [B] real lengths, or empty: every example is T long
  int64_t batch() const { return probs.size(0); }
  int64_t heads() const { return probs.size(1); }
  int64_t len() const { return probs.size(2); }
  // Valid until the next call.
  HeadMap map(int64_t b, int64_t h) const {
    const int64_t len = this->len();
    const auto row = [&](std::span<const int32_t> v) {
      return v.empty() ? v : v.subspan(static_cast<std::size_t>(b * len), static_cast<std::size_t>(len));
    };
    const int64_t real = lengths.empty() ? len : lengths[static_cast<std::size_t>(b)];
    const int64_t at = (b * heads() + h) * len * len;
    const double* d = nullptr;
    core::dispatch(probs.dtype(), [&](auto zero) {
      using T = decltype(zero);
      const T* p = probs.data<T>() + at;
      if constexpr (std::is_same_v<T, double>) {
        d = p;
      } else {
        buffer.assign(p, p + len * len);
        d = buffer.data();
      }
    });
    return {d, real, len, causal, row(tokens), row(targets)};
  }

  mutable std::vector<double> buffer = {};  // the last map's, when probs are f32
};

LayerMaps layer_maps(const core::Tensor& attn, std::span<const int32_t> tokens, bool causal,
                     std::span<const int32_t> targets = {}, std::span<const int32_t> lengths = {}) {
  return {attn.contiguous(), tokens, causal, targets, lengths};
}

// One map's real query rows: probabilities over the keys, none on a later
// key when causal nor on padding (attention computed without the padding mask
// would be scored wrongly). Padding queries are never scored, so not checked.
// Throws at the first bad value.
void check_map(const LayerMaps& maps, int64_t b, int64_t h, const char* op) {
  const HeadMap a = maps.map(b, h);
  for (int64_t q = 0; q < a.len; ++q) {
    double sum = 0;
    for (int64_t k = 0; k < a.stride; ++k) {
      const double v = a(q, k);
      if (k >= a.len && !(std::abs(v) <= 1e-6))
        throw std::invalid_argument(std::string(op) + ": attention[" + std::to_string(b) + ", " +
                                    std::to_string(h) + ", " + std::to_string(q) + ", " + std::to_string(k) +
                                    "] = " + std::to_string(v) + " falls on padding (example " +
                                    std::to_string(b) + " has " + std::to_string(a.len) +
                                    " real positions); run the forward with the padding mask");
      const bool hidden = a.causal && k > q;
      if (!(v >= -1e-6) || (hidden && v > 1e-6))
        throw std::invalid_argument(std::string(op) + ": attention[" + std::to_string(b) + ", " +
                                    std::to_string(h) + ", " + std::to_string(q) + ", " + std::to_string(k) +
                                    "] = " + std::to_string(v) +
                                    (hidden ? " lies above the diagonal of a causal head (pass causal=false for "
                                              "bidirectional attention)"
                                            : " is not a probability; pass softmax outputs, not scores"));
      sum += v;
    }
    if (!(std::abs(sum - 1.0) <= 1e-3))
      throw std::invalid_argument(std::string(op) + ": attention row [" + std::to_string(b) + ", " +
                                  std::to_string(h) + ", " + std::to_string(q) + ", :] sums to " +
                                  std::to_string(sum) + ", expected 1 (softmax over keys)");
  }
}

void check_rows(const LayerMaps& maps, const char* op) {
  // The maps are checked in parallel, each thread with a map buffer of its
  // own; the first bad one in (example, head) order is checked again alone,
  // so the error is the one a check in that order throws.
  const int64_t heads = maps.heads(), n = maps.batch() * heads;
  std::vector<char> bad(static_cast<std::size_t>(n), 0);
#pragma omp parallel if (n > 1)
  {
    const LayerMaps own = maps;
#pragma omp for schedule(dynamic, 16)
    for (int64_t i = 0; i < n; ++i) {
      try {
        check_map(own, i / heads, i % heads, op);
      } catch (const std::invalid_argument&) {
        bad[static_cast<std::size_t>(i)] = 1;
      }
    }
  }
  for (int64_t i = 0; i < n; ++i)
    if (bad[static_cast<std::size_t>(i)]) check_map(maps, i / heads, i % heads, op);
}

void add_example(HeadScoreSums::Means& m, const ExampleScores& example) {
  const auto& [s, spread] = example;
  for (std::size_t i = 0; i < kPatternCount; ++i) {
    m.judged[i].add(s.patterns[i]);
    m.all[i].add(s.patterns_all[i]);
  }
  m.previous.add(s.detector.previous_token);
  m.duplicate.add(s.detector.duplicate_token);
  m.induction.add(s.detector.induction);
  if (spread) {
    m.entropy.add(s.entropy);
    m.distance.add(s.distance);
  }
}

HeadScores mean_scores(const HeadScoreSums::Means& sums) {
  HeadScores m;
  // A batch without a judged query for a pattern (no target where it can
  // look) falls back to its all-query score.
  for (std::size_t i = 0; i < kPatternCount; ++i) {
    m.patterns_all[i] = sums.all[i].value();
    m.patterns[i] = sums.judged[i].count > 0 ? sums.judged[i].value() : m.patterns_all[i];
  }
  m.detector = {sums.previous.value(), sums.duplicate.value(), sums.induction.value()};
  m.entropy = sums.entropy.value().value_or(0.0);
  m.distance = sums.distance.value().value_or(0.0);
  return m;
}

// Every head's per-example scores of a checked layer, added example by example.
void add_scores(std::vector<HeadScoreSums::Means>& heads, const LayerMaps& maps) {
  heads.resize(static_cast<std::size_t>(maps.heads()));
  // A head's sums are its own: each thread takes whole heads, each adding its
  // examples in order, with a map buffer of its own.
#pragma omp parallel for schedule(dynamic, 1) if (maps.heads() > 1)
  for (int64_t h = 0; h < maps.heads(); ++h) {
    const LayerMaps own = maps;
    for (int64_t b = 0; b < own.batch(); ++b) add_example(heads[static_cast<std::size_t>(h)], example_scores(own.map(b, h)));
  }
}

// The longest example's real positions.
int32_t longest(std::span<const int32_t> lengths, const core::Tensor& attn) {
  return lengths.empty() ? static_cast<int32_t>(attn.size(2)) : *std::max_element(lengths.begin(), lengths.end());
}

}  // namespace

namespace {
// Lengths: none, or one per example in [1, T], one of them at least 3 long.
void check_longest(int32_t longest, const char* op) {
  if (longest < 3)
    throw std::invalid_argument(std::string(op) + ": the longest example has " + std::to_string(longest) +
                                " real positions; the head analysis needs one of at least 3 (the positional scores "
                                "use q >= 2)");
}

void check_lengths(std::span<const int32_t> lengths, const core::Tensor& attn, const char* op, bool one_long_row) {
  if (lengths.empty()) return;
  const int64_t T = attn.size(2);
  if (static_cast<int64_t>(lengths.size()) != attn.size(0))
    throw std::invalid_argument(std::string(op) + ": " + std::to_string(lengths.size()) + " lengths for attention " +
                                shape_of(attn) + ", expected one per example");
  int32_t longest = 0;
  for (std::size_t b = 0; b < lengths.size(); ++b) {
    if (lengths[b] < 1 || lengths[b] > T)
      throw std::invalid_argument(std::string(op) + ": example " + std::to_string(b) + " has length " +
                                  std::to_string(lengths[b]) + ", expected 1 .. T = " + std::to_string(T));
    longest = std::max(longest, lengths[b]);
  }
  if (one_long_row) check_longest(longest, op);
}
}  // namespace

const UserScore* HeadScores::user_score(std::string_view name) const {
  for (const UserScore& u : user)
    if (u.name == name) return &u;
  return nullptr;
}

double HeadScores::at(std::string_view name) const {
  const std::optional<double>& score = (*this)[name];
  if (!score) throw std::invalid_argument("HeadScores::at: the " + std::string(name) + " score is absent");
  return *score;
}

void check_attention(const core::Tensor& attn, std::span<const int32_t> tokens, bool causal, const char* op,
                     std::span<const int32_t> lengths, bool one_long_row) {
  if (!attn.defined()) throw std::invalid_argument(std::string(op) + ": attention tensor is undefined");
  if (attn.dim() != 4 || attn.size(2) != attn.size(3))
    throw std::invalid_argument(std::string(op) + ": attention has shape " + shape_of(attn) +
                                ", expected [batch, heads, T, T]");
  if (attn.size(0) < 1 || attn.size(1) < 1 || attn.size(2) < 3)
    throw std::invalid_argument(std::string(op) + ": attention has shape " + shape_of(attn) +
                                ", needs batch >= 1, heads >= 1 and T >= 3 (the positional scores use q >= 2)");
  const int64_t expected = attn.size(0) * attn.size(2);
  if (!tokens.empty() && static_cast<int64_t>(tokens.size()) != expected)
    throw std::invalid_argument(std::string(op) + ": " + std::to_string(tokens.size()) + " tokens for attention " +
                                shape_of(attn) + ", expected batch*T = " + std::to_string(expected) + " or none");
  check_lengths(lengths, attn, op, one_long_row);
  check_rows(layer_maps(attn, tokens, causal, {}, lengths), op);
}

namespace {
void check_targets(std::span<const int32_t> targets, const core::Tensor& attn, const char* op) {
  if (!targets.empty() && static_cast<int64_t>(targets.size()) != attn.size(0) * attn.size(2))
    throw std::invalid_argument(std::string(op) + ": " + std::to_string(targets.size()) + " targets for attention " +
                                shape_of(attn) + ", expected batch*T = " +
                                std::to_string(attn.size(0) * attn.size(2)) + " or none");
}
}  // namespace

std::vector<HeadScores> example_head_scores(const core::Tensor& attn, std::span<const int32_t> tokens, bool causal,
                                            int64_t b, std::span<const int32_t> targets,
                                            std::span<const int32_t> lengths) {
  check_attention(attn, tokens, causal, "example_head_scores", lengths);
  check_targets(targets, attn, "example_head_scores");
  if (b < 0 || b >= attn.size(0))
    throw std::invalid_argument("example_head_scores: example " + std::to_string(b) + " is outside the batch of " +
                                std::to_string(attn.size(0)));
  const LayerMaps maps = layer_maps(attn, tokens, causal, targets, lengths);
  std::vector<HeadScores> out;
  for (int64_t h = 0; h < maps.heads(); ++h) {
    HeadScoreSums::Means one;
    add_example(one, example_scores(maps.map(b, h)));
    out.push_back(mean_scores(one));
  }
  return out;
}

std::vector<HeadScores> head_scores(const core::Tensor& attn, std::span<const int32_t> tokens, bool causal,
                                    std::span<const int32_t> targets, std::span<const int32_t> lengths) {
  check_attention(attn, tokens, causal, "head_scores", lengths);
  check_targets(targets, attn, "head_scores");
  std::vector<HeadScoreSums::Means> heads;
  add_scores(heads, layer_maps(attn, tokens, causal, targets, lengths));
  std::vector<HeadScores> out;
  for (const HeadScoreSums::Means& h : heads) out.push_back(mean_scores(h));
  return out;
}

void HeadScoreSums::add(const core::Tensor& attn, std::span<const int32_t> tokens, bool causal,
                        std::span<const int32_t> targets, std::span<const int32_t> lengths) {
  check_attention(attn, tokens, causal, "head_scores", lengths, /*one_long_row=*/false);
  check_targets(targets, attn, "head_scores");
  if (!heads_.empty() && static_cast<int64_t>(heads_.size()) != attn.size(1))
    throw std::invalid_argument("head_scores: a chunk of attention " + shape_of(attn) + " after chunks of " +
                                std::to_string(heads_.size()) + " heads");
  add_scores(heads_, layer_maps(attn, tokens, causal, targets, lengths));
  longest_ = std::max(longest_, longest(lengths, attn));
}

std::vector<HeadScores> HeadScoreSums::value() const {
  check_longest(longest_, "head_scores");
  std::vector<HeadScores> out;
  for (const Means& h : heads_) out.push_back(mean_scores(h));
  return out;
}

namespace {

// JS = H(m) - (H(p) + H(q)) / 2 with m = (p + q) / 2, written term by term
// so that zeros contribute nothing and rounding cannot make it negative; in
// doubles whatever P and Q are (a float is exact as a double).
template <class P, class Q>
double js_of_rows(const P* p, const Q* q, std::size_t n) {
  double js = 0;
  for (std::size_t k = 0; k < n; ++k) {
    const double pk = p[k], qk = q[k];
    const double m = 0.5 * (pk + qk);
    if (pk > 0) js += 0.5 * pk * std::log2(pk / m);
    if (qk > 0) js += 0.5 * qk * std::log2(qk / m);
  }
  return js < 0 ? 0.0 : js;
}

}  // namespace

double js_divergence(std::span<const double> p, std::span<const double> q) {
  if (p.size() != q.size())
    throw std::invalid_argument("js_divergence: rows of length " + std::to_string(p.size()) + " and " +
                                std::to_string(q.size()) + ", expected equal lengths");
  return js_of_rows(p.data(), q.data(), p.size());
}

namespace {

// One layer's attention, read where it is (a float64 copy of every head's
// rows was twice the attention's own bytes, 2.1 GB at 4 layers of 8 heads on
// 512 sequences of 128 tokens), and where its heads sit in the matrix.
struct JsLayer {
  core::Tensor probs;  // contiguous [B, h, T, T], f32 or f64
  std::size_t offset = 0;  // its head 0's index among all heads
};

// Adds the JS divergence of every pair of heads (a, c), a < c, a of layer
// `x` and c of layer `y` (x's own pairs when both are one layer) over the
// (example, query) pairs of real queries that see two real keys or more to
// total[a][c], term by term in the order of the examples and queries: each
// pair's sum is the same whatever order the pairs come in.
void add_js_pairs(std::vector<std::vector<double>>& total, const JsLayer& x, const JsLayer& y, bool causal,
                  std::span<const int32_t> lengths) {
  const bool same = &x == &y;
  const int64_t batch = x.probs.size(0), len = x.probs.size(2);
  core::dispatch(x.probs.dtype(), [&](auto xzero) {
    core::dispatch(y.probs.dtype(), [&](auto yzero) {
      using TX = decltype(xzero);
      using TY = decltype(yzero);
      const int64_t hx = x.probs.size(1), hy = y.probs.size(1);
      // The pairs (i, j) share nothing but the maps they read: each thread
      // takes whole pairs, so each sum adds its terms in the order above.
      std::vector<std::pair<int64_t, int64_t>> heads;
      for (int64_t i = 0; i < hx; ++i)
        for (int64_t j = same ? i + 1 : 0; j < hy; ++j) heads.emplace_back(i, j);
      const auto n = static_cast<int64_t>(heads.size());
#pragma omp parallel for schedule(dynamic, 1) if (n > 1)
      for (int64_t pair = 0; pair < n; ++pair) {
        const auto [i, j] = heads[static_cast<std::size_t>(pair)];
        double& sum = total[x.offset + static_cast<std::size_t>(i)][y.offset + static_cast<std::size_t>(j)];
        for (int64_t b = 0; b < batch; ++b) {
          const int64_t real = lengths.empty() ? len : lengths[static_cast<std::size_t>(b)];
          // Query q of example b of each head: its row of T keys.
          const TX* p = x.probs.data<TX>() + (b * hx + i) * len * len;
          const TY* r = y.probs.data<TY>() + (b * hy + j) * len * len;
          for (int64_t q = 0; q < real; ++q) {
            // A row with one key is forced to [1] in every head.
            const auto keys = static_cast<std::size_t>(visible_keys(q, real, causal));
            if (keys >= 2) sum += js_of_rows(p + q * len, r + q * len, keys);
          }
        }
      }
    });
  });
}

// The (example, real query) pairs whose query sees two real keys or more.
int64_t js_query_pairs(int64_t batch, int64_t len, bool causal, std::span<const int32_t> lengths) {
  int64_t pairs = 0;
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t real = lengths.empty() ? len : lengths[static_cast<std::size_t>(b)];
    for (int64_t q = 0; q < real; ++q) pairs += visible_keys(q, real, causal) >= 2;
  }
  return pairs;
}

// Adds every pair of heads of one chunk's layers to total (sized for them),
// a pair of layers at a time in JsSums::add's order; returns the number of
// (example, query) pairs. Each layer is checked the first time it is asked
// for (`one_long_row` as in check_attention), before any of its pairs is added.
int64_t add_js(std::vector<std::vector<double>>& total, std::span<const int64_t> heads,
               const LayerAttention& attention, bool causal, std::span<const int32_t> lengths, bool one_long_row,
               const LayerVisit& visit) {
  const auto L = static_cast<int64_t>(heads.size());
  std::vector<std::size_t> offsets{0};
  for (const int64_t h : heads) offsets.push_back(offsets.back() + static_cast<std::size_t>(std::max<int64_t>(h, 0)));
  int64_t batch = 0, len = 0;  // layer 0's, which every layer needs
  const auto ask = [&](int64_t l, bool checked) {
    JsLayer layer{attention(l), offsets[static_cast<std::size_t>(l)]};
    const core::Tensor& p = layer.probs;
    if (!checked) check_attention(p, {}, causal, "js_distance_matrix", lengths, one_long_row);
    if (l == 0 && p.defined() && p.dim() == 4) batch = p.size(0), len = p.size(2);
    const int64_t h = heads[static_cast<std::size_t>(l)];
    if (!p.defined() || p.dim() != 4 || p.size(0) != batch || p.size(1) != h || p.size(2) != len || p.size(3) != len)
      throw std::invalid_argument("js_distance_matrix: layer " + std::to_string(l) + " has attention " +
                                  (p.defined() ? shape_of(p) : std::string("undefined")) + ", expected [" +
                                  std::to_string(batch) + ", " + std::to_string(h) + ", " + std::to_string(len) +
                                  ", " + std::to_string(len) + "]; every layer needs layer 0's batch and T");
    layer.probs = p.contiguous();
    return layer;
  };
  // Layer x (kept from the pass over x - 1) with each later layer, the last
  // of them (x + 1) kept for the next: two layers' attention at a time.
  JsLayer x = ask(0, false);
  const int64_t pairs = js_query_pairs(batch, len, causal, lengths);
  for (int64_t l = 0; l < L; ++l) {
    if (visit) visit(l, x.probs);
    if (pairs > 0) add_js_pairs(total, x, x, causal, lengths);
    JsLayer next;
    for (int64_t y = L - 1; y > l; --y) {
      JsLayer other = ask(y, l > 0);
      if (pairs > 0) add_js_pairs(total, x, other, causal, lengths);
      if (y == l + 1) next = std::move(other);
    }
    x = std::move(next);
  }
  return pairs;
}

// The matrix from the sums: each pair's mean, mirrored (all 0 without a pair).
std::vector<std::vector<double>> js_means(const std::vector<std::vector<double>>& total, int64_t pairs) {
  std::vector<std::vector<double>> js(total.size(), std::vector<double>(total.size(), 0.0));
  for (std::size_t a = 0; a < total.size() && pairs > 0; ++a)
    for (std::size_t c = a + 1; c < total.size(); ++c) js[a][c] = js[c][a] = total[a][c] / static_cast<double>(pairs);
  return js;
}

// The matrix's size for `heads`, or the error of a chunk with other heads.
std::size_t js_heads(std::span<const int64_t> heads, const std::vector<std::vector<double>>& total) {
  if (heads.empty()) throw std::invalid_argument("js_distance_matrix: no layers given");
  std::size_t n = 0;
  for (const int64_t h : heads) n += static_cast<std::size_t>(std::max<int64_t>(h, 0));
  if (!total.empty() && total.size() != n)
    throw std::invalid_argument("js_distance_matrix: a chunk of " + std::to_string(n) + " heads after chunks of " +
                                std::to_string(total.size()));
  return n;
}

}  // namespace

std::vector<std::vector<double>> js_distance_matrix(const std::vector<core::Tensor>& layers, bool causal,
                                                    std::span<const int32_t> lengths) {
  std::vector<int64_t> heads;
  for (const core::Tensor& layer : layers) heads.push_back(layer.defined() && layer.dim() == 4 ? layer.size(1) : 0);
  std::vector<std::vector<double>> total(js_heads(heads, {}));
  for (std::vector<double>& row : total) row.assign(total.size(), 0.0);
  const LayerAttention given = [&](int64_t l) { return layers[static_cast<std::size_t>(l)]; };
  const int64_t pairs = add_js(total, heads, given, causal, lengths, true, {});
  return js_means(total, pairs);
}

void JsSums::add(std::span<const int64_t> heads, const LayerAttention& attention, bool causal,
                 std::span<const int32_t> lengths, const LayerVisit& visit) {
  const std::size_t n = js_heads(heads, total_);
  if (total_.empty()) total_.assign(n, std::vector<double>(n, 0.0));
  int32_t longest_here = 0;
  const LayerVisit each = [&](int64_t l, const core::Tensor& probs) {
    if (l == 0) longest_here = longest(lengths, probs);
    if (visit) visit(l, probs);
  };
  pairs_ += add_js(total_, heads, attention, causal, lengths, false, each);
  longest_ = std::max(longest_, longest_here);
}

std::vector<std::vector<double>> JsSums::value() const {
  check_longest(longest_, "js_distance_matrix");
  return js_means(total_, pairs_);
}

}  // namespace headlab::analysis
