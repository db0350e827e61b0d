#include "layers/head_inputs.h"

#include <vector>

#include "autograd/ops.h"

namespace headlab::layers {

namespace {

// x [B, T, d] -> [B, T, h, d], one copy per head, in memory of its own (a
// broadcast view would let a hook's edit in place reach x and every head).
Variable per_head(const Variable& x, int64_t heads) {
  const Variable one = autograd::reshape(x, {x.size(0), x.size(1), 1, x.size(2)});
  return autograd::concat(std::vector<Variable>(static_cast<std::size_t>(heads), one), 2);
}

}  // namespace

HeadInputs visit_head_inputs(const Variable& resid_pre, int64_t heads, const HookScope& hooks) {
  HeadInputs in;
  Variable attn_in;  // every head's input where hook_attn_in was replaced
  if (hooks.wants("hook_attn_in")) {
    attn_in = hooks.replacement("hook_attn_in", per_head(resid_pre, heads));
    if (attn_in.defined()) in.replaced = "hook_attn_in";
  }
  const auto own = [&](const char* point) {
    if (!hooks.wants(point)) return attn_in;
    const Variable given =
        hooks.replacement(point, attn_in.defined() ? hook_copy(attn_in) : per_head(resid_pre, heads));
    if (!given.defined()) return attn_in;
    if (in.replaced == nullptr) in.replaced = point;
    return given;
  };
  in.q = own("hook_q_input");
  in.k = own("hook_k_input");
  in.v = own("hook_v_input");
  return in;
}

}  // namespace headlab::layers
