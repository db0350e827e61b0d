// `headlab tasks`: the synthetic tasks, their definitions and expected heads.
#include <iostream>
#include <string>
#include <vector>

#include "train/cli/cli.h"
#include "train/tasks.h"

namespace headlab::cli {

namespace {

// "operand a (first-token), operand b (previous-token)"; the verdict looks for each.
std::string roles_text(const std::vector<analysis::ExpectedRole>& roles) {
  if (roles.empty()) return "none (a control)";
  std::string out;
  for (const analysis::ExpectedRole& r : roles) out += (out.empty() ? "" : ", ") + r.role + " (" + r.pattern + ")";
  return out;
}

}  // namespace

Command add_tasks(CLI::App& app) {
  app.footer("Train one with: headlab train --task NAME");
  return [] {
    for (const train::TaskInfo& t : train::task_catalog()) {
      std::cout << t.name << "  (default --vocab " << t.default_vocab << " --seq-len " << t.default_seq_len << ")\n"
                << "  " << t.definition << "\n"
                << "  expected heads: " << t.expected_heads << "\n"
                << "  suggested model: "
                << (train::suggested_model(t.name) ? "headlab train --task " + t.name + " " + train::suggested_model(t.name)->flags
                                                   : std::string("the default flags"))
                << "\n"
                << "  expected roles: " << roles_text(t.roles) << "\n"
                << "  corrupted for analyze --patch: "
                << train::make_task(t.name, t.default_vocab, t.default_seq_len)->corruption() << "\n\n";
    }
    std::cout << "--data FILE.jsonl: your own sequences, one {\"tokens\": [...], \"targets\": [...]} per line\n"
                 "  (targets optional: next-token prediction); --vocab and --seq-len default to what the file needs.\n"
                 "  expected roles: each pattern of the lines' \"attend\": {\"NAME\": [a key, a list of keys or null per\n"
                 "  position]}, e.g. \"after-marker\" (analyze --scored-only NAME: scored, not expected; --expect NAME:\n"
                 "  a built-in pattern such as previous-token expected too)\n"
                 "  corrupted for analyze --patch: "
              << train::Task::next_row_corruption()
              << "\n  (analyze --data FILE --corrupted FILE2: line b of FILE2 in place of line b of FILE)\n";
    return 0;
  };
}

}  // namespace headlab::cli
