// What the head analysis holds at once (docs/head-metrics.md, "What the
// analysis holds"): two layers' attention, whatever the number of layers --
// the scores take a pair of layers at a time, the others computed again when
// asked for -- and beside them nothing of that size: none of its over a
// hundred other passes keeps a layer's probabilities, and no score copies a
// layer into float64. The attention half alone (analyze_model_attention, the
// report's snapshot slider) holds two layers too. Measured by the tensors'
// buffer cache (tests/tensor_peak.h).
#include <gtest/gtest.h>

#include <vector>

#include "analysis/analyze_model.h"
#include "analysis/heads_json.h"
#include "core/gemm.h"
#include "core/random.h"
#include "core/tensor.h"
#include "tests/tensor_peak.h"

namespace headlab::analysis {
namespace analysis_memory_test {

// T = 256 and d_model = 8 with 8 heads: a layer's attention [B, h, T, T]
// (4 MiB) outweighs every other tensor of a pass together. 3 layers: more
// than the two held at once.
constexpr int64_t B = 2, T = 256, L = 3, H = 8, V = 7;
constexpr std::size_t kProbs = std::size_t{B * H * T * T} * sizeof(float);  // one layer's attention

struct Setting {
  core::Generator gen{2};
  layers::Transformer model{
      layers::ModelSpec{.vocab = V, .classes = V, .max_seq_len = T, .layers = L, .heads = H, .d_model = 8}, gen,
      core::DType::f32};
  std::vector<int32_t> tokens, targets, corrupted;
  Examples examples;

  Setting() {
    for (auto& p : model.parameters()) p.mutable_value().copy_(gen.normal(p.shape(), 0.0, 0.5));
    for (int64_t i = 0; i < B * T; ++i) {
      tokens.push_back(static_cast<int32_t>(gen.integer(0, V)));
      targets.push_back(i % T > 0 ? tokens.back() : -1);
      corrupted.push_back(static_cast<int32_t>((tokens.back() + 1) % V));
    }
    examples = Examples{B, T, tokens, targets};
  }
};

TEST(AnalysisMemory, TheAnalysisHoldsTwoLayersAttentionWhateverTheLayersAndNothingOfItsSizeBeside) {
  HEADLAB_SKIP_WITHOUT_BUFFER_CACHE();
  const Setting s;
  const layers::Transformer& model = s.model;
  const Examples& examples = s.examples;

  // The control: the scoring pass's probe holds every layer's.
  EXPECT_GE(test::peak_tensor_bytes([&] {
              layers::Probe probe(L);
              (void)evaluate(model, examples, &probe);
            }),
            L * kProbs);
  // Everything: the pruning curve, the set ablations, mean and resample
  // ablation and patching (the importance's one-row passes keep a row's
  // attention for their backward: left out here).
  AnalysisOptions options;
  options.importance_examples = 0;
  options.pruning_random_orders = 1;
  options.interventions = true;
  options.corruption.tokens = s.corrupted;
  const std::size_t held = test::peak_tensor_bytes([&] { (void)analyze_model(model, examples, options); });
  EXPECT_LT(held, 2 * kProbs + kProbs / 2) << "the analysis held " << held << " bytes of tensors at its peak, at most; "
                                           << "one layer's attention is " << kProbs;
}

// The attention half alone scores what analyze_attention over every layer's
// attention scores, bit for bit, and holds two layers' at a time.
TEST(AnalysisMemory, TheAttentionHalfHoldsTwoLayersAndScoresAsEveryLayersAttentionDoes) {
  HEADLAB_SKIP_WITHOUT_BUFFER_CACHE();
  const Setting s;
  std::vector<core::Tensor> every;
  {
    const core::F32Gemms f32;  // as the analysis runs, under any HEADLAB_PRECISION
    layers::Probe probe(L);
    (void)evaluate(s.model, s.examples, &probe);
    for (const layers::LayerProbe& layer : probe.layers) every.push_back(layer.attention);
  }
  const BatchContext context{.targets = s.targets};
  nlohmann::json whole, streamed;
  to_json(whole, analyze_attention(every, s.tokens, true, {}, 1, context));
  every.clear();
  RunAnalysis run;
  const std::size_t held =
      test::peak_tensor_bytes([&] { run = analyze_model_attention(s.model, s.examples, {}, 1, context); });
  to_json(streamed, run);
  EXPECT_EQ(streamed, whole);
  EXPECT_EQ(run.heads.size(), std::size_t{L * H});
  EXPECT_LT(held, 2 * kProbs + kProbs / 2) << "it held " << held << " bytes of tensors at its peak, at most; "
                                           << "one layer's attention is " << kProbs;
}

}  // namespace analysis_memory_test
}  // namespace headlab::analysis
