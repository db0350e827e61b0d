// What a hook may not hand back: values that would poison the rest of the
// pass (layers/hooks.h, docs/python.md "Hook points").
#pragma once

#include <cstdint>
#include <string>

#include "core/tensor.h"

namespace headlab::layers {

// Throws std::invalid_argument naming the point `name`, the count and the
// index of the first, when `returned` (what the hooks handed back in place of
// `given`) holds NaN or infinity that `given` did not hold: they would spread
// to every later activation, the logits, the loss and the gradients. What
// `given` held already (a diverged model's NaN) is no hook's doing. At
// attention scores (*.hook_attn_scores) -inf hides a key, as the causal mask
// does, and is taken, unless it hides every key a query sees (its softmax
// would be 0/0); there and at *.hook_pattern, the entries after the query that
// a causal pass ignores are ignored here too, and so are the padded keys of
// `padding_mask` [B, T] (nonzero = real token; optional), which the pass hides
// again in any replacement (layers/attention.cpp). One vectorized pass over
// `returned` (at hook_attn_scores a row-by-row one, and `given`'s masked half);
// `given` is read whole only when that pass finds some.
void refuse_non_finite(const std::string& name, const core::Tensor& given, const core::Tensor& returned,
                       const core::Tensor* padding_mask = nullptr);

// The same check for a hook that edits the activation in place and hands it
// back: what `given` held is read before the hooks see it (one vectorized
// pass; at hook_attn_scores and hook_pattern also whether the pass is
// causal, and at hook_attn_scores the row-by-row one), and refuse_edit reads
// the edited values once, throwing as refuse_non_finite does for what the
// edit brought in, padded keys included: the pass hides them again only in a
// replacement. Only at points whose hooks may edit in place
// (Hooks::may_edit_in_place): HookSet's never do.
class FiniteBefore {
 public:
  FiniteBefore(std::string name, const core::Tensor& given);
  void refuse_edit(const core::Tensor& edited) const;

 private:
  std::string name_;
  bool scores_ = false, causal_ = false;  // as refuse_non_finite reads the point
  // What `given` held: NaN or infinity (not a hidden key), and the first element of a row whose every key is hidden.
  int64_t count_ = 0, hidden_row_ = -1;
};

}  // namespace headlab::layers
