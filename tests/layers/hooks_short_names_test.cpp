// TransformerLens's short activation names (layers/hooks_short_names.h):
// the one rule the CLI's --hooks and Python's get_act_name and names= read.
#include "layers/hooks_short_names.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "layers/hooks.h"

namespace headlab::layers {
namespace {

// The compact form of a full hook name, built from its parts (not by the
// rule under test): blocks.1.ln2.hook_scale -> scale1ln2.
std::string compact_of(const std::string& full) {
  const std::string point = full.substr(full.rfind("hook_") + 5);
  if (!full.starts_with("blocks.")) return point;  // hook_embed, ln_final.hook_scale: no block
  const std::string layer = full.substr(7, full.find('.', 7) - 7);
  for (const char* ln : {"ln1", "ln2"})
    if (full.find(std::string(".") + ln + ".") != std::string::npos) return point + layer + ln;
  return point + layer;
}

TEST(ShortHookNames, EveryHookNameOfATwoLayerModelIsReachedByItsCompactName) {
  for (const bool attn_only : {false, true}) {
    ModelSpec spec;
    spec.layers = 2;
    spec.attn_only = attn_only;
    for (const std::string& name : hook_names(spec)) {
      const std::string compact = compact_of(name);
      EXPECT_EQ(full_hook_name(compact), name) << compact;
      EXPECT_NO_THROW(check_hook_name(spec, full_hook_name(compact))) << compact;
      EXPECT_EQ(full_hook_name(name), name);  // a full name is kept
    }
  }
}

TEST(ShortHookNames, ActNameReadsTransformerLensArgumentsAndAliases) {
  EXPECT_EQ(act_name("pattern", 1), "blocks.1.attn.hook_pattern");
  EXPECT_EQ(act_name("attn", 1), "blocks.1.attn.hook_pattern");
  EXPECT_EQ(act_name("attn_logits", 0), "blocks.0.attn.hook_attn_scores");
  EXPECT_EQ(act_name("mlp_pre", 0), "blocks.0.mlp.hook_pre");
  EXPECT_EQ(act_name("scale", 1, "ln2"), "blocks.1.ln2.hook_scale");
  EXPECT_EQ(act_name("scale", std::nullopt), "ln_final.hook_scale");
  EXPECT_EQ(act_name("normalized", std::nullopt, "ln_final"), "ln_final.hook_normalized");
  EXPECT_EQ(act_name("embed", std::nullopt), "hook_embed");
  EXPECT_THROW(act_name("embed", 0), std::invalid_argument);
  EXPECT_THROW(act_name("scale", 0), std::invalid_argument);
  EXPECT_THROW(act_name("scale", 0, "ln3"), std::invalid_argument);
  try {
    act_name("resid_pots", 0);
    FAIL() << "no throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("unknown activation name 'resid_pots'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("resid_post"), std::string::npos) << e.what();
  }
}

TEST(ShortHookNames, CompactNamesAreSplitOnlyInTheirOwnForm) {
  const auto split = split_compact_hook_name("scale12ln1");
  ASSERT_TRUE(split.has_value());
  EXPECT_EQ(split->name, "scale");
  EXPECT_EQ(split->layer, 12);
  EXPECT_EQ(split->layer_type, "ln1");
  EXPECT_EQ(full_hook_name("k6"), "blocks.6.attn.hook_k");
  EXPECT_EQ(full_hook_name("resid_pre0"), "blocks.0.hook_resid_pre");
  for (const char* other : {"k6x", "6k", "k", "K6", "k-1", "k6ln3", "k99999999999", "blocks.0.k6", ""})
    EXPECT_FALSE(split_compact_hook_name(other).has_value()) << other;
  for (const char* kept : {"k6x", "6k", "K6", "k-1", "k99999999999", "hook_k6", "blocks.0.k6", "patern1", ""})
    EXPECT_EQ(full_hook_name(kept), kept) << kept;  // for the hook-name check to name the nearest
  EXPECT_THROW(full_hook_name("pattern"), std::invalid_argument);  // a block's, without its block
  EXPECT_THROW(full_hook_name("scale0"), std::invalid_argument);   // which LayerNorm?
}

// check_hook_name's message for the hook name `written` stands for.
std::string refusal(const ModelSpec& spec, const std::string& written) {
  try {
    check_hook_name(spec, full_hook_name(written));
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  ADD_FAILURE() << written << " was not refused";
  return "";
}

TEST(ShortHookNames, AMisspelledCompactNameIsRefusedWithTheNearestCompactNames) {
  ModelSpec spec;
  spec.layers = 2;
  const std::string typo = refusal(spec, "patern1");
  EXPECT_NE(typo.find("unknown hook name 'patern1'"), std::string::npos) << typo;
  EXPECT_NE(typo.find("nearest: pattern1"), std::string::npos) << typo;
  const std::string past = refusal(spec, "z2");
  EXPECT_NE(past.find("'blocks.2.attn.hook_z'"), std::string::npos) << past;
  EXPECT_NE(past.find("this model has 2 layers"), std::string::npos) << past;
}

}  // namespace
}  // namespace headlab::layers
