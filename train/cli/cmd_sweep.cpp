// `headlab sweep`: one `headlab train` process per (head count, seed), up to
// --jobs at a time, each in its own run folder; then how often the heads
// specialized, per head count, on stdout, in sweep.json and in sweep.html.
//
// Runs are processes, not threads: each trains single-threaded and
// independently of the others, a crash stays in its folder, and SIGINT or
// SIGTERM reach every run through the same path as `headlab train`'s own.
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <sys/prctl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <cstdlib>
#include <iostream>
#include <map>
#include <optional>

#include "analysis/heads_json.h"
#include "analysis/sweep_html.h"
#include "core/shortest.h"
#include "train/cli/cli.h"
#include "train/errors.h"
#include "train/json_input.h"
#include "train/run_folder.h"
#include "train/session.h"
#include "train/dist.h"
#include "train/signals.h"
#include "train/sweep.h"
#include "train/sweep_shard.h"

namespace headlab::cli {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct SweepArgs {
  std::string config_file, seeds = "0-9", heads, out, resume, shard, collect;
  int jobs = 0;
  double target_accuracy = 0.99;
  bool force = false;
};

// Training flags the sweep sets for every run itself.
const std::vector<std::string> kPerRunFlags = {"seed", "heads", "threads"};

std::vector<std::string> forwarded_flag_names() {
  std::vector<std::string> names;
  train::TrainConfig config;
  train::TrainConfig::visit_fields(config, [&](const char* name, auto&, const char*) {
    if (std::find(kPerRunFlags.begin(), kPerRunFlags.end(), name) == kPerRunFlags.end()) names.emplace_back(name);
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

// The last non-empty line of a run's log: `headlab train` reports a failure
// there as one line.
std::string last_line(const std::string& path) {
  std::ifstream in(path);
  std::string line, last;
  while (std::getline(in, line))
    if (line.find_first_not_of(" \t\r") != std::string::npos) last = line;
  if (last.size() > 300) last = last.substr(0, 300) + "...";
  return last;
}

// A new sweep folder: refuses one that holds anything unless --force.
void prepare_sweep_folder(const std::string& dir, bool force) {
  std::error_code ec;
  if (fs::exists(dir, ec)) {
    if (!fs::is_directory(dir, ec)) throw train::UsageError("--out " + dir + " exists and is not a folder");
    if (!fs::is_empty(dir, ec) && !force)
      throw train::UsageError("--out " + dir + " is not empty; pass --force to run the sweep there anyway "
                              "(its runs' folders are overwritten)");
  }
  fs::create_directories(dir, ec);
  if (ec) throw train::UsageError("cannot create --out " + dir + ": " + ec.message());
  if (access(dir.c_str(), W_OK) != 0)
    throw train::UsageError("cannot write to --out " + dir + ": " + std::strerror(errno));
}

// The signals the sweep waits for with sigtimedwait. They are blocked in the
// sweep (threads started later inherit the mask) and unblocked in each child
// before exec.
sigset_t waited_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);
  sigaddset(&set, SIGCHLD);
  return set;
}

class SignalMask {
 public:
  SignalMask() {
    const sigset_t set = waited_signals();
    pthread_sigmask(SIG_BLOCK, &set, &old_);
  }
  // A pending SIGCHLD is then discarded, a pending SIGINT or SIGTERM goes to the stop handler.
  ~SignalMask() { pthread_sigmask(SIG_SETMASK, &old_, nullptr); }
  SignalMask(const SignalMask&) = delete;
  SignalMask& operator=(const SignalMask&) = delete;
  const sigset_t& old() const { return old_; }

 private:
  sigset_t old_;
};

// Starts `argv` as a child with stdin from /dev/null and stdout and stderr
// into `log_path`, under the signal mask `mask`.
pid_t spawn(const std::vector<std::string>& argv, const std::string& log_path, const sigset_t& mask) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  // A run of a sweep under mpirun is a process of its own, not a rank of the
  // sweep's job: it gets none of the launcher's variables.
  std::vector<char*> env;
  for (char** e = environ; *e != nullptr; ++e)
    if (!train::dist::is_launcher_variable(*e)) env.push_back(*e);
  env.push_back(nullptr);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error(std::string("sweep: cannot start a training process: ") + std::strerror(errno));
  if (pid == 0) {
    // The child: only async-signal-safe calls until exec. It gets SIGTERM
    // (a clean stop with a checkpoint) when the sweep dies, however it dies;
    // a sweep that died before this line is caught by the parent check.
    if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0 || getppid() != parent) _exit(128 + SIGTERM);
    const int out = open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    const int in = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (out < 0 || in < 0 || dup2(in, STDIN_FILENO) < 0 || dup2(out, STDOUT_FILENO) < 0 ||
        dup2(out, STDERR_FILENO) < 0)
      _exit(127);
    pthread_sigmask(SIG_SETMASK, &mask, nullptr);
    // This very program, even if the file was replaced since it started.
    execve("/proc/self/exe", args.data(), env.data());
    constexpr char kMessage[] = "headlab sweep: cannot execute /proc/self/exe\n";
    (void)!write(STDERR_FILENO, kMessage, sizeof kMessage - 1);
    _exit(127);
  }
  return pid;
}

// The running children; whatever happens to the sweep, none outlives it.
class Children {
 public:
  struct Child {
    pid_t pid;
    std::size_t run;  // index into the plan
    Clock::time_point start;
  };

  ~Children() {
    signal_all(SIGTERM);
    for (const Child& c : running_) {
      int status = 0;
      while (waitpid(c.pid, &status, 0) < 0 && errno == EINTR) {
      }
    }
  }

  void add(pid_t pid, std::size_t run) { running_.push_back({pid, run, Clock::now()}); }
  std::size_t size() const { return running_.size(); }
  void signal_all(int sig) const {
    for (const Child& c : running_) kill(c.pid, sig);
  }

  // Reaps the children that have exited: calls done(child, wait status).
  template <class F>
  void reap(F&& done) {
    for (std::size_t i = 0; i < running_.size();) {
      int status = 0;
      if (waitpid(running_[i].pid, &status, WNOHANG) == running_[i].pid) {
        const Child c = running_[i];
        running_.erase(running_.begin() + static_cast<std::ptrdiff_t>(i));
        done(c, status);
      } else {
        ++i;
      }
    }
  }

 private:
  std::vector<Child> running_;
};

struct Sweep {
  std::string dir;
  std::vector<int64_t> seeds, heads;
  train::TrainConfig config;  // shared by every run; seed and heads vary
  double target_accuracy = 0.99;
  int jobs = 1;
};

std::vector<std::string> train_argv(const Sweep& sweep, const train::SweepRun& run, bool resume) {
  const std::string folder = sweep.dir + "/" + run.dir;
  // An interrupted run of `sweep --resume` goes on from its checkpoint.
  if (resume && fs::exists(folder + "/checkpoint.safetensors"))
    return {"headlab", "train", "--resume", folder, "--threads", "1"};
  // --force: the sweep folder was checked already, and the run folder holds the sweep's stdout.log.
  return {"headlab", "train",
          "--config", sweep.dir + "/config.json",
          "--out", sweep.dir + "/" + run.dir, "--force",
          "--seed", std::to_string(run.seed),
          "--heads", std::to_string(run.heads),
          "--threads", "1"};
}

// Reads a finished child's results into `run`.
void finish_run(const Sweep& sweep, train::SweepRun& run, int status) {
  const std::string folder = sweep.dir + "/" + run.dir;
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 1;
  if (run.exit_code == 0) {
    try {
      std::ifstream in(folder + "/heads.json");
      if (!in) throw std::runtime_error("no heads.json");
      const auto result = nlohmann::json::parse(in).get<analysis::RunAnalysis>();
      train::record_analysis(run, result);
      // The emergence steps: from the analyses logged during training, if any.
      train::record_history(run, train::read_metrics(folder + "/metrics.jsonl"),
                            analysis::LabelOptions{}.score_threshold);
    } catch (const std::exception& e) {
      run.status = train::RunStatus::failed;
      run.error = std::string("cannot read ") + folder + "/heads.json: " + e.what();
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

// Runs the plan, `sweep.jobs` at a time. Returns the first stop signal, or 0.
int run_all(const Sweep& sweep, std::vector<train::SweepRun>& plan, std::vector<bool>& started,
            const SignalMask& mask, bool resume) {
  Children children;
  std::size_t next = 0, finished = 0;
  int stop = 0;
  const auto request_stop = [&](int sig) {
    if (stop == 0) {
      stop = sig;
      std::fprintf(stderr, "headlab sweep: signal %d: stopping the %zu running run(s); no new ones start\n", sig,
                   children.size());
    }
    children.signal_all(sig);
  };
  const sigset_t waited = waited_signals();
  while (true) {
    children.reap([&](const Children::Child& c, int status) {
      train::SweepRun& run = plan[c.run];
      run.seconds = std::chrono::duration<double>(Clock::now() - c.start).count();
      finish_run(sweep, run, status);
      ++finished;
      std::fprintf(stderr, "[%zu/%zu] %s\n", finished, plan.size(), train::run_line(run).c_str());
    });
    // A signal that reached a thread without the mask went to the stop handler.
    if (stop == 0 && train::stop_signal() != 0) request_stop(train::stop_signal());
    while (stop == 0 && next < plan.size() && children.size() < static_cast<std::size_t>(sweep.jobs)) {
      train::SweepRun& run = plan[next];
      const std::string folder = sweep.dir + "/" + run.dir;
      std::error_code ec;
      // A run finished by an earlier sweep (--resume): its heads.json is
      // written last, after its final checkpoint.
      if (resume && fs::exists(folder + "/heads.json")) {
        finish_run(sweep, run, 0);
        started[next++] = true;
        ++finished;
        std::fprintf(stderr, "[%zu/%zu] %s (finished earlier)\n", finished, plan.size(), train::run_line(run).c_str());
        continue;
      }
      fs::create_directories(folder, ec);
      if (ec) throw std::runtime_error("sweep: cannot create " + folder + ": " + ec.message());
      fs::remove(folder + "/heads.json", ec);  // a stale one from an earlier sweep must not count
      children.add(spawn(train_argv(sweep, run, resume), folder + "/stdout.log", mask.old()), next);
      started[next++] = true;
    }
    if (children.size() == 0) break;
    // Wakes on a child's exit or a stop signal; the timeout is a safety net.
    timespec timeout{0, 250'000'000};
    const int sig = sigtimedwait(&waited, nullptr, &timeout);
    if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP) request_stop(sig);
  }
  return stop;
}

nlohmann::ordered_json sweep_json(const Sweep& sweep, const std::vector<train::SweepRun>& runs,
                          const std::vector<train::ConfigSummary>& configs, std::size_t planned, double seconds,
                          bool interrupted) {
  nlohmann::ordered_json run_list = nlohmann::ordered_json::array(), config_list = nlohmann::ordered_json::array();
  for (const train::SweepRun& r : runs) run_list.push_back(train::run_json(r, sweep.target_accuracy));
  for (const train::ConfigSummary& c : configs) config_list.push_back(train::config_json(c));
  return {{"format", "headlab-sweep/1"},
          {"task", sweep.config.data.empty() ? sweep.config.task : "data"},
          {"seeds", sweep.seeds},
          {"heads", sweep.heads},
          {"target_accuracy", sweep.target_accuracy},
          {"jobs", sweep.jobs},
          {"planned_runs", planned},
          {"seconds", std::round(seconds * 1e3) / 1e3},
          {"interrupted", interrupted},
          {"config", nlohmann::ordered_json(train::to_json(sweep.config))},
          {"runs", run_list},
          {"configs", config_list}};
}

// Writes DIR/sweep.json and DIR/sweep.html (the page shows the same document);
// returns the path of sweep.json.
std::string write_summary(const Sweep& sweep, const std::string& dir, const nlohmann::ordered_json& document) {
  const std::string task = sweep.config.data.empty() ? sweep.config.task : "data";
  const std::string json_path = dir + "/sweep.json";
  train::write_file_atomic(json_path, document.dump(2) + "\n");
  train::write_file_atomic(dir + "/sweep.html", analysis::sweep_html(document, "headlab sweep: " + task));
  return json_path;
}

// Prints the summary of `runs` (of `planned`) and returns the sweep's exit
// status: 128 + stop, 1 if a run failed, else 0.
int report(const Sweep& sweep, const std::vector<train::SweepRun>& runs, std::size_t planned, double seconds,
           int stop, const std::string& json_path) {
  const std::string task = sweep.config.data.empty() ? sweep.config.task : "data";
  const std::vector<train::ConfigSummary> configs = train::summarize(runs, sweep.heads, sweep.target_accuracy);
  std::cout << '\n'
            << task << ": " << runs.size() << " of " << planned << " runs in " << format_seconds(seconds) << " ("
            << sweep.jobs << " at a time, " << sweep.config.steps << " steps each"
            << (stop != 0 ? "; stopped by signal " + std::to_string(stop) : std::string()) << ")\n\n"
            << train::summary_text(configs, sweep.target_accuracy) << "\n" << fs::path(json_path).filename().string()
            << ": " << json_path << '\n';
  if (fs::path(json_path).filename() == "sweep.json")
    std::cout << "sweep.html: " << (fs::path(json_path).parent_path() / "sweep.html").string() << '\n';
  std::cout.flush();

  if (stop != 0) {
    std::fprintf(stderr, "headlab sweep: stopped by signal %d; continue with: headlab sweep --resume %s\n", stop,
                 sweep.dir.c_str());
    return 128 + stop;
  }
  std::size_t failed = 0;
  for (const train::SweepRun& r : runs) failed += r.status == train::RunStatus::done ? 0 : 1;
  if (failed > 0) {
    std::fprintf(stderr, "headlab sweep: %zu of %zu runs failed; their stdout.log says why\n", failed, runs.size());
    return 1;
  }
  return 0;
}

std::vector<train::SweepRun> plan_of(const Sweep& sweep) {
  std::vector<train::SweepRun> plan;
  for (const int64_t h : sweep.heads)
    for (const int64_t s : sweep.seeds) {
      train::SweepRun run;
      run.heads = h;
      run.seed = s;
      run.dir = train::run_dir_name(h, s);
      plan.push_back(run);
    }
  return plan;
}

// `headlab sweep --collect DIR`: the shards' files of DIR merged into
// DIR/sweep.json, as the unsharded sweep would have written it (the runs'
// results read again from their heads.json); jobs is the shards' sum,
// seconds the longest shard's.
int collect_sweep(const std::string& dir_arg) {
  std::string dir = dir_arg;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  if (!fs::is_regular_file(dir + "/config.json"))
    throw train::UsageError("--collect " + dir + ": not a sweep folder (no config.json)");
  Sweep sweep;
  sweep.dir = dir;
  apply_config_file(sweep.config, dir + "/config.json");
  std::map<int, nlohmann::json> shards;
  int count = 0;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (!name.starts_with("shard-") || !name.ends_with(".json")) continue;
    nlohmann::json j;
    try {
      std::ifstream in(entry.path());
      j = nlohmann::json::parse(in);
      const int k = j.at("shard").get<int>(), n = j.at("shards").get<int>();
      if (count != 0 && n != count)
        throw train::UsageError("--collect " + dir + ": shards of " + std::to_string(count) + " and of " +
                                std::to_string(n) + " sweeps are mixed in one folder");
      count = n;
      shards[k] = std::move(j);
    } catch (const nlohmann::json::exception& e) {
      throw train::UsageError("--collect " + dir + ": " + name + " is not a shard's file (" + e.what() + ")");
    }
  }
  if (count == 0) throw train::UsageError("--collect " + dir + ": no shard-K-of-N.json files (run `headlab sweep --shard K/N --out " + dir + "` first)");
  for (int k = 1; k <= count; ++k)
    if (shards.find(k) == shards.end())
      throw train::UsageError("--collect " + dir + ": shard " + std::to_string(k) + " of " + std::to_string(count) +
                              " is missing (" + train::shard_file_name({k, count}) + "); run it with --shard " +
                              std::to_string(k) + "/" + std::to_string(count));
  std::map<std::string, train::SweepRun> by_dir;
  double seconds = 0;
  bool interrupted = false;
  sweep.jobs = 0;
  try {
    const nlohmann::json& first = shards.begin()->second;
    sweep.seeds = first.at("seeds").get<std::vector<int64_t>>();
    sweep.heads = first.at("heads").get<std::vector<int64_t>>();
    sweep.target_accuracy = first.at("target_accuracy").get<double>();
    for (const auto& [k, j] : shards) {
      if (j.at("seeds") != first.at("seeds") || j.at("heads") != first.at("heads"))
        throw train::UsageError("--collect " + dir + ": shard " + std::to_string(k) + " has other seeds or heads");
      sweep.jobs += j.at("jobs").get<int>();
      seconds = std::max(seconds, j.at("seconds").get<double>());
      interrupted = interrupted || j.at("interrupted").get<bool>();
      for (const nlohmann::json& r : j.at("runs")) {
        train::SweepRun run;
        run.heads = r.at("heads").get<int64_t>();
        run.seed = r.at("seed").get<int64_t>();
        run.dir = r.at("dir").get<std::string>();
        run.seconds = r.at("seconds").get<double>();
        const train::RunStatus status = train::status_from_name(r.at("status").get<std::string>());
        if (status == train::RunStatus::done) {
          finish_run(sweep, run, 0);  // the results, at full precision, from its heads.json
        } else {
          run.status = status;
          run.exit_code = r.at("exit_code").get<int>();
          run.error = r.at("error").get<std::string>();
        }
        by_dir[run.dir] = run;
      }
    }
  } catch (const train::UsageError&) {
    throw;
  } catch (const std::exception& e) {
    throw train::UsageError("--collect " + dir + ": a shard's file is not as `sweep --shard` writes it (" + e.what() + ")");
  }
  const std::vector<train::SweepRun> plan = plan_of(sweep);
  std::vector<train::SweepRun> runs;
  for (const train::SweepRun& p : plan)
    if (const auto it = by_dir.find(p.dir); it != by_dir.end()) runs.push_back(it->second);
  const std::vector<train::ConfigSummary> configs = train::summarize(runs, sweep.heads, sweep.target_accuracy);
  const std::string json_path =
      write_summary(sweep, dir, sweep_json(sweep, runs, configs, plan.size(), seconds, interrupted));
  const int status = report(sweep, runs, plan.size(), seconds, 0, json_path);
  return interrupted && status == 0 ? 1 : status;
}

int run_sweep(const SweepArgs& args, const ConfigFlags& flags) {
  if (!args.collect.empty()) {
    if (!args.shard.empty() || !args.out.empty() || !args.resume.empty() || !flags.given().empty())
      throw train::UsageError("--collect DIR merges the shards already in DIR: it takes no --shard, --out, --resume or "
                              "training flags");
    return collect_sweep(args.collect);
  }
  // First of all, before any thread exists: see waited_signals().
  const SignalMask mask;
  train::install_stop_handlers();
  // Under mpirun -np N, rank r runs shard r+1 of N and rank 0 collects.
  const train::dist::World& world = train::dist::world();

  Sweep sweep;
  std::string seeds_text = args.seeds;
  std::vector<train::SweepRun> plan;
  std::optional<train::Shard> shard;
  train::dist::all_or_none(world, [&] {
    if (!args.shard.empty()) shard = train::parse_shard(args.shard);
    if (world.size() > 1) {
      if (shard)
        throw train::UsageError("--shard and mpirun -np " + std::to_string(world.size()) +
                                " both split the sweep: give one of them");
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
      // The plan of the stopped sweep: its config.json and the sweep.json
      // written when it started.
      sweep.dir = args.resume;
      while (sweep.dir.size() > 1 && sweep.dir.back() == '/') sweep.dir.pop_back();
      const std::string plan_path = sweep.dir + "/sweep.json";
      if (!fs::is_regular_file(sweep.dir + "/config.json") || !fs::is_regular_file(plan_path))
        throw train::UsageError("--resume " + sweep.dir + ": not a sweep folder (it needs config.json and sweep.json)");
      apply_config_file(sweep.config, sweep.dir + "/config.json");
      try {
        std::ifstream in(plan_path);
        const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        const nlohmann::json saved = train::parse_user_json(text);
        sweep.seeds = saved.at("seeds").get<std::vector<int64_t>>();
        sweep.heads = saved.at("heads").get<std::vector<int64_t>>();
        sweep.target_accuracy = saved.at("target_accuracy").get<double>();
      } catch (const std::exception&) {
        throw train::UsageError("--resume " + sweep.dir + ": " + plan_path + " is not a sweep's plan");
      }
      seeds_text = join(sweep.seeds);
    } else {
      if (!args.config_file.empty()) apply_config_file(sweep.config, args.config_file);
      flags.apply(sweep.config);
      sweep.config.threads = 1;
      if (!(args.target_accuracy > 0 && args.target_accuracy <= 1))
        throw train::UsageError("--target-accuracy must be a fraction in (0, 1], like 0.99; got " +
                                core::shortest(args.target_accuracy));
      sweep.target_accuracy = args.target_accuracy;
      sweep.seeds = train::parse_int_list(args.seeds, "--seeds", 0);
      sweep.heads = args.heads.empty() ? std::vector<int64_t>{sweep.config.model.heads}
                                       : train::parse_int_list(args.heads, "--heads", 1, 1024);
    }
    if (args.jobs < 0) throw train::UsageError("--jobs must be 0 (one per core) or more, got " + std::to_string(args.jobs));
    // Every configuration must be one `headlab train` accepts, before anything runs.
    for (const int64_t h : sweep.heads) {
      train::TrainConfig c = sweep.config;
      c.model.heads = h;
      c.validate();
      (void)train::Session(c);  // the task, its sizes and the model
    }
    plan = plan_of(sweep);
    const std::string task = sweep.config.data.empty() ? sweep.config.task : "data";
    if (args.resume.empty()) {
      sweep.dir = args.out.empty() ? train::default_run_dir("sweep-" + task) : args.out;
      while (sweep.dir.size() > 1 && sweep.dir.back() == '/') sweep.dir.pop_back();
      // The shards share the folder (each overwrites only its own runs).
      prepare_sweep_folder(sweep.dir, args.force || shard.has_value());
      train::write_file_atomic(sweep.dir + "/config.json", train::to_json(sweep.config).dump(2) + "\n");
      // The plan, so that a sweep stopped even by SIGKILL can be resumed (a
      // sharded sweep's sweep.json is written by --collect).
      if (!shard)
        train::write_file_atomic(sweep.dir + "/sweep.json", sweep_json(sweep, {}, {}, plan.size(), 0, true).dump(2) + "\n");
    }
  });
  std::vector<train::SweepRun> mine;
  for (std::size_t i = 0; i < plan.size(); ++i)
    if (!shard || shard->holds(i)) mine.push_back(plan[i]);
  sweep.jobs = std::max(1, std::min<int>(args.jobs > 0 ? args.jobs : available_cores(), static_cast<int>(mine.size())));
  const std::string task = sweep.config.data.empty() ? sweep.config.task : "data";

  std::fprintf(stderr, "sweep%s: %zu run%s of %s (heads %s x seeds %s, %lld steps each), %d at a time -> %s\n",
               shard ? (" shard " + std::to_string(shard->index) + "/" + std::to_string(shard->count)).c_str() : "",
               mine.size(), mine.size() == 1 ? "" : "s", task.c_str(), join(sweep.heads).c_str(), seeds_text.c_str(),
               static_cast<long long>(sweep.config.steps), sweep.jobs, sweep.dir.c_str());
  const auto start = Clock::now();
  std::vector<bool> started(mine.size(), false);
  const int stop = run_all(sweep, mine, started, mask, !args.resume.empty());
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();

  std::vector<train::SweepRun> runs;
  for (std::size_t i = 0; i < mine.size(); ++i)
    if (started[i]) runs.push_back(mine[i]);
  const std::vector<train::ConfigSummary> configs = train::summarize(runs, sweep.heads, sweep.target_accuracy);
  if (!shard) {
    const std::string json_path =
        write_summary(sweep, sweep.dir, sweep_json(sweep, runs, configs, plan.size(), seconds, stop != 0));
    return report(sweep, runs, plan.size(), seconds, stop, json_path);
  }
  nlohmann::ordered_json file = sweep_json(sweep, runs, configs, plan.size(), seconds, stop != 0);
  file["shard"] = shard->index;
  file["shards"] = shard->count;
  const std::string shard_path = sweep.dir + "/" + train::shard_file_name(*shard);
  train::write_file_atomic(shard_path, file.dump(2) + "\n");
  if (world.size() == 1) {
    const int status = report(sweep, runs, mine.size(), seconds, stop, shard_path);
    std::fprintf(stderr, "headlab sweep: shard %d of %d done; once all are, merge them with: headlab sweep --collect %s\n",
                 shard->index, shard->count, sweep.dir.c_str());
    return status;
  }
  // Every rank's shard file is written; rank 0 merges them.
  int own = stop != 0 ? 128 + stop : 0;
  for (const train::SweepRun& r : runs) own = own != 0 ? own : (r.status == train::RunStatus::done ? 0 : 1);
  const int64_t worst = world.max(own);
  if (!world.is_root()) return own;
  const int status = collect_sweep(sweep.dir);
  return worst > status ? static_cast<int>(worst) : status;
}

}  // namespace

Command add_sweep(CLI::App& app) {
  auto args = std::make_shared<SweepArgs>();
  app.add_option("--seeds", args->seeds, "seeds to train, as numbers and ranges: 0-9, 0,3,5-7")
      ->capture_default_str();
  app.add_option("--heads", args->heads, "head counts to train, e.g. 1,2,4 (default: --config's, else 2)");
  app.add_option("--jobs", args->jobs, "runs at a time, each on one thread (0: one per core)")->capture_default_str();
  app.add_option("--target-accuracy", args->target_accuracy,
                 "evaluation accuracy a run must reach to count as trained (a fraction)")
      ->capture_default_str();
  app.add_option("--out", args->out, "the sweep folder (default: a fresh folder under runs/)");
  app.add_flag("--force", args->force, "run in an existing, non-empty --out folder, overwriting its runs");
  app.add_option("--resume", args->resume,
                 "continue a stopped sweep in this folder: finished runs are kept, interrupted ones resumed");
  app.add_option("--config", args->config_file, "a JSON file of training settings, as for `headlab train`")
      ->check(CLI::ExistingFile);
  app.add_option("--shard", args->shard,
                 "train only shard K of N: runs K, K+N, K+2N, ... of the plan (default: from "
                 "SLURM_ARRAY_TASK_ID and SLURM_ARRAY_TASK_COUNT in a Slurm job array)");
  app.add_option("--collect", args->collect, "merge the shards' files in this sweep folder into its sweep.json");
  auto flags = std::make_shared<ConfigFlags>(app, forwarded_flag_names());
  app.footer(
      "Trains one run per (head count, seed) as a separate `headlab train` process with --threads 1 and\n"
      "the training flags given here, into OUT/h{heads}-s{seed}/ (its output in stdout.log there), and\n"
      "prints a line per finished run. Then, per head count: the runs that finished, the share that\n"
      "reached --target-accuracy, the share whose heads specialized (the verdict of heads.json), the\n"
      "labels of all their heads and the mean scores per label, each share with its Wilson 95% interval.\n"
      "OUT/sweep.json holds all of it and OUT/sweep.html shows it (rates, labels, emergence steps from\n"
      "the analyses every --analyze-every steps, final losses, a link to each run's report.html).\n"
      "SIGINT, SIGTERM and SIGHUP stop every run (each saves a checkpoint) and exit 128 + signal; the\n"
      "runs also stop when the sweep itself is killed. `headlab sweep --resume OUT` then continues.\n"
      "Split over machines: `mpirun -np N headlab sweep ... --out OUT` (rank r runs every Nth run, rank 0\n"
      "writes sweep.json), or --shard K/N per job (OUT/shard-K-of-N.json each) and then --collect OUT.\n\n"
      "Example: headlab sweep --task first-prev-pair --seeds 0-9 --heads 1,2,4 --steps 300");
  return [args, flags, &app] {
    if (!args->resume.empty()) {
      std::vector<std::string> given = flags->given();
      for (const char* option : {"--seeds", "--heads", "--target-accuracy", "--out", "--force", "--config"})
        if (app.count(option) > 0) given.emplace_back(option + 2);
      if (!given.empty())
        throw train::UsageError("--resume continues a sweep with its own plan and settings: --" + given.front() +
                                " cannot be given with it (only --jobs can)");
    }
    return run_sweep(*args, *flags);
  };
}

}  // namespace headlab::cli
