#include "train/tasks.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <span>
#include <stdexcept>
#include <utility>
#include <vector>

#include "analysis/donors.h"
#include "train/errors.h"

namespace headlab::train {
namespace {

using Row = std::span<int32_t>;

// Shared plumbing: a synthetic task fills one sequence at a time; the targets
// arrive pre-filled with -1, so a task writes only the positions it scores.
class SyntheticTask : public Task {
 public:
  SyntheticTask(std::string name, int64_t vocab, int64_t num_classes, int64_t seq_len)
      : name_(std::move(name)), vocab_(vocab), num_classes_(num_classes), seq_len_(seq_len) {}

  std::string name() const final { return name_; }
  std::vector<analysis::ExpectedRole> expected_roles() const final;
  int64_t vocab() const final { return vocab_; }
  int64_t num_classes() const final { return num_classes_; }
  int64_t seq_len() const final { return seq_len_; }

  // Every token of [0, vocab) at every position: a bound for all of them.
  double distinct_sequences() const override {
    return std::pow(static_cast<double>(vocab_), static_cast<double>(seq_len_));
  }

  Batch sample(int64_t batch, core::Generator& gen) final {
    if (batch < 1 || batch > std::numeric_limits<int32_t>::max() / seq_len_) {
      throw std::invalid_argument("Task::sample(" + name_ + "): batch " + std::to_string(batch) + " must be in [1, " +
                                  std::to_string(std::numeric_limits<int32_t>::max() / seq_len_) + "] at seq-len " +
                                  std::to_string(seq_len_));
    }
    const auto n = static_cast<std::size_t>(batch * seq_len_);
    const auto t = static_cast<std::size_t>(seq_len_);
    Batch out{batch, seq_len_, std::vector<int32_t>(n, 0), std::vector<int32_t>(n, -1)};
    for (std::size_t row = 0; row < static_cast<std::size_t>(batch); ++row) {
      fill(Row(out.tokens).subspan(row * t, t), Row(out.targets).subspan(row * t, t), gen);
    }
    return out;
  }

 protected:
  virtual void fill(Row x, Row y, core::Generator& gen) const = 0;

  // A token uniform in [0, high).
  static int32_t draw(core::Generator& gen, int64_t high) { return static_cast<int32_t>(gen.integer(0, high)); }

 private:
  std::string name_;
  int64_t vocab_, num_classes_, seq_len_;
};

// The four tasks over uniform random tokens whose target at i >= 1 depends only
// on the first token and the previous one.
enum class FirstPrev { pair, sum, previous, first };

class FirstPrevTask final : public SyntheticTask {
 public:
  FirstPrevTask(std::string name, FirstPrev kind, int64_t vocab, int64_t seq_len)
      : SyntheticTask(std::move(name), vocab, kind == FirstPrev::pair ? vocab * vocab : vocab, seq_len), kind_(kind) {}

 protected:
  void fill(Row x, Row y, core::Generator& gen) const override {
    const int64_t v = vocab();
    for (auto& token : x) token = draw(gen, v);
    for (std::size_t i = 1; i < x.size(); ++i) {
      const int64_t first = x[0], prev = x[i - 1];
      int64_t target = 0;
      switch (kind_) {
        case FirstPrev::pair:
          target = first * v + prev;
          break;
        case FirstPrev::sum:
          target = (first + prev) % v;
          break;
        case FirstPrev::previous:
          target = prev;
          break;
        case FirstPrev::first:
          target = first;
          break;
      }
      y[i] = static_cast<int32_t>(target);
    }
  }

 public:
  // previous: every token; the others: x_0, each replaced by a different token.
  std::vector<int32_t> corrupt(const Batch& batch, core::Generator& gen) const override {
    std::vector<int32_t> x = batch.tokens;
    for (std::size_t i = 0; i < x.size(); ++i)
      if (kind_ == FirstPrev::previous || i % static_cast<std::size_t>(batch.seq_len) == 0) x[i] = other_than(x[i], gen);
    return x;
  }
  std::string corruption() const override {
    return kind_ == FirstPrev::previous ? "every token replaced by a different uniform token."
                                        : "the first token x_0 replaced by a different uniform token.";
  }

 private:
  int32_t other_than(int32_t token, core::Generator& gen) const {
    const auto t = static_cast<int32_t>(gen.integer(0, vocab() - 1));
    return t >= token ? t + 1 : t;
  }
  FirstPrev kind_;
};

class InductionTask final : public SyntheticTask {
 public:
  InductionTask(int64_t vocab, int64_t seq_len) : SyntheticTask("induction", vocab, vocab, seq_len) {}

  // L = T/4 tokens in each occurrence of the segment.
  static std::size_t segment_length(std::size_t seq_len) { return seq_len / 4; }

  // The first occurrence of the segment (found from the first target and its
  // earlier copy) replaced by filler tokens, so the repeat has nothing to copy.
  std::vector<int32_t> corrupt(const Batch& batch, core::Generator& gen) const override {
    std::vector<int32_t> x = batch.tokens;
    const auto t = static_cast<std::size_t>(batch.seq_len), len = segment_length(t);
    for (std::size_t row = 0; row < static_cast<std::size_t>(batch.batch); ++row) {
      const Row r = Row(x).subspan(row * t, t);
      const auto y = std::span(batch.targets).subspan(row * t, t);
      const auto second = static_cast<std::size_t>(std::find_if(y.begin(), y.end(), [](int32_t v) { return v >= 0; }) - y.begin());
      if (second >= t) continue;
      const auto first = static_cast<std::size_t>(std::find(r.begin(), r.begin() + static_cast<std::ptrdiff_t>(second), r[second]) - r.begin());
      if (first >= second) continue;
      std::vector<int32_t> outside;
      for (int32_t v = 0; v < static_cast<int32_t>(vocab()); ++v)
        if (std::find(r.begin() + static_cast<std::ptrdiff_t>(second), r.begin() + static_cast<std::ptrdiff_t>(second + len), v) ==
            r.begin() + static_cast<std::ptrdiff_t>(second + len))
          outside.push_back(v);
      for (std::size_t i = first; i < first + len; ++i)
        r[i] = outside[static_cast<std::size_t>(gen.integer(0, static_cast<int64_t>(outside.size())))];
    }
    return x;
  }
  std::string corruption() const override {
    return "the first occurrence of the segment replaced by filler tokens (outside the segment), so the repeat has "
           "no earlier copy to read.";
  }
  // Its targets read earlier copies: the task-position scores apply.
  void describe(Batch& batch) const override {
    Task::describe(batch);
    batch.sources = true;
  }

 protected:
  void fill(Row x, Row y, core::Generator& gen) const override {
    const std::size_t len = segment_length(x.size()), filler = x.size() - 2 * len;
    // The segment: L distinct tokens. Floyd's algorithm draws a uniform subset
    // of L in O(L) memory whatever the vocab; it fixes the set, not the order,
    // so shuffle after.
    std::vector<int32_t> segment(len);
    const int64_t v = vocab(), k = static_cast<int64_t>(len);
    for (int64_t j = v - k; j < v; ++j) {
      const auto filled = std::span(segment).first(static_cast<std::size_t>(j - (v - k)));
      const auto t = static_cast<int32_t>(gen.integer(0, j + 1));
      const bool seen = std::find(filled.begin(), filled.end(), t) != filled.end();
      segment[filled.size()] = seen ? static_cast<int32_t>(j) : t;
    }
    for (std::size_t i = len - 1; i > 0; --i)
      std::swap(segment[i], segment[static_cast<std::size_t>(gen.integer(0, static_cast<int64_t>(i) + 1))]);
    // The filler: tokens outside the segment (so the segment's second
    // occurrence is the only place a token has an earlier copy that predicts
    // anything), split at two uniform cut points into the filler before the
    // first occurrence, the gap between the two, and the rest after.
    std::vector<int32_t> outside;
    for (int32_t t = 0; t < static_cast<int32_t>(v); ++t)
      if (std::find(segment.begin(), segment.end(), t) == segment.end()) outside.push_back(t);
    const auto c1 = static_cast<std::size_t>(gen.integer(0, static_cast<int64_t>(filler) + 1));
    const auto c2 = static_cast<std::size_t>(gen.integer(0, static_cast<int64_t>(filler) + 1));
    const std::size_t first = std::min(c1, c2), second = first + len + (std::max(c1, c2) - first);
    for (auto& token : x) token = outside[static_cast<std::size_t>(gen.integer(0, static_cast<int64_t>(outside.size())))];
    std::copy(segment.begin(), segment.end(), x.begin() + static_cast<std::ptrdiff_t>(first));
    std::copy(segment.begin(), segment.end(), x.begin() + static_cast<std::ptrdiff_t>(second));
    // Every position of the second occurrence but its last predicts the next
    // token: the one that followed the current token's earlier copy.
    for (std::size_t i = second; i + 1 < second + len; ++i) y[i] = x[i + 1];
  }
};

class SortTask final : public SyntheticTask {
 public:
  SortTask(int64_t vocab, int64_t seq_len) : SyntheticTask("sort", vocab, vocab, seq_len) {}

  // "next-sorted": at each targeted position, the list positions holding the
  // token to output next (all of them when it occurs more than once).
  void describe(Batch& batch) const override {
    Task::describe(batch);
    const bool has = std::any_of(batch.attend.begin(), batch.attend.end(),
                                 [](const analysis::AttendPattern& p) { return p.name == kNextSorted; });
    if (has) return;
    analysis::AttendPattern p = analysis::AttendPattern::empty(kNextSorted, batch.batch, batch.seq_len);
    p.definition = "attention of a sorted position on the list positions holding the token to output next.";
    const auto t = static_cast<std::size_t>(batch.seq_len), n = (t - 1) / 2;
    for (std::size_t row = 0; row < static_cast<std::size_t>(batch.batch); ++row)
      for (std::size_t q = n; q < t; ++q) {
        const int32_t next = batch.targets[row * t + q];
        if (next < 0) continue;
        for (std::size_t j = 0; j < n; ++j)
          if (batch.tokens[row * t + j] == next) p.keys[row * t + q].push_back(static_cast<int32_t>(j));
      }
    batch.attend.push_back(std::move(p));
  }
  static constexpr const char* kNextSorted = "next-sorted";
  // The list decides the rest: (vocab - 1)^n lists of n = (T - 1) / 2 tokens.
  double distinct_sequences() const override {
    return std::pow(static_cast<double>(vocab() - 1), static_cast<double>((seq_len() - 1) / 2));
  }

 protected:
  void fill(Row x, Row y, core::Generator& gen) const override {
    const std::size_t n = (x.size() - 1) / 2;
    const int64_t separator = vocab() - 1;
    for (auto& token : x.first(n)) token = draw(gen, separator);
    x[n] = static_cast<int32_t>(separator);
    Row sorted = x.subspan(n + 1, n);
    std::copy(x.begin(), x.begin() + static_cast<std::ptrdiff_t>(n), sorted.begin());
    std::sort(sorted.begin(), sorted.end());
    for (std::size_t i = n; i < 2 * n; ++i) y[i] = x[i + 1];
  }
};

class ModularAdditionTask final : public SyntheticTask {
 public:
  explicit ModularAdditionTask(int64_t vocab) : SyntheticTask("modular-addition", vocab, vocab - 1, 3) {}

  // "operands": at '=' (the targeted position), the mass on a and b together.
  void describe(Batch& batch) const override {
    Task::describe(batch);
    const bool has = std::any_of(batch.attend.begin(), batch.attend.end(),
                                 [](const analysis::AttendPattern& p) { return p.name == kOperands; });
    if (has) return;
    analysis::AttendPattern p = analysis::AttendPattern::empty(kOperands, batch.batch, batch.seq_len);
    p.definition = "attention of '=' on the two operands a and b together.";
    for (std::size_t i = 0; i < batch.targets.size(); ++i)
      if (batch.targets[i] >= 0 && i % 3 == 2) p.keys[i] = {0, 1};
    batch.attend.push_back(std::move(p));
  }
  static constexpr const char* kOperands = "operands";
  double distinct_sequences() const override {
    const auto p = static_cast<double>(vocab() - 1);
    return p * p;
  }

  // Up to 2^22 pairs (p <= 2048): a list of 12 M tokens at most.
  std::optional<Batch> all_examples() const override {
    const int64_t p = vocab() - 1;
    if (p > 2048) return std::nullopt;
    const int64_t n = p * p;
    Batch out{n, 3, std::vector<int32_t>(static_cast<std::size_t>(3 * n), 0),
              std::vector<int32_t>(static_cast<std::size_t>(3 * n), -1)};
    for (int64_t i = 0; i < n; ++i) {
      const int64_t a = i / p, b = i % p;
      write(Row(out.tokens).subspan(static_cast<std::size_t>(3 * i), 3),
            Row(out.targets).subspan(static_cast<std::size_t>(3 * i), 3), a, b);
    }
    return out;
  }

 protected:
  void fill(Row x, Row y, core::Generator& gen) const override {
    const int64_t p = vocab() - 1;
    const int32_t a = draw(gen, p);
    write(x, y, a, draw(gen, p));
  }

 private:
  void write(Row x, Row y, int64_t a, int64_t b) const {
    const int64_t p = vocab() - 1;
    x[0] = static_cast<int32_t>(a);
    x[1] = static_cast<int32_t>(b);
    x[2] = static_cast<int32_t>(p);
    y[2] = static_cast<int32_t>((a + b) % p);
  }
};

// --- argument checks: each failure says what would fit ---

[[noreturn]] void reject(const std::string& task, const std::string& problem) {
  throw UsageError("task '" + task + "': " + problem);
}

void need_vocab_at_least(const std::string& task, int64_t vocab, int64_t low, const std::string& why) {
  if (vocab < low) {
    reject(task, "vocab " + std::to_string(vocab) + " is too small; it needs vocab >= " + std::to_string(low) + " (" +
                     why + ")");
  }
}

void need_vocab_at_most(const std::string& task, int64_t vocab, int64_t high, const std::string& why) {
  if (vocab > high) {
    reject(task, "vocab " + std::to_string(vocab) + " is too large; it needs vocab <= " + std::to_string(high) + " (" +
                     why + ")");
  }
}

void need_seq_len_at_least(const std::string& task, int64_t seq_len, int64_t low, const std::string& why) {
  if (seq_len < low) {
    reject(task, "seq-len " + std::to_string(seq_len) + " is too short; it needs seq-len >= " + std::to_string(low) +
                     " (" + why + ")");
  }
}

constexpr int64_t kMaxToken = std::numeric_limits<int32_t>::max();
// Pairs are one class of vocab^2, which must fit a 32-bit target.
constexpr int64_t kMaxPairVocab = 46340;

std::unique_ptr<Task> make_first_prev(const std::string& name, FirstPrev kind, int64_t vocab, int64_t seq_len) {
  need_vocab_at_least(name, vocab, 2, "one token value would make every target the same");
  if (kind == FirstPrev::pair)
    need_vocab_at_most(name, vocab, kMaxPairVocab, "a target is one of vocab^2 32-bit classes");
  need_seq_len_at_least(name, seq_len, 2, "position 0 has no previous token, so targets start at 1");
  return std::make_unique<FirstPrevTask>(name, kind, vocab, seq_len);
}

std::unique_ptr<Task> make_induction(int64_t vocab, int64_t seq_len) {
  const std::string name = "induction";
  need_seq_len_at_least(name, seq_len, 12,
                        "the segment of L = seq-len/4 tokens needs L >= 3, so that the induction score sees it");
  const int64_t len = static_cast<int64_t>(InductionTask::segment_length(static_cast<std::size_t>(seq_len)));
  need_vocab_at_least(name, vocab, len + 1,
                      "the segment of seq-len/4 = " + std::to_string(len) +
                          " distinct tokens, and at least one other token for the filler");
  return std::make_unique<InductionTask>(vocab, seq_len);
}

std::unique_ptr<Task> make_sort(int64_t vocab, int64_t seq_len) {
  const std::string name = "sort";
  need_vocab_at_least(name, vocab, 3, "list tokens are 0 .. vocab-2 and vocab-1 is the separator");
  need_seq_len_at_least(name, seq_len, 3, "n >= 1 tokens, the separator, n sorted tokens");
  if (seq_len % 2 == 0) {
    reject(name, "seq-len " + std::to_string(seq_len) +
                     " must be odd (n tokens, the separator, n sorted tokens); try " + std::to_string(seq_len - 1) +
                     " or " + std::to_string(seq_len + 1));
  }
  return std::make_unique<SortTask>(vocab, seq_len);
}

std::unique_ptr<Task> make_modular_addition(int64_t vocab, int64_t seq_len) {
  const std::string name = "modular-addition";
  need_vocab_at_least(name, vocab, 3, "p = vocab-1 >= 2 and the token p is '='");
  if (seq_len != 3) reject(name, "seq-len " + std::to_string(seq_len) + " must be 3 ([a, b, =])");
  return std::make_unique<ModularAdditionTask>(vocab);
}

using Roles = std::vector<analysis::ExpectedRole>;

struct Entry {
  TaskInfo info;
  std::unique_ptr<Task> (*make)(int64_t vocab, int64_t seq_len);
};

const std::vector<Entry>& entries() {
  static const std::vector<Entry> table = {
      {{"first-prev-pair",
        "random tokens; at every position i >= 1 the target is the pair (x_0, x_{i-1}), one class of V*V "
        "(x_0 * V + x_{i-1})",
        "one previous-token head and one first-token head",
        Roles{{"previous token", "previous-token"}, {"first token", "first-token"}}, 8, 6},
       [](int64_t v, int64_t t) { return make_first_prev("first-prev-pair", FirstPrev::pair, v, t); }},
      {{"first-prev-sum", "random tokens; at every position i >= 1 the target is (x_0 + x_{i-1}) mod V",
        "none forced (a control): the target is symmetric, so heads usually stay mixed between the first "
        "and the previous token",
        Roles{}, 8, 6},
       [](int64_t v, int64_t t) { return make_first_prev("first-prev-sum", FirstPrev::sum, v, t); }},
      {{"previous", "random tokens; at every position i >= 1 the target is the previous token x_{i-1}",
        "a previous-token head", Roles{{"previous token", "previous-token"}}, 8, 6},
       [](int64_t v, int64_t t) { return make_first_prev("previous", FirstPrev::previous, v, t); }},
      {{"first", "random tokens; at every position i >= 1 the target is the first token x_0", "a first-token head",
        Roles{{"first token", "first-token"}}, 8, 6},
       [](int64_t v, int64_t t) { return make_first_prev("first", FirstPrev::first, v, t); }},
      {{"induction",
        "a segment of T/4 distinct random tokens occurs twice at random offsets in filler of other tokens; each "
        "position of the second occurrence except the last predicts the next token",
        "with 2 layers: a previous-token head in layer 0 and an induction head in layer 1 (1 layer cannot solve it)",
        Roles{{"the token after the earlier copy, at the targets", "induction"}}, 16, 24},
       make_induction},
      {{"sort",
        "n = (T-1)/2 random tokens in [0, V-1), the separator V-1, then the same tokens sorted; the separator "
        "and the sorted positions predict the next sorted token",
        "content-based heads, in part: at each sorted position a head puts about half its attention on the list "
        "token that comes next in order and spreads the rest (measured: docs/reproductions.md)",
        Roles{{"the list token to output next", SortTask::kNextSorted}}, 10, 11},
       make_sort},
      {{"modular-addition", "[a, b, =] with p = V-1, a and b in [0, p), '=' the token p; target (a + b) mod p at '='",
        "heads at '=' attend to both operands a and b, each head splitting its attention about evenly between "
        "them rather than one head per operand (measured: docs/reproductions.md); the sum itself is computed by "
        "the MLP, and it takes about 3000 steps to learn",
        Roles{{"both operands, at '='", ModularAdditionTask::kOperands}}, 24, 3},
       make_modular_addition},
  };
  return table;
}

const Entry& find_entry(const std::string& name) {
  for (const auto& entry : entries()) {
    if (entry.info.name == name) return entry;
  }
  std::string valid;
  for (const auto& entry : entries()) valid += (valid.empty() ? "" : ", ") + entry.info.name;
  throw UsageError("unknown task '" + name + "'; valid tasks: " + valid + " (or --data FILE.jsonl)");
}

}  // namespace

Batch Task::eval_batch(int64_t rows, uint64_t seed) {
  // Independent of the training batches' stream (session.cpp) and of
  // initialization, which also start from the run's seed.
  core::Generator gen(seed ^ kEvalStream);
  return sample(rows, gen);
}

Batch Task::rows(int64_t first, int64_t count) const {
  throw std::invalid_argument("task " + name() + " draws fresh examples: it has no rows (first " +
                              std::to_string(first) + ", count " + std::to_string(count) + ")");
}

double Task::distinct_sequences() const { return std::numeric_limits<double>::infinity(); }

Batch Task::eval_slice(int64_t first, int64_t count, uint64_t seed) {
  if (first != 0)
    throw std::invalid_argument("task " + name() + " draws its evaluation batch at once; it has no slice at " +
                                std::to_string(first));
  return eval_batch(count, seed);
}

std::vector<int32_t> Task::corrupt(const Batch& batch, core::Generator&) const {
  // Row b's donor is real wherever b is (analysis/donors.h): b runs with its
  // own padding mask, so only the donor's first n_b tokens count, and the
  // rest is padding. A row without one (the longest) keeps its tokens.
  const std::vector<int64_t> donors = analysis::next_donors(batch.lengths, batch.batch, analysis::DonorRule::at_least_as_long);
  std::vector<int32_t> x = batch.tokens;
  const auto t = static_cast<std::size_t>(batch.seq_len);
  for (std::size_t b = 0; b < donors.size(); ++b) {
    if (donors[b] < 0) continue;
    const std::size_t n = batch.lengths.empty() ? t : static_cast<std::size_t>(batch.lengths[b]);
    const auto row = x.begin() + static_cast<std::ptrdiff_t>(b * t);
    std::copy_n(batch.tokens.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(donors[b]) * t), n, row);
    std::fill(row + static_cast<std::ptrdiff_t>(n), row + static_cast<std::ptrdiff_t>(t), 0);
  }
  return x;
}

std::string Task::next_row_corruption() {
  return "each sequence takes the tokens of the next sequence of the batch (row b gets row (b + 1) mod B; with "
         "sequences of different lengths, of the next one at least as long, as many as it has).";
}

void Task::describe(Batch& batch) const {
  if (batch.roles.empty()) batch.roles = expected_roles();
}

std::vector<analysis::ExpectedRole> SyntheticTask::expected_roles() const { return task_info(name_).roles; }

void Task::set_position(const Position&) {
  throw std::invalid_argument("task " + name() + " has no stream position to restore");
}

const std::vector<TaskInfo>& task_catalog() {
  static const std::vector<TaskInfo> catalog = [] {
    std::vector<TaskInfo> infos;
    for (const auto& entry : entries()) infos.push_back(entry.info);
    return infos;
  }();
  return catalog;
}

const TaskInfo& task_info(const std::string& name) { return find_entry(name).info; }

std::optional<SuggestedModel> suggested_model(const std::string& task) {
  // The default model (1 layer) cannot compose a previous-token head with an
  // induction head; the README's showcase measured this one (5 of 5 solved).
  if (task == "induction")
    return SuggestedModel{.flags = "--layers 2 --attn-only --heads 2 --d-model 32 --steps 3000", .layers = 2,
                          .target_accuracy = 0.9};
  return std::nullopt;
}

std::unique_ptr<Task> make_task(const std::string& name, int64_t vocab, int64_t seq_len) {
  const Entry& entry = find_entry(name);
  need_vocab_at_most(name, vocab, kMaxToken, "tokens are 32-bit");
  return entry.make(vocab, seq_len);
}

}  // namespace headlab::train
