// --init-std's rules (layers/init_scale.h): each weight's scale per rule,
// the same normals as the default draw, biases and LayerNorm untouched.
#include "layers/init_scale.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/random.h"
#include "layers/transformer.h"

namespace headlab::layers {
namespace {

// V 10, C 9 (like modular addition mod 9), d 16, d_ff 64.
const ModelSpec kSpec =
    ModelSpec{.vocab = 10, .classes = 9, .max_seq_len = 3, .layers = 1, .heads = 4, .d_model = 16, .d_ff = 64}
        .resolved();

std::map<std::string, std::vector<double>> values_of(const std::string& rule) {
  core::Generator gen(5);
  Transformer model(kSpec, gen);
  apply_init_scale(model, rule, kSpec);
  std::map<std::string, std::vector<double>> out;
  for (const auto& [name, p] : model.named_parameters()) out[name] = p.value().to_vector();
  return out;
}

TEST(InitScale, RulesGiveEachMatrixItsStdFromTheSameNormals) {
  const auto base = values_of("0.02");
  const std::map<std::string, std::map<std::string, double>> expected = {
      {"fan-in",
       {{"tok_emb.weight", 1 / std::sqrt(16.0)}, {"pos_emb.weight", 1 / std::sqrt(16.0)},
        {"blocks.0.attn.q.weight", 1 / std::sqrt(16.0)}, {"blocks.0.mlp.fc1.weight", 1 / std::sqrt(16.0)},
        {"blocks.0.mlp.fc2.weight", 1 / std::sqrt(64.0)}, {"head.weight", 1 / std::sqrt(16.0)}}},
      {"nanda",
       {{"tok_emb.weight", 1 / std::sqrt(16.0)}, {"blocks.0.attn.o.weight", 1 / std::sqrt(16.0)},
        {"blocks.0.mlp.fc2.weight", 1 / std::sqrt(16.0)}, {"head.weight", 1 / std::sqrt(10.0)}}},
      {"0.5", {{"tok_emb.weight", 0.5}, {"blocks.0.attn.v.weight", 0.5}, {"head.weight", 0.5}}},
  };
  for (const auto& [rule, stds] : expected) {
    const auto scaled = values_of(rule);
    for (const auto& [name, std_dev] : stds) {
      const std::vector<double>& b = base.at(name);
      const std::vector<double>& s = scaled.at(name);
      ASSERT_EQ(b.size(), s.size());
      // Each weight is the default draw times std / 0.02 (float rounding).
      for (std::size_t i = 0; i < b.size(); ++i)
        ASSERT_NEAR(s[i], b[i] * std_dev / 0.02, 1e-6 * std::abs(s[i]) + 1e-12) << rule << " " << name << " " << i;
    }
    for (const auto& [name, v] : scaled) {
      if (name.find("bias") != std::string::npos) {
        EXPECT_EQ(v, base.at(name)) << rule << " " << name;
      }
    }
  }
  EXPECT_EQ(values_of("0.02"), base);  // the default leaves the bits alone
}

TEST(InitScale, BadRulesAreRefusedNamingTheValue) {
  EXPECT_EQ(init_rule_error("0.02"), "");
  EXPECT_EQ(init_rule_error("fan-in"), "");
  for (const std::string bad : {"", "0", "-0.1", "inf", "fan_in", "0.02 "})
    EXPECT_NE(init_rule_error(bad).find("'" + bad + "'"), std::string::npos) << bad;
  EXPECT_THROW(init_std_for("x", "head.weight", {2, 2}, kSpec), std::invalid_argument);
}

// A scale float32 weights cannot hold, or one that saturates every softmax,
// is refused up front, not met as an infinite loss blamed on --lr.
TEST(InitScale, ScalesBeyondFloat32OrSaturatingAreRefused) {
  EXPECT_EQ(init_rule_error("100"), "");
  EXPECT_EQ(init_rule_error("1e-30"), "");
  EXPECT_NE(init_rule_error("1e308").find("--init-std 1e308 is above 100"), std::string::npos);
  EXPECT_NE(init_rule_error("100.5").find("--init-std 100.5 is above 100"), std::string::npos);
  EXPECT_NE(init_rule_error("1e-300").find("--init-std 1e-300 is below 1.18e-38"), std::string::npos);
}

}  // namespace
}  // namespace headlab::layers
