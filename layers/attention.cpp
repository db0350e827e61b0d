#include "layers/attention.h"

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "autograd/ops.h"
#include "core/ops.h"

namespace headlab::layers {

namespace {

bool all_ones(const Tensor& t) {
  for (double g : t.to_vector()) {
    if (g != 1.0) return false;
  }
  return true;
}

// [B, 1, 1, T] (broadcast over heads and queries): 1 at the padded keys of
// `padding_mask` [B, T] (nonzero = real token), as masked_fill reads a mask.
Tensor padded_keys(const Tensor& padding_mask) {
  const Tensor real = padding_mask.to(DType::f64).contiguous();
  Tensor pad = Tensor::zeros({real.size(0), 1, 1, real.size(1)}, DType::f64);
  const double* r = real.data<double>();
  double* p = pad.data<double>();
  for (int64_t i = 0, n = real.numel(); i < n; ++i) p[i] = r[i] == 0.0 ? 1.0 : 0.0;
  return pad;
}

// Scores [B, h, T, T] a hook gave back, with the padded keys hidden again
// (-inf): only attention_scores applies the padding mask, and a replacement
// (zeros for uniform attention, another run's scores) may hold finite values
// there, which would let a real query of a bidirectional model read the
// padding. The hook check (layers/hooks_finite.h), which skips the padded
// keys, has refused a query left with no real key: its softmax is 0 / 0.
Variable hide_padded_scores(const Variable& scores, const Tensor& padding_mask) {
  return autograd::masked_fill(scores, padded_keys(padding_mask), -std::numeric_limits<double>::infinity());
}

}  // namespace

MultiHeadAttention::MultiHeadAttention(const ModelSpec& spec, core::Generator& gen, DType dtype) : spec_(spec) {
  try {
    spec.validate();
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(std::string("MultiHeadAttention: ") + e.what());
  }
  const int64_t d = spec.d_model;
  q_ = register_module("q", std::make_shared<Linear>(LinearOptions{.in_features = d, .out_features = d}, gen, dtype));
  k_ = register_module("k", std::make_shared<Linear>(LinearOptions{.in_features = d, .out_features = d}, gen, dtype));
  v_ = register_module("v", std::make_shared<Linear>(LinearOptions{.in_features = d, .out_features = d}, gen, dtype));
  o_ = register_module("o", std::make_shared<Linear>(LinearOptions{.in_features = d, .out_features = d}, gen, dtype));
}

Variable MultiHeadAttention::forward(const Variable& x, const Tensor* padding_mask, LayerProbe* probe,
                                    const HookScope& hooks) const {
  return forward(AttentionInput{.x = x}, padding_mask, probe, hooks);
}

Variable MultiHeadAttention::forward(const AttentionInput& in, const Tensor* padding_mask, LayerProbe* probe,
                                    const HookScope& hooks) const {
  using namespace autograd;
  const Variable& x = in.x;
  const int64_t d_model = spec_.d_model;
  const int64_t h = spec_.heads;
  const int64_t dk = d_k();
  if (x.dim() != 3 || x.size(2) != d_model) {
    throw std::invalid_argument("MultiHeadAttention::forward: input " + core::to_string(x.shape()) +
                                " is not [B, T, d_model=" + std::to_string(d_model) + "]");
  }
  const Shape per_head{x.size(0), x.size(1), h, d_model};
  for (const Variable* p : {&in.q, &in.k, &in.v})
    if (p->defined() && (p->shape() != per_head || p->dtype() != x.dtype()))
      throw std::invalid_argument("MultiHeadAttention::forward: per-head input " + core::to_string(p->dtype()) + " " +
                                  core::to_string(p->shape()) + " is not " + core::to_string(x.dtype()) + " " +
                                  core::to_string(per_head) + " [B, T, h, d_model]");
  const Variable no_gates;
  const Variable& gates = probe != nullptr ? probe->gates : no_gates;
  if (gates.defined() && (gates.shape() != Shape{h} || gates.dtype() != x.dtype())) {
    throw std::invalid_argument("MultiHeadAttention::forward: the probe's gates must be a " +
                                core::to_string(x.dtype()) + " [" + std::to_string(h) + "] variable, got " +
                                core::to_string(gates.dtype()) + " " + core::to_string(gates.shape()));
  }
  const int64_t batch = x.size(0);
  const int64_t seq_len = x.size(1);
  if (padding_mask != nullptr && padding_mask->defined() && padding_mask->shape() != Shape{batch, seq_len}) {
    throw std::invalid_argument("MultiHeadAttention::forward: padding mask " + core::to_string(padding_mask->shape()) +
                                " does not match the input's [B, T] = " + core::to_string(Shape{batch, seq_len}));
  }
  // Q, K, V stay [B, T, d_model]: head i reads columns i*d_k .. (i+1)*d_k - 1.
  // The fused op computes, per head, A_i = softmax(mask(Q_i K_i^T / sqrt(d_k)))
  // with the per-head d_k (never d_model), and gate_i * A_i V_i written into
  // head i's columns, which is concat(head_1..head_h) [B, T, d_model].
  const Shape heads_layout{batch, seq_len, h, dk};  // TransformerLens's view of Q, K, V and z
  const auto project = [&](const Linear& p, const Variable& heads_in) {
    return heads_in.defined() ? project_heads(p, heads_in) : p.forward(x);
  };
  const Variable q = hooks.visit("hook_q", project(*q_, in.q), heads_layout);
  const Variable k = hooks.visit("hook_k", project(*k_, in.k), heads_layout);
  const Variable v = hooks.visit("hook_v", project(*v_, in.v), heads_layout);
  // All-ones gates change no bit, so they enter the op only when a gate
  // differs from 1 or its gradient is wanted.
  const bool gated = gates.defined() && (gates.requires_grad() || !all_ones(gates.value()));
  const double scale = 1.0 / std::sqrt(static_cast<double>(dk));
  const Tensor mask = padding_mask != nullptr ? *padding_mask : Tensor();
  Tensor* probs = probe != nullptr && probe->keep.attention ? &probe->attention : nullptr;
  const bool want_scores = hooks.wants("hook_attn_scores");
  const bool want_pattern = hooks.wants("hook_pattern");
  Variable attended;
  if (!want_scores && !want_pattern) {
    attended = attention(q, k, v, h, spec_.causal, scale, mask, gated ? gates : Variable(), probs);
  } else {
    // The fused op's three stages, each on the fused kernel's own GEMM calls
    // and softmax rows, so the hooks see (and may replace) what it computes.
    // A replaced score or pattern has the padded keys hidden again, as the
    // causal mask is (whatever a replacement holds there, a real position gets
    // what its row alone gives); a kept one has them hidden already.
    Variable scores = attention_scores(q, k, h, spec_.causal, scale, mask);
    if (want_scores) {
      const Variable given = hooks.visit_wanted("hook_attn_scores", scores, {}, mask.defined() ? &mask : nullptr);
      scores = mask.defined() && given.node() != scores.node()
                   ? hide_padded_scores(given, mask)
                   : given;
    }
    Variable pattern = attention_softmax(scores, spec_.causal);
    if (want_pattern) {
      const Variable given = hooks.visit_wanted("hook_pattern", pattern, {}, mask.defined() ? &mask : nullptr);
      pattern = mask.defined() && given.node() != pattern.node() ? masked_fill(given, padded_keys(mask), 0.0) : given;
    }
    if (probs != nullptr) *probs = pattern.value();
    attended = attention_apply(pattern, v, h, spec_.causal, gated ? gates : Variable());
  }
  Variable concat = probe != nullptr ? replace_heads(attended, *probe) : attended;
  concat = hooks.visit("hook_z", concat, heads_layout);
  if (probe != nullptr && probe->keep.head_outputs) probe->head_outputs = concat.value();
  return hooks.wants("hook_result") ? output_result_hooked(concat, hooks) : o_->forward(concat);
}

Variable MultiHeadAttention::project_heads(const Linear& p, const Variable& heads_in) const {
  using namespace autograd;
  const int64_t batch = heads_in.size(0), seq_len = heads_in.size(1), d = spec_.d_model, h = spec_.heads, dk = d_k();
  // Head i's rows of the fused weight [h d_k, d] read head i's input only:
  // x [B T, h, d] permuted to [h, B T, d] times the weight viewed [h, d_k, d]
  // permuted to [h, d, d_k] gives [h, B T, d_k], head i in columns i*d_k ..
  // of the [B, T, d] output once permuted back (as hook_result's GEMM).
  const Variable x = permute(reshape(heads_in, {batch * seq_len, h, d}), {1, 0, 2});
  const Variable w = permute(reshape(p.weight(), {h, dk, d}), {0, 2, 1});
  return reshape(permute(matmul(x, w), {1, 0, 2}), {batch, seq_len, d}) + p.bias();
}

Variable MultiHeadAttention::output_result_hooked(const Variable& concat, const HookScope& hooks) const {
  using namespace autograd;
  const int64_t batch = concat.size(0), seq_len = concat.size(1), d = spec_.d_model, h = spec_.heads, dk = d_k();
  // result[b, t, i] = z_i W_O^i^T, one GEMM per head (not one per position:
  // B T h products of 1 x d_k x d took as long as the rest of the pass):
  // z [B T, h, d_k] permuted to [h, B T, d_k] times W_O's columns of each
  // head, [d, h, d_k] permuted to [h, d_k, d], gives [h, B T, d].
  const Variable z = permute(reshape(concat, {batch * seq_len, h, dk}), {1, 0, 2});
  const Variable w = permute(reshape(o_->weight(), {d, h, dk}), {1, 2, 0});
  const Variable result = reshape(permute(matmul(z, w), {1, 0, 2}), {batch, seq_len, h, d});
  const Variable given = hooks.visit_side("hook_result", result);
  // Kept: o applied to concat, whose bits a pass without the hook has (a sum
  // over the heads rounds differently).
  if (given.node() == result.node()) return o_->forward(concat);
  return sum(given, {2}) + o_->bias();
}

Variable MultiHeadAttention::replace_heads(const Variable& concat, const LayerProbe& probe) const {
  const int64_t h = spec_.heads, dk = d_k();
  if (probe.replace_heads.empty()) return concat;
  if (static_cast<int64_t>(probe.replace_heads.size()) != h)
    throw std::invalid_argument("MultiHeadAttention::forward: the probe's replace_heads has " +
                                std::to_string(probe.replace_heads.size()) + " entries for " + std::to_string(h) +
                                " heads");
  if (!probe.replacement.defined() || probe.replacement.shape() != concat.shape() ||
      probe.replacement.dtype() != concat.dtype())
    throw std::invalid_argument("MultiHeadAttention::forward: the probe's replacement must be a " +
                                core::to_string(concat.dtype()) + " " + core::to_string(concat.shape()) +
                                " tensor (the head outputs' shape), got " +
                                (probe.replacement.defined() ? core::to_string(probe.replacement.dtype()) + " " +
                                                                   core::to_string(probe.replacement.shape())
                                                             : std::string("none")));
  // concat * keep + replacement * (1 - keep), with keep [d_model] 1 on the
  // kept heads' columns: x * 1 + 0 = x and x * 0 + r = r exactly (finite x),
  // so kept heads are untouched and replaced ones are exactly the given values.
  Tensor keep = Tensor::ones({spec_.d_model}, concat.dtype());
  for (int64_t i = 0; i < h; ++i)
    if (probe.replace_heads[static_cast<std::size_t>(i)]) keep.slice(0, i * dk, (i + 1) * dk).fill_(0);
  const Tensor put = core::mul(probe.replacement, core::sub(Tensor::ones({spec_.d_model}, concat.dtype()), keep));
  return autograd::add(autograd::mul(concat, autograd::Variable(keep)), autograd::Variable(put));
}

void MultiHeadAttention::check_head(int64_t head, const char* who) const {
  if (head < 0 || head >= spec_.heads) {
    throw std::invalid_argument(std::string("MultiHeadAttention::") + who + ": head " + std::to_string(head) +
                                " is outside [0, " + std::to_string(spec_.heads) + ")");
  }
}

Linear& MultiHeadAttention::projection(Projection which) const {
  switch (which) {
    case Projection::Q:
      return *q_;
    case Projection::K:
      return *k_;
    case Projection::V:
      return *v_;
  }
  throw std::invalid_argument("MultiHeadAttention: unknown projection");
}

Tensor MultiHeadAttention::head_weight(Projection which, int64_t head) const {
  check_head(head, "head_weight");
  return projection(which).weight().mutable_value().slice(0, head * d_k(), (head + 1) * d_k());
}

Tensor MultiHeadAttention::head_bias(Projection which, int64_t head) const {
  check_head(head, "head_bias");
  return projection(which).bias().mutable_value().slice(0, head * d_k(), (head + 1) * d_k());
}

Tensor MultiHeadAttention::head_output_weight(int64_t head) const {
  check_head(head, "head_output_weight");
  return o_->weight().mutable_value().slice(1, head * d_k(), (head + 1) * d_k());
}

}  // namespace headlab::layers
