#include "train/dist.h"

#include <chrono>
#include <initializer_list>
#include <cstdlib>
#include <limits>
#include <memory>

#include <nlohmann/json.hpp>

#include "train/errors.h"

#ifdef HEADLAB_HAVE_MPI
#include <mpi.h>
#endif

namespace headlab::train::dist {
namespace {

bool g_failure_shared = false;
const World* g_world = nullptr;  // set by world()

// Times a collective into World::seconds_communicating.
class Timed {
 public:
  explicit Timed(double& total) : total_(total), start_(std::chrono::steady_clock::now()) {}
  ~Timed() { total_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count(); }
  Timed(const Timed&) = delete;
  Timed& operator=(const Timed&) = delete;

 private:
  double& total_;
  std::chrono::steady_clock::time_point start_;
};

#ifdef HEADLAB_HAVE_MPI
void check(int code, const char* what) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  throw std::runtime_error(std::string("MPI: ") + what + " failed: " + std::string(text, static_cast<std::size_t>(length)));
}

// Gathers every rank's `data` and sums them in rank order. An allgather and
// a fixed-order sum rather than MPI_Allreduce: the standard leaves the order
// of a reduction to the implementation (Open MPI's changes with the message
// size and the number of ranks), and this order is also exactly the one
// --micro-batches sums its slices in, so one process reproduces N bit for bit.
template <class T>
void gather_and_sum(std::span<T> data, int size, MPI_Datatype type) {
  if (data.empty()) return;
  std::vector<T> all(data.size() * static_cast<std::size_t>(size));
  check(MPI_Allgather(data.data(), static_cast<int>(data.size()), type, all.data(), static_cast<int>(data.size()), type,
                      MPI_COMM_WORLD),
        "MPI_Allgather");
  const std::size_t n = data.size();
  for (std::size_t i = 0; i < n; ++i) data[i] = all[i];
  for (int r = 1; r < size; ++r) {
    const T* part = all.data() + static_cast<std::size_t>(r) * n;
    for (std::size_t i = 0; i < n; ++i) data[i] += part[i];
  }
}

// Finalizes MPI when the program ends normally.
struct MpiSession {
  ~MpiSession() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Finalize();
  }
};
#endif

}  // namespace

const World& World::single() {
  static const World w(0, 1, false);
  return w;
}

bool launched_by_mpi() {
  // Open MPI's mpirun, and srun with PMIx or PMI-2.
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK"})
    if (std::getenv(name) != nullptr) return true;
  return false;
}

namespace {
int positive_variable(std::initializer_list<const char*> names) {
  for (const char* name : names)
    if (const char* value = std::getenv(name)) {
      const long n = std::strtol(value, nullptr, 10);
      if (n >= 1 && n <= 1 << 20) return static_cast<int>(n);
    }
  return 1;
}
}  // namespace

int processes_on_this_node() { return positive_variable({"OMPI_COMM_WORLD_LOCAL_SIZE", "PMIX_LOCAL_SIZE"}); }
int processes_in_job() { return positive_variable({"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"}); }

bool is_launcher_variable(const std::string& name_and_value) {
  for (const char* prefix : {"OMPI_", "PMIX_", "PMI_", "OPAL_", "ORTE_"})
    if (name_and_value.starts_with(prefix)) return true;
  return false;
}

const World& current_world() { return g_world != nullptr ? *g_world : World::single(); }

const World& world() {
#ifdef HEADLAB_HAVE_MPI
  static const World* w = []() -> const World* {
    if (!launched_by_mpi()) return &World::single();
    // OpenMP threads compute; only the main thread calls MPI.
    int provided = 0;
    check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
    static MpiSession session;
    // Errors come back as codes, turned into exceptions by check().
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    static const World mpi_world(rank, size, size > 1);
    return &mpi_world;
  }();
  g_world = w;
  return *w;
#else
  g_world = &World::single();
  return World::single();
#endif
}

void World::sum_in_rank_order(std::span<float> data) const {
  if (!mpi_) return;
#ifdef HEADLAB_HAVE_MPI
  Timed t(seconds_);
  gather_and_sum(data, size_, MPI_FLOAT);
#else
  (void)data;  // a build without MPI is always one process
#endif
}

void World::sum_in_rank_order(std::span<double> data) const {
  if (!mpi_) return;
#ifdef HEADLAB_HAVE_MPI
  Timed t(seconds_);
  gather_and_sum(data, size_, MPI_DOUBLE);
#else
  (void)data;  // a build without MPI is always one process
#endif
}

std::vector<int64_t> World::all_gather(int64_t value) const {
  std::vector<int64_t> out(static_cast<std::size_t>(size_), value);
  if (!mpi_) return out;
#ifdef HEADLAB_HAVE_MPI
  Timed t(seconds_);
  check(MPI_Allgather(&value, 1, MPI_INT64_T, out.data(), 1, MPI_INT64_T, MPI_COMM_WORLD), "MPI_Allgather");
#endif
  return out;
}

std::vector<std::string> World::all_gather(const std::string& text) const {
  if (!mpi_) return {text};
  std::vector<std::string> out(static_cast<std::size_t>(size_));
#ifdef HEADLAB_HAVE_MPI
  // The lengths first, so that texts of any lengths arrive whole.
  const std::vector<int64_t> lengths = all_gather(static_cast<int64_t>(text.size()));
  Timed t(seconds_);
  std::vector<int> counts(out.size()), offsets(out.size());
  int64_t total = 0;
  for (std::size_t r = 0; r < out.size(); ++r) {
    if (lengths[r] < 0 || total + lengths[r] > std::numeric_limits<int>::max())
      throw std::runtime_error("MPI: the ranks' texts do not fit one exchange");
    offsets[r] = static_cast<int>(total);
    counts[r] = static_cast<int>(lengths[r]);
    total += lengths[r];
  }
  std::string all(static_cast<std::size_t>(total), '\0');
  check(MPI_Allgatherv(text.data(), static_cast<int>(text.size()), MPI_CHAR, all.data(), counts.data(),
                       offsets.data(), MPI_CHAR, MPI_COMM_WORLD),
        "MPI_Allgatherv");
  for (std::size_t r = 0; r < out.size(); ++r)
    out[r] = all.substr(static_cast<std::size_t>(offsets[r]), static_cast<std::size_t>(counts[r]));
#endif
  return out;
}

int64_t World::max(int64_t value) const {
  if (!mpi_) return value;
#ifdef HEADLAB_HAVE_MPI
  Timed t(seconds_);
  int64_t out = value;
  check(MPI_Allreduce(&value, &out, 1, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD), "MPI_Allreduce");
  return out;
#else
  return value;
#endif
}

void World::barrier() const {
  if (!mpi_) return;
#ifdef HEADLAB_HAVE_MPI
  Timed t(seconds_);
  check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
#endif
}

void World::abort(int status) const {
#ifdef HEADLAB_HAVE_MPI
  if (mpi_) MPI_Abort(MPI_COMM_WORLD, status);
#endif
  std::_Exit(status);
}

int exit_status_of(const std::exception& e) {
  if (const auto* peer = dynamic_cast<const PeerFailure*>(&e)) return peer->exit_status;
  // User input that nlohmann could not read is a usage error too (main.cpp).
  return dynamic_cast<const UsageError*>(&e) != nullptr || dynamic_cast<const nlohmann::json::exception*>(&e) != nullptr
             ? 2
             : 1;
}

void mark_failure_shared() { g_failure_shared = true; }

bool failure_is_shared(const std::exception& e) {
  return g_failure_shared || dynamic_cast<const PeerFailure*>(&e) != nullptr ||
         dynamic_cast<const SharedError*>(&e) != nullptr;
}

}  // namespace headlab::train::dist
