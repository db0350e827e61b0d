// The folder of `headlab sweep --out DIR`: what marks it as a sweep's, and
// the lock that keeps two sweeps from writing it at once.
//
// DIR/.headlab ({"headlab": "sweep"}, the marker run folders have with
// "run") and DIR/sweep.lock, created by the first sweep (or shard) in the
// folder, are both: headlab replaces or deletes files only in a folder that holds them
// (and there only its own: config.json, sweep.json, sweep.html,
// data-files.json, shard-K-of-N.json and the runs' folders), and its POSIX record locks say
// who writes the folder. A sweep, --resume, --collect and --redraw hold the
// whole folder; a shard shares the folder with the other shards of its sweep
// and holds its own shard alone. The kernel releases a lock when its process
// ends, however it ends, so a lock is never stale.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "train/config.h"
#include "train/sweep_shard.h"

namespace headlab::train {

class SweepLock {
 public:
  // Locks DIR (which must exist) for a whole sweep, or for `shard` of one.
  // Throws UsageError naming the PID that holds a conflicting lock.
  SweepLock(const std::string& dir, std::optional<Shard> shard);
  ~SweepLock();
  SweepLock(const SweepLock&) = delete;
  SweepLock& operator=(const SweepLock&) = delete;

  // Runs f() while no other shard of the folder runs its own: for reading and
  // writing the files the shards share (config.json).
  template <class F>
  void exclusively(F&& f) {
    setup(true);
    try {
      f();
    } catch (...) {
      setup(false);
      throw;
    }
    setup(false);
  }

 private:
  void setup(bool lock);
  int fd_ = -1;
};

// Whether DIR holds the marker or the sweep.lock a headlab sweep wrote (or,
// from a headlab before them, a regular sweep.json that starts as headlab
// writes it). A folder marked as another kind (a run's) never is.
bool is_sweep_folder(const std::string& dir);

// Checks and creates the folder of a new sweep (`shard`: of a shard of one)
// and locks it. A folder that holds anything but no sweep is refused, with or
// without --force; one that holds a sweep needs `force`, unless a shard joins
// the other shards of its sweep.
// Creates the folder of one run of the sweep; a new or empty one gets the
// marker of a run folder, so that `headlab train --force` may write there
// beside the sweep's stdout.log.
void prepare_run_folder(const std::string& dir);

std::unique_ptr<SweepLock> prepare_sweep_folder(const std::string& dir, bool force, std::optional<Shard> shard);

// DIR/data-files.json: the sweep's --data and --eval-data files as they were
// when it started (its first shard, for a sharded sweep), so that the runs it
// starts later (--resume, another shard) train on the same bytes as the first
// ones. Also sweep.json's "data_files".
inline constexpr const char* kDataFilesName = "data-files.json";

// {"data": {"path", "size", "hash"}, "eval_data": {...}}: each file `config`
// names (absolute), as a checkpoint records it (train/checkpoint.h: its size
// and 64-bit FNV-1a hash), read now; {} for a sweep without files.
nlohmann::ordered_json data_files_record(const TrainConfig& config);

// A UsageError after `where` unless every file of `recorded`
// (data_files_record's) is `config`'s and has the recorded size and hash: it
// names the file, then and now, and the way out. Reads the files again.
void check_data_files(const nlohmann::json& recorded, const TrainConfig& config, const std::string& where);

}  // namespace headlab::train
