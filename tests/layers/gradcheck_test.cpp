// Every layer and whole transformers pass the float64 finite-difference
// gradient check (eps 1e-6, atol 1e-5, rtol 1e-3) with respect to their
// inputs and every parameter; one test per registered case.
#include "layers/gradcheck_cases.h"

#include <gtest/gtest.h>

#include <cctype>
#include <string>
#include <vector>

namespace headlab::layers {
namespace {

class LayerGradcheck : public ::testing::TestWithParam<std::size_t> {};

TEST_P(LayerGradcheck, AnalyticGradientMatchesFiniteDifferences) {
  const autograd::GradcheckCase& c = layers_gradcheck_cases().at(GetParam());
  const autograd::GradcheckResult result = c.run();
  EXPECT_TRUE(result.ok) << c.name << ": " << result.message;
  EXPECT_GT(result.entries, 0) << c.name;
}

std::string case_name(const ::testing::TestParamInfo<std::size_t>& info) {
  std::string name;
  for (char ch : layers_gradcheck_cases().at(info.param).name) {
    if (std::isalnum(static_cast<unsigned char>(ch))) name += ch;
    else if (!name.empty() && name.back() != '_') name += '_';
  }
  while (!name.empty() && name.back() == '_') name.pop_back();
  return std::to_string(info.param) + "_" + name;
}

INSTANTIATE_TEST_SUITE_P(Layers, LayerGradcheck,
                         ::testing::Range<std::size_t>(0, layers_gradcheck_cases().size()), case_name);

TEST(LayerGradcheckCases, CoverEveryLayerAndTheWholeModel) {
  std::vector<std::string> names;
  for (const auto& c : layers_gradcheck_cases()) names.push_back(c.name);
  for (const char* layer : {"Linear", "LayerNorm", "Embedding", "PositionalEmbedding", "Softmax", "MLP",
                            "MultiHeadAttention", "TransformerBlock", "Transformer 2 layers", "gates", "hook_q_input",
                            "hook_attn_in", "hook_mlp_in"}) {
    bool found = false;
    for (const auto& n : names) found = found || n.find(layer) != std::string::npos;
    EXPECT_TRUE(found) << "no gradcheck case for " << layer;
  }
}

}  // namespace
}  // namespace headlab::layers
