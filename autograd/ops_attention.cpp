// Fused multi-head attention on core/attention_kernels.h: one node instead
// of the matmul, scale, mask, softmax and matmul of the composed form; it
// saves only the probabilities [B, h, T, T], and in bf16 not even those
// unless the probe or the gates' gradient reads them (its backward
// recomputes them); without a backward, none unless the probe reads them. In bf16, recorded without the probe or the gates'
// gradient, it saves Q, K and V rounded, not their float32 values, which
// are freed once nothing else holds them. Its three stages as separate
// nodes (core/attention_split.h) serve the hooks.
#include <string>
#include <vector>

#include "autograd/op_util.h"
#include "autograd/ops.h"
#include "core/attention_kernels.h"
#include "core/attention_split.h"

namespace headlab::autograd {

using detail::checked;

namespace {

// Probabilities of at most this many bytes a layer are kept even where the
// backward could recompute them (bf16): there they are small next to the
// layer's other activations, and writing them costs less than the
// recompute's second softmax (docs/performance.md, "Attention's operands,
// rounded where they are made": the small preset's step 6-12% slower when
// they were recomputed, medium's unchanged, for 0.5 MiB a layer).
constexpr int64_t kKeptProbsBytes = int64_t{4} << 20;

// q [B, T, d]: whether P [B, h, T, T] is that small.
bool probs_kept_anyway(const Variable& q, int64_t heads) {
  if (q.dim() != 3) return true;  // attention_forward names the bad shape
  const int64_t t = q.size(1);
  return q.size(0) * heads * t * t * static_cast<int64_t>(sizeof(float)) <= kKeptProbsBytes;
}

}  // namespace

Variable attention(const Variable& q, const Variable& k, const Variable& v, int64_t heads, bool causal, double scale,
                   const Tensor& key_padding, const Variable& gates, Tensor* probs) {
  const core::AttentionShape shape{heads, causal, scale};
  const Tensor gate_values = gates.defined() ? gates.value() : Tensor();
  const bool want_dgates = gates.defined() && gates.requires_grad();
  // The rounded copies serve a recorded backward that reads neither P
  // (the probe's) nor V's float32 values (the gates' gradient).
  const bool recorded = grad_enabled() && (q.requires_grad() || k.requires_grad() || v.requires_grad());
  const bool hold_rounded = recorded && probs == nullptr && !want_dgates;
  // Without a backward (no-grad, or no input wanting a gradient) only the
  // probe reads P: the head analysis's many passes that read the logits
  // alone then hold no layer's [B, h, T, T] (docs/head-metrics.md, "What the
  // analysis holds").
  const bool backward = recorded || want_dgates;
  const bool keep_probs =
      probs != nullptr || want_dgates || (backward && probs_kept_anyway(checked(q, "attention", "q"), heads));
  core::AttentionForward r = core::attention_forward(
      checked(q, "attention", "q").value(), checked(k, "attention", "k").value(), checked(v, "attention", "v").value(),
      shape, key_padding, gate_values, keep_probs, hold_rounded, backward);
  if (probs) *probs = r.probs;
  // Bits 0-2: with the copies, the backward reads none of q, k and v.
  const uint32_t blind = r.rounded ? 0b111u : 0u;
  return Variable::from_op(
      std::move(r.out), {q, k, v, gates},
      [shape, key_padding, p = r.probs, qkv16 = r.rounded](std::vector<Variable>& in, const Tensor& g) {
        const Tensor gv = in[3].defined() ? in[3].value() : Tensor();
        // q, k and v all still held by someone else (a hook, which may have
        // changed them in place since): the backward reads them, as in
        // float32. Once one is released only the copies have it, and they
        // stand for all three (a change in place made since to one still
        // held is then not seen).
        const bool from_copies =
            qkv16 && (in[0].node()->released() || in[1].node()->released() || in[2].node()->released());
        core::AttentionGrads d =
            from_copies ? core::attention_backward(g, *qkv16, p, shape, key_padding, gv)
                        : core::attention_backward(g, in[0].value(), in[1].value(), in[2].value(), p, shape,
                                                   key_padding, gv, in[3].requires_grad());
        if (in[0].requires_grad()) in[0].accumulate_grad(d.dq);
        if (in[1].requires_grad()) in[1].accumulate_grad(d.dk);
        if (in[2].requires_grad()) in[2].accumulate_grad(d.dv);
        if (in[3].requires_grad()) in[3].accumulate_grad(d.dgates);
      },
      "attention", blind);
}

// The three stages (core/attention_split.h): what the hooks at the scores and
// the probabilities need; together the same bits as attention().
Variable attention_scores(const Variable& q, const Variable& k, int64_t heads, bool causal, double scale,
                          const Tensor& key_padding) {
  const core::AttentionShape shape{heads, causal, scale};
  Tensor s = core::attention_scores_forward(checked(q, "attention_scores", "q").value(),
                                            checked(k, "attention_scores", "k").value(), shape, key_padding);
  return Variable::from_op(
      std::move(s), {q, k},
      [shape, key_padding](std::vector<Variable>& in, const Tensor& g) {
        core::ScoresGrads d = core::attention_scores_backward(g, in[0].value(), in[1].value(), shape, key_padding);
        if (in[0].requires_grad()) in[0].accumulate_grad(d.dq);
        if (in[1].requires_grad()) in[1].accumulate_grad(d.dk);
      },
      "attention_scores");
}

Variable attention_softmax(const Variable& scores, bool causal) {
  Tensor p = core::attention_softmax_forward(checked(scores, "attention_softmax", "scores").value(), causal);
  return Variable::from_op(
      p, {scores},
      [causal, p](std::vector<Variable>& in, const Tensor& g) {
        in[0].accumulate_grad(core::attention_softmax_backward(g, p, causal));
      },
      "attention_softmax");
}

Variable attention_apply(const Variable& probs, const Variable& v, int64_t heads, bool causal, const Variable& gates) {
  const core::AttentionShape shape{heads, causal, 1.0};
  const Tensor gate_values = gates.defined() ? gates.value() : Tensor();
  Tensor out = core::attention_apply_forward(checked(probs, "attention_apply", "probs").value(),
                                             checked(v, "attention_apply", "v").value(), shape, gate_values);
  return Variable::from_op(
      std::move(out), {probs, v, gates},
      [shape](std::vector<Variable>& in, const Tensor& g) {
        const Tensor gv = in[2].defined() ? in[2].value() : Tensor();
        core::ApplyGrads d =
            core::attention_apply_backward(g, in[0].value(), in[1].value(), shape, gv, in[2].requires_grad());
        if (in[0].requires_grad()) in[0].accumulate_grad(d.dprobs);
        if (in[1].requires_grad()) in[1].accumulate_grad(d.dv);
        if (in[2].requires_grad()) in[2].accumulate_grad(d.dgates);
      },
      "attention_apply");
}

}  // namespace headlab::autograd
