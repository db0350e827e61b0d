// `headlab gradcheck`: the float64 finite-difference check of every op and
// layer, as a table; exit status 1 if any fails.
#include <algorithm>
#include <cstdio>

#include "autograd/gradcheck.h"
#include "layers/gradcheck_cases.h"
#include "train/cli/cli.h"
#include "train/errors.h"

namespace headlab::cli {

Command add_gradcheck(CLI::App& app) {
  auto filter = std::make_shared<std::string>();
  app.add_option("--filter", *filter, "only the checks whose name contains this text");
  return [filter] {
    std::vector<autograd::GradcheckCase> cases = autograd::op_gradcheck_cases();
    for (const auto& c : layers::layers_gradcheck_cases()) cases.push_back(c);
    const std::size_t all = cases.size();
    std::erase_if(cases, [&](const autograd::GradcheckCase& c) { return c.name.find(*filter) == std::string::npos; });
    if (cases.empty())
      throw train::UsageError("--filter '" + *filter + "' is in none of the " + std::to_string(all) +
                              " checks' names (case-sensitive); headlab gradcheck without --filter "
                              "lists them");
    // The name column is as wide as the longest name, so the numbers stay in line.
    int width = 5;
    for (const auto& c : cases) width = std::max(width, static_cast<int>(c.name.size()));
    int failed = 0, run = 0;
    std::printf("%-*s %12s %12s  %s\n", width, "check", "max abs err", "max rel err", "result");
    for (const auto& c : cases) {
      ++run;
      autograd::GradcheckResult r;
      try {
        r = c.run();
      } catch (const std::exception& e) {
        r.ok = false;
        r.message = e.what();
      }
      failed += !r.ok;
      std::printf("%-*s %12.3e %12.3e  %s\n", width, c.name.c_str(), r.max_abs_err, r.max_rel_err, r.ok ? "pass" : "FAIL");
      if (!r.ok && !r.message.empty()) std::printf("    %s\n", r.message.c_str());
    }
    std::printf("\n%d checks, %d passed, %d failed (float64, eps 1e-6, atol 1e-5, rtol 1e-3)\n", run, run - failed,
                failed);
    return failed ? 1 : 0;
  };
}

}  // namespace headlab::cli
