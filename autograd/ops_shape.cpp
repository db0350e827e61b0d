// Shape ops. The forward is a view of the input where the layout allows
// (reshape, transpose, permute, slice, expand), so results may be
// non-contiguous; every consumer copes (core ops take strides, fused
// kernels call contiguous()). The backward maps the gradient back.
#include <string>
#include <vector>

#include "autograd/op_util.h"
#include "autograd/ops.h"
#include "core/ops.h"

namespace headlab::autograd {

using detail::checked;

Variable reshape(const Variable& x, const Shape& shape) {
  Tensor y = checked(x, "reshape", "x").value().reshape(shape);
  return Variable::from_op(
      std::move(y), {x},
      [](std::vector<Variable>& in, const Tensor& g) { in[0].accumulate_grad(g.reshape(in[0].shape())); },
      "reshape");
}

Variable transpose(const Variable& x, int64_t a, int64_t b) {
  Tensor y = checked(x, "transpose", "x").value().transpose(a, b);
  return Variable::from_op(
      std::move(y), {x},
      [a, b](std::vector<Variable>& in, const Tensor& g) { in[0].accumulate_grad(g.transpose(a, b)); }, "transpose");
}

Variable permute(const Variable& x, const std::vector<int64_t>& order) {
  const Tensor& v = checked(x, "permute", "x").value();
  Tensor y = v.permute(order);  // validates the order
  std::vector<int64_t> inverse(order.size());
  for (std::size_t i = 0; i < order.size(); ++i)
    inverse[static_cast<std::size_t>(v.wrap_axis(order[i], "permute"))] = static_cast<int64_t>(i);
  return Variable::from_op(
      std::move(y), {x},
      [inverse](std::vector<Variable>& in, const Tensor& g) { in[0].accumulate_grad(g.permute(inverse)); },
      "permute");
}

Variable slice(const Variable& x, int64_t axis, int64_t start, int64_t end, int64_t step) {
  Tensor y = checked(x, "slice", "x").value().slice(axis, start, end, step);
  return Variable::from_op(
      std::move(y), {x},
      [axis, start, end, step](std::vector<Variable>& in, const Tensor& g) {
        // Scatter into zeros through the very same view.
        Tensor d = Tensor::zeros(in[0].shape(), g.dtype());
        d.slice(axis, start, end, step).copy_(g);
        in[0].accumulate_grad(d);
      },
      "slice");
}

Variable expand(const Variable& x, const Shape& shape) {
  Tensor y = checked(x, "expand", "x").value().expand(shape);
  return Variable::from_op(
      std::move(y), {x},
      [](std::vector<Variable>& in, const Tensor& g) {
        in[0].accumulate_grad(detail::reduce_grad(g, in[0].shape(), "expand"));
      },
      "expand");
}

Variable concat(const std::vector<Variable>& xs, int64_t axis) {
  if (xs.empty()) throw std::invalid_argument("concat: needs at least one tensor");
  const Tensor& first = checked(xs[0], "concat", "xs[0]").value();
  const int64_t a = first.wrap_axis(axis, "concat");
  Shape shape = first.shape();
  std::vector<int64_t> offsets;  // start of each input along the axis
  int64_t total = 0;
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const Tensor& v = checked(xs[i], "concat", "an input").value();
    Shape expect = shape;
    expect[static_cast<std::size_t>(a)] = v.dim() == first.dim() ? v.size(a) : 0;
    if (v.shape() != expect || v.dtype() != first.dtype())
      throw std::invalid_argument("concat: input " + std::to_string(i) + " has shape " + core::to_string(v.shape()) +
                                  " " + core::to_string(v.dtype()) + " but input 0 has " +
                                  core::to_string(first.shape()) + " " + core::to_string(first.dtype()) +
                                  "; all must match except along axis " + std::to_string(a));
    offsets.push_back(total);
    total += v.size(a);
  }
  shape[static_cast<std::size_t>(a)] = total;
  Tensor y = Tensor::empty(shape, first.dtype());
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const Tensor& v = xs[i].value();
    y.slice(a, offsets[i], offsets[i] + v.size(a)).copy_(v);
  }
  return Variable::from_op(
      std::move(y), xs,
      [a, offsets](std::vector<Variable>& in, const Tensor& g) {
        for (std::size_t i = 0; i < in.size(); ++i)
          if (in[i].requires_grad()) in[i].accumulate_grad(g.slice(a, offsets[i], offsets[i] + in[i].size(a)));
      },
      "concat");
}

std::vector<Variable> split(const Variable& x, const std::vector<int64_t>& sizes, int64_t axis) {
  const Tensor& v = checked(x, "split", "x").value();
  const int64_t a = v.wrap_axis(axis, "split");
  int64_t total = 0;
  for (int64_t s : sizes) {
    if (s < 0) throw std::invalid_argument("split: sizes must be >= 0, got " + core::to_string(sizes));
    total += s;
  }
  if (total != v.size(a))
    throw std::invalid_argument("split: sizes " + core::to_string(sizes) + " add up to " + std::to_string(total) +
                                " but axis " + std::to_string(a) + " of shape " + core::to_string(v.shape()) +
                                " has " + std::to_string(v.size(a)));
  // Each piece is a slice; their gradients add up in x.
  std::vector<Variable> out;
  int64_t start = 0;
  for (int64_t s : sizes) {
    out.push_back(slice(x, a, start, start + s));
    start += s;
  }
  return out;
}

}  // namespace headlab::autograd
