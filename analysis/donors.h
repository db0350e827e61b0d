// Which row an intervention that takes another row's values takes them from
// (docs/head-metrics.md, "Interventions"): resample ablation (another row's
// head outputs) and the next-row corruption of activation patching (another
// row's tokens). Rows of a padded set have their own lengths, and a donor
// must be real at every real position of the row it gives to; a row's
// padding holds no value of its sequence.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace headlab::analysis {

enum class DonorRule {
  // Lengths >= the receiver's: in a causal model the first n positions of a
  // longer row are what the model computes on its first n tokens alone.
  at_least_as_long,
  // Lengths == the receiver's: in a bidirectional model every position of a
  // longer row reads that row's later tokens too.
  same_length,
};

// Resample ablation splices the donor's head outputs into the receiver's
// forward, so they must be what the model computes on an input like the
// receiver's: a causal model's first n positions of a longer row are, a
// bidirectional model's are not. Patching's next-row corruption instead runs
// the model on the donor's first n tokens, a forward of its own: any row at
// least as long serves (train/tasks.h, Task::corrupt).
inline DonorRule resample_rule(bool causal) {
  return causal ? DonorRule::at_least_as_long : DonorRule::same_length;
}

// donors[b]: the first row after b in the set's cyclic order (b + 1, ...,
// rows - 1, 0, ..., b - 1) whose length fits `rule`, or -1 when no other row
// does (never b itself). `lengths` [rows], or empty: every row is full, and
// row b's donor is (b + 1) mod rows. O(rows).
std::vector<int64_t> next_donors(std::span<const int32_t> lengths, int64_t rows, DonorRule rule);

// Where each row of a chunk takes its donor's values from, given the
// donors (in the set) of the chunk's rows [first, first + donors.size()):
// from[r] < n is the chunk's row from[r] (its donor, or r itself when it has
// none: a value no loss reads); from[r] >= n is outside[from[r] - n], a row of
// the set beyond the chunk, listed in the order first needed. A chunk of the
// whole set (first 0) has no row outside.
struct DonorRows {
  std::vector<int64_t> from, outside;
};
DonorRows donor_rows(std::span<const int64_t> donors, int64_t first);

// How many rows have a donor.
int64_t rows_with_donor(std::span<const int64_t> donors);

// `targets` [rows * seq_len] with every row that has no donor set to -1, so
// that an evaluation over them scores only the rows an intervention reached.
std::vector<int32_t> targets_with_donor(std::span<const int32_t> targets, int64_t seq_len,
                                        std::span<const int64_t> donors);

}  // namespace headlab::analysis
