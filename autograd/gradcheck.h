// Finite-difference gradient check in float64.
//
// gradcheck(f, inputs) compares the Jacobian of f that backward() gives with
// the numeric one by central differences, (f(x + eps e_j) - f(x - eps e_j)) /
// 2 eps, entry by entry: an entry passes if |analytic - numeric| <= atol +
// rtol * |numeric| (PyTorch's gradcheck rule and defaults).
//
// Outputs with at most `max_full_outputs` elements get the full Jacobian (one
// backward per output element). Larger outputs are checked through
// `projections` fixed random projections of the output: for each random
// vector r (standard normal, seeded by `projection_seed`), backward(r) is
// compared with the numeric derivative of r . f. Both modes perturb every
// input element.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "autograd/variable.h"

namespace headlab::autograd {

struct GradcheckOptions {
  double eps = 1e-6;
  double atol = 1e-5;
  double rtol = 1e-3;
  int64_t max_full_outputs = 256;
  int64_t projections = 3;
  uint64_t projection_seed = 1234;
};

struct GradcheckResult {
  bool ok = false;
  double max_abs_err = 0.0;  // max |analytic - numeric| over the entries
  // max |analytic - numeric| / max(|analytic|, |numeric|) over the entries
  // where that denominator exceeds atol (near zero only the absolute error
  // means something).
  double max_rel_err = 0.0;
  int64_t entries = 0;  // Jacobian (or projection) entries compared
  std::string message;  // on failure: the worst input, element and values
};

using GradcheckFn = std::function<Variable(const std::vector<Variable>&)>;

// inputs_f64 must be float64; f receives leaves holding private copies of
// them (requires_grad) and must be deterministic (a dropout inside f seeds
// its own generator). Throws std::invalid_argument for a non-f64 input or
// output.
GradcheckResult gradcheck(const GradcheckFn& f, const std::vector<Tensor>& inputs_f64,
                          const GradcheckOptions& options = GradcheckOptions{});

// A named check for `headlab gradcheck` and the tests. Each library exposes
// its own list (autograd: op_gradcheck_cases(); layers append theirs in
// layers/), and the CLI prints their concatenation.
struct GradcheckCase {
  std::string name;
  std::function<GradcheckResult()> run;
};

// Every op of autograd/ops.h, including broadcast operands, non-contiguous
// inputs and reductions over several axes.
const std::vector<GradcheckCase>& op_gradcheck_cases();

}  // namespace headlab::autograd
