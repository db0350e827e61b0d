// Training in bf16 mixed precision (--precision bf16, core/gemm.h): the
// default demo and the induction showcase learn what they learn in f32,
// with loss curves close to f32's; resume is exact within bf16; the key
// round-trips through config JSON and checkpoints; the head analysis gives
// the same numbers under either precision. Skipped on a CPU without bf16
// units.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "analysis/analyze_model.h"
#include "analysis/heads_json.h"
#include "core/gemm.h"
#include "core/safetensors.h"
#include "core/threads.h"
#include "tests/precision.h"
#include "tests/train/test_util.h"
#include "train/checkpoint.h"
#include "train/config.h"
#include "train/errors.h"
#include "train/session.h"

namespace headlab::train {
namespace {

using test::flat_weights;

using headlab::test::PrecisionScope;

struct Trained {
  std::vector<double> losses;  // per step
  analysis::RunAnalysis run;
  std::vector<double> weights;
};

// Trains `c` in `precision`, then the head analysis; on one thread, as the
// CLI's --threads 0 picks for these toy models.
Trained train_in(TrainConfig c, core::GemmPrecision precision) {
  c.precision = core::gemm_precision_name(precision);
  const PrecisionScope scope(precision);
  const int threads = core::num_threads();
  core::set_num_threads(1);
  Session s(c);
  Trained t;
  for (int64_t i = 0; i < c.steps; ++i) t.losses.push_back(s.step().loss);
  t.run = analysis::analyze_model(s.model(), examples_of(s.eval_batch()));
  t.weights = flat_weights(s.model());
  core::set_num_threads(threads);
  return t;
}

// Mean loss over each 50-step window.
std::vector<double> windows(const std::vector<double>& losses) {
  std::vector<double> out;
  for (std::size_t i = 0; i + 50 <= losses.size(); i += 50) {
    double sum = 0;
    for (std::size_t j = i; j < i + 50; ++j) sum += losses[j];
    out.push_back(sum / 50);
  }
  return out;
}

// The loss tolerance: each 50-step window's mean within 0.01 + 3% of f32's.
// Measured on the demo (Zen 4, oneDNN): the twelve windows differ by at most
// 0.4% (0.494 against 0.492 at steps 100-149, the steepest part); bf16's
// 8-bit operands perturb every product by ~0.2-0.4%, which moves the
// trajectory a little, not where it goes.
TEST(Bf16Training, TheDemoReachesF32sVerdictAndAccuracyWithACloseLossCurve) {
  SKIP_WITHOUT_BF16_UNITS();
#if defined(__SANITIZE_ADDRESS__)
  // Its 1200 steps take 20-35 s under the sanitizers and run no code that
  // the bf16 tests of a few steps (resume, the analysis, the layers') do not.
  GTEST_SKIP() << "numbers, not memory: the Release passes run it";
#endif
  // The default demo: `headlab train` with no flags, 600 steps.
  const Trained f32 = train_in(TrainConfig{}, core::GemmPrecision::f32),
                bf16 = train_in(TrainConfig{}, core::GemmPrecision::bf16);
  EXPECT_NE(f32.weights, bf16.weights) << "bf16 trained the same bits as f32: it did not run in bf16";
  EXPECT_EQ(bf16.run.verdict.specialized, f32.run.verdict.specialized);
  EXPECT_TRUE(bf16.run.verdict.specialized);
  EXPECT_EQ(bf16.run.verdict.success(), f32.run.verdict.success());
  EXPECT_EQ(bf16.run.verdict.distinct_labels, f32.run.verdict.distinct_labels);
  for (int64_t h = 0; h < 2; ++h)
    EXPECT_EQ(analysis::label_name(bf16.run.at(0, h).label), analysis::label_name(f32.run.at(0, h).label)) << h;
  EXPECT_EQ(*bf16.run.accuracy, *f32.run.accuracy);
  const std::vector<double> a = windows(f32.losses), b = windows(bf16.losses);
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t w = 0; w < a.size(); ++w)
    EXPECT_NEAR(b[w], a[w], 0.01 + 0.03 * a[w]) << "steps " << 50 * w << "-" << 50 * w + 49;
}

// The induction showcase's setting (README, "Interventions and the induction
// showcase"), seed 0: 2 attention-only layers of 2 heads, d_model 32, 3000
// steps. The tolerance, from its 5 seeds in both precisions
// (docs/performance.md, "The induction showcase in bf16"; Zen 5, oneDNN):
// the same verdict, labels and heads found; final accuracy within 0.002
// (0.0012 measured); the 50-step windows of the plateau and the loss drop
// (steps 0-599) within 0.01 + 3% of f32's (2.3% measured), and from step
// 1000 on, where both are below 0.05, within 0.02 (0.013 measured). Between
// them the last 0.3 nats fall at times that bf16's rounding moves (by up to
// 200 steps, a gap of 0.2 nats): not held window by window.
TEST(Bf16Training, TheInductionShowcaseFindsF32sCircuitWithACloseLossCurve) {
  SKIP_WITHOUT_BF16_UNITS();
  // It sets each precision itself: the bf16 suite pass would only repeat it.
  if (headlab::test::in_bf16()) GTEST_SKIP() << "the f32 passes run it (it trains in both precisions)";
  // On OpenBLAS (no bf16 kernel: bf16 products emulated on its f32 ones) it
  // would take 80 s to repeat the oneDNN pass's claim on a second backend;
  // the demo's test above checks the same claim there, on the same paths.
  if (core::gemm_backend() != core::GemmBackend::onednn) GTEST_SKIP() << "the oneDNN pass runs it";
#if defined(__SANITIZE_ADDRESS__)
  // Its 6000 steps would take minutes under the sanitizers: as the demo's.
  GTEST_SKIP() << "numbers, not memory: the Release passes run it";
#endif
  TrainConfig c;
  c.task = "induction";
  c.model.layers = 2;
  c.model.attn_only = true;
  c.model.heads = 2;
  c.model.d_model = 32;
  c.steps = 3000;
  const Trained f32 = train_in(c, core::GemmPrecision::f32), bf16 = train_in(c, core::GemmPrecision::bf16);
  EXPECT_NE(f32.weights, bf16.weights) << "bf16 trained the same bits as f32: it did not run in bf16";
  EXPECT_TRUE(bf16.run.verdict.success());
  EXPECT_EQ(bf16.run.verdict.success(), f32.run.verdict.success());
  EXPECT_EQ(bf16.run.verdict.specialized, f32.run.verdict.specialized);
  EXPECT_EQ(bf16.run.verdict.roles_found, f32.run.verdict.roles_found);
  EXPECT_EQ(bf16.run.verdict.distinct_labels, f32.run.verdict.distinct_labels);
  for (const Trained* t : {&f32, &bf16}) {
    const analysis::RunAnalysis& run = t->run;
    EXPECT_GE(*run.accuracy, 0.9) << "solved";
    // A previous-token head in layer 0 and induction heads in layer 1, at
    // the task's positions (scripts/induction_showcase.py's threshold).
    EXPECT_GE(std::max(*run.at(0, 0).task.previous_token, *run.at(0, 1).task.previous_token), 0.5);
    for (int64_t h = 0; h < 2; ++h) EXPECT_GE(*run.at(1, h).task.induction, 0.5) << "L1H" << h;
  }
  for (int64_t l = 0; l < 2; ++l)
    for (int64_t h = 0; h < 2; ++h)
      EXPECT_EQ(analysis::label_name(bf16.run.at(l, h).label), analysis::label_name(f32.run.at(l, h).label))
          << "L" << l << "H" << h;
  EXPECT_NEAR(*bf16.run.accuracy, *f32.run.accuracy, 0.002);
  const std::vector<double> a = windows(f32.losses), b = windows(bf16.losses);
  ASSERT_EQ(a.size(), b.size());
  ASSERT_EQ(a.size(), 60u);
  for (std::size_t w = 0; w < 12; ++w)
    EXPECT_NEAR(b[w], a[w], 0.01 + 0.03 * a[w]) << "steps " << 50 * w << "-" << 50 * w + 49;
  for (std::size_t w = 20; w < a.size(); ++w)
    EXPECT_NEAR(b[w], a[w], 0.02) << "steps " << 50 * w << "-" << 50 * w + 49;
}

TEST(Bf16Training, ResumeEqualsTheUninterruptedRunBitForBit) {
  SKIP_WITHOUT_BF16_UNITS();
  const PrecisionScope scope(core::GemmPrecision::bf16);
  const auto path = (std::filesystem::temp_directory_path() / ("headlab-bf16-" + std::to_string(::getpid()))).string();
  TrainConfig c;
  c.precision = "bf16";
  c.model.d_model = 32;
  c.seed = 3;
  Session straight(c);
  std::vector<double> losses;
  for (int i = 0; i < 12; ++i) losses.push_back(straight.step().loss);
  Session first(c);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(first.step().loss, losses[static_cast<std::size_t>(i)]);
  first.save(path);
  const Checkpoint ck = read_checkpoint(path);
  std::filesystem::remove(path);
  EXPECT_EQ(ck.info.config.precision, "bf16");
  Session resumed(ck);
  for (int i = 6; i < 12; ++i) EXPECT_EQ(resumed.step().loss, losses[static_cast<std::size_t>(i)]) << "step " << i;
  EXPECT_EQ(flat_weights(resumed.model()), flat_weights(straight.model()));
}

// A checkpoint from before the key trained in f32: it reads as f32 even
// where HEADLAB_PRECISION=bf16 makes bf16 the default of a new config.
TEST(Bf16Training, ThePrecisionKeyRoundTripsAndOldCheckpointsReadAsF32) {
  TrainConfig c;
  c.precision = "bf16";
  TrainConfig back;
  apply_json(back, to_json(c), "test");
  EXPECT_EQ(back.precision, "bf16");
  c.model.d_model = 16;
  const auto path = (std::filesystem::temp_directory_path() / ("headlab-old-" + std::to_string(::getpid()))).string();
  Session(c).save(path);
  EXPECT_EQ(read_checkpoint(path).info.config.precision, "bf16");
  core::SafetensorsFile file = core::load_safetensors(path);
  nlohmann::json old = nlohmann::json::parse(file.metadata.at("config"));
  old.erase("precision");
  file.metadata["config"] = old.dump();
  core::save_safetensors(path, file.tensors, file.metadata, file.integers);
  const std::string read = read_checkpoint(path).info.config.precision;
  std::filesystem::remove(path);
  EXPECT_EQ(read, "f32");
  c.precision = "fp8";
  EXPECT_THROW(c.validate(), UsageError);
}

// The analysis runs its products in f32 under any precision: the same
// weights give the same heads.json, bit for bit.
TEST(Bf16Training, TheHeadAnalysisIsTheSameUnderEitherPrecision) {
  SKIP_WITHOUT_BF16_UNITS();
  TrainConfig c;
  c.model.d_model = 32;
  c.eval_batch = 64;
  Session s(c);
  for (int i = 0; i < 30; ++i) s.step();
  const analysis::Examples examples = examples_of(s.eval_batch());
  nlohmann::json f32, bf16;
  analysis::to_json(f32, analysis::analyze_model(s.model(), examples));
  {
    const PrecisionScope scope(core::GemmPrecision::bf16);
    analysis::to_json(bf16, analysis::analyze_model(s.model(), examples));
    // While the products outside it do run in bf16.
    EXPECT_NE(evaluate(s.model(), s.eval_batch()).loss, [&] {
      const core::F32Gemms f32_gemms;
      return evaluate(s.model(), s.eval_batch()).loss;
    }());
  }
  EXPECT_EQ(bf16.dump(), f32.dump());
}

}  // namespace
}  // namespace headlab::train
