// Fused multi-head attention on core/attention_kernels.h: one node instead
// of the matmul, scale, mask, softmax and matmul of the composed form; it
// saves only the probabilities [B, h, T, T].
#include <string>
#include <vector>

#include "autograd/op_util.h"
#include "autograd/ops.h"
#include "core/attention_kernels.h"

namespace headlab::autograd {

using detail::checked;

Variable attention(const Variable& q, const Variable& k, const Variable& v, int64_t heads, bool causal, double scale,
                   const Tensor& key_padding, const Variable& gates, Tensor* probs) {
  const core::AttentionShape shape{heads, causal, scale};
  const Tensor gate_values = gates.defined() ? gates.value() : Tensor();
  core::AttentionForward r =
      core::attention_forward(checked(q, "attention", "q").value(), checked(k, "attention", "k").value(),
                              checked(v, "attention", "v").value(), shape, key_padding, gate_values);
  if (probs) *probs = r.probs;
  return Variable::from_op(
      std::move(r.out), {q, k, v, gates},
      [shape, p = r.probs](std::vector<Variable>& in, const Tensor& g) {
        const Tensor gv = in[3].defined() ? in[3].value() : Tensor();
        core::AttentionGrads d = core::attention_backward(g, in[0].value(), in[1].value(), in[2].value(), p, shape,
                                                          gv, in[3].requires_grad());
        if (in[0].requires_grad()) in[0].accumulate_grad(d.dq);
        if (in[1].requires_grad()) in[1].accumulate_grad(d.dk);
        if (in[2].requires_grad()) in[2].accumulate_grad(d.dv);
        if (in[3].requires_grad()) in[3].accumulate_grad(d.dgates);
      },
      "attention");
}

}  // namespace headlab::autograd
