// The headlab command line: parses argv, runs one command, prints its failure
// as one line and returns the exit status. The headlab binary's main() and the
// Python package's headlab.train() both call it, so the same flags take the
// same code path.
#include "train/cli/command_line.h"

#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <exception>
#include <iostream>
#include <map>
#include <new>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "train/cli/cli.h"
#include "train/cli/version.h"
#include "train/decimal.h"
#include "train/dist.h"
#include "train/errors.h"
#include "train/json_input.h"
#include "train/nearest_name.h"
#include "train/signals.h"

namespace {

// Per thread: the Python package may run commands on several threads at once.
thread_local std::string last_error_line;
thread_local bool print_errors = true;

// Prints one error line on stderr (unless the caller raises it instead) and
// remembers it (last_error()).
void say(const std::string& line) {
  last_error_line = line;
  if (print_errors) std::fprintf(stderr, "%s\n", line.c_str());
}

// The CLI's promise is one line per error, whatever a message holds, and a
// line a person can read: a value quoted from a hostile file is cut short in
// its middle, so that the reason at the end of a message ("File name too
// long", how to fix it) is still said.
std::string one_line(std::string text) {
  constexpr std::size_t kHead = 700, kTail = 300;
  if (text.size() > kHead + kTail)
    text = text.substr(0, kHead) + " ... (" + std::to_string(text.size() - kHead - kTail) + " bytes left out) ... " +
           text.substr(text.size() - kTail);
  for (char& c : text)
    if (c == '\n' || c == '\r' || c == '\0') c = ' ';
  return text;
}

// "--d_model=64" -> "--d_model"; "" for anything that is not a long flag.
std::string long_flag(const std::string& arg) {
  if (!arg.starts_with("--") || arg.size() == 2) return "";
  return arg.substr(0, arg.find('='));
}

// What a flag of CLI11's type name takes ("INT", "UINT", "FLOAT"; a
// transform may add to the name).
std::string kind_of(const std::string& type) {
  if (type.starts_with("UINT")) return "a whole number, 0 or more (such as 7)";
  if (type.starts_with("INT")) return "a whole number (such as 100)";
  if (type.starts_with("FLOAT")) return "a number (such as 0.001 or 1e-3)";
  return "";
}

// Every integer flag of `sub` reads decimal only (train/decimal.h): CLI11
// reads with strtoll's base 0, which takes 0x10 as 16 and 010 as 8 (octal).
// A value in another base is refused; leading zeros are dropped, so that 010
// is 10 as in sweep's lists.
void read_integers_in_decimal(CLI::App& sub) {
  for (CLI::Option* o : sub.get_options()) {
    const std::string type = o->get_type_name();
    if (!type.starts_with("INT") && !type.starts_with("UINT")) continue;
    // A transform runs before the option's checks (in_range, --batch full).
    o->transform(CLI::Validator(
        [](std::string& value) {
          if (std::string why = headlab::train::non_decimal_integer(value); !why.empty()) return why;
          const std::size_t sign = value.starts_with('-') || value.starts_with('+') ? 1 : 0;
          if (value.size() > sign + 1 && value.find_first_not_of("0123456789", sign) == std::string::npos) {
            const std::size_t first = std::min(value.find_first_not_of('0', sign), value.size() - 1);
            value.erase(sign, first - sign);
          }
          return std::string();
        },
        "", "DECIMAL"));
  }
}

// CLI11 says "Could not convert: --steps = abc" for a value of the wrong kind
// and "--config: File does not exist: x.json" for a missing file: the flag,
// the value and what fits, in headlab's words. "" for other errors.
std::string value_message(const CLI::App& sub, const CLI::ParseError& e) {
  const std::string what = e.what();
  if (dynamic_cast<const CLI::ConversionError*>(&e) != nullptr) {
    const std::string lead = "Could not convert: ";
    const auto eq = what.find(" = ");
    if (!what.starts_with(lead) || eq == std::string::npos) return "";
    const std::string flag = what.substr(lead.size(), eq - lead.size()), value = what.substr(eq + 3);
    const CLI::Option* opt = sub.get_option_no_throw(flag);
    const std::string kind = opt != nullptr ? kind_of(opt->get_type_name()) : "";
    return flag + " '" + one_line(value) + "' is not " + (kind.empty() ? "a value it takes (see --help)" : kind);
  }
  if (dynamic_cast<const CLI::ValidationError*>(&e) != nullptr) {
    for (const auto& [said, meant] : {std::pair<std::string, std::string>{": File does not exist: ", ": no such file"},
                                      {": File is actually a directory: ", " is a folder; give a file"}}) {
      const auto colon = what.find(said);
      if (colon != std::string::npos)
        return what.substr(0, colon) + " " + one_line(what.substr(colon + said.size())) + meant;
    }
  }
  return "";
}

// An empty value (--data '', --dump-logits=) is never what a flag wants:
// CLI11 takes it, and the command would fall back to the flag's default
// without a word (train on the default task, write no dump). The message
// for the first one given, or "".
std::string empty_value(const std::string& flag) {
  return flag + " is given an empty value (''); give one, or drop the flag for its default";
}

std::string empty_value_message(const CLI::App& sub) {
  for (const CLI::Option* o : sub.get_options()) {
    if (o->get_items_expected_max() == 0) continue;  // a flag without a value
    const CLI::results_t& values = o->results();
    if (std::find(values.begin(), values.end(), std::string()) == values.end()) continue;
    if (o->get_lnames().empty()) return "the " + o->get_name() + " argument is empty; give one (see --help)";
    return empty_value("--" + o->get_lnames().front());
  }
  return "";
}

// A flag of `train` that `sweep` leaves out on purpose: why, and what does
// its job there; "" for any other flag. The nearest name would mislead here
// ("--threads (did you mean --heads?)").
std::string not_a_sweep_flag(const std::string& flag) {
  if (flag == "--threads")
    return "--threads is not a sweep flag: each run trains on one thread (train --threads 1), and --jobs N runs N "
           "of them at a time (0: one per core)";
  if (flag == "--quiet")
    return "--quiet is not a sweep flag: a sweep prints one line per run and its summary; each run's own output "
           "is in its folder's stdout.log";
  return "";
}

// CLI11 calls an unknown flag "The following arguments were not expected: 64
// --d_model" and a repeated one "At Most 1 required but received 2". Say
// which flag and how to fix it; "" leaves CLI11's message (a stray argument).
std::string usage_message(const CLI::App& sub, const std::vector<std::string>& args, const CLI::ParseError& e) {
  if (std::string m = value_message(sub, e); !m.empty()) return m;
  std::map<const CLI::Option*, int> times;
  for (const std::string& arg : args) {
    if (arg == "--") break;
    const std::string flag = long_flag(arg);
    if (flag.empty()) continue;
    const CLI::Option* opt = sub.get_option_no_throw(flag);
    // --data= : CLI11 says "1 required TEXT missing".
    if (opt != nullptr && arg == flag + "=" && dynamic_cast<const CLI::ArgumentMismatch*>(&e) != nullptr)
      return empty_value(flag);
    if (opt == nullptr && dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr) {
      if (sub.get_name() == "sweep")
        if (std::string why = not_a_sweep_flag(flag); !why.empty()) return why;
      std::vector<std::string> names;
      for (const CLI::Option* o : sub.get_options())
        for (const std::string& name : o->get_lnames()) names.push_back(name);
      const std::string near = headlab::train::nearest_name(flag.substr(2), names);
      return "unknown flag " + flag + (near.empty() ? " (see --help)" : " (did you mean --" + near + "?)");
    }
    if (opt != nullptr) ++times[opt];
  }
  if (dynamic_cast<const CLI::ArgumentMismatch*>(&e) != nullptr)
    for (const auto& [opt, n] : times)
      if (n > 1 && opt->get_items_expected_max() == 1)
        return opt->get_name() + " was given " + std::to_string(n) + " times; give it once";
  return "";
}

// Whether stdout is a pipe or socket whose reader has gone (`| head -1`
// read its line and exited): the writes failed with EPIPE, and poll()
// reports such a pipe's write end as in error whatever `error` (the errno
// of the last write) says.
bool stdout_reader_gone(int error) {
  if (error == EPIPE) return true;
  struct stat st {};
  if (::fstat(STDOUT_FILENO, &st) != 0 || !(S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode))) return false;
  pollfd out{STDOUT_FILENO, 0, 0};  // POLLERR and POLLHUP are reported unasked
  return ::poll(&out, 1, 0) == 1 && (out.revents & (POLLERR | POLLHUP)) != 0;
}

// A command's exit status once what it printed is flushed. A write that
// failed (`eval --json >/dev/full`) fails the command, said on stderr (exit
// 1), but a reader that went away is no failure of the command's: as a Unix
// tool killed by SIGPIPE, it exits 128 + SIGPIPE without a word. SIGPIPE
// itself is ignored, so that it never kills the process: by then every file
// the command writes is written whole (eval's dumps, analyze's heads.json
// and report.html, a sweep's sweep.json), as the command prints last; `train`
// meets the closed pipe at its next log line and stops as on a stop signal,
// with a checkpoint and the same status. `status`, the command's own, wins
// when it is not 0.
int exit_status(const std::string& command, int status) {
  std::cout.flush();
  if (std::cout.good() && std::fflush(stdout) == 0 && !std::ferror(stdout)) return status;
  const int error = errno;  // the failed write's, as far as errno still tells
  if (status != 0) return status;
  if (stdout_reader_gone(error)) return 128 + SIGPIPE;
  say("headlab" + (command.empty() ? "" : " " + command) + ": error: cannot write to standard output" +
      (error != 0 ? ": " + std::string(std::strerror(error)) : ""));
  return 1;
}

// Under mpirun every rank parses the same command line and meets the same
// usage error: rank 0 says it, the others stay quiet. Which rank this is, is
// MPI's to say: the launcher's variables alone (OMPI_COMM_WORLD_RANK,
// PMI_RANK, ...) may be stale, exported by hand or inherited from another
// job, and a process they call rank 1 is then the only one and must speak.
// So, as a valid command does, MPI starts when they are set, and a process
// the launcher did not start is a world of one.
bool another_rank_says_it() {
  if (!headlab::train::dist::launched_by_mpi()) return false;
  try {
    return !headlab::train::dist::world().is_root();
  } catch (const std::exception&) {
    return false;  // MPI did not start: this process is alone
  }
}

// Prints a command's failure as one line and returns its exit status. In a
// job of several processes (mpirun), rank 0 speaks for a failure every rank
// knows of; any other rank names itself, and a failure only it knows of
// aborts the job, or the other ranks would wait for it forever.
int fail(const std::string& command, const std::exception& e, int status, const std::string& message) {
  using namespace headlab::train;
  const dist::World& world = dist::current_world();
  const bool shared = world.size() == 1 || dist::failure_is_shared(e);
  if (world.is_root())
    say("headlab " + command + ": error: " + one_line(message));
  else if (!shared)
    say("headlab " + command + ": error (process " + std::to_string(world.rank()) + " of " +
        std::to_string(world.size()) + "): " + one_line(message));
  if (!shared) {
    std::fflush(stderr);
    world.abort(status);
  }
  return status;
}

}  // namespace

namespace headlab::cli {

const std::string& last_error() { return last_error_line; }

int run_command_line(int argc, char** argv, bool print_error) {
  last_error_line.clear();
  print_errors = print_error;
  // A closed pipe makes a write fail (and the command say so, or a run stop
  // with a checkpoint) instead of killing the process silently.
  std::signal(SIGPIPE, SIG_IGN);
  CLI::App app{"headlab: train toy transformers and see what their attention heads learn.\n"
               "Start with `headlab train` (the default demo), then read the head report it prints.",
               "headlab"};
  app.set_version_flag("--version", cli::version_line(), "print the version and the git commit it was built from");
  app.require_subcommand(1);
  app.fallthrough(false);
  std::map<CLI::App*, cli::Command> commands;
  auto add = [&](const char* name, const char* about, cli::Command (*make)(CLI::App&)) {
    CLI::App* sub = app.add_subcommand(name, about);
    commands[sub] = make(*sub);
    read_integers_in_decimal(*sub);
  };
  add("train", "train a model; writes a run folder (--out DIR)", cli::add_train);
  add("eval", "loss and accuracy of a checkpoint; optional logits and gradient dumps", cli::add_eval);
  add("analyze", "head analysis of a run or checkpoint: table, heads.json, report.html", cli::add_analyze);
  add("sweep", "train many seeds and head counts; how often heads specialize", cli::add_sweep);
  add("bench", "training-step throughput, GFLOP/s, MFU and peak memory", cli::add_bench);
  add("tasks", "the synthetic tasks and the heads each should produce", cli::add_tasks);
  add("gradcheck", "float64 finite-difference check of every op and layer", cli::add_gradcheck);

  // CLI11 would call an unknown command "a subcommand is required".
  if (argc > 1 && argv[1][0] != '-') {
    std::string names;
    bool known = false;
    for (const auto& [sub, run] : commands) {
      known = known || sub->get_name() == argv[1];
      names += (names.empty() ? "" : ", ") + sub->get_name();
    }
    if (!known) {
      if (another_rank_says_it()) return 2;
      say(std::string("headlab: error: unknown command '") + argv[1] + "' (commands: " + names + "; see --help)");
      return 2;
    }
  }
  // An option before any command: only headlab's own (--help, --version).
  if (argc > 1 && std::string(argv[1]).starts_with("--")) {
    const std::string flag = std::string(argv[1]).substr(0, std::string(argv[1]).find('='));
    if (app.get_option_no_throw(flag) == nullptr) {
      if (another_rank_says_it()) return 2;
      std::vector<std::string> own;
      for (const CLI::Option* o : app.get_options())
        for (const std::string& name : o->get_lnames()) own.push_back(name);
      const std::string near = train::nearest_name(flag.substr(2), own);
      std::string names;
      for (const auto& [sub, run] : commands) names += (names.empty() ? "" : ", ") + sub->get_name();
      if (!near.empty())
        say("headlab: error: unknown option " + flag + " (did you mean --" + near + "?)");
      else
        say("headlab: error: " + flag + " comes after a command: headlab COMMAND [flags] (commands: " + names + ")");
      return 2;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return exit_status(argc > 1 && argv[1][0] != '-' ? argv[1] : "", app.exit(e));
  } catch (const CLI::CallForAllHelp& e) {
    return exit_status("", app.exit(e));
  } catch (const CLI::CallForVersion& e) {
    return exit_status("", app.exit(e));
  } catch (const CLI::ParseError& e) {
    if (another_rank_says_it()) return 2;
    // The command's own errors carry its name, as its failures do.
    if (const CLI::App* sub = argc > 1 && argv[1][0] != '-' ? app.get_subcommand(argv[1]) : nullptr) {
      const std::string message = usage_message(*sub, std::vector<std::string>(argv + 2, argv + argc), e);
      say(std::string("headlab ") + argv[1] + ": error: " +
          (message.empty() ? one_line(e.what()) + " (see headlab " + argv[1] + " --help)" : message));
      return 2;
    }
    say("headlab: error: " + one_line(e.what()) + " (see --help)");
    return 2;
  }
  for (auto& [sub, run] : commands) {
    if (!sub->parsed()) continue;
    const std::string name = sub->get_name();
    if (const std::string message = empty_value_message(*sub); !message.empty()) {
      if (another_rank_says_it()) return 2;
      say("headlab " + name + ": error: " + message);
      return 2;
    }
    try {
      return exit_status(name, run());
    } catch (const train::dist::PeerFailure& e) {
      return fail(name, e, e.exit_status, e.what());
    } catch (const train::Stopped& e) {
      return fail(name, e, 128 + e.signal, e.what());
    } catch (const nlohmann::json::exception& e) {
      // Only user input reaches nlohmann (a config value, a data line, a
      // checkpoint's metadata): a usage error, without the library's prefix.
      return fail(name, e, 2, train::without_json_prefix(e.what()));
    } catch (const train::UsageError& e) {
      return fail(sub->get_name(), e, 2, e.what());
    } catch (const std::bad_alloc& e) {
      return fail(sub->get_name(), e, 1, "out of memory (reduce --batch, --eval-batch, --seq-len or the model's size)");
    } catch (const std::exception& e) {
      return fail(sub->get_name(), e, 1, e.what());
    }
  }
  return 2;
}

}  // namespace headlab::cli
