// Multi-head attention (docs/model.md).
//
// X [B, T, d_model]; h heads of width d_k = d_model / h. Q = X W_Q^T + b_Q
// (likewise K, V) with fused weights [d_model, d_model]: rows i*d_k ..
// (i+1)*d_k - 1 are head i's own projection W_Q^i. Per head,
//   A_i = softmax(mask(Q_i K_i^T / sqrt(d_k))),  head_i = gate_i * A_i V_i,
// (gate_i = 1 unless a probe sets it)
// then out = concat(head_1..head_h) W_O^T + b_O.
//
// The scores, mask, softmax and both products run as one fused op
// (autograd::attention, core/attention_kernels.h) with its own backward,
// checked against the composed equations in the tests and by gradcheck.
#pragma once

#include <cstdint>
#include <memory>

#include "core/random.h"
#include "layers/hooks.h"
#include "layers/linear.h"
#include "layers/model_spec.h"
#include "layers/module.h"
#include "layers/probe.h"

namespace headlab::layers {

// What the projections read: x [B, T, d_model], the same for every head
// (ln1's output), and, for a projection whose heads read inputs of their own
// (a replaced hook_attn_in or hook_q_input ..., layers/head_inputs.h), those
// [B, T, h, d_model], each head's through ln1 (undefined: x).
struct AttentionInput {
  Variable x{}, q{}, k{}, v{};
};

class MultiHeadAttention : public Module {
 public:
  enum class Projection { Q, K, V };

  // Reads d_model, heads and causal (query t never sees keys after t;
  // otherwise bidirectional) of `spec`. Submodules "q", "k", "v", "o", each
  // Linear(d_model -> d_model). Throws std::invalid_argument as
  // ModelSpec::validate does (e.g. unless heads divides d_model).
  MultiHeadAttention(const ModelSpec& spec, core::Generator& gen, DType dtype = DType::f32);

  // x [B, T, d_model] -> [B, T, d_model]. padding_mask [B, T] (any dtype):
  // nonzero = real token, 0 = pad; pad keys get no attention (nullptr or an
  // undefined tensor: no padding, see layers/padding_mask.h). A query that
  // can see no key at all (a fully masked row) attends to nothing: its row of
  // A is all zeros and its head output is 0. `probe` (optional, see
  // layers/probe.h) supplies the head gates and receives the attention
  // probabilities and the head outputs; throws std::invalid_argument for
  // gates that are not a [h] variable of x's dtype. `hooks` (prefix
  // "blocks.{i}.attn.") visits hook_q, hook_k, hook_v, hook_attn_scores,
  // hook_pattern, hook_z and hook_result (layers/hooks.h); when the scores or
  // the pattern are wanted the fused op runs as its three stages (autograd::
  // attention_scores, attention_softmax, attention_apply: the same bits); a
  // hook's replacement of either has the padded keys hidden again (-inf
  // scores, 0 pattern), and replaced scores that hide every real key of a real
  // query throw std::invalid_argument naming it.
  // A wanted hook_result [B, T, h, d_model] is computed on the side; if the
  // hook replaces it the output is its sum over the heads + o's bias.
  Variable forward(const Variable& x, const Tensor* padding_mask = nullptr, LayerProbe* probe = nullptr,
                   const HookScope& hooks = {}) const;
  // The same with per-head inputs: head i's Q is in.q[:, :, i] W_Q^i^T + b_Q^i
  // (likewise K, V), one batched GEMM over the heads; a projection without
  // them reads in.x as above (the same bits). Throws std::invalid_argument
  // for per-head inputs that are not [B, T, h, d_model] of x's dtype.
  Variable forward(const AttentionInput& in, const Tensor* padding_mask = nullptr, LayerProbe* probe = nullptr,
                   const HookScope& hooks = {}) const;

  const ModelSpec& spec() const { return spec_; }
  int64_t heads() const { return spec_.heads; }
  int64_t d_k() const { return spec_.d_k(); }

  // Head `head`'s own projection: a VIEW [d_k, d_model] of rows head*d_k ..
  // (head+1)*d_k - 1 of the fused weight, read and written in place.
  Tensor head_weight(Projection which, int64_t head) const;
  // The matching VIEW [d_k] of the fused bias.
  Tensor head_bias(Projection which, int64_t head) const;
  // Head `head`'s slice of W_O: a VIEW [d_model, d_k] of columns head*d_k ..
  // (head+1)*d_k - 1 (the part of the output that reads head i's values).
  Tensor head_output_weight(int64_t head) const;

  Linear& q() const { return *q_; }
  Linear& k() const { return *k_; }
  Linear& v() const { return *v_; }
  Linear& o() const { return *o_; }

 private:
  void check_head(int64_t head, const char* who) const;
  // The probe's replacement of some heads' outputs in concat [B, T, d_model].
  Variable replace_heads(const Variable& concat, const LayerProbe& probe) const;
  // p's output [B, T, d_model] for per-head inputs [B, T, h, d_model].
  Variable project_heads(const Linear& p, const Variable& heads_in) const;
  // o applied to concat [B, T, d_model] with a wanted hook_result.
  Variable output_result_hooked(const Variable& concat, const HookScope& hooks) const;
  Linear& projection(Projection which) const;

  ModelSpec spec_;
  std::shared_ptr<Linear> q_, k_, v_, o_;
};

}  // namespace headlab::layers
