// The transformer's feed-forward block: fc2(act(fc1(x))), act GELU in exact erf
// form (the default) or ReLU.
#pragma once

#include <cstdint>
#include <memory>

#include "core/random.h"
#include "layers/hooks.h"
#include "layers/linear.h"
#include "layers/module.h"

namespace headlab::layers {

struct MLPOptions {
  int64_t d_model = 0;
  int64_t d_ff = 0;
  bool relu = false;  // ReLU instead of GELU
};

class MLP : public Module {
 public:
  // Submodules: "fc1" Linear(d_model -> d_ff), "fc2" Linear(d_ff -> d_model).
  MLP(const MLPOptions& options, core::Generator& gen, DType dtype = DType::f32);

  // x [..., d_model] -> [..., d_model]. `hooks` (prefix "blocks.{i}.mlp.")
  // visits hook_pre (fc1's output) and hook_post (after the activation).
  Variable forward(const Variable& x, const HookScope& hooks = {}) const;

  const MLPOptions& options() const { return options_; }
  Linear& fc1() const { return *fc1_; }
  Linear& fc2() const { return *fc2_; }

 private:
  MLPOptions options_;
  std::shared_ptr<Linear> fc1_;
  std::shared_ptr<Linear> fc2_;
};

}  // namespace headlab::layers
