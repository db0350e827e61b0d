// The weights' scale at initialization (`train --init-std RULE`).
//
// headlab draws every Linear and Embedding weight from N(0, 0.02^2)
// (init.h). Another rule multiplies each drawn matrix by its own standard
// deviation / 0.02 once the model is built: the same seed then gives the
// same normals at another scale, and the default 0.02 leaves every weight as
// it was. The rules (docs/model.md, "Initialization"):
//   S       (a number): every such weight ~ N(0, S^2);
//   fan-in  a Linear weight [out, in] ~ N(0, 1/in); tok_emb and pos_emb
//           [n, d] ~ N(0, 1/d);
//   nanda   Nanda et al. (2023)'s: every such weight ~ N(0, 1/d_model),
//           except head.weight ~ N(0, 1/vocab) (their W_U / sqrt(d_vocab)).
// Biases stay 0 and LayerNorm weights 1.
#pragma once

#include <string>

#include "core/tensor.h"
#include "layers/model_spec.h"
#include "layers/module.h"

namespace headlab::layers {

inline constexpr const char* kDefaultInitStd = "0.02";
// A number S is at least float32's smallest normal number (below it the
// weights round to 0 or lose their precision) and at most kMaxInitStd: a
// weight of that scale saturates every softmax (the default model's first
// loss is about 2000 at S = 100), and beyond about 1e9 LayerNorm's variance
// overflows float32.
inline constexpr double kMaxInitStd = 100;

// An empty string if `rule` is one of the above, else why not.
std::string init_rule_error(const std::string& rule);

// The standard deviation `rule` gives the 2-D weight `name` of shape `shape`
// in a model of `spec`. Throws std::invalid_argument for a bad rule.
double init_std_for(const std::string& rule, const std::string& name, const core::Shape& shape,
                    const ModelSpec& spec);

// Rescales every 2-D weight of a freshly initialized `model` to `rule`.
void apply_init_scale(Module& model, const std::string& rule, const ModelSpec& spec);

}  // namespace headlab::layers
