// Neural-network ops on the fused kernels of core/nn_kernels.h: softmax,
// log-softmax, cross-entropy, LayerNorm (alone and after a residual add);
// plus embedding, masked fill, dropout.
#include <cmath>
#include <string>
#include <vector>

#include "autograd/grad_in_place.h"
#include "autograd/op_util.h"
#include "autograd/ops.h"
#include "core/nn_kernels.h"
#include "core/ops.h"

namespace headlab::autograd {

using detail::checked;

namespace {

// The softmax kernels work on the last axis: any other axis is swapped
// there (a view), and the result swapped back.
Tensor to_last(const Tensor& t, int64_t axis) { return axis == t.dim() - 1 ? t : t.transpose(axis, -1); }

template <Tensor (*Forward)(const Tensor&), Tensor (*Backward)(const Tensor&, const Tensor&)>
Variable row_op(const Variable& x, int64_t axis, const char* op) {
  const Tensor& v = checked(x, op, "x").value();
  const int64_t a = v.wrap_axis(axis, op);
  Tensor y_last = Forward(to_last(v, a));  // contiguous, axis last
  return Variable::from_op(
      to_last(y_last, a), {x},
      [y_last, a](std::vector<Variable>& in, const Tensor& g) {
        in[0].accumulate_grad(to_last(Backward(y_last, to_last(g, a)), a));
      },
      op);
}

}  // namespace

Variable softmax(const Variable& x, int64_t axis) {
  return row_op<core::softmax_forward, core::softmax_backward>(x, axis, "softmax");
}

Variable log_softmax(const Variable& x, int64_t axis) {
  return row_op<core::log_softmax_forward, core::log_softmax_backward>(x, axis, "log_softmax");
}

Variable cross_entropy(const Variable& logits, std::span<const int32_t> targets) {
  return cross_entropy(logits, targets, checked(logits, "cross_entropy", "logits").value().dtype());
}

Variable cross_entropy(const Variable& logits, std::span<const int32_t> targets, core::DType compute) {
  const Tensor& v = checked(logits, "cross_entropy", "logits").value();
  core::CrossEntropyResult r = core::cross_entropy_forward(v.dtype() == compute ? v : v.to(compute), targets);
  return Variable::from_op(
      Tensor::scalar(r.loss, v.dtype()), {logits},
      [probs = r.probs, t = std::vector<int32_t>(targets.begin(), targets.end()), count = r.count,
       dtype = v.dtype()](std::vector<Variable>& in, const Tensor& g) {
        const Tensor d = core::cross_entropy_backward(probs, t, count, g.item());
        in[0].accumulate_grad(d.dtype() == dtype ? d : d.to(dtype));
      },
      "cross_entropy");
}

namespace {

// The LayerNorm node over x, from its forward's result (mean and rstd kept).
Variable layer_norm_node(const Variable& x, const Variable& weight, const Variable& bias, core::LayerNormResult r) {
  return Variable::from_op(
      std::move(r.y), {x, weight, bias},
      [mean = r.mean, rstd = r.rstd](std::vector<Variable>& in, const Tensor& g) {
        const Tensor w_val = in[1].defined() ? in[1].value() : Tensor();
        // x's gradient may already hold another use's (the residual stream's
        // after its add): then dx is added into it in the kernel's pass.
        const Tensor into = in[0].requires_grad() ? grad_to_add_into(in[0]) : Tensor();
        if (into.defined()) {
          const core::LayerNormGrads d = core::layer_norm_backward_into(g, in[0].value(), w_val, mean, rstd, into);
          if (in[1].requires_grad()) in[1].accumulate_grad(d.dweight);
          if (in[2].requires_grad()) in[2].accumulate_grad(d.dbias);
          return;
        }
        core::LayerNormGrads d = core::layer_norm_backward(g, in[0].value(), w_val, mean, rstd);
        if (in[0].requires_grad()) in[0].accumulate_grad(d.dx);
        if (in[1].requires_grad()) in[1].accumulate_grad(d.dweight);
        if (in[2].requires_grad()) in[2].accumulate_grad(d.dbias);
      },
      "layer_norm");
}

Tensor value_or_none(const Variable& v) { return v.defined() ? v.value() : Tensor(); }

}  // namespace

Variable layer_norm(const Variable& x, const Variable& weight, const Variable& bias, double eps) {
  const Tensor& v = checked(x, "layer_norm", "x").value();
  return layer_norm_node(x, weight, bias, core::layer_norm_forward(v, value_or_none(weight), value_or_none(bias), eps));
}

AddLayerNorm add_layer_norm(const Variable& a, const Variable& b, const Variable& weight, const Variable& bias,
                            double eps) {
  const Tensor& av = checked(a, "add_layer_norm", "a").value();
  const Tensor& bv = checked(b, "add_layer_norm", "b").value();
  core::AddLayerNormResult r =
      core::add_layer_norm_forward(av, bv, value_or_none(weight), value_or_none(bias), eps);
  // Two nodes, as a + b then layer_norm would record: the sum is used
  // again downstream (the residual stream), and its gradient gathers both uses.
  Variable sum = Variable::from_op(
      std::move(r.sum), {a, b},
      [](std::vector<Variable>& in, const Tensor& g) {
        if (in[0].requires_grad()) in[0].accumulate_grad(g);
        if (in[1].requires_grad()) in[1].accumulate_grad(g);
      },
      "add", Variable::kBlindAll);
  Variable normalized = layer_norm_node(sum, weight, bias, std::move(r.norm));
  return {std::move(sum), std::move(normalized)};
}

Variable embedding(const Variable& weight, std::span<const int32_t> ids, const Shape& ids_shape) {
  const Tensor& w = checked(weight, "embedding", "weight").value();
  if (core::numel_of(ids_shape) != static_cast<int64_t>(ids.size()))
    throw std::invalid_argument("embedding: ids_shape " + core::to_string(ids_shape) + " holds " +
                                std::to_string(core::numel_of(ids_shape)) + " ids but " + std::to_string(ids.size()) +
                                " were given");
  if (w.dim() != 2)
    throw std::invalid_argument("embedding: weight must be [V, D], got " + core::to_string(w.shape()));
  Shape out_shape = ids_shape;
  out_shape.push_back(w.size(1));
  Tensor y = core::embedding_forward(w, ids).reshape(out_shape);
  return Variable::from_op(
      std::move(y), {weight},
      [ids_copy = std::vector<int32_t>(ids.begin(), ids.end())](std::vector<Variable>& in, const Tensor& g) {
        const int64_t n = static_cast<int64_t>(ids_copy.size());
        in[0].accumulate_grad(core::embedding_backward(g.reshape({n, in[0].size(1)}), ids_copy, in[0].size(0)));
      },
      "embedding");
}

Variable masked_fill(const Variable& x, const Tensor& mask, double value) {
  const Tensor& v = checked(x, "masked_fill", "x").value();
  if (!mask.defined()) throw std::invalid_argument("masked_fill: the mask is undefined");
  if (mask.dim() > v.dim() || core::broadcast_shapes(mask.shape(), v.shape(), "masked_fill") != v.shape())
    throw std::invalid_argument("masked_fill: a mask of shape " + core::to_string(mask.shape()) +
                                " does not broadcast to x's shape " + core::to_string(v.shape()) +
                                " (its axes must be 1 or match x's, counted from the end)");
  const Tensor m = mask.to(v.dtype());
  Tensor y = core::where(m, detail::scalar_like(value, v), v);
  return Variable::from_op(
      std::move(y), {x},
      [m](std::vector<Variable>& in, const Tensor& g) {
        in[0].accumulate_grad(core::where(m, detail::scalar_like(0.0, g), g));
      },
      "masked_fill");
}

Variable dropout(const Variable& x, double p, core::Generator& gen, bool training) {
  const Tensor& v = checked(x, "dropout", "x").value();
  if (!(p >= 0.0 && p <= 1.0)) throw std::invalid_argument("dropout: p must be in [0, 1], got " + std::to_string(p));
  if (!training || p == 0.0) return x;
  // One uniform per element in row-major order, drawn on this thread: the
  // mask depends on the generator's state only, never on the thread count.
  Tensor keep = Tensor::empty(v.shape(), v.dtype());
  const double scale = p < 1.0 ? 1.0 / (1.0 - p) : 0.0;
  core::dispatch(v.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* k = keep.data<T>();
    for (int64_t i = 0, n = keep.numel(); i < n; ++i) k[i] = gen.uniform() < p ? T(0) : static_cast<T>(scale);
  });
  Tensor y = core::mul(v, keep);
  return Variable::from_op(
      std::move(y), {x},
      [keep](std::vector<Variable>& in, const Tensor& g) { in[0].accumulate_grad(core::mul(g, keep)); }, "dropout");
}

}  // namespace headlab::autograd
