// gradcheck: analytic Jacobian (backward) against central differences.
#include "autograd/gradcheck.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <stdexcept>

#include "core/random.h"

namespace headlab::autograd {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

std::string index_string(int64_t flat, const Shape& shape) { return core::to_string(core::unravel_index(flat, shape)); }

// The worst entry seen so far, by its error relative to the tolerance.
struct Worst {
  double ratio = -1.0;
  double analytic = 0.0, numeric = 0.0;
  std::size_t input = 0;
  int64_t element = 0, row = 0;
};

}  // namespace

GradcheckResult gradcheck(const GradcheckFn& f, const std::vector<Tensor>& inputs_f64,
                          const GradcheckOptions& options) {
  if (!(options.eps > 0.0)) throw std::invalid_argument("gradcheck: eps must be > 0");
  std::vector<Variable> leaves;
  for (std::size_t i = 0; i < inputs_f64.size(); ++i) {
    const Tensor& t = inputs_f64[i];
    if (!t.defined() || t.dtype() != DType::f64)
      throw std::invalid_argument("gradcheck: input " + std::to_string(i) + " must be a defined float64 tensor, got " +
                                  (t.defined() ? core::to_string(t.dtype()) : std::string("undefined")) +
                                  " (use .to(DType::f64))");
    leaves.emplace_back(t.clone(), true);  // a private, contiguous copy we can perturb
  }

  // --- analytic: rows of the Jacobian (or projections) by backward ---
  const Variable y = f(leaves);
  if (!y.defined() || y.dtype() != DType::f64)
    throw std::invalid_argument("gradcheck: f must return a defined float64 Variable");
  const int64_t m = y.numel();
  const bool full = m <= options.max_full_outputs;
  const int64_t rows = full ? m : options.projections;
  std::vector<std::vector<double>> directions;  // projection mode only: [rows][m]
  if (!full) {
    core::Generator gen(options.projection_seed);
    directions.assign(static_cast<std::size_t>(rows), std::vector<double>(static_cast<std::size_t>(m)));
    for (auto& d : directions)
      for (double& v : d) v = gen.normal();
  }
  // analytic[row][input] = gradient of (row-th output, or projection) w.r.t. that input
  std::vector<std::vector<std::vector<double>>> analytic(static_cast<std::size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    for (const Variable& v : leaves) v.zero_grad();
    if (y.requires_grad()) {
      Tensor seed = full ? Tensor::zeros(y.shape(), DType::f64)
                         : Tensor::from_vector(directions[static_cast<std::size_t>(r)], y.shape(), DType::f64);
      if (full) seed.data<double>()[r] = 1.0;
      y.backward(seed, /*retain_graph=*/r + 1 < rows);
    }
    for (const Variable& v : leaves)
      analytic[static_cast<std::size_t>(r)].push_back(
          v.has_grad() ? v.grad().to_vector() : std::vector<double>(static_cast<std::size_t>(v.numel()), 0.0));
  }
  for (const Variable& v : leaves) v.zero_grad();

  // --- numeric: central differences, one input element at a time ---
  NoGradGuard no_grad;
  GradcheckResult result;
  Worst worst;
  auto evaluate = [&] { return f(leaves).value().to_vector(); };
  for (std::size_t i = 0; i < leaves.size(); ++i) {
    double* p = leaves[i].mutable_value().data<double>();
    for (int64_t j = 0; j < leaves[i].numel(); ++j) {
      const double saved = p[j];
      p[j] = saved + options.eps;
      const std::vector<double> plus = evaluate();
      p[j] = saved - options.eps;
      const std::vector<double> minus = evaluate();
      p[j] = saved;
      for (int64_t r = 0; r < rows; ++r) {
        double numeric = 0.0;
        if (full) {
          numeric = (plus[static_cast<std::size_t>(r)] - minus[static_cast<std::size_t>(r)]) / (2 * options.eps);
        } else {
          const auto& d = directions[static_cast<std::size_t>(r)];
          for (std::size_t k = 0; k < d.size(); ++k) numeric += d[k] * (plus[k] - minus[k]);
          numeric /= 2 * options.eps;
        }
        const double a = analytic[static_cast<std::size_t>(r)][i][static_cast<std::size_t>(j)];
        const double err = std::abs(a - numeric);
        const double scale = std::max(std::abs(a), std::abs(numeric));
        double ratio = err / (options.atol + options.rtol * std::abs(numeric));
        if (std::isnan(ratio)) ratio = kInf;  // a NaN anywhere fails
        result.max_abs_err = std::max(result.max_abs_err, std::isnan(err) ? kInf : err);
        if (scale > options.atol) result.max_rel_err = std::max(result.max_rel_err, err / scale);
        ++result.entries;
        if (ratio > worst.ratio) worst = {ratio, a, numeric, i, j, r};
      }
    }
  }

  result.ok = worst.ratio <= 1.0;
  std::ostringstream msg;
  msg.precision(6);
  if (result.entries == 0) {
    msg << "nothing to compare (no input or no output elements)";
  } else {
    msg << (result.ok ? "ok" : "MISMATCH") << ": worst at input " << worst.input << " element "
        << index_string(worst.element, leaves[worst.input].shape()) << ", "
        << (full ? "output element " + index_string(worst.row, y.shape())
                 : "random projection " + std::to_string(worst.row))
        << ": analytic " << worst.analytic << " vs numeric " << worst.numeric << " (|diff| "
        << std::abs(worst.analytic - worst.numeric) << ", allowed " << options.atol + options.rtol * std::abs(worst.numeric)
        << "); " << result.entries << " entries, " << (full ? "full Jacobian" : "random projections");
  }
  result.message = msg.str();
  return result;
}

}  // namespace headlab::autograd
