// analysis::score_logits against the definition: the mean over the scored
// positions of logsumexp(row) - row[target], and the first argmax's accuracy.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "analysis/evaluate.h"
#include "core/random.h"

namespace headlab::analysis {
namespace {

// Rows of many classes, peaked or flat, scored in float32 (core's exp) and
// float64 (libm's), both within the analysis's 1e-6 of the long double sums.
TEST(ScoreLogits, FloatAndDoubleLogitsGiveTheDefinitionsLossAndAccuracy) {
  const int64_t rows = 12, classes = 5003;  // not a multiple of a vector's width
  core::Generator gen(5);
  std::vector<double> values(static_cast<std::size_t>(rows * classes));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < classes; ++c)
      values[static_cast<std::size_t>(r * classes + c)] =
          gen.normal(0.0, static_cast<double>(1 + 4 * (r % 3))) + (r % 4 == 0 && c == r ? 40.0 : 0.0);
  std::vector<int32_t> targets(static_cast<std::size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) targets[static_cast<std::size_t>(r)] = r % 5 == 1 ? -1 : static_cast<int32_t>(r);
  for (const core::DType dtype : {core::DType::f32, core::DType::f64}) {
    const core::Tensor logits = core::Tensor::from_vector(values, {rows, classes}, dtype);
    const core::Tensor stored = logits.to(core::DType::f64);  // the values as the tensor holds them
    const double* x = stored.data<double>();
    long double loss = 0;
    int64_t count = 0, correct = 0;
    for (int64_t r = 0; r < rows; ++r) {
      const int32_t t = targets[static_cast<std::size_t>(r)];
      if (t < 0) continue;
      const double* row = x + r * classes;
      int64_t best = 0;
      for (int64_t c = 1; c < classes; ++c)
        if (row[c] > row[best]) best = c;
      long double sum = 0;
      for (int64_t c = 0; c < classes; ++c) sum += std::exp(static_cast<long double>(row[c]) - row[best]);
      loss += std::log(sum) - (static_cast<long double>(row[t]) - row[best]);
      correct += best == t;
      ++count;
    }
    const EvalResult got = score_logits(logits, targets);
    EXPECT_EQ(got.count, count);
    EXPECT_NEAR(got.loss, static_cast<double>(loss / count), 1e-6) << core::to_string(dtype);
    EXPECT_DOUBLE_EQ(got.accuracy, static_cast<double>(correct) / static_cast<double>(count));
    EXPECT_GT(correct, 0);  // the peaked rows are predicted
  }
}

}  // namespace
}  // namespace headlab::analysis
