// Per-head attention scores (formulas in docs/head-metrics.md).
//
// Pure functions over attention probabilities: one layer's A is a tensor
// [B, h, T, T] (f32 or f64) whose rows sum to 1 over keys. Causal models have
// zeros above the diagonal (query q sees keys 0..q); bidirectional ones see all
// T keys. Nothing here reads or changes a model.
//
// Every batch score is the mean of the per-example scores, so a batch of one
// example gives that example's score and a batch's score is the mean over its
// examples (a score that can be absent: the mean over the examples where it
// exists).
//
// Padded examples (`lengths`, docs/head-metrics.md "Padding"): only an
// example's real positions count, as queries and as keys, and an example too
// short for a score is left out of that score's mean: one of 2 positions has
// no query q >= 2, one of 1 position counts in no score at all.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/mean.h"
#include "analysis/patterns.h"
#include "core/tensor.h"

namespace headlab::analysis {

// A user-defined pattern's score (attend.h).
struct UserScore {
  std::string name;
  std::optional<double> score;  // absent when the batch has no scored query
  // The built-in patterns it nests with on the batch (nesting.h): no rivals of it for the label.
  std::vector<std::string> nests_with;
  bool operator==(const UserScore&) const = default;
};

// TransformerLens's head-detector scores (its "mul" method): the attention
// mass on the detection pattern summed over ALL query rows, divided by the
// number of rows (docs/head-metrics.md, "Comparable with TransformerLens").
struct DetectorScores {
  std::optional<double> previous_token, duplicate_token, induction;  // absent without tokens (all three)
};

struct HeadScores {
  // One score per entry of kPatterns, in its order, over the judged queries
  // (those with a target, when the targets are known); absent only for a
  // pattern that can be absent. These are what labels use.
  std::array<std::optional<double>, kPatternCount> patterns = present_patterns();
  // The same over every query the pattern can judge, targets or not.
  std::array<std::optional<double>, kPatternCount> patterns_all = present_patterns();
  // The user-defined patterns' scores, in the order they were given.
  std::vector<UserScore> user;
  DetectorScores detector;
  double entropy = 0;   // mean over q with >= 2 visible keys of H(A[q,:]) / log(keys)
  double distance = 0;  // mean over all q of sum_k A[q, k] |q - k|, in positions
  // (both over the examples of 2 positions or more)

  // The user pattern called `name`, or nullptr.
  const UserScore* user_score(std::string_view name) const;

  // The score of the pattern called `name`; throws std::invalid_argument for
  // an unknown name.
  std::optional<double>& operator[](std::string_view name) { return patterns[pattern_index(name)]; }
  const std::optional<double>& operator[](std::string_view name) const { return patterns[pattern_index(name)]; }
  // The score of a pattern that has one; throws std::invalid_argument for an
  // unknown name or an absent score.
  double at(std::string_view name) const;

 private:
  // 0 for the patterns that always have a score, absent for the others.
  static std::array<std::optional<double>, kPatternCount> present_patterns() {
    std::array<std::optional<double>, kPatternCount> p;
    for (std::size_t i = 0; i < kPatternCount; ++i)
      if (!kPatterns[i].can_be_absent) p[i] = 0.0;
    return p;
  }
};

// Checks that `attn` is one layer's attention [B, h, T, T] with T >= 3 and
// rows that are probabilities (non-negative, sum 1 within 1e-3; causal: zero
// above the diagonal within 1e-6), and that `tokens` is empty or has B*T
// entries. lengths: empty (every example is T long) or each example's real
// length in [1, T], one at least 3; a real query's row must then put no mass
// (within 1e-6) on padding, i.e. come from a forward with the padding mask.
// Throws std::invalid_argument naming `op` and what is wrong.
// `one_long_row`: whether the batch itself must hold an example of 3
// positions or more; a chunk of a larger set (the sums below) need not, the
// set must (their value() checks it).
void check_attention(const core::Tensor& attn, std::span<const int32_t> tokens, bool causal, const char* op,
                     std::span<const int32_t> lengths = {}, bool one_long_row = true);

// Scores of every head of one layer over the batch: result[head].
// tokens: row-major [B, T], or empty (then the token patterns are absent).
// targets: row-major [B, T] or empty; when given, `patterns` judge only the
// queries with a target (patterns_all every query).
// lengths: [B] real lengths of padded examples, or empty (all T long).
std::vector<HeadScores> head_scores(const core::Tensor& attn, std::span<const int32_t> tokens, bool causal,
                                    std::span<const int32_t> targets = {}, std::span<const int32_t> lengths = {});

// head_scores over a set read in chunks (analyze_model.h): add() each
// chunk's attention of one layer (arguments as head_scores'); value() is what
// head_scores of one batch holding every chunk gives -- the same sums in the
// same order, so bit for bit the same given the same attention.
class HeadScoreSums {
 public:
  void add(const core::Tensor& attn, std::span<const int32_t> tokens, bool causal,
           std::span<const int32_t> targets = {}, std::span<const int32_t> lengths = {});
  std::vector<HeadScores> value() const;

  // One head's running means.
  struct Means {
    std::array<Mean, kPatternCount> judged, all;
    Mean previous, duplicate, induction, entropy, distance;
  };

 private:
  std::vector<Means> heads_;
  int32_t longest_ = 0;  // the longest example's real positions so far
};

// Scores of every head on example `b` alone: result[head].
std::vector<HeadScores> example_head_scores(const core::Tensor& attn, std::span<const int32_t> tokens, bool causal,
                                            int64_t b, std::span<const int32_t> targets = {},
                                            std::span<const int32_t> lengths = {});

// Jensen-Shannon divergence in bits (base-2 logs), so 0 for equal rows and 1
// for rows with disjoint support. p and q are probability rows of equal length.
double js_divergence(std::span<const double> p, std::span<const double> q);

// A chunk's attention of one layer [B, h, T, T], asked for by its layer: a
// layer asked for again must give the same values (its pass's attention
// computed again from the residual stream entering the layer, analysis/prefix.h).
using LayerAttention = std::function<core::Tensor(int64_t layer)>;
// Handed each layer's attention once, in layer order.
using LayerVisit = std::function<void(int64_t layer, const core::Tensor& attention)>;

// The head-to-head distance matrix over all heads of all layers, in the order
// (layer 0 head 0, layer 0 head 1, ..., layer 1 head 0, ...): entry (a, b) is
// the mean JS divergence (bits) between heads a and b over the same (example,
// query) pairs: the real queries that see two real keys or more -- q >= 1 when
// causal (row 0 is forced to [1, 0, ...]), all of an example of 2 positions or
// more when bidirectional -- over their real keys (lengths as in head_scores).
// Every layer must have the same B and T.
std::vector<std::vector<double>> js_distance_matrix(const std::vector<core::Tensor>& layers, bool causal,
                                                    std::span<const int32_t> lengths = {});

// js_distance_matrix over a set read in chunks, as HeadScoreSums is head_scores.
class JsSums {
 public:
  // One chunk: layer l's attention (heads[l] heads) asked of `attention`, a
  // pair of layers at a time, so that at most two layers' attention are held
  // at once, whatever the number of layers (docs/head-metrics.md, "What the
  // analysis holds"). The order: layer 0, then L-1, L-2, ..., 1, each paired
  // with 0; layer 1, kept from that last asking, is paired with L-1, ..., 2;
  // layer 2, kept, with L-1, ..., 3; and so on. So layer 0 is asked for once,
  // first, and L-1 second; a later layer again by each layer before it but
  // the one before it. `visit` (optional) is handed each layer's attention
  // once, in layer order.
  void add(std::span<const int64_t> heads, const LayerAttention& attention, bool causal,
           std::span<const int32_t> lengths = {}, const LayerVisit& visit = {});
  std::vector<std::vector<double>> value() const;

 private:
  std::vector<std::vector<double>> total_;  // per pair of heads, the sum over (example, query) pairs
  int64_t pairs_ = 0;
  int32_t longest_ = 0;
};

}  // namespace headlab::analysis
