// The op registry of `headlab gradcheck`: every op of autograd/ops.h in
// float64, with broadcast operands, non-contiguous inputs (transposed,
// strided and expanded views made inside f) and multi-axis reductions.
#include <cmath>
#include <limits>
#include <vector>

#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "core/random.h"

namespace headlab::autograd {
namespace {

using Vars = std::vector<Variable>;
constexpr DType f64 = DType::f64;

class Registry {
 public:
  void add(std::string name, GradcheckFn f, std::vector<Tensor> inputs) {
    cases_.push_back({std::move(name), [f = std::move(f), in = std::move(inputs)] { return gradcheck(f, in); }});
  }
  // Inputs: every call draws from a fresh seed, so cases do not share values.
  Tensor normal(const Shape& s) { return core::Generator(++seed_).normal(s, 0.0, 1.0, f64); }
  Tensor positive(const Shape& s) { return core::Generator(++seed_).uniform(s, 0.5, 2.0, f64); }
  // |x| >= 0.2: far from relu's kink compared with the finite-difference step.
  Tensor away_from_zero(const Shape& s) {
    Tensor t = normal(s);
    double* p = t.data<double>();
    for (int64_t i = 0; i < t.numel(); ++i) p[i] += std::copysign(0.2, p[i]);
    return t;
  }
  std::vector<GradcheckCase> take() { return std::move(cases_); }

 private:
  std::vector<GradcheckCase> cases_;
  uint64_t seed_ = 100;
};

Tensor mask_of(const std::vector<double>& values, const Shape& shape) { return Tensor::from_vector(values, shape, f64); }

void elementwise_cases(Registry& r) {
  r.add("add", [](const Vars& x) { return x[0] + x[1]; }, {r.normal({3, 4}), r.normal({3, 4})});
  r.add("add broadcast [2,3,4] + [3,1]", [](const Vars& x) { return x[0] + x[1]; },
        {r.normal({2, 3, 4}), r.normal({3, 1})});
  r.add("add broadcast [3,1] + [1,4]", [](const Vars& x) { return x[0] + x[1]; }, {r.normal({3, 1}), r.normal({1, 4})});
  r.add("add scalar", [](const Vars& x) { return x[0] + 1.5; }, {r.normal({2, 3})});
  r.add("sub broadcast [2,3] - [3]", [](const Vars& x) { return x[0] - x[1]; }, {r.normal({2, 3}), r.normal({3})});
  r.add("mul broadcast [2,1,4] * [3,4]", [](const Vars& x) { return x[0] * x[1]; },
        {r.normal({2, 1, 4}), r.normal({3, 4})});
  r.add("mul x * x (one input twice)", [](const Vars& x) { return x[0] * x[0]; }, {r.normal({2, 3})});
  r.add("mul scalar", [](const Vars& x) { return x[0] * -2.5; }, {r.normal({2, 3})});
  r.add("div broadcast [2,3] / [2,1]", [](const Vars& x) { return x[0] / x[1]; },
        {r.normal({2, 3}), r.positive({2, 1})});
  r.add("neg", [](const Vars& x) { return -x[0]; }, {r.normal({2, 3})});
  r.add("exp", [](const Vars& x) { return exp(x[0]); }, {r.normal({2, 3})});
  r.add("log", [](const Vars& x) { return log(x[0]); }, {r.positive({2, 3})});
  r.add("sqrt", [](const Vars& x) { return sqrt(x[0]); }, {r.positive({2, 3})});
  r.add("pow 3", [](const Vars& x) { return pow(x[0], 3.0); }, {r.normal({2, 3})});
  r.add("pow -1.5", [](const Vars& x) { return pow(x[0], -1.5); }, {r.positive({2, 3})});
  r.add("tanh", [](const Vars& x) { return tanh(x[0]); }, {r.normal({2, 3})});
  r.add("relu", [](const Vars& x) { return relu(x[0]); }, {r.away_from_zero({3, 4})});
  r.add("sigmoid", [](const Vars& x) { return sigmoid(x[0]); }, {r.normal({2, 3})});
  r.add("gelu", [](const Vars& x) { return gelu(x[0]); }, {r.normal({3, 4})});
  // Non-contiguous operands: the op sees transposed, strided or expanded views.
  r.add("mul transposed operands", [](const Vars& x) { return transpose(x[0], 0, 1) * transpose(x[1], 0, 1); },
        {r.normal({4, 3}), r.normal({4, 3})});
  r.add("exp of strided slice", [](const Vars& x) { return exp(slice(x[0], 1, 0, 5, 2)); }, {r.normal({2, 5})});
  r.add("div by expanded operand", [](const Vars& x) { return x[0] / expand(x[1], {2, 3}); },
        {r.normal({2, 3}), r.positive({1, 3})});
  r.add("gelu of transposed", [](const Vars& x) { return gelu(transpose(x[0], 0, 1)); }, {r.normal({3, 2})});
}

void reduce_cases(Registry& r) {
  r.add("sum all", [](const Vars& x) { return sum(x[0]); }, {r.normal({2, 3, 4})});
  r.add("sum axis 1", [](const Vars& x) { return sum(x[0], {1}); }, {r.normal({2, 3, 4})});
  r.add("sum axes {0,2}", [](const Vars& x) { return sum(x[0], {0, 2}); }, {r.normal({2, 3, 4})});
  r.add("sum axes {0,2} keepdim", [](const Vars& x) { return sum(x[0], {0, 2}, true); }, {r.normal({2, 3, 4})});
  r.add("sum axis -1 keepdim", [](const Vars& x) { return sum(x[0], {-1}, true); }, {r.normal({2, 3, 4})});
  r.add("sum of transposed axes {0,1}", [](const Vars& x) { return sum(transpose(x[0], 0, 2), {0, 1}); },
        {r.normal({2, 3, 4})});
  r.add("mean all", [](const Vars& x) { return mean(x[0]); }, {r.normal({2, 3, 4})});
  r.add("mean axes {1,2}", [](const Vars& x) { return mean(x[0], {1, 2}); }, {r.normal({2, 3, 4})});
  r.add("mean axes {0,-1} keepdim", [](const Vars& x) { return mean(x[0], {0, -1}, true); }, {r.normal({2, 3, 4})});
  r.add("max axis 1", [](const Vars& x) { return max(x[0], 1); }, {r.normal({2, 4, 3})});
  r.add("max axis 0 keepdim", [](const Vars& x) { return max(x[0], 0, true); }, {r.normal({4, 3})});
  r.add("max axis -1 of transposed", [](const Vars& x) { return max(transpose(x[0], 0, 1), -1); },
        {r.normal({5, 3})});
}

void matmul_cases(Registry& r) {
  auto mm = [](const Vars& x) { return matmul(x[0], x[1]); };
  r.add("matmul [3,4] @ [4,5]", mm, {r.normal({3, 4}), r.normal({4, 5})});
  r.add("matmul batched [2,3,4] @ [2,4,5]", mm, {r.normal({2, 3, 4}), r.normal({2, 4, 5})});
  r.add("matmul shared weight [2,3,4] @ [4,5]", mm, {r.normal({2, 3, 4}), r.normal({4, 5})});
  r.add("matmul broadcast batch [2,1,3,4] @ [3,4,2]", mm, {r.normal({2, 1, 3, 4}), r.normal({3, 4, 2})});
  r.add("matmul [3,4] @ batched [2,4,5]", mm, {r.normal({3, 4}), r.normal({2, 4, 5})});
  r.add("matmul vector @ matrix", mm, {r.normal({4}), r.normal({4, 3})});
  r.add("matmul matrix @ vector", mm, {r.normal({3, 4}), r.normal({4})});
  r.add("matmul vector @ vector", mm, {r.normal({4}), r.normal({4})});
  r.add("matmul vector @ batched", mm, {r.normal({4}), r.normal({2, 4, 3})});
  r.add("matmul transposed operands", [](const Vars& x) { return matmul(transpose(x[0], 0, 1), transpose(x[1], -1, -2)); },
        {r.normal({4, 3}), r.normal({2, 5, 4})});
}

void shape_cases(Registry& r) {
  r.add("reshape", [](const Vars& x) { return reshape(x[0], {3, -1}) * reshape(x[1], {3, 4}); },
        {r.normal({2, 6}), r.normal({12})});
  r.add("reshape of transposed (copies)", [](const Vars& x) { return reshape(transpose(x[0], 0, 1), {-1}); },
        {r.normal({3, 4})});
  r.add("transpose", [](const Vars& x) { return transpose(x[0], 0, 2) * x[1]; },
        {r.normal({2, 3, 4}), r.normal({4, 3, 2})});
  r.add("permute", [](const Vars& x) { return permute(x[0], {2, 0, 1}) * x[1]; },
        {r.normal({2, 3, 4}), r.normal({4, 2, 3})});
  r.add("slice step 2", [](const Vars& x) { return slice(x[0], 1, 1, 6, 2) * x[1]; },
        {r.normal({2, 6}), r.normal({2, 3})});
  r.add("slice negative start", [](const Vars& x) { return exp(slice(x[0], 0, -2, 4)); }, {r.normal({4, 3})});
  r.add("expand [3,1] -> [2,3,4]", [](const Vars& x) { return expand(x[0], {2, 3, 4}) * x[1]; },
        {r.normal({3, 1}), r.normal({2, 3, 4})});
  r.add("concat axis 1 of three", [](const Vars& x) { return exp(concat({x[0], x[1], x[2]}, 1)); },
        {r.normal({2, 1}), r.normal({2, 3}), r.normal({2, 2})});
  r.add("concat axis 0 of a transposed", [](const Vars& x) { return concat({transpose(x[0], 0, 1), x[1]}, 0) * 3.0; },
        {r.normal({3, 2}), r.normal({1, 3})});
  r.add("split {1,2,2} reassembled", [](const Vars& x) {
        auto p = split(x[0], {1, 2, 2}, 1);
        return concat({p[2] * 3.0, p[0], p[1] * -2.0}, 1);
      },
        {r.normal({2, 5})});
}

void nn_cases(Registry& r) {
  // A non-linear readout so that softmax's row sums (always 1) still test every entry.
  r.add("softmax last axis", [](const Vars& x) { return softmax(x[0]) * x[1]; }, {r.normal({3, 5}), r.normal({3, 5})});
  r.add("softmax axis 0", [](const Vars& x) { return softmax(x[0], 0) * x[1]; }, {r.normal({4, 3}), r.normal({4, 3})});
  r.add("softmax axis 1 of [2,3,4]", [](const Vars& x) { return softmax(x[0], 1) * x[1]; },
        {r.normal({2, 3, 4}), r.normal({2, 3, 4})});
  r.add("softmax of transposed", [](const Vars& x) { return softmax(transpose(x[0], 0, 1)) * x[1]; },
        {r.normal({5, 3}), r.normal({3, 5})});
  const double inf = std::numeric_limits<double>::infinity();
  // Row 0 fully masked: softmax gives 0s there (no NaN), so does its gradient.
  const Tensor mask = mask_of({1, 1, 1, 0, 1, 1, 0, 0, 1, 0, 0, 0}, {3, 4});
  r.add("softmax with -inf mask, one row all masked",
        [mask, inf](const Vars& x) { return softmax(masked_fill(x[0], mask, -inf)) * x[1]; },
        {r.normal({3, 4}), r.normal({3, 4})});
  r.add("log_softmax last axis", [](const Vars& x) { return log_softmax(x[0]) * x[1]; },
        {r.normal({3, 5}), r.normal({3, 5})});
  r.add("log_softmax axis 0 of transposed", [](const Vars& x) { return log_softmax(transpose(x[0], 0, 1), 0) * x[1]; },
        {r.normal({4, 3}), r.normal({3, 4})});
  r.add("cross_entropy with ignored rows",
        [](const Vars& x) { return cross_entropy(x[0], std::vector<int32_t>{1, -1, 4, 0}); }, {r.normal({4, 5})});
  r.add("cross_entropy [2,3,4] logits",
        [](const Vars& x) { return cross_entropy(x[0], std::vector<int32_t>{0, 3, 2, -1, 1, 1}); },
        {r.normal({2, 3, 4})});
  r.add("cross_entropy computed in f64, with ignored rows",
        [](const Vars& x) { return cross_entropy(x[0], std::vector<int32_t>{3, -1, 0}, core::DType::f64); },
        {r.normal({3, 4})});
  r.add("cross_entropy of transposed logits",
        [](const Vars& x) { return cross_entropy(transpose(x[0], 0, 1), std::vector<int32_t>{2, 0, 1}); },
        {r.normal({4, 3})});
  r.add("layer_norm [3,5]", [](const Vars& x) { return layer_norm(x[0], x[1], x[2]) * x[3]; },
        {r.normal({3, 5}), r.normal({5}), r.normal({5}), r.normal({3, 5})});
  r.add("layer_norm [2,3,4] of transposed", [](const Vars& x) { return layer_norm(transpose(x[0], 0, 2), x[1], x[2]) * x[3]; },
        {r.normal({4, 3, 2}), r.normal({4}), r.normal({4}), r.normal({2, 3, 4})});
  r.add("layer_norm without weight and bias", [](const Vars& x) { return layer_norm(x[0], {}, {}) * x[1]; },
        {r.normal({3, 4}), r.normal({3, 4})});
  // Both outputs weighed, so the gradient through the sum's other use (the
  // residual stream) and through the LayerNorm are both checked.
  r.add("add_layer_norm [2,3,4] (sum and normalized)", [](const Vars& x) {
        const AddLayerNorm out = add_layer_norm(x[0], transpose(x[1], 0, 1), x[2], x[3]);
        return out.sum * x[4] + out.normalized * x[5];
      },
        {r.normal({2, 3, 4}), r.normal({3, 2, 4}), r.normal({4}), r.normal({4}), r.normal({2, 3, 4}),
         r.normal({2, 3, 4})});
  r.add("linear_gelu without bias", [](const Vars& x) { return linear_gelu(transpose(x[0], 0, 1), x[1], {}) * x[2]; },
        {r.normal({4, 3}), r.normal({2, 4}), r.normal({3, 2})});
  r.add("embedding with repeated ids",
        [](const Vars& x) { return embedding(x[0], std::vector<int32_t>{1, 4, 1, 0, 5, 1}, {2, 3}) * x[1]; },
        {r.normal({6, 3}), r.normal({2, 3, 3})});
  r.add("masked_fill mask [3,1] broadcast", [](const Vars& x) {
        return masked_fill(x[0], mask_of({0, 1, 0}, {3, 1}), 7.0) * x[1];
      },
        {r.normal({3, 4}), r.normal({3, 4})});
  r.add("masked_fill mask [4] broadcast", [](const Vars& x) {
        return masked_fill(x[0], mask_of({1, 0, 0, 1}, {4}), -1.0) * x[1];
      },
        {r.normal({2, 3, 4}), r.normal({2, 3, 4})});
  r.add("dropout p 0.4 (seeded)", [](const Vars& x) {
        core::Generator gen(42);
        return dropout(x[0], 0.4, gen, true) * x[1];
      },
        {r.normal({4, 5}), r.normal({4, 5})});
  // One causal attention head, composed: softmax(mask(Q K^T / 2)) V.
  const Tensor causal = mask_of({0, 1, 1, 0, 0, 1, 0, 0, 0}, {3, 3});
  r.add("composed causal attention head", [causal, inf](const Vars& x) {
        Variable scores = matmul(x[0], transpose(x[1], -1, -2)) * 0.5;
        return matmul(softmax(masked_fill(scores, causal, -inf)), x[2]);
      },
        {r.normal({2, 3, 4}), r.normal({2, 3, 4}), r.normal({2, 3, 4})});
  r.add("linear [2,3,4] -> 5 with bias", [](const Vars& x) { return linear(x[0], x[1], x[2]) * x[3]; },
        {r.normal({2, 3, 4}), r.normal({5, 4}), r.normal({5}), r.normal({2, 3, 5})});
  r.add("linear_gelu [2,3,4] -> 5", [](const Vars& x) { return linear_gelu(x[0], x[1], x[2]) * x[3]; },
        {r.normal({2, 3, 4}), r.normal({5, 4}), r.normal({5}), r.normal({2, 3, 5})});
  r.add("linear of transposed, no bias", [](const Vars& x) { return linear(transpose(x[0], 0, 1), x[1], {}); },
        {r.normal({4, 3}), r.normal({2, 4})});
  // Fused attention, 2 heads of d_k 2: causal; then bidirectional with padded
  // keys (batch 1 has a single real key) and gates that need a gradient.
  r.add("attention causal, 2 heads", [](const Vars& x) { return attention(x[0], x[1], x[2], 2, true, 0.5) * x[3]; },
        {r.normal({2, 3, 4}), r.normal({2, 3, 4}), r.normal({2, 3, 4}), r.normal({2, 3, 4})});
  const Tensor padding = mask_of({1, 1, 0, 0, 1, 0}, {2, 3});
  r.add("attention bidirectional, key padding, gates", [padding](const Vars& x) {
        return attention(x[0], x[1], x[2], 2, false, 0.7, padding, x[3]) * x[4];
      },
        {r.normal({2, 3, 4}), r.normal({2, 3, 4}), r.normal({2, 3, 4}), r.normal({2}), r.normal({2, 3, 4})});
  // Causal past 64 positions: queries run in chunks that skip hidden keys.
  r.add("attention causal, 70 positions (two chunks)",
        [](const Vars& x) { return attention(x[0], x[1], x[2], 1, true, 0.5) * x[3]; },
        {r.normal({1, 70, 2}), r.normal({1, 70, 2}), r.normal({1, 70, 2}), r.normal({1, 70, 2})});
  // Causal with key 0 padded: query 0 sees no key, its row is zeros.
  const Tensor first_padded = mask_of({0, 1, 1, 1, 1, 1}, {2, 3});
  r.add("attention causal, a query that sees no key", [first_padded](const Vars& x) {
        return attention(x[0], x[1], x[2], 1, true, 0.5, first_padded) * x[3];
      },
        {r.normal({2, 3, 2}), r.normal({2, 3, 2}), r.normal({2, 3, 2}), r.normal({2, 3, 2})});
}

std::vector<GradcheckCase> build() {
  Registry r;
  elementwise_cases(r);
  reduce_cases(r);
  matmul_cases(r);
  shape_cases(r);
  nn_cases(r);
  return r.take();
}

}  // namespace

const std::vector<GradcheckCase>& op_gradcheck_cases() {
  static const std::vector<GradcheckCase> cases = build();
  return cases;
}

}  // namespace headlab::autograd
