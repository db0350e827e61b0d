#include "train/tasks.h"

#include <algorithm>
#include <limits>
#include <span>
#include <stdexcept>
#include <utility>

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
  int64_t vocab() const final { return vocab_; }
  int64_t num_classes() const final { return num_classes_; }
  int64_t seq_len() const final { return seq_len_; }

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

 private:
  FirstPrev kind_;
};

class InductionTask final : public SyntheticTask {
 public:
  InductionTask(int64_t vocab, int64_t seq_len) : SyntheticTask("induction", vocab, vocab, seq_len) {}

 protected:
  void fill(Row x, Row y, core::Generator& gen) const override {
    const std::size_t half = x.size() / 2;
    Row prefix = x.first(half);
    // Floyd's algorithm: a uniform subset of `half` distinct tokens in O(half)
    // memory whatever the vocab; it fixes the set, not the order, so shuffle after.
    const int64_t v = vocab(), k = static_cast<int64_t>(half);
    for (int64_t j = v - k; j < v; ++j) {
      const auto filled = prefix.first(static_cast<std::size_t>(j - (v - k)));
      const auto t = static_cast<int32_t>(gen.integer(0, j + 1));
      const bool seen = std::find(filled.begin(), filled.end(), t) != filled.end();
      prefix[filled.size()] = seen ? static_cast<int32_t>(j) : t;
    }
    for (std::size_t i = half - 1; i > 0; --i) {
      std::swap(prefix[i], prefix[static_cast<std::size_t>(gen.integer(0, static_cast<int64_t>(i) + 1))]);
    }
    std::copy(prefix.begin(), prefix.end(), x.begin() + static_cast<std::ptrdiff_t>(half));
    for (std::size_t i = half; i + 1 < x.size(); ++i) y[i] = x[i + 1];
  }
};

class SortTask final : public SyntheticTask {
 public:
  SortTask(int64_t vocab, int64_t seq_len) : SyntheticTask("sort", vocab, vocab, seq_len) {}

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

 protected:
  void fill(Row x, Row y, core::Generator& gen) const override {
    const int64_t p = vocab() - 1;
    x[0] = draw(gen, p);
    x[1] = draw(gen, p);
    x[2] = static_cast<int32_t>(p);
    y[2] = static_cast<int32_t>((int64_t{x[0]} + x[1]) % p);
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
  need_seq_len_at_least(name, seq_len, 4, "a prefix of at least 2 tokens and its repetition");
  if (seq_len % 2 != 0) {
    reject(name, "seq-len " + std::to_string(seq_len) + " must be even (a prefix and its repetition); try " +
                     std::to_string(seq_len - 1) + " or " + std::to_string(seq_len + 1));
  }
  need_vocab_at_least(name, vocab, seq_len / 2,
                      "the prefix of seq-len/2 = " + std::to_string(seq_len / 2) + " tokens is drawn without repeats");
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

struct Entry {
  TaskInfo info;
  std::unique_ptr<Task> (*make)(int64_t vocab, int64_t seq_len);
};

const std::vector<Entry>& entries() {
  static const std::vector<Entry> table = {
      {{"first-prev-pair",
        "random tokens; at every position i >= 1 the target is the pair (x_0, x_{i-1}), one class of V*V "
        "(x_0 * V + x_{i-1})",
        "one previous-token head and one first-token head", 8, 6},
       [](int64_t v, int64_t t) { return make_first_prev("first-prev-pair", FirstPrev::pair, v, t); }},
      {{"first-prev-sum", "random tokens; at every position i >= 1 the target is (x_0 + x_{i-1}) mod V",
        "none forced (a control): the target is symmetric, so heads usually stay mixed between the first "
        "and the previous token",
        8, 6},
       [](int64_t v, int64_t t) { return make_first_prev("first-prev-sum", FirstPrev::sum, v, t); }},
      {{"previous", "random tokens; at every position i >= 1 the target is the previous token x_{i-1}",
        "a previous-token head", 8, 6},
       [](int64_t v, int64_t t) { return make_first_prev("previous", FirstPrev::previous, v, t); }},
      {{"first", "random tokens; at every position i >= 1 the target is the first token x_0", "a first-token head", 8,
        6},
       [](int64_t v, int64_t t) { return make_first_prev("first", FirstPrev::first, v, t); }},
      {{"induction",
        "T/2 distinct random tokens, then the same tokens again; each position of the repeat except the last "
        "predicts the next token",
        "with 2 layers: a previous-token head in layer 0 and an induction head in layer 1", 16, 12},
       make_induction},
      {{"sort",
        "n = (T-1)/2 random tokens in [0, V-1), the separator V-1, then the same tokens sorted; the separator "
        "and the sorted positions predict the next sorted token",
        "content-based heads: each sorted position attends to the list token that comes next in order", 10, 11},
       make_sort},
      {{"modular-addition", "[a, b, =] with p = V-1, a and b in [0, p), '=' the token p; target (a + b) mod p at '='",
        "heads at '=' attend to both operands a and b (the sum itself is computed by the MLP)", 24, 3},
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
  constexpr uint64_t kEvalStream = 0x6576616c00000000ULL;  // "eval"
  core::Generator gen(seed ^ kEvalStream);
  return sample(rows, gen);
}

Batch Task::eval_slice(int64_t first, int64_t count, uint64_t seed) {
  if (first != 0)
    throw std::invalid_argument("task " + name() + " draws its evaluation batch at once; it has no slice at " +
                                std::to_string(first));
  return eval_batch(count, seed);
}

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

std::unique_ptr<Task> make_task(const std::string& name, int64_t vocab, int64_t seq_len) {
  const Entry& entry = find_entry(name);
  need_vocab_at_most(name, vocab, kMaxToken, "tokens are 32-bit");
  return entry.make(vocab, seq_len);
}

}  // namespace headlab::train
