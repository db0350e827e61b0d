// Each case builds a small float64 layer, draws its parameters from N(0, 0.5)
// (large enough that a wrong gradient is far above the tolerance; the
// N(0, 0.02) init would make every gradient tiny) and checks the layer's
// output with respect to its input and every parameter. The parameters reach
// the layer through Module::replace_parameter, so the gradcheck's own leaves
// are the variables the layer computes with.
#include "layers/gradcheck_cases.h"

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "autograd/ops.h"
#include "core/ops.h"
#include "core/random.h"
#include "layers/attention.h"
#include "layers/embedding.h"
#include "layers/hook_set.h"
#include "layers/layer_norm.h"
#include "layers/linear.h"
#include "layers/mlp.h"
#include "layers/softmax.h"
#include "layers/transformer.h"
#include "layers/transformer_block.h"

namespace headlab::layers {
namespace {

using autograd::GradcheckCase;
using Vars = std::vector<Variable>;
constexpr DType f64 = DType::f64;

class Registry {
 public:
  // A case over `inputs` followed by every parameter of `module`; forward
  // receives the layer and the leaves of `inputs`.
  template <class M>
  void add(std::string name, std::shared_ptr<M> module, std::vector<Tensor> inputs,
           std::function<Variable(M&, const Vars&)> forward) {
    std::vector<std::string> names;
    const std::size_t n_inputs = inputs.size();
    core::Generator gen(++seed_);
    for (auto& [param_name, p] : module->named_parameters()) {
      names.push_back(param_name);
      inputs.push_back(gen.normal(p.shape(), 0.0, 0.5, f64));
    }
    autograd::GradcheckFn f = [module, names, n_inputs, forward](const Vars& x) {
      for (std::size_t i = 0; i < names.size(); ++i) module->replace_parameter(names[i], x[n_inputs + i]);
      return forward(*module, Vars(x.begin(), x.begin() + static_cast<std::ptrdiff_t>(n_inputs)));
    };
    auto run = [f = std::move(f), in = std::move(inputs)] { return autograd::gradcheck(f, in); };
    cases_.push_back({std::move(name), std::move(run)});
  }
  Tensor normal(const Shape& shape) { return core::Generator(++seed_).normal(shape, 0.0, 1.0, f64); }
  core::Generator& gen() { return gen_; }  // for the layers' (overwritten) init
  std::vector<GradcheckCase> take() { return std::move(cases_); }

 private:
  std::vector<GradcheckCase> cases_;
  core::Generator gen_{7};
  uint64_t seed_ = 500;
};

void basic_cases(Registry& r) {
  r.add<Linear>("Linear [2,3,4] -> [2,3,5]", std::make_shared<Linear>(LinearOptions{.in_features = 4, .out_features = 5}, r.gen(), f64),
                {r.normal({2, 3, 4})}, [](Linear& m, const Vars& x) { return m.forward(x[0]); });
  r.add<Linear>("Linear without bias", std::make_shared<Linear>(LinearOptions{.in_features = 4, .out_features = 3, .bias = false}, r.gen(), f64),
                {r.normal({5, 4})}, [](Linear& m, const Vars& x) { return m.forward(x[0]); });
  r.add<LayerNorm>("LayerNorm [2,3,6]", std::make_shared<LayerNorm>(LayerNormOptions{.normalized_size = 6}, r.gen(), f64),
                   {r.normal({2, 3, 6})}, [](LayerNorm& m, const Vars& x) { return m.forward(x[0]); });
  r.add<Embedding>("Embedding [5,3] by ids [2,3] (repeated ids)",
                   std::make_shared<Embedding>(EmbeddingOptions{.num_embeddings = 5, .embedding_dim = 3}, r.gen(), f64), {},
                   [](Embedding& m, const Vars&) {
                     static const std::vector<int32_t> ids{4, 0, 4, 2, 2, 4};
                     return m.forward(ids, {2, 3});
                   });
  r.add<PositionalEmbedding>("PositionalEmbedding [6,4] for seq_len 4",
                             std::make_shared<PositionalEmbedding>(EmbeddingOptions{.num_embeddings = 6, .embedding_dim = 4}, r.gen(), f64), {},
                             [](PositionalEmbedding& m, const Vars&) { return m.forward(4); });
  r.add<Softmax>("Softmax over axis 1 of [2,4,3]", std::make_shared<Softmax>(SoftmaxOptions{.axis = 1}), {r.normal({2, 4, 3})},
                 [](Softmax& m, const Vars& x) { return m.forward(x[0]); });
  r.add<MLP>("MLP 4 -> 8 -> 4 (exact GELU)", std::make_shared<MLP>(MLPOptions{.d_model = 4, .d_ff = 8}, r.gen(), f64),
             {r.normal({2, 3, 4})}, [](MLP& m, const Vars& x) { return m.forward(x[0]); });
  // Random weights put fc1's outputs at |h| ~ 0.5, far from ReLU's kink at the
  // finite-difference step.
  r.add<MLP>("MLP 4 -> 8 -> 4 (ReLU)", std::make_shared<MLP>(MLPOptions{.d_model = 4, .d_ff = 8, .relu = true}, r.gen(), f64),
             {r.normal({2, 3, 4})}, [](MLP& m, const Vars& x) { return m.forward(x[0]); });
}

void attention_cases(Registry& r) {
  auto mha = [&r](int64_t heads, bool causal) {
    return std::make_shared<MultiHeadAttention>(ModelSpec{.heads = heads, .d_model = 8, .causal = causal}, r.gen(), f64);
  };
  const auto plain = [](MultiHeadAttention& m, const Vars& x) { return m.forward(x[0]); };
  r.add<MultiHeadAttention>("MultiHeadAttention causal, h=2", mha(2, true), {r.normal({2, 4, 8})}, plain);
  r.add<MultiHeadAttention>("MultiHeadAttention bidirectional, h=4", mha(4, false), {r.normal({2, 3, 8})}, plain);
  const Tensor right_pad = Tensor::from_vector({1, 1, 1, 0, 1, 1, 1, 1}, {2, 4}, f64);
  r.add<MultiHeadAttention>("MultiHeadAttention bidirectional, padded keys, h=2", mha(2, false), {r.normal({2, 4, 8})},
                            [right_pad](MultiHeadAttention& m, const Vars& x) { return m.forward(x[0], &right_pad); });
  // Left padding with a causal mask: query 0 of sequence 0 sees no key at all.
  const Tensor left_pad = Tensor::from_vector({0, 1, 1, 1, 1, 1, 1, 1}, {2, 4}, f64);
  r.add<MultiHeadAttention>("MultiHeadAttention causal, left padding (a query sees no key), h=2", mha(2, true),
                            {r.normal({2, 4, 8})},
                            [left_pad](MultiHeadAttention& m, const Vars& x) { return m.forward(x[0], &left_pad); });
  r.add<MultiHeadAttention>("MultiHeadAttention with respect to the probe's head gates, h=4", mha(4, true),
                            {r.normal({2, 3, 8}), r.normal({4})}, [](MultiHeadAttention& m, const Vars& x) {
                              LayerProbe probe{.gates = x[1]};
                              return m.forward(x[0], nullptr, &probe);
                            });
  // Heads 1 and 2 of 4 replaced by constants (patching, mean and resample
  // ablation): the gradient flows through heads 0 and 3 only.
  const Tensor replacement = r.normal({2, 3, 8});
  r.add<MultiHeadAttention>("MultiHeadAttention with heads 1 and 2 replaced through the probe, h=4", mha(4, true),
                            {r.normal({2, 3, 8})}, [replacement](MultiHeadAttention& m, const Vars& x) {
                              LayerProbe probe{.replace_heads = {false, true, true, false}, .replacement = replacement};
                              return m.forward(x[0], nullptr, &probe);
                            });
}

void model_cases(Registry& r) {
  const auto block_forward = [](TransformerBlock& m, const Vars& x) { return m.forward(x[0]); };
  r.add<TransformerBlock>("TransformerBlock pre-LN, h=2",
                          std::make_shared<TransformerBlock>(ModelSpec{.heads = 2, .d_model = 8, .d_ff = 16}, r.gen(), f64),
                          {r.normal({2, 3, 8})}, block_forward);
  r.add<TransformerBlock>(
      "TransformerBlock attention-only without LayerNorm, bidirectional, h=2",
      std::make_shared<TransformerBlock>(
          ModelSpec{.heads = 2, .d_model = 8, .d_ff = 16, .attn_only = true, .layernorm = false, .causal = false}, r.gen(), f64),
      {r.normal({2, 3, 8})}, block_forward);

  // V=5 tokens, 3 classes, B=2, T=4, d=8, h=2, d_ff=16; -1 marks a position without a target.
  const ModelSpec spec{.vocab = 5, .classes = 3, .max_seq_len = 4, .layers = 2, .heads = 2, .d_model = 8, .d_ff = 16};
  r.add<Transformer>("Transformer 2 layers: cross-entropy loss w.r.t. every parameter",
                     std::make_shared<Transformer>(spec, r.gen(), f64), {}, [](Transformer& m, const Vars&) {
                       static const std::vector<int32_t> tokens{1, 4, 0, 2, 3, 3, 1, 0};
                       static const std::vector<int32_t> targets{2, 0, -1, 1, 1, 2, 0, 2};
                       return autograd::cross_entropy(m.forward(tokens, 2, 4), targets);
                     });
  const Tensor pad = Tensor::from_vector({1, 1, 1, 1, 1, 1, 0, 0}, {2, 4}, f64);
  r.add<Transformer>(
      "Transformer attention-only, no LayerNorm, bidirectional, padded: cross-entropy loss",
      std::make_shared<Transformer>(ModelSpec{.vocab = 5, .classes = 3, .max_seq_len = 4, .layers = 2, .heads = 2, .d_model = 8, .d_ff = 16, .attn_only = true, .layernorm = false, .causal = false},
                                    r.gen(), f64),
      {}, [pad](Transformer& m, const Vars&) {
        static const std::vector<int32_t> tokens{1, 4, 0, 2, 3, 3, 0, 0};
        static const std::vector<int32_t> targets{2, 0, 1, 1, 1, 2, -1, -1};
        return autograd::cross_entropy(m.forward(tokens, 2, 4, &pad), targets);
      });
  // The grokking model's shape (Nanda et al. 2023): ReLU, no LayerNorm.
  r.add<Transformer>(
      "Transformer ReLU MLP, no LayerNorm: cross-entropy loss",
      std::make_shared<Transformer>(ModelSpec{.vocab = 5, .classes = 3, .max_seq_len = 3, .layers = 1, .heads = 2, .d_model = 8, .d_ff = 16, .layernorm = false, .activation = "relu"},
                                    r.gen(), f64),
      {}, [](Transformer& m, const Vars&) {
        static const std::vector<int32_t> tokens{1, 4, 0, 2, 3, 3};
        static const std::vector<int32_t> targets{-1, -1, 1, -1, -1, 2};
        return autograd::cross_entropy(m.forward(tokens, 2, 3), targets);
      });
  // Gates of both layers through the probe: the gradient importance uses.
  r.add<Transformer>("Transformer 2 layers: cross-entropy loss w.r.t. the probe's gates and every parameter",
                     std::make_shared<Transformer>(spec, r.gen(), f64), {r.normal({2}), r.normal({2})},
                     [](Transformer& m, const Vars& x) {
                       static const std::vector<int32_t> tokens{1, 4, 0, 2, 3, 3, 1, 0};
                       static const std::vector<int32_t> targets{2, 0, -1, 1, 1, 2, 0, 2};
                       Probe probe(2);
                       probe.layers[0].gates = x[0];
                       probe.layers[1].gates = x[1];
                       return autograd::cross_entropy(m.forward(tokens, 2, 4, nullptr, &probe), targets);
                     });
}

// With respect to activations at hook points (layers/hooks.h): each input is
// a delta added to one named activation (what activation_gradients does).
// Hooks at the scores or the pattern run attention as its three stages, so
// these also check those stages' backward, parameters included.
void hook_cases(Registry& r) {
  struct HookCase {
    const char* what;
    ModelSpec spec;
    std::vector<std::string> names;
    bool padded;
  };
  const ModelSpec causal{.vocab = 5, .classes = 3, .max_seq_len = 4, .layers = 2, .heads = 2, .d_model = 8, .d_ff = 16};
  ModelSpec bidirectional = causal, no_layernorm = causal;
  bidirectional.causal = false;
  no_layernorm.layernorm = false;
  const std::vector<HookCase> cases{
      {"Transformer 2 layers: cross-entropy loss w.r.t. hook_attn_scores, hook_pattern, hook_resid_pre and every "
       "parameter",
       causal,
       {"blocks.0.attn.hook_attn_scores", "blocks.1.attn.hook_pattern", "blocks.1.hook_resid_pre"},
       false},
      {"Transformer bidirectional, padded: cross-entropy loss w.r.t. hook_attn_scores, hook_pattern and every "
       "parameter",
       bidirectional,
       {"blocks.0.attn.hook_attn_scores", "blocks.0.attn.hook_pattern"},
       true},
      // A delta at hook_result or hook_scale replaces the activation, so the
      // pass takes the composed path: per-head W_O, and the LayerNorms as
      // their equations (ln2 apart from the residual add).
      {"Transformer 2 layers: cross-entropy loss w.r.t. hook_result, every hook_scale and every parameter",
       causal,
       {"blocks.0.attn.hook_result", "blocks.1.attn.hook_result", "blocks.0.ln1.hook_scale", "blocks.1.ln2.hook_scale",
        "ln_final.hook_scale"},
       false},
      // A delta at a head's input takes the per-head path: ln1 of each head's
      // input, each projection's heads in one batched GEMM (block 1: Q and K
      // read attn_in's copies, V its own on top); one at mlp_in feeds ln2
      // apart from resid_mid's skip path.
      {"Transformer 2 layers: cross-entropy loss w.r.t. hook_q_input, hook_k_input, hook_attn_in, hook_v_input, "
       "hook_mlp_in and every parameter",
       causal,
       {"blocks.0.hook_q_input", "blocks.0.hook_k_input", "blocks.1.hook_attn_in", "blocks.1.hook_v_input",
        "blocks.0.hook_mlp_in"},
       false},
      {"Transformer without LayerNorm, padded: cross-entropy loss w.r.t. hook_attn_in, hook_k_input, hook_mlp_in and "
       "every parameter",
       no_layernorm,
       {"blocks.0.hook_attn_in", "blocks.1.hook_k_input", "blocks.1.hook_mlp_in"},
       true}};
  const Tensor pad = Tensor::from_vector({1, 1, 1, 1, 1, 1, 0, 0}, {2, 4}, f64);
  for (const HookCase& c : cases) {
    std::vector<Tensor> deltas;
    // A scale's delta stays small against the scale (~1): it divides.
    for (const std::string& n : c.names)
      deltas.push_back(core::mul(r.normal(hook_shape(c.spec, n, 2, 4)), n.ends_with("hook_scale") ? 0.1 : 1.0));
    r.add<Transformer>(c.what, std::make_shared<Transformer>(c.spec, r.gen(), f64), deltas,
                       [c, pad](Transformer& m, const Vars& x) {
                         static const std::vector<int32_t> tokens{1, 4, 0, 2, 3, 3, 1, 0};
                         static const std::vector<int32_t> targets{2, 0, -1, 1, 1, 2, -1, -1};
                         std::map<std::string, Variable> d;
                         for (std::size_t i = 0; i < c.names.size(); ++i) d.emplace(c.names[i], x[i]);
                         HookSet hooks(m.spec(), {}, {}, d);
                         Probe probe;
                         probe.hooks = &hooks;
                         return autograd::cross_entropy(m.forward(tokens, 2, 4, c.padded ? &pad : nullptr, &probe),
                                                        targets);
                       });
  }
}

std::vector<GradcheckCase> build() {
  Registry r;
  basic_cases(r);
  attention_cases(r);
  model_cases(r);
  hook_cases(r);
  return r.take();
}

}  // namespace

const std::vector<GradcheckCase>& layers_gradcheck_cases() {
  static const std::vector<GradcheckCase> cases = build();
  return cases;
}

}  // namespace headlab::layers
