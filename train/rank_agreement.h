// The processes of one job must train one run. Before step 1 every rank
// compares a fingerprint of what it is about to train -- the settings that
// must match, the model, the step it starts from and a hash of the state it
// starts from (weights, optimizer, data stream) -- so that a flag given to one
// rank only (an MPMD mpirun line: `-np 1 headlab train ... : -np 1 headlab
// train ...`) or ranks resuming different checkpoints stop at once with a
// message, instead of training different updates, exchanging gradient buffers
// of different lengths or waiting for each other forever.
#pragma once

#include <string>
#include <vector>

#include "train/dist.h"
#include "train/session.h"

namespace headlab::train {

struct FingerprintEntry {
  std::string key;    // as the message names it: "--d-model", "step", ...
  std::string value;  // as the message prints it
  // Follows from other entries (the model from the flags and the task, the
  // state hash from everything): named only when nothing else differs.
  bool derived = false;
};
using RunFingerprint = std::vector<FingerprintEntry>;

// What `session` trains: every config key as its flag except --threads (each
// host may use its own cores; the results do not depend on it), the resolved
// model, the step it starts from, and a hash of its weights, optimizer state
// and data stream.
RunFingerprint run_fingerprint(Session& session);

// "" when every rank's fingerprint is the same; else the differing keys with
// each rank's value ("--d-model is 16 on process 0, 32 on process 1"), at
// most five keys.
std::string disagreement(const std::vector<RunFingerprint>& by_rank);

// Collective: every rank compares its fingerprint with all the others'; on a
// difference every rank throws the same UsageError (a failure every rank
// knows of, so each exits 2 on its own).
void check_ranks_agree(const dist::World& world, const RunFingerprint& mine);

}  // namespace headlab::train
