// Splitting a sweep's runs over processes or cluster jobs: `headlab sweep
// --shard K/N` trains every Nth run of the plan starting at the Kth, and
// `headlab sweep --collect DIR` merges the shards' files into sweep.json.
// Under mpirun -np N, rank r is shard r+1 of N.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "train/sweep.h"

namespace headlab::train {

// At most this many shards: a sweep has at most 10,000 runs (train/sweep_grid.h).
inline constexpr int kMaxShards = 10000;

struct Shard {
  int index = 1;  // 1 .. count
  int count = 1;
  bool holds(std::size_t run) const { return static_cast<int>(run % static_cast<std::size_t>(count)) == index - 1; }
};

// "2/4". A UsageError naming --shard and the text unless 1 <= K <= N <= kMaxShards.
Shard parse_shard(const std::string& text);

// The shard of a Slurm job array's task: SLURM_ARRAY_TASK_ID counted from
// SLURM_ARRAY_TASK_MIN (default 0) in steps of SLURM_ARRAY_TASK_STEP
// (default 1), of SLURM_ARRAY_TASK_COUNT; nullopt outside a job array.
// `getenv` is std::getenv in the program (tests pass their own).
std::optional<Shard> shard_from_slurm(const char* (*getenv)(const char*));

// "shard-2-of-4.json": the file a shard writes into the sweep folder.
std::string shard_file_name(const Shard& shard);
// The shard a file of that name is from; nullopt for any other name.
std::optional<Shard> shard_of_file_name(const std::string& name);

// The shard files in DIR by their split, the number of shards (N -> the
// files' names in the order of K). One folder holds one split of a sweep:
// --collect merges the files of one N.
std::map<int, std::vector<std::string>> shard_files(const std::string& dir);

// A UsageError, after `where`, when DIR holds shard files of another split
// than `shard`'s: a shard joins only the shards of its own N. It names those
// files and what to do.
void check_same_split(const std::string& dir, const Shard& shard, const std::string& where);

// A UsageError, after `where`, when DIR holds shard files of more than one
// split: it lists each split's files and shards missing, and which files to
// remove (those of every split but the one with the most shards done).
void check_one_split(const std::string& dir, const std::string& where);

// The status run_json wrote ("done", "failed", "interrupted").
RunStatus status_from_name(const std::string& name);

}  // namespace headlab::train
