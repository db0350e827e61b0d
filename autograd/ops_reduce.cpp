// Reductions: sum and mean over any set of axes, max over one axis. The
// backward broadcasts the gradient back over the reduced axes.
#include <vector>

#include "autograd/op_util.h"
#include "autograd/ops.h"
#include "core/ops.h"

namespace headlab::autograd {

using detail::checked;

namespace {

// g has the reduced shape (with or without the kept axes): view it with the
// kept axes and broadcast it to the input's shape.
Tensor spread(const Tensor& g, const Shape& keep_shape, const Shape& input_shape) {
  return g.reshape(keep_shape).expand(input_shape);
}

Variable reduce_sum(const Variable& x, const std::vector<int64_t>& axes, bool keepdim, bool average) {
  const char* op = average ? "mean" : "sum";
  const Tensor& v = checked(x, op, "x").value();
  const std::vector<int64_t> ax = detail::normalize_axes(axes, v.dim(), op);
  Tensor y = average ? core::mean(v, ax, keepdim) : core::sum(v, ax, keepdim);
  int64_t count = 1;
  for (int64_t a : ax) count *= v.size(a);
  const double scale = average ? 1.0 / static_cast<double>(count) : 1.0;
  return Variable::from_op(
      std::move(y), {x},
      [keep = detail::keepdim_shape(v.shape(), ax), scale, average](std::vector<Variable>& in, const Tensor& g) {
        Tensor d = spread(g, keep, in[0].shape());
        in[0].accumulate_grad(average ? core::mul(d, scale) : d);
      },
      op);
}

}  // namespace

Variable sum(const Variable& x, const std::vector<int64_t>& axes, bool keepdim) {
  return reduce_sum(x, axes, keepdim, false);
}

Variable mean(const Variable& x, const std::vector<int64_t>& axes, bool keepdim) {
  return reduce_sum(x, axes, keepdim, true);
}

Variable max(const Variable& x, int64_t axis, bool keepdim) {
  const Tensor& v = checked(x, "max", "x").value();
  const int64_t a = v.wrap_axis(axis, "max");
  Tensor y = core::max(v, {a}, keepdim);
  // The gradient goes to the first maximum only, as argmax picks it.
  Tensor index = core::argmax(v, a, /*keepdim=*/true);
  return Variable::from_op(
      std::move(y), {x},
      [index, a](std::vector<Variable>& in, const Tensor& g) {
        const Tensor& xv = in[0].value();
        Shape pos_shape(static_cast<std::size_t>(xv.dim()), 1);
        pos_shape[static_cast<std::size_t>(a)] = xv.size(a);
        const Tensor positions = Tensor::arange(xv.size(a), xv.dtype()).reshape(pos_shape);
        const Tensor one_hot = core::eq(positions, index);  // broadcasts to x's shape
        in[0].accumulate_grad(core::mul(one_hot, g.reshape(index.shape())));
      },
      "max");
}

}  // namespace headlab::autograd
