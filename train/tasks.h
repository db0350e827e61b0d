// Synthetic tasks: seeded sources of (tokens, targets) batches.
//
// Every task draws all of its randomness from the core::Generator passed to
// sample(), so a generator state gives the same batch on every machine and at
// every thread count. A target of -1 means "no target at this position"; the
// loss and the accuracy skip it.
//
// The tasks (V = vocab, T = seq-len, x_i the token at position i):
//   first-prev-pair   x_i uniform in [0, V); target at i >= 1 is x_0 * V + x_{i-1}
//                     (one class of V*V per ordered pair).
//   first-prev-sum    as above; target at i >= 1 is (x_0 + x_{i-1}) mod V.
//   previous          target at i >= 1 is x_{i-1}.
//   first             target at i >= 1 is x_0.
//   induction         a segment of L = T/4 distinct tokens occurs twice, at
//                     random offsets: filler before it, a random gap, the
//                     second occurrence, filler after (two uniform cut points
//                     split the T - 2L filler positions). Filler tokens are
//                     uniform over the tokens outside the segment. At every
//                     position i of the second occurrence but its last, the
//                     target is x_{i+1}: the token that followed the earlier
//                     copy of x_i. Its offset varies, so no head can find the
//                     copy from positions alone (hence V >= L + 1, T >= 12).
//   sort              n = (T-1)/2 tokens uniform in [0, V-1), the separator V-1,
//                     then the same tokens in ascending order; the separator and
//                     each sorted position except the last predict the next
//                     token (positions n .. 2n-1 predict x_{n+1} .. x_{2n}).
//   modular-addition  [a, b, =] with p = V-1, a and b uniform in [0, p), '=' the
//                     token p; the only target, at '=', is (a + b) mod p. Its
//                     p^2 pairs can be listed (all_examples) for a split.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "analysis/attend.h"
#include "core/random.h"

namespace headlab::train {

// Row-major [batch, seq_len] tokens and targets; target -1 = no target.
struct Batch {
  int64_t batch = 0, seq_len = 0;
  std::vector<int32_t> tokens, targets;
  // Row b's real length: its first lengths[b] positions are its sequence,
  // the rest padding (token 0, target -1), which every forward masks
  // (layers/padding_mask.h) and the head analysis leaves out. Empty: every
  // row is full (the synthetic tasks).
  std::vector<int32_t> lengths = {};
  // For the head analysis (Task::describe): user-defined patterns over these
  // rows (a data file's "attend", a task's roles), the roles the task
  // expects, and whether it defines sources (analysis/task_positions.h).
  std::vector<analysis::AttendPattern> attend = {};
  std::vector<analysis::ExpectedRole> roles = {};
  bool sources = false;
  // Row b's line in the data file it was read from (1-based), for messages
  // about the rows; empty for a task's rows.
  std::vector<int64_t> lines = {};
};

// A source of batches.
class Task {
 public:
  virtual ~Task() = default;
  virtual std::string name() const = 0;
  virtual int64_t vocab() const = 0;        // input tokens are in [0, vocab)
  virtual int64_t num_classes() const = 0;  // targets are in [0, num_classes) or -1
  virtual int64_t seq_len() const = 0;
  // Deterministic given the generator's state (and, for stateful sources such as
  // DataFile, their own position). Throws std::invalid_argument unless
  // 1 <= batch and batch * seq_len < 2^31.
  virtual Batch sample(int64_t batch, core::Generator& gen) = 0;

  // The sequences in eval_batch(rows, ...): `rows`, or fewer for a finite
  // source (a data file has at most its own).
  virtual int64_t eval_rows(int64_t rows) const { return rows; }
  // The fixed held-out batch of a run: eval_rows(rows) sequences, drawn from
  // an evaluation stream of `seed` of its own (never the training batches'),
  // so that every command evaluates a run on the same batch. A data file
  // gives its first sequences instead.
  virtual Batch eval_batch(int64_t rows, uint64_t seed);
  // Sequences [first, first + count) of that evaluation set, so that a large
  // one (a whole data file) can be scored a batch at a time. A synthetic
  // task's set is one draw: it gives only first = 0, as eval_batch(count,
  // seed), and throws std::invalid_argument otherwise.
  virtual Batch eval_slice(int64_t first, int64_t count, uint64_t seed);

  // A finite training source (a data file, a fixed training set): how many
  // sequences it serves in each epoch, which --batch 0 trains on at once.
  // 0: a stream that draws fresh examples.
  virtual int64_t size() const { return 0; }
  // Sequences [first, first + count) of a finite source in its fixed order,
  // without touching its position; throws std::invalid_argument for a range
  // outside [0, size()) (always, for a stream).
  virtual Batch rows(int64_t first, int64_t count) const;
  // Every distinct example, for a task with few enough to list (modular
  // addition's p^2 pairs, in the order a * p + b); nullopt otherwise.
  virtual std::optional<Batch> all_examples() const { return std::nullopt; }
  // How many different sequences sample() can produce, or a bound above it
  // (first-prev-pair: vocab^seq-len); infinity when unknown. A fixed
  // training set larger than this repeats itself and leaves nothing to hold out.
  virtual double distinct_sequences() const;

  // The corrupted input of activation patching (`headlab analyze --patch`):
  // the tokens of `batch` changed so that what the task needs is gone, the
  // targets kept. Deterministic given `gen`. The default, for every task
  // without its own: each sequence takes the tokens of the next one of the
  // batch (row b gets row (b + 1) mod B); with rows of different lengths, of
  // the next one at least as long (analysis/donors.h), its first n_b tokens.
  // A row without such a donor keeps its tokens.
  virtual std::vector<int32_t> corrupt(const Batch& batch, core::Generator& gen) const;
  // The roles the task needs heads to take, as the patterns that show them
  // (the catalog's, see task_catalog); none for a control task.
  virtual std::vector<analysis::ExpectedRole> expected_roles() const { return {}; }
  // Adds to `batch` what the head analysis needs beyond tokens and targets:
  // the task's patterns over its rows, expected_roles() and whether the task
  // defines sources. Keeps what the batch already has (a data file's
  // "attend"). Called on the evaluation batch.
  virtual void describe(Batch& batch) const;

  // One sentence saying how corrupt() changes the input.
  virtual std::string corruption() const { return next_row_corruption(); }
  // The default's sentence (a data file's too).
  static std::string next_row_corruption();

  // Where sample() is in a stream of its own beyond the generator (a data
  // file's epoch), for checkpoints: with the generator's state it makes the
  // next batches exactly reproducible. Synthetic tasks have none.
  struct Position {
    uint64_t epoch_seed = 0;  // seeds the current epoch's shuffle
    int64_t next = 0;         // index into the epoch order
  };
  virtual std::optional<Position> position() const { return std::nullopt; }
  // Goes back to a position(); throws std::invalid_argument if it does not
  // fit this task (or the task has none).
  virtual void set_position(const Position& position);

  // What a checkpoint records of a task read from a file, to refuse the file
  // once it has changed: its size and a 64-bit FNV-1a hash of its bytes.
  // Synthetic tasks have none.
  struct Fingerprint {
    uint64_t size = 0;
    uint64_t hash = 0;
    bool operator==(const Fingerprint&) const = default;
  };
  virtual std::optional<Fingerprint> fingerprint() const { return std::nullopt; }
  // The same of the file a task evaluates on instead of its own held-out
  // batch (--eval-data, FixedSets); none otherwise.
  virtual std::optional<Fingerprint> eval_fingerprint() const { return std::nullopt; }
  // The sizes read from a data file rather than given (--vocab, --classes,
  // --seq-len left at 0) and the lines that set them, for train.log and for
  // messages about them; "" when every size was given.
  virtual std::string inferred_sizes() const { return ""; }
};

// Task::eval_batch draws from a generator seeded with seed ^ kEvalStream,
// apart from initialization and the training batches.
inline constexpr uint64_t kEvalStream = 0x6576616c00000000ULL;  // "eval"

struct TaskInfo {
  std::string name;
  std::string definition;      // one line
  std::string expected_heads;  // one line: the head pattern training should produce
  // The roles the verdict looks for ("expected roles found: k of n"), as
  // patterns: built-in ones, or a user pattern the task emits (describe).
  std::vector<analysis::ExpectedRole> roles = {};
  int64_t default_vocab = 0;
  int64_t default_seq_len = 0;
};

// The model known to solve a task (eval accuracy >= target_accuracy; see
// docs/reproductions.md) when the default flags do not: its flags, and its
// --layers, below which a run that falls short is told to use them.
struct SuggestedModel {
  std::string flags;  // "--layers 2 --attn-only ..."
  int64_t layers = 0;
  double target_accuracy = 0.9;
};
// None when the default model solves the task (or `task` is unknown).
std::optional<SuggestedModel> suggested_model(const std::string& task);

// Every synthetic task, in the order `headlab tasks` lists them.
const std::vector<TaskInfo>& task_catalog();

// The catalog entry of `name`; throws UsageError listing the valid names.
const TaskInfo& task_info(const std::string& name);

// Builds a task. vocab and seq_len are always explicit (take the catalog's
// defaults when the user gave none). Throws UsageError for an unknown name (the
// message lists the valid ones) and for a vocab or seq-len the task cannot use
// (the message says what would fit).
std::unique_ptr<Task> make_task(const std::string& name, int64_t vocab, int64_t seq_len);

}  // namespace headlab::train
