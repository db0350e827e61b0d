// layers::Hooks: the named points of a forward pass where a caller reads or
// replaces an activation (docs/architecture.md, "How the analysis observes a
// forward pass"). The names and layouts are TransformerLens's, so a
// researcher's code and vocabulary carry over:
//
//   hook_embed, hook_pos_embed                 [B, T, d_model]
//   blocks.{i}.hook_resid_pre                  [B, T, d_model]
//   blocks.{i}.hook_attn_in                    [B, T, h, d_model]
//   blocks.{i}.hook_q_input|hook_k_input|hook_v_input  [B, T, h, d_model]
//   blocks.{i}.ln1.hook_scale                  [B, T, 1]         (layernorm)
//   blocks.{i}.ln1.hook_normalized             [B, T, d_model]   (layernorm)
//   blocks.{i}.attn.hook_q|hook_k|hook_v       [B, T, h, d_k]
//   blocks.{i}.attn.hook_attn_scores           [B, h, T, T]  scaled, masked (-inf)
//   blocks.{i}.attn.hook_pattern               [B, h, T, T]
//   blocks.{i}.attn.hook_z                     [B, T, h, d_k]    (after gates and replace_heads)
//   blocks.{i}.attn.hook_result                [B, T, h, d_model]
//   blocks.{i}.hook_attn_out                   [B, T, d_model]
//   blocks.{i}.hook_resid_mid                  [B, T, d_model]   (with an MLP)
//   blocks.{i}.hook_mlp_in                     [B, T, d_model]   (with an MLP)
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
// unchanged (an edit in place included: return another Variable to
// replace), the pass goes on as without them (the same bits).
//
// A replacement, or an edit in place, may not bring NaN or infinity into
// the pass (but -inf at hook_attn_scores, which hides a key):
// std::invalid_argument naming the point (layers/hooks_finite.h).
//
// TransformerLens's copies (its use_attn_in, use_split_qkv_input and
// use_hook_mlp_in), each a copy of its own made only when wanted:
// hook_attn_in is resid_pre once per head, the input every head's Q, K and
// V read; hook_q_input, hook_k_input and hook_v_input each head's input to
// one projection, copies of hook_attn_in; hook_mlp_in resid_mid, what ln2 and
// the MLP read (the skip path keeps resid_mid). Handed back unchanged (an
// edit in place included: return another Variable to replace), the pass
// reads the residual stream as without them, the same bits. Replaced, each
// head's input goes through ln1 apart, [B, T, h, d_model], and through its
// own rows of W_Q (W_K, W_V) in one batched GEMM. ln1's two points then have
// no activation (TransformerLens visits ln1 per head, once for each of Q, K
// and V): a pass that replaces a head's input and wants one of its block's
// ln1 points throws std::invalid_argument naming both (want ln1's point in
// a pass of its own).
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
  // Whether visit(name, ...) may write into the activation's values and hand
  // the same Variable back (an edit in place). Such an edit is checked for NaN
  // and infinity as a replacement is (layers/hooks_finite.h), which costs a
  // pass over the activation before the visit and one after, at each point
  // visited; say false for points whose hooks only read (a cache) or replace,
  // and their kept activations are not read.
  virtual bool may_edit_in_place(const std::string& /*name*/) const { return true; }
};

// Every hook name of a model of this spec, in forward order.
std::vector<std::string> hook_names(const ModelSpec& spec);
// Whether `name` is one of TransformerLens's copy points (blocks.{i}.hook_attn_in,
// hook_q_input, hook_k_input, hook_v_input, hook_mlp_in; above): copies made
// only in a pass that wants them, which a cache of every point leaves out
// unless named (Python's names=None), as TransformerLens's cache without its
// flags does.
bool is_copy_point(const std::string& name);
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
  // shape. Only for a point that wants(): the caller asked. Throws
  // std::invalid_argument for a replacement of another shape or dtype, or
  // one holding NaN or infinity that x did not (refuse_non_finite), or an
  // edit of x in place that brought some (FiniteBefore, where the hooks
  // may_edit_in_place). `padding_mask` (optional, [B, T]): at hook_attn_scores
  // and hook_pattern, the padded keys the pass hides again in a replacement,
  // which the check of a replacement skips.
  Variable visit_wanted(const char* point, const Variable& x, const Shape& layout = {},
                        const core::Tensor* padding_mask = nullptr) const;
  // visit_wanted if the point is wanted, else x itself.
  Variable visit(const char* point, const Variable& x, const Shape& layout = {}) const {
    return wants(point) ? visit_wanted(point, x, layout) : x;
  }
  // visit_wanted for an activation computed on the side for the hooks
  // (hook_result, hook_scale): handed back, kept or edited in place, the
  // pass goes on as without it, so an edit in place is neither read nor
  // checked; only a replacement is.
  Variable visit_side(const char* point, const Variable& x) const { return visit_hooks(point, x, {}, false, nullptr); }
  // For a wanted point whose activation is `copy`, a copy made for the
  // hooks of what the pass reads (hook_mlp_in, hook_attn_in ...): what they
  // give back if they replace it, undefined if they hand the copy back (the
  // pass then reads the original, as without the hook: an edit of the copy
  // in place is neither read nor checked).
  Variable replacement(const char* point, const Variable& copy) const;

 private:
  // visit_wanted; `in_place`: whether an edit in place reaches the pass (and is checked).
  Variable visit_hooks(const char* point, const Variable& x, const Shape& layout, bool in_place,
                       const core::Tensor* padding_mask) const;
};

// `replacement`'s values (of x's shape and dtype) as a hook hands them back
// in place of x in a pass that records a graph: the entries it left as x
// had them pass the gradient on to x, the ones it changed are constants
// (no gradient flows upstream through them), as an assignment of a detached
// value into x would in PyTorch. A hook written as values, not as an op of
// the graph (a Python hook on numpy), is differentiated this way.
Variable patch(const Variable& x, const core::Tensor& replacement);

// A copy of x in memory of its own, through which the gradient flows back
// to x: a hook may edit it in place without touching x (TransformerLens
// clones the activations of its copy points).
Variable hook_copy(const Variable& x);

}  // namespace headlab::layers
