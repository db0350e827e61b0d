#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>

#include "core/gemm.h"
#include "core/threads.h"
#include "train/cli/cli.h"
#include "train/dist.h"
#include "train/errors.h"
#include "train/input_file.h"
#include "train/json_input.h"
#include "train/run_builder.h"
#include "train/session.h"

namespace headlab::cli {

CLI::Validator non_negative() {
  return CLI::Validator(
      [](std::string& value) {
        return value.find('-') == std::string::npos ? std::string() : "must be 0 or more, got " + value;
      },
      "NONNEGATIVE");
}

ConfigFlags::ConfigFlags(CLI::App& app, std::vector<std::string> only)
    : app_(app), values_(std::make_shared<train::TrainConfig>()) {
  train::TrainConfig::visit_fields(*values_, [&](const char* name, auto& field, const char* help) {
    if (!only.empty() && std::find(only.begin(), only.end(), name) == only.end()) return;
    names_.emplace_back(name);
    const std::string flag = "--" + std::string(name);
    if constexpr (train::is_negated_v<std::decay_t<decltype(field)>>) {
      app.add_flag(flag)->description(help);  // apply() reads it: the field is its negation
    } else if constexpr (std::is_same_v<std::decay_t<decltype(field)>, bool>) {
      app.add_flag(flag, field, help);
    } else if constexpr (std::is_same_v<std::decay_t<decltype(field)>, std::vector<double>>) {
      std::string shown;
      for (const double v : field) shown += (shown.empty() ? "" : ",") + CLI::detail::to_string(v);
      app.add_option(flag, field, help)->delimiter(',')->default_str(shown);
    } else if constexpr (std::is_same_v<std::decay_t<decltype(field)>, std::vector<std::string>>) {
      // Pattern names: repeatable, or a comma list (headlab.train(expect=[...]) passes one).
      app.add_option(flag, field, help)->delimiter(',')->type_name("NAME");
    } else if constexpr (std::is_unsigned_v<std::decay_t<decltype(field)>>) {
      // CLI11 reads "-1" into an unsigned field as 2^64-1.
      app.add_option(flag, field, help)->default_val(field)->check(non_negative())->check(
          in_range<std::decay_t<decltype(field)>>());
    } else if constexpr (std::is_integral_v<std::decay_t<decltype(field)>>) {
      CLI::Option* option = app.add_option(flag, field, help)->default_val(field);
      // --batch full: the whole training set, as 0.
      if (std::string(name) == "batch") option->transform(CLI::Transformer({{"full", "0"}}));
      option->check(in_range<std::decay_t<decltype(field)>>());
    } else {
      app.add_option(flag, field, help)->default_val(field);
    }
  });
}

std::vector<std::string> ConfigFlags::given() const {
  std::vector<std::string> out;
  for (const std::string& name : names_)
    if (app_.get_option("--" + name)->count() > 0) out.push_back(name);
  return out;
}

void ConfigFlags::apply(train::TrainConfig& config) const {
  const std::vector<std::string> flags = given();
  const train::TrainConfig& src = *values_;
  // Copy field by field: visit both configs in lockstep.
  train::TrainConfig::visit_fields(config, [&](const char* name, auto& dst, const char*) {
    if (std::find(flags.begin(), flags.end(), name) == flags.end()) return;
    if constexpr (train::is_negated_v<std::decay_t<decltype(dst)>>) {
      dst.field = !app_.get_option("--" + std::string(name))->as<bool>();
    } else {
      train::TrainConfig::visit_fields(src, [&](const char* other, const auto& value, const char*) {
        if constexpr (std::is_same_v<std::decay_t<decltype(dst)>, std::decay_t<decltype(value)>>)
          if (std::string(other) == name) dst = value;
      });
    }
  });
}

void use_gemm_backend(const std::string& name) {
  try {
    core::set_gemm_backend(core::parse_gemm_backend(name));
  } catch (const std::invalid_argument&) {
    throw train::UsageError("--gemm must be onednn or openblas, got '" + name + "'");
  }
}

void use_precision(const std::string& name) {
  core::GemmPrecision precision;
  try {
    precision = core::parse_gemm_precision(name);
  } catch (const std::invalid_argument&) {
    throw train::UsageError("--precision must be f32 or bf16, got '" + name + "'");
  }
  if (precision == core::GemmPrecision::bf16 && !core::cpu_has_native_bf16())
    throw train::UsageError(std::string("--precision bf16: ") + core::kNoBf16Units +
                            "; use --precision f32 (HEADLAB_PRECISION, if set, is the default)");
  core::set_gemm_precision(precision);
}

double train_flops_per_step(const train::TrainConfig& config, const layers::ModelSpec& model) {
  int64_t batch = config.batch;
  // Counted as 0 rows, a full-batch run's step looked like no work (1
  // thread). A task that cannot be built leaves the estimate at that: the
  // command reports why once it builds its run.
  if (batch == 0) {
    try {
      batch = train::make_task_for(config)->size();
    } catch (const std::exception&) {
    }
  }
  return model.resolved().train_flops_per_step(batch);
}

void use_threads_for(train::Session& session) {
  train::TrainConfig& config = session.config();
  config.threads = use_threads(config.threads, session.model().spec().train_flops_per_step(session.batch_rows()));
}

int use_threads(int requested, double flops_per_step) {
  // Under mpirun each process computes its slice of the batch, and the
  // processes on this machine share its cores: 2 processes on 2 cores at 2
  // threads each wait for one another in every parallel region.
  const int here = train::dist::processes_on_this_node();
  const int cores = std::max(1, core::hardware_threads() / here);
  if (requested == 0) requested = core::threads_for_work(flops_per_step / train::dist::processes_in_job());
  if (requested > cores) {
    const char* rank = std::getenv("OMPI_COMM_WORLD_RANK");
    if (rank == nullptr || std::string(rank) == "0") {
      if (here > 1)
        std::fprintf(stderr, "headlab: --threads %d is more than this process's share of the cores (%d cores, %d "
                     "processes here): using %d\n", requested, core::hardware_threads(), here, cores);
      else
        std::fprintf(stderr, "headlab: --threads %d is more than the %d core%s here: using %d\n", requested, cores,
                     cores == 1 ? "" : "s", cores);
    }
    requested = cores;
  }
  core::set_num_threads(requested);
  return requested;
}

void warn_of_settings(train::Session& session) {
  if (!train::dist::current_world().is_root()) return;  // under mpirun, once
  std::vector<std::string> warnings = session.config().inert_settings();
  const train::Batch& analyzed = session.eval_batch();
  if (std::string slow = train::slow_analysis_warning(session.model().spec(), analyzed.batch, analyzed.seq_len,
                                                         session.task().inferred_sizes());
      !slow.empty())
    warnings.push_back(std::move(slow));
  // A batch over a finite set's size wraps within the step: some sequences
  // count twice in one gradient, which --batch full never does.
  if (const int64_t size = session.task().size(); size > 0 && session.config().batch > size)
    warnings.push_back("--batch " + std::to_string(session.config().batch) + " is more than the " +
                       std::to_string(size) + " training sequences: each step holds some of them more than once " +
                       "(--batch full trains on each exactly once a step)");
  for (const std::string& warning : warnings) std::fprintf(stderr, "headlab train: warning: %s\n", warning.c_str());
}

namespace {

// The JSON of a config file, read with the limits of user input; messages
// start with `where`, which names the file.
nlohmann::json read_config_json(const std::string& path, const std::string& where) {
  // A config is a few hundred bytes; a bound keeps --config /dev/zero finite.
  // Read once: it may be a pipe (--config <(...)), and never hangs (input_file.h).
  constexpr std::size_t kMaxBytes = 1 << 20;
  const std::string text = train::read_input(path, where, kMaxBytes);
  if (text.size() > kMaxBytes)
    throw train::UsageError(where + ": the file is over " + std::to_string(kMaxBytes) +
                            " bytes, not a config of flag names and values");
  nlohmann::json j;
  try {
    j = train::parse_user_json(text);
  } catch (const std::invalid_argument& e) {
    throw train::UsageError(where + ": invalid JSON (" + e.what() + ")");
  }
  return j;
}

}  // namespace

void check_data_paths(const train::TrainConfig& config, const ConfigFlags& flags, const std::string& config_file) {
  const std::vector<std::string> typed = flags.given();
  for (const auto& [key, path] :
       {std::pair<std::string, const std::string*>{"data", &config.data}, {"eval-data", &config.eval_data}}) {
    if (path->empty()) continue;
    const bool flag = config_file.empty() || std::find(typed.begin(), typed.end(), key) != typed.end();
    train::check_data_path(flag ? "--" + key : "\"" + key + "\" of --config " + config_file, *path);
  }
}

std::vector<std::string> apply_config_file(train::TrainConfig& config, const std::string& path) {
  const std::string where = "--config " + path;
  const nlohmann::json j = read_config_json(path, where);
  train::apply_json(config, j, where);
  // A relative path in the file is read from the current folder, as on the
  // command line; one that names a file only beside the config was meant so.
  namespace fs = std::filesystem;
  for (const char* key : {"data", "eval-data", "init"}) {
    const auto it = j.find(key);
    if (it == j.end() || !it->is_string() || it->get<std::string>().empty()) continue;
    const fs::path named = it->get<std::string>(), beside = fs::path(path).parent_path() / named;
    std::error_code ec;
    if (named.is_relative() && !fs::exists(named, ec) && !beside.parent_path().empty() && fs::exists(beside, ec))
      throw train::UsageError(where + ": \"" + key + "\": \"" + named.string() +
                              "\" is read from the current folder, as on the command line, where there is no such "
                              "file; the config's folder has one: write \"" + beside.lexically_normal().string() +
                              "\", or an absolute path");
  }
  std::vector<std::string> keys;
  for (const auto& item : j.items()) keys.push_back(item.key());
  return keys;
}

train::TrainConfig stored_config_file(const std::string& path, const std::string& where) {
  return train::stored_config(read_config_json(path, where), where);
}

namespace {

// NO_COLOR (no-color.org), set to anything but "", asks for plain text. Under
// an MPI launcher a rank's stream may be a pseudo-terminal (Open MPI forwards
// output through one) whatever mpirun's own output is: plain text too.
bool ansi_allowed() {
  const char* no_color = std::getenv("NO_COLOR");
  return (no_color == nullptr || *no_color == '\0') && !train::dist::launched_by_mpi();
}

}  // namespace

bool stdout_is_terminal() { return isatty(STDOUT_FILENO) != 0 && ansi_allowed(); }
bool stderr_is_terminal() { return isatty(STDERR_FILENO) != 0 && ansi_allowed(); }

}  // namespace headlab::cli
