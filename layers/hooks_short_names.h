// TransformerLens's short activation names (its utils.get_act_name), the one
// rule by which the CLI's --hooks and the Python package (get_act_name,
// names=, cache[...]) read them:
//
//   short name, layer, LayerNorm          hook name
//   "embed", "pos_embed"                   hook_embed, hook_pos_embed
//   "resid_pre", 0                         blocks.0.hook_resid_pre (and resid_mid, resid_post,
//                                          attn_out, mlp_out, attn_in, q_input, k_input,
//                                          v_input, mlp_in)
//   "pattern", 1                           blocks.1.attn.hook_pattern (and q, k, v, z, result,
//                                          attn_scores)
//   "pre", 0                               blocks.0.mlp.hook_pre (and post)
//   "scale", 1, "ln2"                      blocks.1.ln2.hook_scale (and normalized; ln1)
//   "scale"                                ln_final.hook_scale (and normalized)
//
// TransformerLens's aliases: attn (pattern), attn_logits (attn_scores), query,
// key, value (q, k, v), mlp_pre, mlp_post (pre, post). Its compact form writes
// the three in one word: "pattern0", "k6", "scale1ln2"; here a short name with
// an underscore too ("resid_pre0"), which TransformerLens's pattern misses.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace headlab::layers {

// Every short name, aliases included, sorted.
std::vector<std::string> short_hook_names();
bool is_short_hook_name(const std::string& name);

// The hook name of short name `name` at block `layer` (none: a point of no
// block) and LayerNorm `layer_type` ("ln1", "ln2"; "" or "ln_final": ln_final's).
// Throws std::invalid_argument for an unknown name, a layer given to a point
// of no block or none to a block's, or a block's LayerNorm point without ln1
// or ln2.
std::string act_name(const std::string& name, std::optional<int64_t> layer, const std::string& layer_type = "");

// A compact name split into act_name's arguments.
struct CompactHookName {
  std::string name;
  int64_t layer = 0;
  std::string layer_type;  // "", "ln1" or "ln2"
};
// `name` split as a compact name: lower-case letters and '_', the layer in
// decimal, then "ln1" or "ln2" or nothing. Nothing for any other string or a
// layer past 2^31; the short name is not checked (a misspelled one is still
// split, for the hook-name check to name the nearest).
std::optional<CompactHookName> split_compact_hook_name(const std::string& name);

// The hook name `name` stands for: a full name (one holding a '.' or
// starting with hook_) as it is; a compact name of a short name, or a short
// name of no block ("embed"; "scale": ln_final's), as act_name gives it; any
// other string as it is, for the hook-name check to name the nearest. Throws
// as act_name does for a block's short name without its layer ("pattern")
// and for a compact LayerNorm point without ln1 or ln2 ("scale0").
std::string full_hook_name(const std::string& name);

}  // namespace headlab::layers
