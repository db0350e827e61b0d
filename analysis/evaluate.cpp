#include "analysis/evaluate.h"

#include <cmath>
#include <stdexcept>
#include <string>

#include "core/vec_math.h"
#include "layers/padding_mask.h"

namespace headlab::analysis {

Examples Examples::rows(int64_t first, int64_t count) const {
  if (first < 0 || count < 0 || first + count > batch)
    throw std::invalid_argument("Examples::rows: rows " + std::to_string(first) + " .. " +
                                std::to_string(first + count - 1) + " are outside the " + std::to_string(batch) +
                                " examples");
  const auto begin = static_cast<std::size_t>(first * seq_len), size = static_cast<std::size_t>(count * seq_len);
  Examples out;
  out.batch = count;
  out.seq_len = seq_len;
  out.tokens = tokens.subspan(begin, size);
  out.targets = targets.subspan(begin, size);
  if (!lengths.empty()) out.lengths = lengths.subspan(static_cast<std::size_t>(first), static_cast<std::size_t>(count));
  return out;
}

core::Tensor Examples::padding_mask() const { return layers::padding_mask(lengths, batch, seq_len); }

namespace {

// sum over c of e^(row[c] - top). float logits: core's vectorizable exp
// (within 2 ulp), each term added in double, in an order fixed at compile
// time; a model of 40,000 classes spends most of its analysis here
// (docs/performance.md). double logits keep libm's exp.
double sum_exp(const float* row, int64_t classes, float top) {
  double sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t c = 0; c < classes; ++c) sum += static_cast<double>(core::detail::fast_exp(row[c] - top));
  return sum;
}
double sum_exp(const double* row, int64_t classes, double top) {
  double sum = 0;
  for (int64_t c = 0; c < classes; ++c) sum += std::exp(row[c] - top);
  return sum;
}

// Log-sum-exp shifted by the row's max; the prediction is its first argmax.
template <class T>
double loss_of_row(const T* row, int64_t classes, int32_t target, int64_t& best) {
  best = 0;
  for (int64_t c = 1; c < classes; ++c)
    if (row[c] > row[best]) best = c;
  const T top = row[best];
  return std::log(sum_exp(row, classes, top)) - (static_cast<double>(row[target]) - static_cast<double>(top));
}

// Adds `rows` rows of `classes` logits of type T to the sums, with no
// float64 copy of the logits (twice the float32 logits' bytes: 1 GB for 3200
// positions of 40,000 classes, allocated and freed by every evaluation of the
// head analysis).
template <class T>
void add_rows(EvalSums& sums, const T* p, int64_t rows, int64_t classes, std::span<const int32_t> targets) {
  for (int64_t i = 0; i < rows; ++i) {
    const int32_t t = targets[static_cast<std::size_t>(i)];
    if (t < 0) continue;
    int64_t best = 0;
    sums.loss += loss_of_row(p + i * classes, classes, t, best);
    sums.correct += best == t;
    ++sums.count;
  }
}

}  // namespace

double row_loss(const float* row, int64_t classes, int32_t target, int64_t& best) {
  return loss_of_row(row, classes, target, best);
}
double row_loss(const double* row, int64_t classes, int32_t target, int64_t& best) {
  return loss_of_row(row, classes, target, best);
}

EvalResult score_logits(const core::Tensor& logits, std::span<const int32_t> targets) {
  EvalSums sums;
  sums.add(logits, targets);
  return sums.result();
}

void EvalSums::add(const core::Tensor& logits, std::span<const int32_t> targets) {
  const int64_t classes = logits.size(-1);
  const core::Tensor flat = logits.reshape({-1, classes}).contiguous();
  const int64_t rows = flat.size(0);
  if (rows != static_cast<int64_t>(targets.size()))
    throw std::invalid_argument("score_logits: " + std::to_string(rows) + " rows of logits for " +
                                std::to_string(targets.size()) + " targets");
  core::dispatch(flat.dtype(), [&](auto zero) {
    using T = decltype(zero);
    add_rows(*this, flat.data<T>(), rows, classes, targets);
  });
}

EvalResult EvalSums::result() const {
  EvalResult r;
  r.count = count;
  if (count > 0) {
    r.loss = loss / static_cast<double>(count);
    r.accuracy = static_cast<double>(correct) / static_cast<double>(count);
  }
  return r;
}

EvalResult evaluate(const layers::Transformer& model, const Examples& examples, layers::Probe* probe) {
  EvalSums sums;
  add_evaluation(sums, model, examples, probe);
  return sums.result();
}

void add_evaluation(EvalSums& sums, const layers::Transformer& model, const Examples& examples, layers::Probe* probe) {
  autograd::NoGradGuard no_grad;
  const core::Tensor mask = examples.padding_mask();
  const autograd::Variable logits = model.forward(examples.tokens, examples.batch, examples.seq_len, &mask, probe);
  sums.add(logits.value(), examples.targets);
}

}  // namespace headlab::analysis
