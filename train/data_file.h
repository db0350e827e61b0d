// DataFile: a Task that serves sequences read from a JSONL file (`--data`).
//
// Format: one JSON object per line, {"tokens": [...], "targets": [...]}.
//   - "tokens": a non-empty array of integers in [0, vocab), at most seq-len long.
//   - "targets" (optional): an array of the same length, each -1 (no target) or
//     in [0, num_classes). Without it the targets are next-token: target[i] =
//     tokens[i+1], and the last position has none (-1). A line with no target
//     at all is read (eval and analyze take it), but a new training run
//     refuses it (make_task_to_train, train/run_builder.h).
//   - "attend" (optional): {"NAME": [...], ...}, user-defined head patterns
//     (analysis/attend.h) with one entry per position: a key position, a list
//     of key positions (the attention mass on the set counts), or null (the
//     query is not scored). Keys are positions of the line, and at most the
//     query's own position under causal attention. Every name is a pattern
//     scored for every head and an expected role of the run, so each must
//     give some query of some line a key: a pattern whose every entry is
//     null could never be scored, and is refused (naming it at the line it
//     first appears on). A line may lack a pattern other lines have.
//   - No other keys (a misspelt "target" would otherwise silently mean
//     next-token). Blank lines are skipped.
//   - A line is at most 1 MiB plus 64 bytes per position of seq-len (a file
//     without newlines cannot grow memory without bound; when seq-len is
//     inferred from the file, 65536 positions, 5 MiB). A line whose first
//     byte (after blanks and a byte order mark) is not '{' is refused at that
//     byte: a binary file given by mistake (/dev/zero, a checkpoint) costs
//     nothing.
//   - The file is read once, sizes to infer and all: it may be a pipe
//     (`eval --data <(cmd)`, `analyze --data /dev/stdin`), whose reads stay
//     stoppable (train/input_file.h).
// Every problem is a UsageError naming FILE:LINE and what is wrong.
//
// Batches: sequences in file order, wrapping around after the last one; with
// shuffle, each epoch is a fresh permutation drawn from the generator passed to
// sample(). Every row is padded to the model's seq-len with token 0 and target -1,
// so the padding never counts in the loss, and the batch records each row's
// length (Batch::lengths): every forward over a padded batch passes the
// padding mask, so no real position attends to padding, causal or
// bidirectional, and the head analysis scores only real positions.
#pragma once

#include <algorithm>
#include <nlohmann/json_fwd.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "core/random.h"
#include "train/epoch_order.h"
#include "train/tasks.h"

namespace headlab::train {

class DataFile final : public Task {
 public:
  // The model's sizes for the file; 0 for one read from the file as it is
  // parsed, in the same single pass (what --vocab, --classes and --seq-len
  // default to): one more than its largest token (and, as targets are
  // tokens unless the classes are given, than its largest target); the
  // classes are then the vocab; its longest sequence, at least
  // `least_seq_len`. A file whose seq-len is to be inferred has lines of at
  // most kInferredPositions positions' bytes.
  struct Sizes {
    int64_t vocab = 0, classes = 0, seq_len = 0;
    int64_t least_seq_len = 1;
  };
  // Reads and checks the whole file, once; throws UsageError on any problem.
  // causal: the model's attention, which "attend" keys must respect.
  DataFile(std::string path, Sizes sizes, bool shuffle = false, bool causal = true);
  // With every size given (each at least 1).
  DataFile(std::string path, int64_t vocab, int64_t num_classes, int64_t seq_len, bool shuffle = false,
           bool causal = true);

  // What the file needs: one more than its largest token and target, and its
  // longest sequence, with the lines (1-based) that set them: the first with
  // the largest token, the largest target, the longest sequence, for
  // messages about inferred sizes.
  struct Needs {
    int64_t vocab = 0, classes = 0, seq_len = 0;
    int64_t vocab_line = 0, classes_line = 0, seq_len_line = 0;
  };
  const Needs& needs() const { return needs_; }
  static constexpr int64_t kInferredPositions = int64_t{1} << 16;

  // The longest line a file read for `positions` tokens per sequence may have.
  static std::size_t max_line_bytes(int64_t positions);

  std::string name() const override { return "data:" + path_; }
  int64_t vocab() const override { return vocab_; }
  int64_t num_classes() const override { return num_classes_; }
  int64_t seq_len() const override { return seq_len_; }

  // The next `batch` sequences of the epoch order (wrapping into the next epoch).
  // Draws from gen only at the start of each epoch, and only when shuffling.
  Batch sample(int64_t batch, core::Generator& gen) override;

  int64_t size() const override { return static_cast<int64_t>(sequences_.size()); }
  // Sequences [first, first + count) in file order, without touching the epoch
  // position: for evaluation over the whole file.
  // Carries the file's "attend" patterns over those rows.
  Batch rows(int64_t first, int64_t count) const override;
  // The roles: one per "attend" pattern, called by its name.
  void describe(Batch& batch) const override;

  // The first min(rows, size()) sequences, whatever the seed.
  int64_t eval_rows(int64_t rows) const override { return std::min(rows, size()); }
  Batch eval_batch(int64_t rows, uint64_t seed) override;
  Batch eval_slice(int64_t first, int64_t count, uint64_t /*seed*/) override { return rows(first, count); }

  // The epoch's permutation is regenerated from epoch_seed (unused without
  // shuffle); next = size() means the epoch is finished.
  std::optional<Position> position() const override { return order_.position(); }
  void set_position(const Position& position) override;  // throws std::invalid_argument if next is out of [0, size()]

  std::optional<Fingerprint> fingerprint() const override { return fingerprint_; }
  const std::string& path() const { return path_; }

  // The lines without "targets", whose targets are the next token (eval and
  // analyze --data warn when the model learned other targets).
  int64_t lines_without_targets() const { return lines_without_targets_; }
  // The lines (1-based, in file order) none of whose positions has a target:
  // every target -1, or a single token without "targets". No training step
  // learns from them (a new run refuses them: make_task_to_train).
  std::vector<int64_t> lines_with_no_target() const;

  // Which of vocab, classes and seq-len were read from the file rather than
  // given, and the lines that set them: "vocab 5001, classes 5001 and seq-len
  // 8 inferred from FILE (largest target 5000 at line 11; longest sequence 8
  // tokens at line 1)", starting with "vocab " when the vocab was inferred;
  // "" when every size was given.
  std::string inferred_sizes() const override;

 private:
  // The longest sequence a line may hold while the seq-len is read from the file.
  static constexpr int64_t kMaxLinePositions = int64_t{1} << 24;
  // Reads the lines, each at most max_line_bytes(line_positions) long.
  void read(int64_t line_positions);
  void measure();  // needs_, from the sequences read

  struct Sequence {
    int64_t line = 0;  // in the file, 1-based (needs() names it)
    std::vector<int32_t> tokens, targets;
    // "attend": pattern index (into pattern_names_) -> keys per position.
    std::vector<std::pair<std::size_t, std::vector<std::vector<int32_t>>>> attend;
  };
  void parse_attend(const nlohmann::json& attend, Sequence& sequence, int64_t line_number, const std::string& where);

  void parse_line(const std::string& line, int64_t line_number);
  void fill_row(Batch& out, int64_t row, const Sequence& sequence) const;

  std::string path_;
  int64_t vocab_, num_classes_, seq_len_;
  bool causal_;
  std::vector<Sequence> sequences_;
  std::vector<std::string> pattern_names_;  // every "attend" name, in order of first appearance
  std::vector<int64_t> pattern_lines_;      // the line each first appears on
  std::vector<bool> pattern_keyed_;         // whether it gives some query a key
  EpochOrder order_{1, false};  // sized once the file is read
  Fingerprint fingerprint_;
  Sizes asked_;  // the sizes given: 0 for those read from the file
  Needs needs_;
  int64_t lines_without_targets_ = 0;
};

}  // namespace headlab::train
