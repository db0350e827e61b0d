// `headlab sweep`: one `headlab train` process per run of the plan (the cross
// product of the listed values of any training flags, the head counts and the
// seeds; train/sweep_grid.h), up to --jobs at a time, each in its own run
// folder; then how often the heads specialized, per configuration and per
// value of each varied flag, on stdout, in sweep.json and in sweep.html.
//
// Here: the flags, the plan's files and what is printed. The processes are
// train/sweep_supervisor.h's, the folder and its lock train/sweep_folder.h's.
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <optional>

#include "analysis/heads_json.h"
#include "analysis/sweep_html.h"
#include "core/shortest.h"
#include "train/cli/cli.h"
#include "train/dist.h"
#include "train/errors.h"
#include "train/folder_kind.h"
#include "train/input_file.h"
#include "train/json_input.h"
#include "train/run_builder.h"
#include "train/run_folder.h"
#include "train/session.h"
#include "train/shell_word.h"
#include "train/signals.h"
#include "train/sweep.h"
#include "train/sweep_document.h"
#include "train/sweep_folder.h"
#include "train/sweep_grid.h"
#include "train/sweep_shard.h"
#include "train/sweep_supervisor.h"

namespace headlab::cli {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct SweepArgs {
  std::string config_file, seeds = "0-9", heads, out, resume, shard, collect, redraw;
  int jobs = 0;
  // Absent: the task's own target, else 0.99 (train::default_target_accuracy).
  std::optional<double> target_accuracy;
  double target_flag = 0;  // --target-accuracy's value, when given
  bool force = false;
  // The lists of the grid flags, by flag name ("lr" -> "1e-3,1e-2"); given ones only.
  std::map<std::string, std::string> grid;
};

// Training flags the sweep sets for every run itself.
const std::vector<std::string> kPerRunFlags = {"seed", "heads", "threads"};

// The training flags a sweep passes on: with a list (`grid`) or as they are.
std::vector<std::string> forwarded_flag_names(bool grid) {
  std::vector<std::string> names;
  train::TrainConfig config;
  train::TrainConfig::visit_fields(config, [&](const char* name, auto&, const char*) {
    if (std::find(kPerRunFlags.begin(), kPerRunFlags.end(), name) == kPerRunFlags.end() &&
        train::is_grid_flag(name) == grid)
      names.emplace_back(name);
  });
  return names;
}

int available_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return static_cast<int>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
}

std::string join(const std::vector<int64_t>& values) {
  std::string out;
  for (const int64_t v : values) out += (out.empty() ? "" : ",") + std::to_string(v);
  return out;
}

std::string format_seconds(double seconds) {
  char buf[32];
  if (seconds >= 60)
    std::snprintf(buf, sizeof buf, "%dm%02ds", static_cast<int>(seconds / 60), static_cast<int>(seconds) % 60);
  else
    std::snprintf(buf, sizeof buf, "%.1fs", seconds);
  return buf;
}

std::string trimmed_dir(std::string dir) {
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  return dir;
}

// The refusal of `dir`, given to `flag` (--resume, --collect, --redraw) and
// not a sweep's folder: no such folder, a run's (of a sweep, whose folder to
// give; or one of its own, which train --resume continues), an analysis's,
// or another, which lacks what a sweep's holds (`lacks`).
std::string not_a_sweep(const std::string& flag, const std::string& dir, const std::string& lacks) {
  std::error_code ec;
  const std::string given = flag + " " + dir;
  if (!fs::exists(dir, ec)) return given + ": no such sweep folder";
  const std::string kind = train::folder_kind(dir);
  if (kind == "run") {
    const std::string parent = fs::path(dir).lexically_normal().parent_path().string();
    if (train::folder_kind(parent.empty() ? "." : parent) == "sweep")
      return given + " is a run folder of a sweep, not the sweep's: give " + flag + " " +
             train::shell_word(parent.empty() ? "." : parent);
    return given + " is a run folder, not a sweep's: " +
           (flag == "--resume" ? "continue it with headlab train --resume " + train::shell_word(dir)
                               : "give the folder a sweep wrote (headlab sweep --out DIR)");
  }
  if (kind == "analysis")
    return given + " holds an analysis (heads.json, report.html), not a sweep: give the folder a sweep wrote";
  return given + ": not a sweep folder (" + lacks + "): give the folder a sweep wrote (headlab sweep --out DIR)";
}

// A JSON file of the sweep's own (sweep.json, a shard's file), read with the
// limits of user input.
nlohmann::json read_plan_file(const std::string& path, const std::string& flag) {
  constexpr std::size_t kMaxBytes = std::size_t{256} << 20;
  // Never a FIFO: the sweep blocks its stop signals (input_file.h).
  const std::string text =
      train::read_input(path, flag + ": " + path, kMaxBytes, "a sweep's files are the ones headlab wrote");
  if (text.size() > kMaxBytes) throw train::UsageError(flag + ": " + path + " is larger than a sweep's file can be");
  try {
    return train::parse_user_json(text);
  } catch (const std::exception& e) {
    throw train::UsageError(flag + ": " + path + " is not valid JSON (" + e.what() + ")");
  }
}

// Why a sweep reads a run's files only if they are regular files: it blocks
// its stop signals, so a FIFO planted in a run folder would hang it for good.
constexpr const char* kRunFileIsHeadlabs = "a run folder holds the files the sweep and its run wrote";

// The last non-empty line of a run's log: `headlab train` reports a failure
// there as one line. Read a block at a time, never waited on (input_file.h).
std::string last_line(const std::string& path) {
  std::string line, last;
  try {
    train::InputFile in(path, path, kRunFileIsHeadlabs);
    char block[1 << 16];
    while (const std::size_t got = in.read(block, sizeof block)) {
      for (std::size_t i = 0; i < got; ++i) {
        if (block[i] != '\n') {
          if (line.size() <= 300) line += block[i];  // enough to show
          continue;
        }
        if (line.find_first_not_of(" \t\r") != std::string::npos) last = line;
        line.clear();
      }
    }
  } catch (const train::UsageError& e) {
    std::error_code ec;
    return fs::exists(fs::symlink_status(path, ec)) ? e.what() : "";  // not a file: said instead of the line
  }
  if (line.find_first_not_of(" \t\r") != std::string::npos) last = line;
  if (last.size() > 300) last = last.substr(0, 300) + "...";
  return last;
}

struct Sweep {
  std::string dir;
  train::SweepPlan plan;
  train::TrainConfig config;  // shared by every run; seed, heads and the grid's flags vary
  int jobs = 1;               // at a time (for --collect: the shards' sum)
  int jobs_flag = 0;          // --jobs as given (0: one per core), kept for --resume
  // --resume: each run's status and wall time as the sweep.json read
  // recorded them, by folder, so that a run finished earlier keeps its time
  // rather than 0, and an interrupted one adds its earlier time to the rest.
  std::map<std::string, std::pair<std::string, double>> earlier;
  // Its data files as they were when it started (train::data_files_record).
  nlohmann::ordered_json data_files = nlohmann::ordered_json::object();
  // By configuration (SweepCell::name), the user patterns its runs' analysis
  // scores (a task's own, a data file's "attend"), as validate_plan found them.
  std::map<std::string, std::vector<std::string>> patterns;
  // A --task list's axis, if any: config.task is then the default, which no run trains on.
  const train::GridAxis* task_axis() const {
    for (const train::GridAxis& axis : plan.axes)
      if (axis.flag == "task") return &axis;
    return nullptr;
  }
  // The task, or the list's tasks joined by `sep`.
  std::string tasks(const std::string& sep) const {
    const train::GridAxis* axis = task_axis();
    if (axis == nullptr) return config.task;
    std::string out;
    for (const nlohmann::json& v : axis->values) out += (out.empty() ? "" : sep) + v.get<std::string>();
    return out;
  }
  std::string task() const { return config.data.empty() ? tasks(",") : "data"; }
  // What messages and sweep.html say the runs train on: the task(s), or the file.
  std::string trained_on() const {
    if (!config.data.empty()) return "data " + config.data;
    return task_axis() ? "tasks " + tasks(", ") : config.task;
  }
};

// DIR/config.json: the settings every run of the sweep reads (--config).
void write_config(const Sweep& sweep) {
  train::write_file_atomic(sweep.dir + "/config.json", train::to_json(sweep.config).dump(2) + "\n");
}

std::vector<std::string> train_argv(const Sweep& sweep, const train::SweepRun& run, bool resume) {
  const std::string folder = sweep.dir + "/" + run.dir;
  // An interrupted run of `sweep --resume` goes on from its checkpoint.
  if (resume && fs::exists(folder + "/checkpoint.safetensors"))
    return {"headlab", "train", "--resume", folder, "--threads", "1"};
  // --force: the sweep folder was checked already, and the run folder holds the sweep's stdout.log.
  std::vector<std::string> argv = {"headlab", "train",
                                   "--config", sweep.dir + "/config.json",
                                   "--out", folder, "--force",
                                   "--seed", std::to_string(run.seed),
                                   "--heads", std::to_string(run.heads),
                                   "--threads", "1"};
  for (const auto& [flag, value] : run.settings.items()) {
    if (value.is_boolean()) {
      // A switch takes no value of its own but --flag=false, which also
      // overrides a true in config.json.
      argv.push_back("--" + flag + (value.get<bool>() ? "=true" : "=false"));
      continue;
    }
    argv.push_back("--" + flag);
    argv.push_back(train::setting_text(value));
  }
  return argv;
}

// A run's heads.json (`file`); throws what is wrong with it, after "it".
analysis::RunAnalysis read_heads(const std::string& file) {
  constexpr std::size_t kMaxBytes = std::size_t{256} << 20;  // a heads.json is some kilobytes per head
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(file, ec))) throw std::runtime_error("it is missing");
  const std::string text = train::read_input(file, "it", kMaxBytes, kRunFileIsHeadlabs);
  if (text.size() > kMaxBytes) throw std::runtime_error("it is larger than a heads.json can be");
  return nlohmann::json::parse(text).get<analysis::RunAnalysis>();
}

// Reads a finished child's results into `run`.
void finish_run(const Sweep& sweep, train::SweepRun& run, int exit_code) {
  const std::string folder = sweep.dir + "/" + run.dir;
  run.exit_code = exit_code;
  if (run.exit_code == 0) {
    std::string file = folder + "/heads.json";  // the one being read
    try {
      const analysis::RunAnalysis heads = read_heads(file);
      train::record_analysis(run, heads);
      // The emergence steps: from the analyses logged during training, if any.
      file = folder + "/metrics.jsonl";
      train::record_history(run, train::read_metrics(file), heads);
    } catch (const std::exception& e) {
      run.status = train::RunStatus::failed;
      run.error = "cannot read " + file + ": " + train::without_json_prefix(e.what());
    }
  } else if (run.exit_code == 128 + SIGINT || run.exit_code == 128 + SIGTERM || run.exit_code == 128 + SIGHUP) {
    run.status = train::RunStatus::interrupted;
  } else {
    run.status = train::RunStatus::failed;
    const std::string why = last_line(folder + "/stdout.log");
    run.error = "exit status " + std::to_string(run.exit_code) + (why.empty() ? "" : ": " + why) + " (see " +
                folder + "/stdout.log)";
  }
}

// The plan's runs whose folders hold what the sweep did not make there: a
// config.json other than the plan's for that run (extended with `train
// --resume RUN --steps N`, edited), or a heads.json that scores other user
// patterns than the sweep's analysis (rewritten by `analyze RUN --pattern`),
// or was labelled with other label options (`analyze RUN --threshold`, ...:
// heads.json records them). Pooled, a configuration's rates would mix two
// settings: refused before any run starts, naming each run and what differs.
void check_runs_follow_plan(const Sweep& sweep, const std::vector<train::SweepRun>& plan, const std::string& where) {
  std::vector<std::string> problems;
  for (const train::SweepRun& run : plan) {
    const std::string folder = sweep.dir + "/" + run.dir;
    if (fs::is_regular_file(folder + "/config.json")) {
      train::TrainConfig planned = train::cell_config(sweep.config, run.cell());
      planned.seed = run.seed;
      const std::string path = folder + "/config.json";
      const std::vector<std::string> diff =
          train::run_departures(planned, stored_config_file(path, where + ": " + path));
      if (!diff.empty()) {
        std::string keys;
        for (std::size_t i = 0; i < diff.size() && i < 4; ++i) keys += (i ? ", " : "") + diff[i];
        problems.push_back(run.dir + " (the plan vs its config.json: " + keys + (diff.size() > 4 ? ", ..." : "") + ")");
        continue;
      }
    }
    if (!fs::exists(folder + "/heads.json")) continue;
    analysis::RunAnalysis heads;
    try {
      heads = read_heads(folder + "/heads.json");
    } catch (const std::exception&) {
      continue;  // a damaged heads.json: the run is run again (run_all)
    }
    if (const std::string options = analysis::label_options_departures(heads); !options.empty()) {
      problems.push_back(run.dir + " (its heads.json was labelled with " + options + ": `analyze " + folder +
                         "` with label options and without --out rewrote it; `headlab analyze " + train::shell_word(folder) +
                         "` writes the sweep's analysis again)");
      continue;
    }
    const auto expected = sweep.patterns.find(run.cell().name());
    if (expected == sweep.patterns.end()) continue;
    std::vector<std::string> extra;
    for (const analysis::PatternInfo& p : heads.user_patterns)
      if (std::find(expected->second.begin(), expected->second.end(), p.name) == expected->second.end())
        extra.push_back(p.name);
    if (!extra.empty()) {
      std::string names;
      for (const std::string& n : extra) names += (names.empty() ? "" : ", ") + n;
      problems.push_back(run.dir + " (its heads.json scores the pattern" + (extra.size() > 1 ? "s " : " ") + names +
                         ", which the sweep's analysis does not: `analyze " + folder + " --pattern` without --out "
                         "rewrote it; `headlab analyze " + train::shell_word(folder) + "` writes the sweep's analysis again)");
    }
  }
  if (problems.empty()) return;
  std::string list;
  for (std::size_t i = 0; i < problems.size() && i < 5; ++i) list += (i ? "; " : "") + problems[i];
  if (problems.size() > 5) list += "; and " + std::to_string(problems.size() - 5) + " more";
  throw train::UsageError(where + ": " + std::to_string(problems.size()) + " run folder" +
                          (problems.size() > 1 ? "s hold runs" : " holds a run") +
                          " the sweep's plan did not make, which it would pool with its own: " + list +
                          ". Move such a run folder out of the sweep folder: the sweep then trains that run again as "
                          "planned");
}

// Runs the plan, `sweep.jobs` at a time. Returns the first stop signal, or 0.
int run_all(const Sweep& sweep, std::vector<train::SweepRun>& plan, std::vector<bool>& started,
            const train::SweepSignals& signals, bool resume) {
  std::size_t finished = 0;
  const auto start = [&](std::size_t i) -> std::optional<train::ChildJob> {
    train::SweepRun& run = plan[i];
    const std::string folder = sweep.dir + "/" + run.dir;
    started[i] = true;
    // A run finished by an earlier sweep (--resume): its heads.json is
    // written last, after its final checkpoint. One whose results cannot be
    // read (a damaged heads.json) is run again: `train --resume` writes its
    // final analysis again, or trains it anew without a checkpoint.
    if (resume && fs::exists(folder + "/heads.json")) {
      finish_run(sweep, run, 0);
      if (const auto t = sweep.earlier.find(run.dir); t != sweep.earlier.end()) run.seconds = t->second.second;
      if (run.status == train::RunStatus::done) {
        std::fprintf(stderr, "[%zu/%zu] %s (finished earlier)\n", ++finished, plan.size(), train::run_line(run).c_str());
        return std::nullopt;
      }
      std::fprintf(stderr, "sweep: %s; running %s again\n", run.error.c_str(), run.dir.c_str());
      run.error.clear();
    }
    train::prepare_run_folder(folder);
    std::error_code ec;
    fs::remove(folder + "/heads.json", ec);  // a stale one from an earlier sweep must not count
    return train::ChildJob{train_argv(sweep, run, resume), folder + "/stdout.log"};
  };
  const auto done = [&](std::size_t i, const train::ChildExit& exit) {
    train::SweepRun& run = plan[i];
    run.seconds = exit.seconds;
    // A run stopped earlier went on from its checkpoint: its time is both parts'.
    if (const auto t = sweep.earlier.find(run.dir); t != sweep.earlier.end() && t->second.first == "interrupted")
      run.seconds += t->second.second;
    finish_run(sweep, run, exit.exit_code);
    std::fprintf(stderr, "[%zu/%zu] %s\n", ++finished, plan.size(), train::run_line(run).c_str());
  };
  return train::supervise(plan.size(), sweep.jobs, signals, start, done);
}

// sweep.json's settings as a reader is shown them: without the "task" of a
// --data sweep, the unused default's, which would name a task its runs never
// trained on (stored_config reads them back as the same config). The runs'
// config.json keeps every key: their checkpoints are compared key by key
// with it (train/run_identity.h).
nlohmann::json shown_settings(const train::TrainConfig& config) {
  nlohmann::json j = train::to_json(config);
  if (!config.data.empty()) j.erase("task");
  return j;
}

// The plan's keys of sweep.json and of a shard's file, compared by --collect.
nlohmann::ordered_json plan_json(const Sweep& sweep) {
  return {{"task", sweep.task()},
          {"seeds", sweep.plan.seeds},
          {"heads", sweep.plan.heads},
          {"grid", train::grid_json(sweep.plan.axes)},
          {"target_accuracy", sweep.plan.target_accuracy},
          {"data_files", sweep.data_files}};
}

nlohmann::ordered_json sweep_json(const Sweep& sweep, const std::vector<train::SweepRun>& runs, std::size_t planned,
                                  double seconds, bool interrupted) {
  const double target = sweep.plan.target_accuracy;
  nlohmann::ordered_json run_list = nlohmann::ordered_json::array(), config_list = nlohmann::ordered_json::array(),
                         flag_list = nlohmann::ordered_json::array();
  for (const train::SweepRun& r : runs) run_list.push_back(train::run_json(r, target));
  const std::vector<train::SweepCell> cells = sweep.plan.cells();
  for (const train::ConfigSummary& c : train::summarize(runs, cells, target)) config_list.push_back(train::config_json(c));
  for (const std::string& flag : sweep.plan.varied()) {
    std::vector<nlohmann::json> values;
    if (flag == "heads")
      for (const int64_t h : sweep.plan.heads) values.emplace_back(h);
    for (const train::GridAxis& axis : sweep.plan.axes)
      if (axis.flag == flag) values = axis.values;
    flag_list.push_back(train::flag_json(train::summarize_flag(runs, flag, values, target)));
  }
  nlohmann::ordered_json out = {{"format", "headlab-sweep/1"}};
  out.update(plan_json(sweep));
  out.update(nlohmann::ordered_json{{"jobs", sweep.jobs},
                                    {"jobs_flag", sweep.jobs_flag},
                                    {"planned_runs", planned},
                                    {"seconds", std::round(seconds * 1e3) / 1e3},
                                    {"interrupted", interrupted},
                                    {"config", nlohmann::ordered_json(shown_settings(sweep.config))},
                                    {"runs", run_list},
                                    {"configs", config_list},
                                    {"flags", flag_list}});
  return out;
}

// Writes DIR/sweep.json and DIR/sweep.html (the page shows the same document);
// returns the path of sweep.json.
std::string write_summary(const Sweep& sweep, const nlohmann::ordered_json& document) {
  const std::string json_path = sweep.dir + "/sweep.json";
  train::write_file_atomic(json_path, document.dump(2) + "\n");
  train::write_file_atomic(sweep.dir + "/sweep.html", analysis::sweep_html(document, "headlab sweep: " + sweep.trained_on()));
  return json_path;
}

// Prints the summary of `runs` (of `planned`) and returns the sweep's exit
// status: 128 + stop, 1 if a run failed, else 0.
int report(const Sweep& sweep, const std::vector<train::SweepRun>& runs, std::size_t planned, double seconds,
           int stop, const std::string& json_path) {
  const std::vector<train::ConfigSummary> configs =
      train::summarize(runs, sweep.plan.cells(), sweep.plan.target_accuracy);
  std::cout << '\n'
            << sweep.trained_on() << ": " << runs.size() << " of " << planned << " runs in " << format_seconds(seconds)
            << " (" << sweep.jobs << " at a time, " << sweep.config.steps << " steps each"
            << (stop != 0 ? "; stopped by signal " + std::to_string(stop) : std::string()) << ")\n\n"
            << train::summary_text(configs, sweep.plan.target_accuracy) << "\n"
            << fs::path(json_path).filename().string() << ": " << json_path << '\n';
  if (fs::path(json_path).filename() == "sweep.json")
    std::cout << "sweep.html: " << (fs::path(json_path).parent_path() / "sweep.html").string() << '\n';
  std::cout.flush();

  if (stop != 0) {
    std::fprintf(stderr, "headlab sweep: stopped by signal %d; continue with: headlab sweep --resume %s\n", stop,
                 train::shell_word(sweep.dir).c_str());
    return 128 + stop;
  }
  std::size_t failed = 0;
  for (const train::SweepRun& r : runs) failed += r.status == train::RunStatus::done ? 0 : 1;
  if (failed > 0) {
    std::fprintf(stderr, "headlab sweep: %zu of %zu runs failed; their lines above (and their stdout.log) say why\n",
                 failed, runs.size());
    return 1;
  }
  return 0;
}

void validate_plan(Sweep& sweep);

// A run of a shard's file, checked (train::run_entry) and in this shard; a
// finished one's results read again, at full precision, from its heads.json.
train::SweepRun shard_run(const Sweep& sweep, const nlohmann::json& r, const std::vector<train::SweepRun>& plan,
                          const train::Shard& shard, const std::string& where) {
  train::RunEntry entry = train::run_entry(r, plan, where);
  if (!shard.holds(entry.index))
    throw train::UsageError(where + ": the run " + entry.run.dir + " is not one of shard " +
                            std::to_string(shard.index) + "'s");
  if (entry.run.status == train::RunStatus::done) finish_run(sweep, entry.run, 0);
  return entry.run;
}

// `headlab sweep --collect DIR`: the shards' files of DIR merged into
// DIR/sweep.json, as the unsharded sweep would have written it (the runs'
// results read again from their heads.json); jobs is the shards' sum,
// seconds the longest shard's. Every shard must have been trained with the
// same settings and plan. `locked`: the caller holds DIR's lock (mpirun's rank 0).
int collect_sweep(const std::string& dir_arg, bool locked) {
  const std::string dir = trimmed_dir(dir_arg);
  const std::string where = "--collect " + dir;
  // Before the lock, whose file would mark the folder as a sweep's.
  if (!fs::is_regular_file(dir + "/config.json") || !train::is_sweep_folder(dir))
    throw train::UsageError(not_a_sweep("--collect", dir, "no sweep.lock or config.json: the user's files"));
  std::unique_ptr<train::SweepLock> lock;
  if (!locked) lock = std::make_unique<train::SweepLock>(dir, std::nullopt);
  train::check_one_split(dir, where);
  std::map<int, std::pair<std::string, nlohmann::json>> shards;  // by K: the file's name and content
  int count = 0;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (!name.starts_with("shard-") || !name.ends_with(".json")) continue;
    const nlohmann::json j = read_plan_file(entry.path().string(), where);
    if (!j.is_object()) throw train::UsageError(where + ": " + name + " is not a shard's file");
    const int n = static_cast<int>(train::file_int(j, "shards", 1, train::kMaxShards, where + ": " + name));
    const int k = static_cast<int>(train::file_int(j, "shard", 1, n, where + ": " + name));
    if (name != train::shard_file_name({k, n}))
      throw train::UsageError(where + ": " + name + " says it is shard " + std::to_string(k) + " of " +
                              std::to_string(n) + " (" + train::shard_file_name({k, n}) + ")");
    (void)train::check_sweep_file(j, where + ": " + name);
    if (count != 0 && n != count)
      throw train::UsageError(where + ": shards of " + std::to_string(count) + " and of " + std::to_string(n) +
                              " sweeps are mixed in one folder");
    count = n;
    shards[k] = {name, j};
  }
  if (count == 0)
    throw train::UsageError(where + ": no shard-K-of-N.json files (run `headlab sweep --shard K/N --out " + train::shell_word(dir) +
                            "` first)");
  for (int k = 1; k <= count; ++k)
    if (shards.find(k) == shards.end())
      throw train::UsageError(where + ": shard " + std::to_string(k) + " of " + std::to_string(count) +
                              " is missing (" + train::shard_file_name({k, count}) + "); run it with --shard " +
                              std::to_string(k) + "/" + std::to_string(count));
  // The fingerprint of each shard: its training settings, every key as the
  // shard's runs train with it (a key stored before it existed reads as
  // stored_config reads it, so an older shard is not told apart by that
  // alone), and its plan.
  const auto fingerprint = [&where](const std::string& name, const nlohmann::json& j) {
    nlohmann::json f = j.contains("config") && j.at("config").is_object()
                           ? train::to_json(train::stored_config(j.at("config"), where + ": " + name + " \"config\""))
                           : nlohmann::json::object();
    for (const char* key : {"task", "seeds", "heads", "grid", "target_accuracy", "data_files"})
      f[std::string("plan ") + key] = j.contains(key) ? j.at(key) : nlohmann::json();
    return f;
  };
  const auto& [first_name, first] = shards.begin()->second;
  for (const auto& [k, shard] : shards) {
    const std::vector<std::string> diff =
        train::differing_keys(fingerprint(first_name, first), fingerprint(shard.first, shard.second));
    if (diff.empty()) continue;
    std::string keys;
    for (std::size_t i = 0; i < diff.size() && i < 6; ++i) keys += (i ? ", " : "") + diff[i];
    throw train::UsageError(where + ": " + shard.first + " was trained with other settings than " + first_name + " (" +
                            keys + (diff.size() > 6 ? ", ..." : "") +
                            "); every shard of a sweep needs the same flags: run it again with them, or into another --out");
  }
  Sweep sweep;
  sweep.dir = dir;
  if (!first.contains("config")) throw train::UsageError(where + ": " + first_name + " holds no \"config\"");
  sweep.config = train::stored_config(first.at("config"), where + ": " + first_name + " \"config\"");
  sweep.plan = train::plan_from_json(first, where + ": " + first_name);
  if (const auto files = first.find("data_files"); files != first.end() && files->is_object())
    sweep.data_files = *files;
  const std::vector<train::SweepRun> plan = sweep.plan.runs();
  // The patterns each configuration's analysis scores, as the shards found
  // them; a data file gone since (the runs' results stand) leaves only the
  // config.json check.
  try {
    validate_plan(sweep);
  } catch (const train::UsageError& e) {
    sweep.patterns.clear();
    std::fprintf(stderr, "sweep: the runs' heads.json are not checked for patterns the sweep's analysis does not "
                 "score: %s\n", e.what());
  }
  check_runs_follow_plan(sweep, plan, where);
  std::map<std::string, train::SweepRun> by_dir;
  double seconds = 0;
  bool interrupted = false;
  int64_t jobs = 0;
  for (const auto& [k, shard] : shards) {
    const std::string shard_where = where + ": " + shard.first;
    const nlohmann::json& j = shard.second;
    jobs += train::file_int(j, "jobs", 1, static_cast<int64_t>(train::kMaxSweepRuns), shard_where);
    const auto s = j.find("seconds");
    if (s != j.end() && s->is_number() && std::isfinite(s->get<double>())) seconds = std::max(seconds, s->get<double>());
    const auto stopped = j.find("interrupted");
    interrupted = interrupted || stopped == j.end() || !stopped->is_boolean() || stopped->get<bool>();
    if (!j.contains("runs") || !j.at("runs").is_array()) throw train::UsageError(shard_where + ": no \"runs\" list");
    for (const nlohmann::json& r : j.at("runs")) {
      train::SweepRun run = shard_run(sweep, r, plan, {k, count}, shard_where);
      if (!by_dir.emplace(run.dir, run).second)
        throw train::UsageError(shard_where + ": the run " + run.dir + " is listed twice");
    }
  }
  sweep.jobs = static_cast<int>(jobs);  // at most kMaxShards * kMaxSweepRuns
  std::vector<train::SweepRun> runs;
  for (const train::SweepRun& p : plan)
    if (const auto it = by_dir.find(p.dir); it != by_dir.end()) runs.push_back(it->second);
  const std::string json_path = write_summary(sweep, sweep_json(sweep, runs, plan.size(), seconds, interrupted));
  const int status = report(sweep, runs, plan.size(), seconds, 0, json_path);
  return interrupted && status == 0 ? 1 : status;
}

// `headlab sweep --redraw DIR`: DIR/sweep.html drawn again from DIR/sweep.json.
int redraw_sweep(const std::string& dir_arg) {
  const std::string dir = trimmed_dir(dir_arg);
  const std::string path = dir + "/sweep.json";
  if (!fs::is_regular_file(path)) throw train::UsageError(not_a_sweep("--redraw", dir, "no sweep.json"));
  const train::SweepLock lock(dir, std::nullopt);
  const nlohmann::json document = read_plan_file(path, "--redraw " + dir);
  // As --resume reads its plan and --collect the shards' runs: the page
  // draws nothing a sweep could not have written.
  (void)train::check_sweep_file(document, "--redraw " + dir + ": " + path);
  // As the sweep named it: its data file, else its task.
  const auto task = document.find("task");
  const nlohmann::json data = document.at("config").value("data", nlohmann::json());
  const std::string title =
      "headlab sweep: " + (data.is_string() && !data.get<std::string>().empty()
                               ? "data " + train::brief_text(data.get<std::string>())
                           : task != document.end() && task->is_string() ? train::brief_text(task->get<std::string>())
                                                                         : std::string("?"));
  train::write_file_atomic(dir + "/sweep.html", analysis::sweep_html(nlohmann::ordered_json(document), title));
  std::cout << "sweep.html: " << dir << "/sweep.html\n";
  return 0;
}

// Checks every configuration of the plan the way `headlab train` would, before
// anything runs, and notes the user patterns each one's analysis scores.
void validate_plan(Sweep& sweep) {
  sweep.plan.check_size("the sweep");
  const std::vector<train::SweepCell> cells = sweep.plan.cells();
  for (const train::SweepCell& cell : cells) {
    try {
      const train::TrainConfig c = train::cell_config(sweep.config, cell);
      c.validate();
      if (c.precision == "bf16") use_precision(c.precision);  // refused on a CPU without bf16 units
      const train::Session session(c);  // the task, its sizes and the model
      std::vector<std::string>& names = sweep.patterns[cell.name()];
      for (const analysis::AttendPattern& p : session.eval_batch().attend) names.push_back(p.name);
    } catch (const train::UsageError& e) {
      // Which part of a grid cannot train: --bidirectional true,false on a causal file, say.
      if (cells.size() == 1) throw;
      throw train::UsageError("the configuration " + cell.name() + " (one of the sweep's " +
                              std::to_string(cells.size()) + "): " + e.what());
    }
  }
}

// A sweep names its data files absolutely, as a run's config.json does
// (train::make_data_paths_absolute): --resume, --collect and the other
// shards find them from any folder, and compare them whatever their spelling.
// A list, or a file that cannot be opened, is refused first, named by its flag.
void name_data_files(train::TrainConfig& config, const ConfigFlags& flags, const std::string& config_file) {
  for (auto [flag, path] :
       {std::pair<const char*, std::string*>{"--data", &config.data}, {"--eval-data", &config.eval_data}}) {
    std::error_code ec;
    if (path->find(',') != std::string::npos && !fs::exists(*path, ec))
      throw train::UsageError(std::string(flag) + " '" + *path + "': a sweep trains on one " + flag +
                              " file, and a file name takes no list; run one sweep per file, each with its own --out");
  }
  check_data_paths(config, flags, config_file);
  train::make_data_paths_absolute(config);
}

// The plan of a stopped sweep (--resume DIR): its config.json and the
// sweep.json written when it started, checked as strictly as flags.
void read_resumed_plan(Sweep& sweep, const SweepArgs& args, bool jobs_given) {
  sweep.dir = trimmed_dir(args.resume);
  const std::string config_path = sweep.dir + "/config.json", plan_path = sweep.dir + "/sweep.json";
  if (!fs::is_regular_file(config_path) || !fs::is_regular_file(plan_path))
    throw train::UsageError(not_a_sweep("--resume", sweep.dir, "it needs config.json and sweep.json"));
  // As its runs so far trained: a folder from before the precision key, in f32.
  sweep.config = stored_config_file(config_path, "--resume " + sweep.dir + ": " + config_path);
  const nlohmann::json saved = read_plan_file(plan_path, "--resume " + sweep.dir);
  sweep.plan = train::plan_from_json(saved, "--resume " + sweep.dir + ": " + plan_path);
  // Timing only: a run without a readable time gets none, as before.
  if (const auto runs = saved.find("runs"); runs != saved.end() && runs->is_array())
    for (const nlohmann::json& r : *runs)
      if (r.is_object() && r.contains("dir") && r.at("dir").is_string() && r.contains("seconds") &&
          r.at("seconds").is_number() && std::isfinite(r.at("seconds").get<double>()) && r.at("seconds").get<double>() >= 0)
        sweep.earlier[r.at("dir").get<std::string>()] = {
            r.contains("status") && r.at("status").is_string() ? r.at("status").get<std::string>() : "",
            r.at("seconds").get<double>()};
  // The --jobs of the first sweep, unless given again (a sweep.json of an older headlab has none: one per core).
  // Before any run reads them: the files the sweep started on, unchanged (a
  // sweep from before the record is not checked).
  const std::string files_path = sweep.dir + "/" + train::kDataFilesName;
  if (fs::exists(files_path)) {
    sweep.data_files = read_plan_file(files_path, "--resume " + sweep.dir);
    train::check_data_files(sweep.data_files, sweep.config, "--resume " + sweep.dir);
  }
  sweep.jobs_flag = jobs_given || !saved.contains("jobs_flag")
                        ? args.jobs
                        : static_cast<int>(train::file_int(saved, "jobs_flag", 0, static_cast<int64_t>(train::kMaxSweepRuns),
                                                    "--resume " + sweep.dir + ": " + plan_path));
}

// The plan of a new sweep, from its flags.
void read_new_plan(Sweep& sweep, const SweepArgs& args, const ConfigFlags& flags) {
  if (!args.config_file.empty()) apply_config_file(sweep.config, args.config_file);
  flags.apply(sweep.config);
  // In the order of the training flags, so that a folder's name does not depend on the command line's.
  train::TrainConfig::visit_fields(sweep.config, [&](const char* name, auto&, const char*) {
    const auto it = args.grid.find(name);
    if (it == args.grid.end()) return;
    train::GridAxis axis = train::parse_grid_axis(name, it->second);
    if (axis.values.size() > 1) sweep.plan.axes.push_back(std::move(axis));
    else train::apply_json(sweep.config, {{name, axis.values.front()}}, "--" + std::string(name));
  });
  name_data_files(sweep.config, flags, args.config_file);
  sweep.config.threads = 1;
  if (args.target_accuracy && !(*args.target_accuracy > 0 && *args.target_accuracy <= 1))
    throw train::UsageError("--target-accuracy must be a fraction in (0, 1], like 0.99; got " +
                            core::shortest(*args.target_accuracy));
  sweep.plan.target_accuracy =
      args.target_accuracy.value_or(train::default_target_accuracy(sweep.config, sweep.plan.axes));
  sweep.plan.seeds = train::parse_int_list(args.seeds, "--seeds", 0, train::kMaxSweepRuns);
  sweep.plan.heads = args.heads.empty()
                         ? std::vector<int64_t>{sweep.config.model.heads}
                         : train::parse_int_list(args.heads, "--heads", 1, train::kMaxGridValues);
  for (const int64_t h : sweep.plan.heads)
    if (h > train::kMaxSweepHeads)
      throw train::UsageError("--heads '" + args.heads + "': " + std::to_string(h) + " is more than " +
                              std::to_string(train::kMaxSweepHeads) + " heads");
  sweep.jobs_flag = args.jobs;
}

// "lr 0.001,0.01 x layers 1,2 x heads 2 x seeds 0-2".
std::string plan_text(const Sweep& sweep, const std::string& seeds_text) {
  std::string out;
  for (const train::GridAxis& axis : sweep.plan.axes) {
    std::string values;
    for (const nlohmann::json& v : axis.values) values += (values.empty() ? "" : ",") + train::setting_text(v);
    out += axis.flag + " " + values + " x ";
  }
  return out + "heads " + join(sweep.plan.heads) + " x seeds " + seeds_text;
}

// A shard's settings must be those of the other shards in its folder, which
// may be running (they share config.json, which every run reads). Called
// under the folder's setup lock.
void write_shard_config(Sweep& sweep) {
  // The data files the first shard started on, unchanged.
  const std::string files_path = sweep.dir + "/" + train::kDataFilesName;
  if (fs::exists(files_path))
    train::check_data_files(read_plan_file(files_path, "--out " + sweep.dir), sweep.config, "--out " + sweep.dir);
  else
    train::write_file_atomic(files_path, sweep.data_files.dump(2) + "\n");
  const std::string path = sweep.dir + "/config.json";
  if (fs::is_regular_file(path)) {
    const train::TrainConfig theirs = stored_config_file(path, "--out " + sweep.dir + ": " + path);
    // The same data file by another spelling (a link) is the same file: named as the first shard named it.
    for (auto [mine, first] :
         {std::pair{&sweep.config.data, &theirs.data}, {&sweep.config.eval_data, &theirs.eval_data}}) {
      std::error_code ec;
      if (!mine->empty() && !first->empty() && fs::equivalent(*mine, *first, ec)) *mine = *first;
    }
    const nlohmann::json ours = train::to_json(sweep.config);
    const std::vector<std::string> diff = train::differing_keys(train::to_json(theirs), ours);
    if (!diff.empty()) {
      std::string keys;
      for (std::size_t i = 0; i < diff.size() && i < 6; ++i) keys += (i ? ", " : "") + diff[i];
      throw train::UsageError("--out " + sweep.dir + " holds a sweep with other settings (its config.json vs these: " +
                              keys + "); give the shards of one sweep the same flags, or use another --out");
    }
  }
  write_config(sweep);
}

int run_sweep(const SweepArgs& args, const ConfigFlags& flags, bool jobs_given) {
  if (!args.collect.empty() || !args.redraw.empty()) {
    const char* flag = args.collect.empty() ? "--redraw" : "--collect";
    if (!args.collect.empty() && !args.redraw.empty())
      throw train::UsageError("--collect and --redraw are two commands: give one of them");
    if (!args.shard.empty() || !args.out.empty() || !args.resume.empty() || !flags.given().empty() || !args.grid.empty())
      throw train::UsageError(std::string(flag) + " DIR works on the sweep already in DIR: it takes no --shard, --out, "
                              "--resume or training flags");
    return args.collect.empty() ? redraw_sweep(args.redraw) : collect_sweep(args.collect, false);
  }
  // First of all, before any thread exists: see train::SweepSignals.
  const train::SweepSignals signals;
  train::install_stop_handlers();
  // Under mpirun -np N, rank r runs shard r+1 of N and rank 0 collects.
  const train::dist::World& world = train::dist::world();

  Sweep sweep;
  std::string seeds_text = args.seeds;
  std::vector<train::SweepRun> plan;
  std::optional<train::Shard> shard;
  std::unique_ptr<train::SweepLock> lock;
  train::dist::all_or_none(world, [&] {
    if (!args.shard.empty()) shard = train::parse_shard(args.shard);
    if (world.size() > 1) {
      if (shard)
        throw train::UsageError("--shard and mpirun -np " + std::to_string(world.size()) +
                                " both split the sweep: give one of them");
      if (world.size() > train::kMaxShards)
        throw train::UsageError("mpirun -np " + std::to_string(world.size()) + ": a sweep has at most " +
                                std::to_string(train::kMaxShards) + " shards");
      shard = train::Shard{world.rank() + 1, world.size()};
    } else if (!shard) {
      shard = train::shard_from_slurm([](const char* name) -> const char* { return std::getenv(name); });
    }
    if (shard && !args.resume.empty())
      throw train::UsageError("--resume continues a sweep of one process; a sweep split into shards (--shard, a Slurm "
                              "job array or mpirun) is continued by running each unfinished shard again with --force");
    if (shard && args.out.empty())
      throw train::UsageError("a sweep split into shards (--shard, a Slurm job array or mpirun) needs --out: "
                              "every shard writes into the same folder");
    if (!args.resume.empty()) {
      read_resumed_plan(sweep, args, jobs_given);
      seeds_text = join(sweep.plan.seeds);
    } else {
      read_new_plan(sweep, args, flags);
    }
    if (sweep.jobs_flag < 0)
      throw train::UsageError("--jobs must be 0 (one per core) or more, got " + std::to_string(sweep.jobs_flag));
    validate_plan(sweep);
    plan = sweep.plan.runs();
    if (args.resume.empty()) sweep.data_files = train::data_files_record(sweep.config);
    if (!args.resume.empty()) {
      lock = std::make_unique<train::SweepLock>(sweep.dir, std::nullopt);
      check_runs_follow_plan(sweep, plan, "--resume " + sweep.dir);
      // The runs started now read config.json (--config), where a missing
      // key would take this process's default (HEADLAB_PRECISION's for the
      // precision): written again from the settings read, every key is the
      // sweep's own.
      write_config(sweep);
    } else {
      const std::string name = "sweep-" + (sweep.config.data.empty() ? sweep.tasks("+") : std::string("data"));
      sweep.dir = trimmed_dir(args.out.empty() ? train::default_run_dir(name) : args.out);
      // The shards share the folder (each overwrites only its own runs).
      lock = train::prepare_sweep_folder(sweep.dir, args.force, shard);
      if (shard) {
        lock->exclusively([&] {
          train::check_same_split(sweep.dir, *shard, "--out " + sweep.dir);
          write_shard_config(sweep);
        });
      } else {
        write_config(sweep);
        train::write_file_atomic(sweep.dir + "/" + train::kDataFilesName, sweep.data_files.dump(2) + "\n");
      }
    }
  });
  std::vector<train::SweepRun> mine;
  for (std::size_t i = 0; i < plan.size(); ++i)
    if (!shard || shard->holds(i)) mine.push_back(plan[i]);
  sweep.jobs = std::max(1, std::min<int>(sweep.jobs_flag > 0 ? sweep.jobs_flag : available_cores(),
                                         static_cast<int>(mine.size())));
  // The plan, so that a sweep stopped even by SIGKILL can be resumed (a
  // sharded sweep's sweep.json is written by --collect).
  if (!shard && args.resume.empty())
    train::write_file_atomic(sweep.dir + "/sweep.json", sweep_json(sweep, {}, plan.size(), 0, true).dump(2) + "\n");

  std::fprintf(stderr, "sweep%s: %zu run%s of %s (%s, %lld steps each), %d at a time -> %s\n",
               shard ? (" shard " + std::to_string(shard->index) + "/" + std::to_string(shard->count)).c_str() : "",
               mine.size(), mine.size() == 1 ? "" : "s", sweep.trained_on().c_str(), plan_text(sweep, seeds_text).c_str(),
               static_cast<long long>(sweep.config.steps), sweep.jobs, sweep.dir.c_str());
  const auto start = Clock::now();
  std::vector<bool> started(mine.size(), false);
  const int stop = run_all(sweep, mine, started, signals, !args.resume.empty());
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();

  std::vector<train::SweepRun> runs;
  for (std::size_t i = 0; i < mine.size(); ++i)
    if (started[i]) runs.push_back(mine[i]);
  if (!shard) {
    const std::string json_path = write_summary(sweep, sweep_json(sweep, runs, plan.size(), seconds, stop != 0));
    return report(sweep, runs, plan.size(), seconds, stop, json_path);
  }
  nlohmann::ordered_json file = sweep_json(sweep, runs, plan.size(), seconds, stop != 0);
  file["shard"] = shard->index;
  file["shards"] = shard->count;
  const std::string shard_path = sweep.dir + "/" + train::shard_file_name(*shard);
  train::write_file_atomic(shard_path, file.dump(2) + "\n");
  if (world.size() == 1) {
    const int status = report(sweep, runs, mine.size(), seconds, stop, shard_path);
    std::fprintf(stderr, "headlab sweep: shard %d of %d done; once all are, merge them with: headlab sweep --collect %s\n",
                 shard->index, shard->count, train::shell_word(sweep.dir).c_str());
    return status;
  }
  // Every rank's shard file is written; rank 0 merges them.
  int own = stop != 0 ? 128 + stop : 0;
  for (const train::SweepRun& r : runs) own = own != 0 ? own : (r.status == train::RunStatus::done ? 0 : 1);
  const int64_t worst = world.max(own);
  if (!world.is_root()) return own;
  const int status = collect_sweep(sweep.dir, true);
  return worst > status ? static_cast<int>(worst) : status;
}

}  // namespace

Command add_sweep(CLI::App& app) {
  auto args = std::make_shared<SweepArgs>();
  app.add_option("--seeds", args->seeds, "seeds to train, as numbers and ranges: 0-9, 0,3,5-7")
      ->capture_default_str();
  app.add_option("--heads", args->heads, "head counts to train, e.g. 1,2,4 (default: --config's, else 2)");
  app.add_option("--jobs", args->jobs, "runs at a time, each on one thread (0: one per core)")
      ->capture_default_str()
      ->check(in_range<int>());
  app.add_option("--target-accuracy", args->target_flag,
                 "evaluation accuracy a run must reach to count as trained (a fraction; default: the task's own "
                 "target where it defines one (" + train::task_targets_text() + "), else " +
                     core::shortest(train::kDefaultTargetAccuracy) + ")");
  app.add_option("--out", args->out, "the sweep folder (default: a fresh folder under runs/)");
  app.add_flag("--force", args->force, "run in a folder of an earlier sweep, overwriting its runs");
  app.add_option("--resume", args->resume,
                 "continue a stopped sweep in this folder with its settings: finished runs are kept, interrupted "
                 "ones resumed");
  app.add_option("--config", args->config_file, "a JSON file of training settings, as for `headlab train`")
      ->check(CLI::ExistingFile);
  app.add_option("--shard", args->shard,
                 "train only shard K of N: runs K, K+N, K+2N, ... of the plan (default: from "
                 "SLURM_ARRAY_TASK_ID and SLURM_ARRAY_TASK_COUNT in a Slurm job array)");
  app.add_option("--collect", args->collect, "merge the shards' files in this sweep folder into its sweep.json");
  app.add_option("--redraw", args->redraw, "write this sweep folder's sweep.html again from its sweep.json");
  auto flags = std::make_shared<ConfigFlags>(app, forwarded_flag_names(false));
  // The flags that take a list: bound as text, read by train::parse_grid_axis.
  auto grid_text = std::make_shared<std::map<std::string, std::string>>();
  const std::vector<std::string> grid_flags = forwarded_flag_names(true);
  train::TrainConfig defaults;
  train::TrainConfig::visit_fields(defaults, [&](const char* name, auto& field, const char* help) {
    if (std::find(grid_flags.begin(), grid_flags.end(), name) == grid_flags.end()) return;
    using T = std::decay_t<decltype(field)>;
    if constexpr (std::is_same_v<T, bool> || train::is_negated_v<T>) {
      // A switch: alone it is on, as for `headlab train`; given a value
      // (--attn-only true,false), it is a list like any other. CLI11 hands a
      // value-less option its default text: "true".
      app.add_option("--" + std::string(name), (*grid_text)[name],
                     std::string(help) + "; alone it is on; a list true,false (or on,off, 1,0) sweeps over it")
          ->expected(0, 1)
          ->default_str("true")
          ->option_text("[BOOL[,...]]");
    } else {
      std::string shown;
      if constexpr (std::is_same_v<T, std::string>) shown = field;
      else shown = CLI::detail::to_string(field);
      app.add_option("--" + std::string(name), (*grid_text)[name], std::string(help) + "; a comma list sweeps over it")
          ->type_name(std::is_same_v<T, std::string> ? "NAME[,...]" : "NUM[,...]")
          ->default_str(shown);
    }
  });
  app.footer(
      "Trains one run per configuration and seed as a separate `headlab train` process with --threads 1\n"
      "and the training flags given here. Every training flag that takes a number or a choice takes a\n"
      "comma list (whole numbers also ranges: --layers 1-3), and so does every switch (--attn-only\n"
      "true,false; alone it is on, as for train); the plan is the cross product:\n"
      "--lr 1e-3,1e-2 --layers 1,2 --seeds 0-2 is 2 x 2 configurations x 3 seeds = 12 runs. Each run\n"
      "goes into OUT/<varied flags and values>h{heads}-s{seed}/ (e.g. layers2-lr0.001-h2-s0, or\n"
      "attn-only-on-h2-s0; its output in stdout.log there), and a line is printed per finished run.\n"
      "Then, per configuration: the runs that finished, the share that reached --target-accuracy, the\n"
      "share whose heads specialized and the share that found the roles the task expects (the verdict\n"
      "of heads.json; n/a when the task expects none), the labels of all their heads and the mean\n"
      "scores per label, each share with its Wilson 95% interval. OUT/sweep.json holds all of it, with\n"
      "the rates per value of each varied flag, and OUT/sweep.html shows it (a chart per varied flag,\n"
      "emergence steps from the analyses every --analyze-every steps, final losses, a link to each\n"
      "run's report.html);\n"
      "`headlab sweep --redraw OUT` writes the page again. One sweep at a time writes a folder.\n"
      "SIGINT, SIGTERM and SIGHUP stop every run (each saves a checkpoint) and exit 128 + signal; the\n"
      "runs also stop when the sweep itself is killed. `headlab sweep --resume OUT` then continues with\n"
      "the same plan, settings and --jobs.\n"
      "Split over machines: `mpirun -np N headlab sweep ... --out OUT` (rank r runs every Nth run, rank 0\n"
      "writes sweep.json), or --shard K/N per job (OUT/shard-K-of-N.json each) and then --collect OUT,\n"
      "which refuses shards trained with different settings.\n\n"
      "Example: headlab sweep --task first-prev-pair --seeds 0-9 --heads 1,2,4 --lr 1e-3,3e-3 --steps 300");
  return [args, flags, grid_text, &app] {
    args->grid.clear();
    args->target_accuracy =
        app.count("--target-accuracy") > 0 ? std::optional<double>(args->target_flag) : std::nullopt;
    for (const auto& [name, text] : *grid_text)
      if (app.count("--" + name) > 0) args->grid[name] = text;
    if (!args->resume.empty()) {
      std::vector<std::string> given = flags->given();
      for (const auto& [name, text] : args->grid) given.push_back(name);
      for (const char* option : {"--seeds", "--heads", "--target-accuracy", "--out", "--force", "--config"})
        if (app.count(option) > 0) given.emplace_back(option + 2);
      if (!given.empty())
        throw train::UsageError("--resume continues a sweep with its own plan and settings: --" + given.front() +
                                " cannot be given with it (only --jobs can)");
    }
    return run_sweep(*args, *flags, app.count("--jobs") > 0);
  };
}

}  // namespace headlab::cli
