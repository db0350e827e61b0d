// The attention heads' own inputs, TransformerLens's hook points
// blocks.{i}.hook_attn_in (its use_attn_in: the residual stream copied once
// per head, what every head's Q, K and V read) and hook_q_input,
// hook_k_input, hook_v_input (its use_split_qkv_input: each head's input to
// one projection, copies of hook_attn_in), all [B, T, h, d_model]. They let
// a researcher patch what one head reads without touching the residual
// stream the rest of the model reads (layers/hooks.h).
#pragma once

#include <cstdint>

#include "layers/hooks.h"

namespace headlab::layers {

struct HeadInputs {
  // What each projection's heads read, [B, T, h, d_model], where a hook
  // replaced it (at the projection's own point, or at hook_attn_in, which
  // all three copy); undefined where they read the residual stream as
  // without hooks.
  Variable q, k, v;
  // The first of the four points the hooks replaced ("hook_attn_in" ...);
  // null when they replaced none (the heads read the residual stream).
  const char* replaced = nullptr;
};

// Visits the four points the hooks want, in forward order, each with a copy
// of its own made only then; a copy handed back unchanged replaces nothing.
HeadInputs visit_head_inputs(const Variable& resid_pre, int64_t heads, const HookScope& hooks);

}  // namespace headlab::layers
