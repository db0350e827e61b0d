// headlab: train toy transformers and find out what their attention heads learn.
#include <spdlog/spdlog.h>

#include <cstdio>
#include <exception>
#include <map>

#include "train/cli/cli.h"
#include "train/errors.h"

int main(int argc, char** argv) {
  using namespace headlab;
  CLI::App app{"headlab: train toy transformers and see what their attention heads learn.\n"
               "Start with `headlab train` (the default demo), then read the head report it prints.",
               "headlab"};
  app.require_subcommand(1);
  app.fallthrough(false);
  std::map<CLI::App*, cli::Command> commands;
  auto add = [&](const char* name, const char* about, cli::Command (*make)(CLI::App&)) {
    CLI::App* sub = app.add_subcommand(name, about);
    commands[sub] = make(*sub);
  };
  add("train", "train a model; writes a run folder (--out DIR)", cli::add_train);
  add("eval", "loss and accuracy of a checkpoint; optional logits and gradient dumps", cli::add_eval);
  add("analyze", "head analysis of a run or checkpoint: table, heads.json, report.html", cli::add_analyze);
  add("sweep", "train many seeds and head counts; how often heads specialize", cli::add_sweep);
  add("bench", "training-step throughput, GFLOP/s, MFU and peak memory", cli::add_bench);
  add("tasks", "the synthetic tasks and the heads each should produce", cli::add_tasks);
  add("gradcheck", "float64 finite-difference check of every op and layer", cli::add_gradcheck);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "headlab: error: %s (see --help)\n", e.what());
    return 2;
  }
  for (auto& [sub, run] : commands) {
    if (!sub->parsed()) continue;
    try {
      return run();
    } catch (const train::UsageError& e) {
      std::fprintf(stderr, "headlab %s: error: %s\n", sub->get_name().c_str(), e.what());
      return 2;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "headlab %s: error: %s\n", sub->get_name().c_str(), e.what());
      return 1;
    }
  }
  return 2;
}
