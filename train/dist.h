// The processes of one job: data-parallel training and sweeps over MPI.
//
// `mpirun -np N headlab train` (or srun) starts N processes, the ranks
// 0..N-1; world() is their communicator. A headlab started without a launcher
// is a world of one and never touches MPI, and a build without MPI
// (-DHEADLAB_MPI=OFF) has only that world. Nothing outside train/dist.cpp
// includes mpi.h.
//
// Every reduction here is in rank order, whatever order the messages arrive
// in: the result is the same bits on every rank and on every run.
#pragma once

#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace headlab::train::dist {

class World {
 public:
  // The single process: rank 0 of 1, no communication.
  static const World& single();

  int rank() const { return rank_; }
  int size() const { return size_; }
  bool is_root() const { return rank_ == 0; }

  // Replaces `data` (the same length on every rank) with its element-wise sum
  // over the ranks, added in rank order: ((r0 + r1) + r2) + ... Collective.
  void sum_in_rank_order(std::span<float> data) const;
  void sum_in_rank_order(std::span<double> data) const;
  // Every rank's `value`, by rank. Collective.
  std::vector<int64_t> all_gather(int64_t value) const;
  // Every rank's `text`, by rank; the lengths may differ. Collective.
  std::vector<std::string> all_gather(const std::string& text) const;
  // The largest `value` over the ranks. Collective.
  int64_t max(int64_t value) const;
  // Waits until every rank has reached it. Collective.
  void barrier() const;
  // Kills every rank of the job; the launcher exits with `status`.
  [[noreturn]] void abort(int status) const;

  // Seconds spent in the collectives above (the time a rank waits for the
  // slowest one included).
  double seconds_communicating() const { return seconds_; }

 private:
  friend const World& world();
  World(int rank, int size, bool mpi) : rank_(rank), size_(size), mpi_(mpi) {}

  int rank_ = 0, size_ = 1;
  bool mpi_ = false;
  mutable double seconds_ = 0;
};

// The job's world: on the first call, starts MPI if a launcher (mpirun,
// srun) started this process, else the single process. Throws
// std::runtime_error if MPI cannot start.
const World& world();
// world() if it has been called, else the single process (for error
// handling that must not start MPI).
const World& current_world();

// Whether this process was started by an MPI launcher (its environment says so).
bool launched_by_mpi();
// How many of the job's processes run on this machine (Open MPI's
// OMPI_COMM_WORLD_LOCAL_SIZE, PMIx's PMIX_LOCAL_SIZE), and how many in all
// (OMPI_COMM_WORLD_SIZE, PMI_SIZE): 1 and 1 without a launcher. Read from
// the launcher's variables, so they can be asked before MPI starts.
int processes_on_this_node();
int processes_in_job();
// The environment variables an MPI launcher gives its processes (prefixes);
// a child that must run on its own (a sweep's run) gets none of them.
bool is_launcher_variable(const std::string& name_and_value);

// Another rank failed; this one stops with the same exit status, and its
// message says which rank to read. Thrown on every rank that did not fail.
struct PeerFailure : std::runtime_error {
  PeerFailure(int rank, int status)
      : std::runtime_error("process " + std::to_string(rank) + " failed (its message says why)"),
        failed_rank(rank), exit_status(status) {}
  int failed_rank, exit_status;
};

// The exit status the CLI gives an exception: 2 for a UsageError, else 1.
int exit_status_of(const std::exception& e);

// Whether the error being handled is one every rank knows of (all_or_none
// agreed on it, or every rank threw it at the same step): each rank can then
// stop on its own. Any other error on one rank must abort the job, or the
// others would wait for it forever.
bool failure_is_shared(const std::exception& e);
void mark_failure_shared();

// Runs `work` on every rank, then all agree before going on: if it threw on
// any rank, the lowest rank that failed rethrows its own exception and every
// other rank throws PeerFailure. So a failure on one rank (a folder rank 0
// cannot create, a file one host cannot read) stops all of them at the same
// point instead of leaving the others waiting. Collective.
template <class F>
void all_or_none(const World& w, F&& work) {
  int status = 0;
  std::exception_ptr error;
  try {
    work();
  } catch (const std::exception& e) {
    status = exit_status_of(e);
    error = std::current_exception();
  }
  const std::vector<int64_t> statuses = w.all_gather(status);
  for (int r = 0; r < w.size(); ++r) {
    if (statuses[static_cast<std::size_t>(r)] == 0) continue;
    mark_failure_shared();
    if (r == w.rank()) std::rethrow_exception(error);
    throw PeerFailure(r, static_cast<int>(statuses[static_cast<std::size_t>(r)]));
  }
}

}  // namespace headlab::train::dist
