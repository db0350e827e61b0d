// MultiHeadAttention against the equations of docs/model.md.
#include "layers/attention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "core/ops.h"
#include "core/random.h"
#include "tests/layers/reference_attention.h"
#include "tests/precision.h"

namespace headlab::layers {
namespace {

using autograd::Variable;
using core::DType;
using core::Tensor;
using testing::reference_attention;
using testing::ReferenceOptions;

constexpr int64_t kBatch = 2;
constexpr int64_t kSeq = 5;
constexpr int64_t kModel = 16;

// An f64 layer whose weights are large enough (N(0, 0.5)) that attention is
// sharp, so a wrong scale or mask shows up far above rounding.
std::unique_ptr<MultiHeadAttention> make_attention(int64_t heads, bool causal, uint64_t seed = 1) {
  core::Generator gen(seed);
  auto mha = std::make_unique<MultiHeadAttention>(ModelSpec{.heads = heads, .d_model = kModel, .causal = causal}, gen,
                                                  DType::f64);
  for (auto& [name, p] : mha->named_parameters()) p.mutable_value().copy_(gen.normal(p.shape(), 0.0, 0.5, DType::f64));
  return mha;
}

Tensor random_input(uint64_t seed, int64_t seq_len = kSeq) {
  core::Generator gen(seed);
  return gen.normal({kBatch, seq_len, kModel}, 0.0, 1.0, DType::f64);
}

TEST(MultiHeadAttention, OutputIsBatchByTimeByModelForEveryHeadCount) {
  for (int64_t h : {1, 2, 4, 8}) {
    auto mha = make_attention(h, true);
    const Variable out = mha->forward(Variable(random_input(2)));
    EXPECT_EQ(out.shape(), (core::Shape{kBatch, kSeq, kModel})) << "heads=" << h;
  }
}

TEST(MultiHeadAttention, ReportsPerHeadWidthDModelOverHeads) {
  for (int64_t h : {1, 2, 4, 8}) {
    auto mha = make_attention(h, true);
    EXPECT_EQ(mha->d_k(), kModel / h) << "heads=" << h;
    EXPECT_EQ(mha->heads(), h);
  }
}

TEST(MultiHeadAttention, DModelNotDivisibleByHeadsIsAnErrorNamingBoth) {
  core::Generator gen(0);
  try {
    MultiHeadAttention mha(ModelSpec{.heads = 3, .d_model = 10}, gen);
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("10"), std::string::npos) << msg;
    EXPECT_NE(msg.find("3"), std::string::npos) << msg;
  }
}

TEST(MultiHeadAttention, EqualsTheHeadByHeadEquationsInFloat64) {
  for (bool causal : {false, true}) {
    for (int64_t h : {1, 2, 4, 8}) {
      auto mha = make_attention(h, causal, static_cast<uint64_t>(10 + h));
      const Tensor x = random_input(3);
      const Tensor out = mha->forward(Variable(x)).value();
      const Tensor ref = reference_attention(*mha, x, ReferenceOptions().with_causal(causal));
      EXPECT_LT(core::max_abs_diff(out, ref), 1e-12) << "heads=" << h << " causal=" << causal;
    }
  }
}

TEST(MultiHeadAttention, ScalesScoresByPerHeadDkNotDModel) {
  auto mha = make_attention(4, false);
  const Tensor x = random_input(4);
  const Tensor out = mha->forward(Variable(x)).value();
  const Tensor with_dk = reference_attention(*mha, x, ReferenceOptions().with_scale_dim(mha->d_k()));
  const Tensor with_d_model = reference_attention(*mha, x, ReferenceOptions().with_scale_dim(kModel));
  EXPECT_LT(core::max_abs_diff(out, with_dk), 1e-12);
  // Dividing by sqrt(d_model) instead would move the output far beyond rounding.
  EXPECT_GT(core::max_abs_diff(out, with_d_model), 1e-3);
}

TEST(MultiHeadAttention, CausalOutputAtTDoesNotDependOnLaterPositions) {
  auto mha = make_attention(2, true);
  const Tensor x = random_input(5);
  const Tensor out = mha->forward(Variable(x)).value();
  for (int64_t t = 0; t + 1 < kSeq; ++t) {
    Tensor changed = x.clone();
    core::Generator gen(static_cast<uint64_t>(100 + t));
    changed.slice(1, t + 1, kSeq).copy_(gen.normal({kBatch, kSeq - t - 1, kModel}, 0.0, 3.0, DType::f64));
    const Tensor out2 = mha->forward(Variable(changed)).value();
    EXPECT_EQ(core::max_abs_diff(out.slice(1, 0, t + 1), out2.slice(1, 0, t + 1)), 0.0) << "t=" << t;
    EXPECT_GT(core::max_abs_diff(out.slice(1, t + 1, kSeq), out2.slice(1, t + 1, kSeq)), 1e-6) << "t=" << t;
  }
}

TEST(MultiHeadAttention, BidirectionalOutputAtTDependsOnLaterPositions) {
  auto mha = make_attention(2, false);
  const Tensor x = random_input(5);
  const Tensor out = mha->forward(Variable(x)).value();
  Tensor changed = x.clone();
  changed.slice(1, kSeq - 1, kSeq).fill_(2.0);
  const Tensor out2 = mha->forward(Variable(changed)).value();
  EXPECT_GT(core::max_abs_diff(out.slice(1, 0, 1), out2.slice(1, 0, 1)), 1e-6);
}

TEST(MultiHeadAttention, AttentionRowsSumToOneAndMaskedEntriesAreExactlyZero) {
  auto mha = make_attention(4, true);
  LayerProbe probe;
  mha->forward(Variable(random_input(6)), nullptr, &probe);
  const Tensor& a = probe.attention;
  ASSERT_EQ(a.shape(), (core::Shape{kBatch, 4, kSeq, kSeq}));
  const Tensor row_sums = core::sum(a, {-1});
  EXPECT_LT(core::max_abs_diff(row_sums, Tensor::ones(row_sums.shape(), DType::f64)), 1e-12);
  for (int64_t b = 0; b < kBatch; ++b) {
    for (int64_t h = 0; h < 4; ++h) {
      for (int64_t q = 0; q < kSeq; ++q) {
        for (int64_t k = 0; k < kSeq; ++k) {
          if (k > q) {
            EXPECT_EQ(a.at({b, h, q, k}), 0.0) << b << h << q << k;
          } else {
            EXPECT_GT(a.at({b, h, q, k}), 0.0) << b << h << q << k;
          }
        }
      }
    }
  }
}

TEST(MultiHeadAttention, ProbedAttentionEqualsTheReferenceProbabilities) {
  auto mha = make_attention(2, true);
  const Tensor x = random_input(7);
  LayerProbe probe;
  mha->forward(Variable(x), nullptr, &probe);
  const int64_t dk = mha->d_k();
  for (int64_t i = 0; i < 2; ++i) {
    const Tensor wq = mha->head_weight(MultiHeadAttention::Projection::Q, i);
    const Tensor wk = mha->head_weight(MultiHeadAttention::Projection::K, i);
    const Tensor q = core::matmul(x, wq.transpose(0, 1)) + mha->head_bias(MultiHeadAttention::Projection::Q, i);
    const Tensor k = core::matmul(x, wk.transpose(0, 1)) + mha->head_bias(MultiHeadAttention::Projection::K, i);
    Tensor scores = core::matmul(q, k.transpose(1, 2)) * (1.0 / std::sqrt(static_cast<double>(dk)));
    for (int64_t qi = 0; qi < kSeq; ++qi) {
      for (int64_t ki = qi + 1; ki < kSeq; ++ki) {
        for (int64_t b = 0; b < kBatch; ++b) scores.set({b, qi, ki}, -std::numeric_limits<double>::infinity());
      }
    }
    const Tensor expected = testing::reference_softmax(scores);
    EXPECT_LT(core::max_abs_diff(probe.attention.select(1, i), expected), 1e-12) << "head " << i;
  }
}

TEST(MultiHeadAttention, ProbedAttentionIsNotPartOfTheGraph) {
  auto mha = make_attention(2, true);
  const Variable x(random_input(8), true);
  LayerProbe probe;
  const Variable out = mha->forward(x, nullptr, &probe);
  const Tensor before = probe.attention.clone();
  autograd::sum(out).backward();
  EXPECT_EQ(core::max_abs_diff(before, probe.attention), 0.0);
  EXPECT_TRUE(x.has_grad());
}

TEST(MultiHeadAttention, PaddingMaskGivesPadKeysNoAttention) {
  auto mha = make_attention(2, false);
  const Tensor x = random_input(9);
  // Sequence 0 has 3 real tokens, sequence 1 all 5.
  const Tensor pad = Tensor::from_vector({1, 1, 1, 0, 0, 1, 1, 1, 1, 1}, {kBatch, kSeq}, DType::f64);
  LayerProbe probe;
  const Tensor out = mha->forward(Variable(x), &pad, &probe).value();
  const Tensor& a = probe.attention;
  for (int64_t h = 0; h < 2; ++h) {
    for (int64_t q = 0; q < kSeq; ++q) {
      EXPECT_EQ(a.at({0, h, q, 3}), 0.0);
      EXPECT_EQ(a.at({0, h, q, 4}), 0.0);
      EXPECT_GT(a.at({1, h, q, 4}), 0.0);
    }
  }
  EXPECT_LT(core::max_abs_diff(out, reference_attention(*mha, x, ReferenceOptions().with_padding(pad))), 1e-12);
  // The real tokens of sequence 0 see exactly what they would see unpadded.
  const Tensor unpadded = x.slice(0, 0, 1).slice(1, 0, 3).contiguous();
  const Tensor alone = mha->forward(Variable(unpadded)).value();
  EXPECT_LT(core::max_abs_diff(out.slice(0, 0, 1).slice(1, 0, 3), alone), 1e-12);
}

TEST(MultiHeadAttention, QueryThatSeesNoKeyAttendsToNothingInsteadOfNaN) {
  auto mha = make_attention(2, true);
  const Tensor x = random_input(10);
  // Left padding with a causal mask: query 0 of sequence 0 can see no real key.
  const Tensor pad = Tensor::from_vector({0, 1, 1, 1, 1, 1, 1, 1, 1, 1}, {kBatch, kSeq}, DType::f64);
  LayerProbe probe;
  const Tensor out = mha->forward(Variable(x), &pad, &probe).value();
  for (double value : out.to_vector()) ASSERT_TRUE(std::isfinite(value));
  const Tensor& a = probe.attention;
  for (int64_t h = 0; h < 2; ++h) {
    for (int64_t k = 0; k < kSeq; ++k) EXPECT_EQ(a.at({0, h, 0, k}), 0.0);
    EXPECT_NEAR(core::sum(a.select(0, 0).select(0, h).select(0, 1)).item(), 1.0, 1e-12);
  }
  // With no head output, that position's output is W_O's bias.
  EXPECT_LT(core::max_abs_diff(out.select(0, 0).select(0, 0), mha->o().bias().value()), 1e-15);
}

TEST(MultiHeadAttention, PaddingMaskOfTheWrongShapeIsAnError) {
  auto mha = make_attention(2, true);
  const Tensor pad = Tensor::ones({kBatch, kSeq + 1}, DType::f64);
  EXPECT_THROW(mha->forward(Variable(random_input(1)), &pad), std::invalid_argument);
}

TEST(MultiHeadAttention, InputNotEndingInDModelIsAnError) {
  auto mha = make_attention(2, true);
  core::Generator gen(0);
  EXPECT_THROW(mha->forward(Variable(gen.normal({2, 3, kModel + 1}, 0, 1, DType::f64))), std::invalid_argument);
  EXPECT_THROW(mha->forward(Variable(gen.normal({3, kModel}, 0, 1, DType::f64))), std::invalid_argument);
}

TEST(MultiHeadAttention, GateOfZeroRemovesExactlyThatHead) {
  for (int64_t h : {2, 4}) {
    for (int64_t dropped = 0; dropped < h; ++dropped) {
      auto mha = make_attention(h, true);
      const Tensor x = random_input(11);
      LayerProbe probe{.gates = Variable(Tensor::ones({h}, DType::f64))};
      probe.gates.mutable_value().set({dropped}, 0.0);
      const Tensor out = mha->forward(Variable(x), nullptr, &probe).value();
      const Tensor ref = reference_attention(*mha, x, ReferenceOptions().with_causal(true).without_head(dropped));
      EXPECT_LT(core::max_abs_diff(out, ref), 1e-12) << "heads=" << h << " dropped=" << dropped;
      const Tensor full = reference_attention(*mha, x, ReferenceOptions().with_causal(true));
      EXPECT_GT(core::max_abs_diff(out, full), 1e-6);
    }
  }
}

TEST(MultiHeadAttention, WithoutAProbeTheGatesAreOnesAndNotParameters) {
  auto mha = make_attention(4, true);
  const Tensor x = random_input(16);
  LayerProbe ones{.gates = Variable(Tensor::ones({4}, DType::f64))};
  EXPECT_EQ(core::max_abs_diff(mha->forward(Variable(x)).value(), mha->forward(Variable(x), nullptr, &ones).value()),
            0.0);
  EXPECT_FALSE(ones.gates.requires_grad());
  for (auto& [name, p] : mha->named_parameters()) EXPECT_NE(p.node(), ones.gates.node()) << name;
  EXPECT_EQ(mha->num_parameters(), 4 * (kModel * kModel + kModel));
}

TEST(MultiHeadAttention, GateGradientIsTheLossChangePerUnitGate) {
  auto mha = make_attention(2, true);
  const Tensor x = random_input(12);
  LayerProbe probe{.gates = Variable(Tensor::ones({2}, DType::f64), /*requires_grad=*/true)};
  autograd::sum(mha->forward(Variable(x), nullptr, &probe)).backward();
  ASSERT_TRUE(probe.gates.has_grad());
  const Tensor grad = probe.gates.grad().clone();
  // Loss is linear in each gate, so a unit step changes it by exactly the gradient.
  const double base = core::sum(mha->forward(Variable(x)).value()).item();
  for (int64_t i = 0; i < 2; ++i) {
    LayerProbe ablated{.gates = Variable(Tensor::ones({2}, DType::f64))};
    ablated.gates.mutable_value().set({i}, 0.0);
    const double without = core::sum(mha->forward(Variable(x), nullptr, &ablated).value()).item();
    EXPECT_NEAR(base - without, grad.at({i}), 1e-10) << "head " << i;
  }
}

// In bf16 the fused op keeps probabilities over 4 MiB a layer only for a
// probe (or the gates' gradient): without one its backward recomputes them
// (core/attention_bf16.h), padded keys and all, to the probed pass's bits.
TEST(MultiHeadAttention, InBf16AProbeChangesNoGradientBit) {
  SKIP_WITHOUT_BF16_UNITS();
  const test::PrecisionScope bf16(core::GemmPrecision::bf16);
  core::Generator gen(21);
  MultiHeadAttention mha(ModelSpec{.heads = 2, .d_model = kModel, .causal = true}, gen, DType::f32);
  const int64_t T = 518;  // P over 4 MiB (kBatch 2, 2 heads); nine causal chunks, the last of 6 rows
  const Tensor x = gen.normal({kBatch, T, kModel}, 0.0, 1.0, DType::f32);
  const Tensor weights = gen.normal({kBatch, T, kModel}, 0.0, 1.0, DType::f32);
  std::vector<double> real(static_cast<std::size_t>(kBatch * T), 1.0);
  for (int64_t j = 50; j < T; ++j) real[static_cast<std::size_t>(j)] = 0.0;  // sequence 0 has 50 tokens
  real[static_cast<std::size_t>(T + 3)] = 0.0;
  const Tensor pad = Tensor::from_vector(real, {kBatch, T}, DType::f32);
  // x's gradient and every parameter's, exactly.
  const auto grads = [&](LayerProbe* probe) {
    mha.zero_grad();
    const Variable input(x, true);
    autograd::sum(mha.forward(input, &pad, probe) * Variable(weights)).backward();
    std::vector<std::vector<double>> g{input.grad().to_vector()};
    for (auto& [name, p] : mha.named_parameters()) g.push_back(p.grad().to_vector());
    return g;
  };
  LayerProbe probe;
  const std::vector<std::vector<double>> probed = grads(&probe);
  ASSERT_TRUE(probe.attention.defined());
  EXPECT_EQ(grads(nullptr), probed);
}

// In bf16 the recorded op holds q, k and v rounded for its backward
// (core/attention_bf16.h) and reads none of their float32 values, which are
// released after the forward once nothing else holds them; its gradients
// keep every bit of the path that reads q, k and v (a probe's), P kept
// (T = 150, three causal chunks) or recomputed (518). float32 keeps them.
TEST(MultiHeadAttention, InBf16TheFusedOpReleasesQKVAfterItsForwardAndChangesNoGradientBit) {
  SKIP_WITHOUT_BF16_UNITS();
  for (const int64_t T : {150, 518}) {
    SCOPED_TRACE("T = " + std::to_string(T));
    core::Generator gen(23);
    const int64_t h = 2, dk = kModel / h;
    const auto leaf = [&] { return Variable(gen.normal({kBatch, T, kModel}, 0.0, 1.0, DType::f32), true); };
    const Variable xq = leaf(), xk = leaf(), xv = leaf();
    const Variable weights(gen.normal({kBatch, T, kModel}, 0.0, 1.0, DType::f32));
    std::vector<double> real(static_cast<std::size_t>(kBatch * T), 1.0);
    for (int64_t j = 40; j < T; ++j) real[static_cast<std::size_t>(j)] = 0.0;  // sequence 0 has 40 tokens
    real[static_cast<std::size_t>(T + 5)] = 0.0;
    const Tensor pad = Tensor::from_vector(real, {kBatch, T}, DType::f32);
    struct Run {
      std::vector<std::vector<double>> grads;
      bool released = false;
    };
    // q, k and v are op results (times 2: exact) that only attention holds
    // once the forward is done.
    const auto run = [&](Tensor* probs) {
      for (const Variable* x : {&xq, &xk, &xv}) x->zero_grad();
      const Variable out = autograd::attention(xq * 2.0, xk * 2.0, xv * 2.0, h, true, 1.0 / std::sqrt(double(dk)),
                                               pad, Variable(), probs);
      Run r;
      r.released = true;
      for (int i = 0; i < 3; ++i) r.released = r.released && out.node()->inputs[i].node()->released();
      autograd::sum(out * weights).backward();
      for (const Variable* x : {&xq, &xk, &xv}) r.grads.push_back(x->grad().to_vector());
      return r;
    };
    Run plain, probed;
    {
      const test::PrecisionScope bf16(core::GemmPrecision::bf16);
      plain = run(nullptr);
      Tensor probs;
      probed = run(&probs);
      ASSERT_TRUE(probs.defined());
    }
    EXPECT_TRUE(plain.released);
    EXPECT_FALSE(probed.released);  // the probe's path reads q, k and v
    EXPECT_EQ(plain.grads, probed.grads);
    const test::PrecisionScope f32(core::GemmPrecision::f32);
    EXPECT_FALSE(run(nullptr).released);
  }
}

TEST(MultiHeadAttention, ProbeGatesMustBeAnHElementVariableOfTheInputsDtype) {
  auto mha = make_attention(4, true);
  const Variable x(random_input(17));
  LayerProbe mine{.gates = Variable(Tensor::from_vector({1, 0, 1, 1}, {4}, DType::f64))};
  EXPECT_NO_THROW(mha->forward(x, nullptr, &mine));
  LayerProbe short_gates{.gates = Variable(Tensor::ones({3}, DType::f64))};
  EXPECT_THROW(mha->forward(x, nullptr, &short_gates), std::invalid_argument);
  LayerProbe f32_gates{.gates = Variable(Tensor::ones({4}, DType::f32))};
  EXPECT_THROW(mha->forward(x, nullptr, &f32_gates), std::invalid_argument);
}

TEST(MultiHeadAttention, EachProbeKeepsItsOwnPassAndTheLayerKeepsNothing) {
  auto mha = make_attention(2, true);
  LayerProbe first, second;
  mha->forward(Variable(random_input(14)), nullptr, &first);
  const Tensor copy = first.attention.clone();
  mha->forward(Variable(random_input(15)), nullptr, &second);
  EXPECT_GT(core::max_abs_diff(second.attention, copy), 0.0);
  EXPECT_EQ(core::max_abs_diff(first.attention, copy), 0.0);
}

TEST(MultiHeadAttention, ProbedHeadOutputsAreWhatWOReads) {
  auto mha = make_attention(4, true);
  LayerProbe probe;
  const Tensor out = mha->forward(Variable(random_input(18)), nullptr, &probe).value();
  ASSERT_EQ(probe.head_outputs.shape(), (core::Shape{kBatch, kSeq, kModel}));
  EXPECT_LT(core::max_abs_diff(mha->o().forward(Variable(probe.head_outputs)).value(), out), 1e-12);
}

TEST(MultiHeadAttention, HeadWeightIsAViewOfThatHeadsRows) {
  auto mha = make_attention(4, true);
  const int64_t dk = mha->d_k();
  using P = MultiHeadAttention::Projection;
  for (P which : {P::Q, P::K, P::V}) {
    Linear& lin = which == P::Q ? mha->q() : which == P::K ? mha->k() : mha->v();
    const Tensor before = lin.weight().value().clone();
    Tensor view = mha->head_weight(which, 2);
    ASSERT_EQ(view.shape(), (core::Shape{dk, kModel}));
    EXPECT_TRUE(view.shares_storage(lin.weight().value()));
    EXPECT_EQ(core::max_abs_diff(view, before.slice(0, 2 * dk, 3 * dk)), 0.0);
    view.fill_(7.0);
    const Tensor& after = lin.weight().value();
    for (int64_t r = 0; r < kModel; ++r) {
      const bool in_head = r >= 2 * dk && r < 3 * dk;
      for (int64_t c = 0; c < kModel; ++c) {
        EXPECT_EQ(after.at({r, c}), in_head ? 7.0 : before.at({r, c})) << r << "," << c;
      }
    }
    Tensor bias = mha->head_bias(which, 1);
    bias.fill_(-3.0);
    for (int64_t r = 0; r < kModel; ++r) {
      EXPECT_EQ(lin.bias().value().at({r}) == -3.0, r >= dk && r < 2 * dk) << r;
    }
  }
}

TEST(MultiHeadAttention, HeadOutputWeightIsAViewOfThatHeadsColumns) {
  auto mha = make_attention(4, true);
  const int64_t dk = mha->d_k();
  const Tensor before = mha->o().weight().value().clone();
  Tensor view = mha->head_output_weight(3);
  ASSERT_EQ(view.shape(), (core::Shape{kModel, dk}));
  view.fill_(5.0);
  for (int64_t r = 0; r < kModel; ++r) {
    for (int64_t c = 0; c < kModel; ++c) {
      EXPECT_EQ(mha->o().weight().value().at({r, c}), c >= 3 * dk ? 5.0 : before.at({r, c}));
    }
  }
}

TEST(MultiHeadAttention, SettingAHeadsProjectionChangesOnlyThatHeadsAttention) {
  auto mha = make_attention(4, false);
  const Tensor x = random_input(13);
  LayerProbe probe;
  mha->forward(Variable(x), nullptr, &probe);
  const Tensor before = probe.attention.clone();
  mha->head_weight(MultiHeadAttention::Projection::Q, 1).fill_(0.0);
  mha->head_bias(MultiHeadAttention::Projection::Q, 1).fill_(0.0);
  mha->forward(Variable(x), nullptr, &probe);
  const Tensor& after = probe.attention;
  for (int64_t h = 0; h < 4; ++h) {
    const double diff = core::max_abs_diff(before.select(1, h), after.select(1, h));
    if (h == 1) {
      EXPECT_GT(diff, 1e-3);
      // Q_1 = 0: every score is 0, so the head attends uniformly.
      EXPECT_LT(core::max_abs_diff(after.select(1, h), Tensor::full({kBatch, kSeq, kSeq}, 1.0 / kSeq, DType::f64)),
                1e-15);
    } else {
      EXPECT_EQ(diff, 0.0) << "head " << h;
    }
  }
}

TEST(MultiHeadAttention, HeadIndexOutOfRangeIsAnError) {
  auto mha = make_attention(4, true);
  EXPECT_THROW(mha->head_weight(MultiHeadAttention::Projection::Q, 4), std::invalid_argument);
  EXPECT_THROW(mha->head_bias(MultiHeadAttention::Projection::V, -1), std::invalid_argument);
  EXPECT_THROW(mha->head_output_weight(4), std::invalid_argument);
}

TEST(MultiHeadAttention, ParametersAreNamedQKVO) {
  auto mha = make_attention(2, true);
  std::vector<std::string> names;
  for (auto& [name, p] : mha->named_parameters()) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"q.weight", "q.bias", "k.weight", "k.bias", "v.weight", "v.bias",
                                             "o.weight", "o.bias"}));
}

TEST(MultiHeadAttention, ReplacedHeadsTakeTheGivenValuesAndTheOthersStayBitIdentical) {
  auto mha = make_attention(4, true);
  const Tensor x = random_input(19);
  LayerProbe plain;
  mha->forward(Variable(x), nullptr, &plain);
  core::Generator gen(3);
  const Tensor replacement = gen.normal({kBatch, kSeq, kModel}, 0, 1, DType::f64);
  LayerProbe probe{.replace_heads = {false, true, false, true}, .replacement = replacement};
  mha->forward(Variable(x), nullptr, &probe);
  const int64_t dk = kModel / 4;
  for (int64_t i = 0; i < 4; ++i) {
    const Tensor got = probe.head_outputs.slice(2, i * dk, (i + 1) * dk);
    const Tensor want = (i % 2 == 1 ? replacement : plain.head_outputs).slice(2, i * dk, (i + 1) * dk);
    EXPECT_EQ(core::max_abs_diff(got, want), 0.0) << "head " << i;
  }
}

TEST(MultiHeadAttention, ReplacingAHeadByItsOwnOutputChangesNoBit) {
  auto mha = make_attention(2, true);
  const Tensor x = random_input(20);
  LayerProbe plain;
  const Tensor out = mha->forward(Variable(x), nullptr, &plain).value();
  LayerProbe same{.replace_heads = {true, true}, .replacement = plain.head_outputs};
  EXPECT_EQ(core::max_abs_diff(mha->forward(Variable(x), nullptr, &same).value(), out), 0.0);
}

TEST(MultiHeadAttention, ProbeReplacementMustMatchTheHeadsAndTheHeadOutputs) {
  auto mha = make_attention(4, true);
  const Variable x(random_input(21));
  LayerProbe few{.replace_heads = {true, false}, .replacement = Tensor::zeros({kBatch, kSeq, kModel}, DType::f64)};
  EXPECT_THROW(mha->forward(x, nullptr, &few), std::invalid_argument);
  LayerProbe missing{.replace_heads = {true, false, false, false}};
  EXPECT_THROW(mha->forward(x, nullptr, &missing), std::invalid_argument);
  LayerProbe wrong{.replace_heads = {true, false, false, false}, .replacement = Tensor::zeros({kBatch, kSeq, 3}, DType::f64)};
  EXPECT_THROW(mha->forward(x, nullptr, &wrong), std::invalid_argument);
  LayerProbe f32{.replace_heads = {true, false, false, false}, .replacement = Tensor::zeros({kBatch, kSeq, kModel}, DType::f32)};
  EXPECT_THROW(mha->forward(x, nullptr, &f32), std::invalid_argument);
}

}  // namespace
}  // namespace headlab::layers
