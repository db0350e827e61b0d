// DataFile: a Task that serves sequences read from a JSONL file (`--data`).
//
// Format: one JSON object per line, {"tokens": [...], "targets": [...]}.
//   - "tokens": a non-empty array of integers in [0, vocab), at most seq-len long.
//   - "targets" (optional): an array of the same length, each -1 (no target) or
//     in [0, num_classes). Without it the targets are next-token: target[i] =
//     tokens[i+1], and the last position has none (-1).
//   - No other keys (a misspelt "target" would otherwise silently mean
//     next-token). Blank lines are skipped.
//   - A line is at most 1 MiB plus 64 bytes per position of seq-len (a file
//     without newlines, /dev/zero, cannot grow memory without bound).
// Every problem is a UsageError naming FILE:LINE and what is wrong.
//
// Batches: sequences in file order, wrapping around after the last one; with
// shuffle, each epoch is a fresh permutation drawn from the generator passed to
// sample(). Every row is padded to the model's seq-len with token 0 and target -1,
// so the padding never counts in the loss; under causal attention it cannot
// change the real positions either (it only comes after them).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "core/random.h"
#include "train/epoch_order.h"
#include "train/tasks.h"

namespace headlab::train {

class DataFile final : public Task {
 public:
  // vocab, num_classes and seq_len are the model's. Reads and checks the whole
  // file; throws UsageError on any problem.
  DataFile(std::string path, int64_t vocab, int64_t num_classes, int64_t seq_len, bool shuffle = false);

  // The sizes a file needs: one more than its largest token and target, and
  // its longest sequence (what --vocab, --classes and --seq-len default to).
  struct Needs {
    int64_t vocab = 0, classes = 0, seq_len = 0;
  };
  static Needs needs(const std::string& path);

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
  Batch rows(int64_t first, int64_t count) const override;

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

 private:
  struct Sequence {
    std::vector<int32_t> tokens, targets;
  };

  void parse_line(const std::string& line, int64_t line_number);
  void fill_row(Batch& out, int64_t row, const Sequence& sequence) const;

  std::string path_;
  int64_t vocab_, num_classes_, seq_len_;
  std::vector<Sequence> sequences_;
  EpochOrder order_{1, false};  // sized once the file is read
  Fingerprint fingerprint_;
};

}  // namespace headlab::train
