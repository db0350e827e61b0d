// Nanda et al.'s progress measures (analysis/fourier.h, fourier_loss.h,
// progress_measures.h) on inputs whose answers are known: embeddings and
// logits built from given frequencies, and a model whose embedding is set.
#include "analysis/progress_measures.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <stdexcept>
#include <string>
#include <vector>

#include "analysis/fourier.h"
#include "analysis/fourier_loss.h"
#include "core/random.h"

namespace headlab::analysis {
namespace {

double wave(int64_t k, int64_t x, int64_t p, bool sine = false) {
  const double angle = 2 * std::numbers::pi * static_cast<double>(k * x) / static_cast<double>(p);
  return sine ? std::sin(angle) : std::cos(angle);
}

// Rows x in [0, 17), d 4: 2 cos(3x) and sin(3x), 0.5 cos(7x), a constant 1.
std::vector<double> two_frequency_rows(int64_t p) {
  std::vector<double> rows;
  for (int64_t x = 0; x < p; ++x)
    rows.insert(rows.end(), {2 * wave(3, x, p), wave(3, x, p, true), 0.5 * wave(7, x, p), 1.0});
  return rows;
}

TEST(Fourier, AnEmbeddingOfTwoFrequenciesHasThemAsItsKeysAndAllTheirNorm) {
  const int64_t p = 17;
  const std::vector<double> norms = frequency_norms(two_frequency_rows(p), p, 4);
  ASSERT_EQ(norms.size(), 9u);  // the constant and 1 .. 8
  const double half = static_cast<double>(p) / 2;
  EXPECT_NEAR(norms[0], std::sqrt(static_cast<double>(p)), 1e-12);
  EXPECT_NEAR(norms[3], std::sqrt(4 * half + half), 1e-12);
  EXPECT_NEAR(norms[7], std::sqrt(0.25 * half), 1e-12);
  for (const int k : {1, 2, 4, 5, 6, 8}) EXPECT_NEAR(norms[static_cast<std::size_t>(k)], 0, 1e-12) << k;
  EXPECT_EQ(key_frequencies(norms, 2), (std::vector<int64_t>{3, 7}));
  EXPECT_EQ(key_frequencies(norms, 20).size(), 8u);
  const double key = 5 * half + 0.25 * half;
  EXPECT_NEAR(key_share(norms, {3, 7}), key / (key + static_cast<double>(p)), 1e-12);
  EXPECT_NEAR(key_share(norms, {3}), 5 * half / (key + static_cast<double>(p)), 1e-12);
  EXPECT_THROW(frequency_norms(std::vector<double>(10), 17, 4), std::invalid_argument);
}

// logits[(a, b), c] = scale cos(w_k (a + b - c)) over classes p.
std::vector<double> adding_logits(int64_t p, int64_t k, double scale) {
  std::vector<double> out;
  for (int64_t a = 0; a < p; ++a)
    for (int64_t b = 0; b < p; ++b)
      for (int64_t c = 0; c < p; ++c) out.push_back(scale * wave(k, a + b - c + p, p));
  return out;
}

TEST(FourierLosses, TheKeyFrequencyCarriesAllOfAnAddingModelsLoss) {
  const int64_t p = 11;
  const std::vector<double> logits = adding_logits(p, 2, 10);
  const double full = modular_loss(logits, p, p);
  ASSERT_LT(full, 0.5);  // it adds: the target has the largest logit
  // Its own frequency: restricted = full, and excluded leaves all-zero
  // logits, whose loss is log p.
  const FourierLosses own = fourier_losses(logits, p, p, {2}, {});
  EXPECT_NEAR(own.full, full, 1e-12);
  EXPECT_NEAR(own.restricted, full, 1e-9);
  EXPECT_NEAR(own.excluded, std::log(static_cast<double>(p)), 1e-9);
  // Another frequency carries nothing: the reverse.
  const FourierLosses other = fourier_losses(logits, p, p, {3, 4}, {});
  EXPECT_NEAR(other.restricted, std::log(static_cast<double>(p)), 1e-9);
  EXPECT_NEAR(other.excluded, full, 1e-9);
  // The excluded loss is over the training rows only.
  std::vector<bool> train(static_cast<std::size_t>(p * p), false);
  train[5] = true;
  std::vector<double> marked = logits;
  marked[5 * static_cast<std::size_t>(p) + (0 + 5) % 11] += 100;  // row (0, 5): its target far ahead
  EXPECT_LT(fourier_losses(marked, p, p, {3}, train).excluded, 1e-6);
  EXPECT_THROW(key_frequency_part(logits, p, p, {6}), std::invalid_argument);  // above (p-1)/2
}

TEST(ProgressMeasures, ReadTheEmbeddingsFrequenciesAndTheHeadsAttention) {
  const int64_t p = 17;
  const layers::ModelSpec spec =
      layers::ModelSpec{.vocab = p + 1, .classes = p, .max_seq_len = 3, .layers = 1, .heads = 2, .d_model = 4,
                        .d_ff = 8, .layernorm = false, .activation = "relu"}
          .resolved();
  core::Generator gen(1);
  layers::Transformer model(spec, gen);
  const std::vector<double> rows = two_frequency_rows(p);
  for (auto& [name, w] : model.named_parameters())
    if (name == "tok_emb.weight")
      for (int64_t x = 0; x < p; ++x)
        for (int64_t j = 0; j < 4; ++j) w.mutable_value().set({x, j}, rows[static_cast<std::size_t>(x * 4 + j)]);
  const ProgressMeasures m = progress_measures(model, p, {}, 2);
  EXPECT_EQ(m.key_frequencies, (std::vector<int64_t>{3, 7}));
  EXPECT_NEAR(m.key_share, key_share(frequency_norms(rows, p, 4), {3, 7}), 1e-6);
  ASSERT_EQ(m.attention_a.size(), 2u);
  for (std::size_t h = 0; h < 2; ++h) {
    // Causal: '=' sees a, b and itself, so a and b hold less than all of it.
    EXPECT_GT(m.attention_a[h], 0);
    EXPECT_GT(m.attention_b[h], 0);
    EXPECT_LT(m.attention_a[h] + m.attention_b[h], 1);
  }
  // An untrained model is near chance, and its full loss is the same logits'.
  EXPECT_NEAR(m.full_loss, std::log(static_cast<double>(p)), 0.5);
  EXPECT_THROW(progress_measures(model, 18, {}), std::invalid_argument);
}

std::string refusal(const layers::Transformer& model, int64_t p) {
  try {
    progress_measures(model, p, {});
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

// A p below 3 (addition mod 2 has no frequency to measure) is named with the
// requirement, whatever the model; a model too small for p is named with
// the sizes it has and those it needs.
TEST(ProgressMeasures, RefusalsNameTheValueAndTheRequirement) {
  const layers::ModelSpec spec = layers::ModelSpec{.vocab = 4, .classes = 3, .max_seq_len = 3, .layers = 1,
                                                   .heads = 1, .d_model = 4, .d_ff = 8, .activation = "relu"}
                                     .resolved();
  core::Generator gen(2);
  const layers::Transformer model(spec, gen);
  EXPECT_NO_THROW(progress_measures(model, 3, {}));  // the smallest p that fits
  for (const int64_t p : {2, 1, 0, -5}) {
    const std::string what = refusal(model, p);
    EXPECT_NE(what.find("p = " + std::to_string(p) + ","), std::string::npos) << what;
    EXPECT_NE(what.find("need p >= 3"), std::string::npos) << what;
  }
  const std::string what = refusal(model, 5);
  EXPECT_NE(what.find("addition mod 5 needs vocab >= p + 1 = 6"), std::string::npos) << what;
  EXPECT_NE(what.find("classes >= p = 5"), std::string::npos) << what;
  EXPECT_NE(what.find("this one has vocab 4, classes 3 and max_seq_len 3"), std::string::npos) << what;
}

}  // namespace
}  // namespace headlab::analysis
