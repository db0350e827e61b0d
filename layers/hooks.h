// layers::Hooks: the named points of a forward pass where a caller reads or
// replaces an activation (docs/architecture.md, "How the analysis observes a
// forward pass"). The names and layouts are TransformerLens's, so a
// researcher's code and vocabulary carry over:
//
//   hook_embed, hook_pos_embed                 [B, T, d_model]
//   blocks.{i}.hook_resid_pre                  [B, T, d_model]
//   blocks.{i}.ln1.hook_scale                  [B, T, 1]         (layernorm)
//   blocks.{i}.ln1.hook_normalized             [B, T, d_model]   (layernorm)
//   blocks.{i}.attn.hook_q|hook_k|hook_v       [B, T, h, d_k]
//   blocks.{i}.attn.hook_attn_scores           [B, h, T, T]  scaled, masked (-inf)
//   blocks.{i}.attn.hook_pattern               [B, h, T, T]
//   blocks.{i}.attn.hook_z                     [B, T, h, d_k]    (after gates and replace_heads)
//   blocks.{i}.attn.hook_result                [B, T, h, d_model]
//   blocks.{i}.hook_attn_out                   [B, T, d_model]
//   blocks.{i}.hook_resid_mid                  [B, T, d_model]   (with an MLP)
//   blocks.{i}.ln2.hook_scale                  [B, T, 1]         (layernorm, MLP)
//   blocks.{i}.ln2.hook_normalized             [B, T, d_model]   (layernorm, MLP)
//   blocks.{i}.mlp.hook_pre|hook_post          [B, T, d_ff]      (with an MLP)
//   blocks.{i}.hook_mlp_out                    [B, T, d_model]   (with an MLP)
//   blocks.{i}.hook_resid_post                 [B, T, d_model]
//   ln_final.hook_scale                        [B, T, 1]         (layernorm)
//   ln_final.hook_normalized                   [B, T, d_model]   (layernorm)
//
// hook_normalized is the LayerNorm's output (after its weight and bias: what
// the next layer reads); hook_scale its divisor sqrt(var + eps) per position
// (a replaced scale divides the centered input: (x - mean) / scale * w + b);
// hook_result head i's output through its columns of W_O, without o's bias
// (a replaced result makes attn_out its sum over the heads + o's bias);
// hook_pos_embed the position rows broadcast to the batch. A pass visits
// only the points its hooks want; one whose hooks want nothing does no extra
// work and is bit-identical to a pass without hooks. hook_result and
// hook_scale are computed on the side, only when wanted: handed back
// unchanged, the pass goes on as without them (the same bits).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "autograd/variable.h"
#include "layers/model_spec.h"

namespace headlab::layers {

using autograd::Variable;
using core::Shape;

class Hooks {
 public:
  virtual ~Hooks() = default;
  // Whether the pass visits this point (asked once per point per pass).
  virtual bool wants(const std::string& name) const = 0;
  // The activation at `name` in the layout above, a Variable of the graph;
  // returns what flows downstream: the same Variable to keep it, or another
  // of the same shape and dtype to replace it (a constant for patching,
  // x + delta for gradients). Any other shape or dtype makes the forward
  // throw std::invalid_argument naming the expected one.
  virtual Variable visit(const std::string& name, const Variable& activation) = 0;
};

// Every hook name of a model of this spec, in forward order.
std::vector<std::string> hook_names(const ModelSpec& spec);
// Throws std::invalid_argument naming `name` and the nearest valid names
// unless it is one of hook_names(spec).
void check_hook_name(const ModelSpec& spec, const std::string& name);
// The layout of `name`'s activation in a [batch, seq_len] pass (checks the
// name as check_hook_name does).
Shape hook_shape(const ModelSpec& spec, const std::string& name, int64_t batch, int64_t seq_len);

// What a layer holds while it runs: the hooks (null: none) and the prefix of
// its points' names ("blocks.0.attn."). The layers call these.
struct HookScope {
  Hooks* hooks = nullptr;
  std::string prefix;

  HookScope inner(const std::string& part) const { return {hooks, hooks ? prefix + part : std::string()}; }
  bool wants(const char* point) const { return hooks != nullptr && hooks->wants(prefix + point); }
  // Hands `x` (viewed as `layout`, e.g. [B, T, h, d_k] for a [B, T, d] x;
  // empty = x's shape) to the hooks and returns what they give back, in x's
  // shape. Only for a point that wants(): the caller asked.
  Variable visit_wanted(const char* point, const Variable& x, const Shape& layout = {}) const;
  // visit_wanted if the point is wanted, else x itself.
  Variable visit(const char* point, const Variable& x, const Shape& layout = {}) const {
    return wants(point) ? visit_wanted(point, x, layout) : x;
  }
};

}  // namespace headlab::layers
