// What the head analysis holds at once (docs/head-metrics.md, "What the
// analysis holds"): two layers' attention, whatever the number of layers --
// the scores take a pair of layers at a time, the others computed again when
// asked for -- and beside them nothing of that size: none of its over a
// hundred other passes keeps a layer's probabilities, and no score copies a
// layer into float64. Measured by the tensors' buffer cache (tests/tensor_peak.h).
#include <gtest/gtest.h>

#include <vector>

#include "analysis/analyze_model.h"
#include "core/random.h"
#include "core/tensor.h"
#include "tests/tensor_peak.h"

namespace headlab::analysis {
namespace analysis_memory_test {

TEST(AnalysisMemory, TheAnalysisHoldsTwoLayersAttentionWhateverTheLayersAndNothingOfItsSizeBeside) {
  HEADLAB_SKIP_WITHOUT_BUFFER_CACHE();
  // T = 256 and d_model = 8 with 8 heads: a layer's attention [B, h, T, T]
  // (4 MiB) outweighs every other tensor of a pass together. 3 layers: more
  // than the two held at once.
  constexpr int64_t B = 2, T = 256, L = 3, H = 8, V = 7;
  core::Generator gen(2);
  const layers::Transformer model(layers::ModelSpec{.vocab = V, .classes = V, .max_seq_len = T, .layers = L,
                                                    .heads = H, .d_model = 8},
                                  gen, core::DType::f32);
  for (auto& p : model.parameters()) p.mutable_value().copy_(gen.normal(p.shape(), 0.0, 0.5));
  std::vector<int32_t> tokens, targets, corrupted;
  for (int64_t i = 0; i < B * T; ++i) {
    tokens.push_back(static_cast<int32_t>(gen.integer(0, V)));
    targets.push_back(i % T > 0 ? tokens.back() : -1);
    corrupted.push_back(static_cast<int32_t>((tokens.back() + 1) % V));
  }
  const Examples examples{B, T, tokens, targets};
  const std::size_t probs = std::size_t{B * H * T * T} * sizeof(float);

  // The control: the scoring pass's probe holds every layer's.
  EXPECT_GE(test::peak_tensor_bytes([&] {
              layers::Probe probe(L);
              (void)evaluate(model, examples, &probe);
            }),
            L * probs);
  // Everything: the pruning curve, the set ablations, mean and resample
  // ablation and patching (the importance's one-row passes keep a row's
  // attention for their backward: left out here).
  AnalysisOptions options;
  options.importance_examples = 0;
  options.pruning_random_orders = 1;
  options.interventions = true;
  options.corruption.tokens = corrupted;
  const std::size_t held = test::peak_tensor_bytes([&] { (void)analyze_model(model, examples, options); });
  EXPECT_LT(held, 2 * probs + probs / 2) << "the analysis held " << held << " bytes of tensors at its peak, at most; "
                                         << "one layer's attention is " << probs;
}

}  // namespace analysis_memory_test
}  // namespace headlab::analysis
