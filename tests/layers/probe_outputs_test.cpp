// What a forward pass keeps (layers/probe.h, ProbeOutputs): a probe's
// attention, head outputs and residual only where it asks for them, the same
// bits where it does, and the logits' bits whatever it keeps. A pass without
// a backward that keeps no attention allocates no layer's [B, h, T, T]: the
// head analysis runs over a hundred such passes (docs/head-metrics.md, "What
// the analysis holds"), and each kept every layer's probabilities before.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "autograd/ops.h"
#include "core/random.h"
#include "core/tensor.h"
#include "layers/probe.h"
#include "layers/transformer.h"
#include "tests/tensor_peak.h"

namespace headlab::layers {
namespace probe_outputs_test {

using autograd::Variable;
using core::DType;
using core::Tensor;

bool identical_bits(const Tensor& a, const Tensor& b) {
  if (!a.defined() || !b.defined() || a.shape() != b.shape() || a.dtype() != b.dtype()) return false;
  const Tensor ac = a.contiguous(), bc = b.contiguous();
  return std::memcmp(ac.raw_data(), bc.raw_data(), static_cast<std::size_t>(ac.numel()) * core::dtype_size(a.dtype())) ==
         0;
}

// A model of 3 layers of 4 heads with random weights (sharp attention) on
// rows of T tokens, the second padded from position 5 on.
struct Model {
  static constexpr int64_t B = 2, H = 4;
  int64_t T;
  core::Generator gen{3};
  Transformer model;
  std::vector<int32_t> tokens;
  Tensor pad;

  Model(int64_t t, int64_t d_model, DType dtype)
      : T(t),
        model(ModelSpec{.vocab = 11, .classes = 5, .max_seq_len = t, .layers = 3, .heads = H, .d_model = d_model},
              gen, dtype) {
    for (auto& p : model.parameters()) p.mutable_value().copy_(gen.normal(p.shape(), 0.0, 0.5));
    std::vector<double> real;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t i = 0; i < T; ++i) {
        tokens.push_back(static_cast<int32_t>((7 * i + 3 * b) % 11));
        real.push_back(b == 1 && i >= 5 ? 0.0 : 1.0);
      }
    pad = Tensor::from_vector(real, {B, T}, dtype);
  }
  Tensor logits(Probe* probe) const { return model.forward(tokens, B, T, &pad, probe).value(); }
};

TEST(ProbeOutputs, APassKeepsOnlyWhatItsProbeAsksForAndTheSameBits) {
  for (const DType dtype : {DType::f32, DType::f64}) {
    const Model m(9, 16, dtype);
    autograd::NoGradGuard no_grad;
    Probe all(3);
    const Tensor expected = m.logits(&all);
    const std::vector<ProbeOutputs> asked = {ProbeOutputs::none(), ProbeOutputs::only_residual(),
                                             ProbeOutputs::only_head_outputs(),
                                             {.head_outputs = false, .residual = false}};
    for (const ProbeOutputs& keep : asked) {
      Probe probe(3, keep);
      // Layer 1 asks for everything: what one layer keeps is its own choice.
      probe.layers[1].keep = {};
      EXPECT_TRUE(identical_bits(m.logits(&probe), expected)) << "what a probe keeps changes no logit";
      for (std::size_t l = 0; l < 3; ++l) {
        const ProbeOutputs k = probe.layers[l].keep;
        const LayerProbe& got = probe.layers[l];
        EXPECT_EQ(got.attention.defined(), k.attention) << "layer " << l;
        EXPECT_EQ(got.head_outputs.defined(), k.head_outputs) << "layer " << l;
        EXPECT_EQ(got.residual.defined(), k.residual) << "layer " << l;
        if (k.attention) {
          EXPECT_TRUE(identical_bits(got.attention, all.layers[l].attention)) << "layer " << l;
        }
        if (k.head_outputs) {
          EXPECT_TRUE(identical_bits(got.head_outputs, all.layers[l].head_outputs)) << "layer " << l;
        }
        if (k.residual) {
          EXPECT_TRUE(identical_bits(got.residual, all.layers[l].residual)) << "layer " << l;
        }
      }
    }
    // Gated heads too (the ablations' passes): kept or not, the same logits.
    Probe gated_all(3), gated_none(3, ProbeOutputs::none());
    for (Probe* p : {&gated_all, &gated_none})
      p->layers[2].gates = Variable(Tensor::from_vector({1, 0, 1, 0.5}, {4}, dtype));
    const Tensor gated = m.logits(&gated_all);
    EXPECT_FALSE(identical_bits(gated, expected)) << "the gates changed something";
    EXPECT_TRUE(identical_bits(m.logits(&gated_none), gated));
  }
}

TEST(ProbeOutputs, ANoGradPassThatKeepsNoAttentionAllocatesNoLayersProbabilities) {
  HEADLAB_SKIP_WITHOUT_BUFFER_CACHE();
  // T = 256, d_model = 8: one layer's probabilities (2 MiB) outweigh every
  // other tensor of the pass together.
  const Model m(256, 8, DType::f32);
  const std::size_t probs = std::size_t{Model::B * Model::H} * 256 * 256 * sizeof(float);
  autograd::NoGradGuard no_grad;
  // The control: a probe that keeps them frees every layer's when it goes.
  const std::size_t kept = test::peak_tensor_bytes([&] {
    Probe probe(3);
    (void)m.logits(&probe);
  });
  EXPECT_GE(kept, 3 * probs) << "the measure sees a layer's attention freed";
  const std::size_t none = test::peak_tensor_bytes([&] {
    Probe probe(3, ProbeOutputs::none());
    (void)m.logits(&probe);
  });
  EXPECT_LT(none, probs) << "a pass read for its logits allocated " << none << " bytes";
  EXPECT_LT(test::peak_tensor_bytes([&] { (void)m.logits(nullptr); }), probs) << "nor does a pass without a probe";
  EXPECT_LT(test::peak_tensor_bytes([&] {
              Probe probe(3, ProbeOutputs::only_residual());
              (void)m.logits(&probe);
            }),
            probs)
      << "nor one that keeps the residuals (the analysis's prefixes)";
}

// A recorded float32 pass still keeps P for its backward when no probe asks
// for it: its gradients are those of the probed pass, bit for bit (a backward
// without P would recompute it in bf16).
TEST(ProbeOutputs, ARecordedPassKeepsTheProbabilitiesItsBackwardReads) {
  Model m(20, 16, DType::f32);
  const std::vector<int32_t> targets(static_cast<std::size_t>(Model::B * m.T), 2);
  const auto gradients = [&](Probe* probe) {
    m.model.zero_grad();
    autograd::cross_entropy(m.model.forward(m.tokens, Model::B, m.T, &m.pad, probe), targets).backward();
    std::vector<Tensor> out;
    for (const Variable& p : m.model.parameters()) out.push_back(p.grad().clone());
    return out;
  };
  Probe probe(3);
  const std::vector<Tensor> probed = gradients(&probe), plain = gradients(nullptr);
  ASSERT_EQ(probed.size(), plain.size());
  for (std::size_t i = 0; i < plain.size(); ++i) EXPECT_TRUE(identical_bits(plain[i], probed[i])) << "parameter " << i;
}

}  // namespace probe_outputs_test
}  // namespace headlab::layers
