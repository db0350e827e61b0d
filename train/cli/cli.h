// The `headlab` command line: one CLI11 app, one file per subcommand.
//
// Each subcommand registers its options with add_*() and returns a callable
// that runs it and returns the exit status. Errors are exceptions: a
// UsageError (or a CLI11 parse error) exits 2, anything else exits 1, always
// as one line on stderr.
#pragma once

#include <CLI/CLI.hpp>

#include <charconv>
#include <functional>
#include <limits>
#include <memory>
#include <string>

#include "train/config.h"

namespace headlab::layers {
struct ModelSpec;
}  // namespace headlab::layers
namespace headlab::train {
class Session;
}  // namespace headlab::train

namespace headlab::cli {

using Command = std::function<int()>;

Command add_train(CLI::App& app);
Command add_eval(CLI::App& app);
Command add_analyze(CLI::App& app);
Command add_tasks(CLI::App& app);
Command add_gradcheck(CLI::App& app);
Command add_sweep(CLI::App& app);
Command add_bench(CLI::App& app);

// Binds every TrainConfig field to a flag of `app` (--d-model ...). After
// parsing, apply() writes onto a config only the flags the user gave, so a
// --config file's values survive unless a flag overrides them.
class ConfigFlags {
 public:
  // `only`: if non-empty, bind just these flag names.
  explicit ConfigFlags(CLI::App& app, std::vector<std::string> only = {});
  void apply(train::TrainConfig& config) const;
  // Flag names the user gave on the command line.
  std::vector<std::string> given() const;

 private:
  CLI::App& app_;
  std::shared_ptr<train::TrainConfig> values_;
  std::vector<std::string> names_;
};

// For an unsigned flag: CLI11 reads "-1" into one as 2^64-1.
CLI::Validator non_negative();

// For a whole-number flag of type T: CLI11 saturates a number beyond T's
// range (--seed 99999999999999999999 would train with 2^64-1, unsaid).
template <class T>
CLI::Validator in_range() {
  return CLI::Validator(
      [](std::string& value) {
        T parsed{};
        if (std::from_chars(value.data(), value.data() + value.size(), parsed).ec != std::errc::result_out_of_range)
          return std::string();
        return "must be a whole number from " + std::to_string(std::numeric_limits<T>::min()) + " to " +
               std::to_string(std::numeric_limits<T>::max()) + ", got " + value;
      },
      "INRANGE");
}

// Prints a warning line on stderr, rank 0 only, for each setting of the
// session's config that does nothing in its run (TrainConfig::inert_settings)
// and for a head analysis so large it will be slow (slow_analysis_warning).
void warn_of_settings(train::Session& session);

// Selects the GEMM backend by name (UsageError naming --gemm if unknown).
void use_gemm_backend(const std::string& name);
// Sets the float32 GEMMs' precision by name ("f32" or "bf16"). A UsageError
// names --precision if unknown, and refuses bf16 on a CPU without bf16 units
// (core::cpu_has_native_bf16), where oneDNN would emulate it slowly.
void use_precision(const std::string& name);

// Sets the threads of headlab's kernels and returns the count. 0 picks it
// from the work of one training step of `flops_per_step` FLOPs
// (core::threads_for_work: 1 for a toy model, one per core for a larger
// one). More threads than cores only make every parallel region wait for a
// descheduled thread, so a larger --threads is capped at the cores, with a
// note on stderr. Under mpirun the work is each process's share of the
// step, and the cores are this machine's shared among its processes.
int use_threads(int requested, double flops_per_step);
// The FLOPs of one training step of a run of `config` whose model is `model`
// (a checkpoint's, resolved), on its batch. A full batch (--batch 0) is the
// task's training set, so the task is built to count it; otherwise nothing
// is read (a --data file is parsed by the command itself, once).
double train_flops_per_step(const train::TrainConfig& config, const layers::ModelSpec& model);
// use_threads for a session just built (its model and batch rows), recording
// the count picked in its config (config.json).
void use_threads_for(train::Session& session);

// Reads --config FILE.json onto `config` (UsageError on any problem);
// returns the keys it set.
std::vector<std::string> apply_config_file(train::TrainConfig& config, const std::string& path);
// Reads the config.json an earlier sweep wrote (train::stored_config: without
// a "precision" key, f32); UsageError on any problem, after `where`, which
// names the file.
train::TrainConfig stored_config_file(const std::string& path, const std::string& where);
// The config's data files (--data, --eval-data) checked before anything is
// read (train::check_data_path), each named by what gave it: its flag, or
// its key of --config `config_file` when the command line did not type it.
void check_data_paths(const train::TrainConfig& config, const ConfigFlags& flags, const std::string& config_file);

// Whether a stream may carry ANSI codes (colours, the progress bar): a
// terminal, NO_COLOR unset or empty, and no MPI launcher in between.
bool stdout_is_terminal();
bool stderr_is_terminal();

}  // namespace headlab::cli
