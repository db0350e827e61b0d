// Elementwise ops. Binary ones broadcast; their backward sums each gradient
// back to its input's shape (detail::reduce_grad). Those whose backward reads
// no input value (add, sub, the scalar add and multiply, neg) say so to
// from_op, which lets an input's value go early (autograd/variable.h).
#include <vector>

#include "autograd/op_util.h"
#include "autograd/ops.h"
#include "core/nn_kernels.h"
#include "core/ops.h"

namespace headlab::autograd {

using detail::checked;
using detail::reduce_grad;
using detail::scalar_like;

namespace {

void give(Variable& input, const Tensor& g, const char* op) {
  if (input.requires_grad()) input.accumulate_grad(reduce_grad(g, input.shape(), op));
}

}  // namespace

// --- binary, broadcasting ---

Variable add(const Variable& a, const Variable& b) {
  Tensor y = core::add(checked(a, "add", "a").value(), checked(b, "add", "b").value());
  return Variable::from_op(
      std::move(y), {a, b},
      [](std::vector<Variable>& in, const Tensor& g) {
        give(in[0], g, "add");
        give(in[1], g, "add");
      },
      "add", Variable::kBlindAll);
}

Variable sub(const Variable& a, const Variable& b) {
  Tensor y = core::sub(checked(a, "sub", "a").value(), checked(b, "sub", "b").value());
  return Variable::from_op(
      std::move(y), {a, b},
      [](std::vector<Variable>& in, const Tensor& g) {
        give(in[0], g, "sub");
        if (in[1].requires_grad()) give(in[1], core::neg(g), "sub");
      },
      "sub", Variable::kBlindAll);
}

Variable mul(const Variable& a, const Variable& b) {
  Tensor y = core::mul(checked(a, "mul", "a").value(), checked(b, "mul", "b").value());
  return Variable::from_op(
      std::move(y), {a, b},
      [](std::vector<Variable>& in, const Tensor& g) {
        if (in[0].requires_grad()) give(in[0], core::mul(g, in[1].value()), "mul");
        if (in[1].requires_grad()) give(in[1], core::mul(g, in[0].value()), "mul");
      },
      "mul");
}

Variable div(const Variable& a, const Variable& b) {
  Tensor y = core::div(checked(a, "div", "a").value(), checked(b, "div", "b").value());
  return Variable::from_op(
      y, {a, b},
      [y](std::vector<Variable>& in, const Tensor& g) {
        const Tensor& bv = in[1].value();
        // d(a/b)/da = 1/b, d(a/b)/db = -(a/b)/b
        if (in[0].requires_grad()) give(in[0], core::div(g, bv), "div");
        if (in[1].requires_grad()) give(in[1], core::neg(core::div(core::mul(g, y), bv)), "div");
      },
      "div");
}

// --- with a scalar ---

Variable add(const Variable& a, double b) {
  Tensor y = core::add(checked(a, "add", "a").value(), b);
  return Variable::from_op(
      std::move(y), {a}, [](std::vector<Variable>& in, const Tensor& g) { give(in[0], g, "add_scalar"); },
      "add_scalar", Variable::kBlindAll);
}

Variable mul(const Variable& a, double b) {
  Tensor y = core::mul(checked(a, "mul", "a").value(), b);
  return Variable::from_op(
      std::move(y), {a},
      [b](std::vector<Variable>& in, const Tensor& g) { give(in[0], core::mul(g, b), "mul_scalar"); },
      "mul_scalar", Variable::kBlindAll);
}

// --- unary ---

Variable neg(const Variable& x) {
  Tensor y = core::neg(checked(x, "neg", "x").value());
  return Variable::from_op(
      std::move(y), {x}, [](std::vector<Variable>& in, const Tensor& g) { give(in[0], core::neg(g), "neg"); },
      "neg", Variable::kBlindAll);
}

Variable exp(const Variable& x) {
  Tensor y = core::exp(checked(x, "exp", "x").value());
  return Variable::from_op(
      y, {x}, [y](std::vector<Variable>& in, const Tensor& g) { give(in[0], core::mul(g, y), "exp"); }, "exp");
}

Variable log(const Variable& x) {
  Tensor y = core::log(checked(x, "log", "x").value());
  return Variable::from_op(
      std::move(y), {x},
      [](std::vector<Variable>& in, const Tensor& g) { give(in[0], core::div(g, in[0].value()), "log"); }, "log");
}

Variable sqrt(const Variable& x) {
  Tensor y = core::sqrt(checked(x, "sqrt", "x").value());
  return Variable::from_op(
      y, {x},
      [y](std::vector<Variable>& in, const Tensor& g) { give(in[0], core::mul(core::div(g, y), 0.5), "sqrt"); },
      "sqrt");
}

Variable pow(const Variable& x, double exponent) {
  Tensor y = core::pow(checked(x, "pow", "x").value(), exponent);
  return Variable::from_op(
      std::move(y), {x},
      [exponent](std::vector<Variable>& in, const Tensor& g) {
        // d x^e / dx = e x^(e-1)
        give(in[0], core::mul(core::mul(g, core::pow(in[0].value(), exponent - 1.0)), exponent), "pow");
      },
      "pow");
}

Variable tanh(const Variable& x) {
  Tensor y = core::tanh(checked(x, "tanh", "x").value());
  return Variable::from_op(
      y, {x},
      [y](std::vector<Variable>& in, const Tensor& g) {
        // 1 - tanh^2
        give(in[0], core::mul(g, core::add(core::neg(core::mul(y, y)), 1.0)), "tanh");
      },
      "tanh");
}

Variable relu(const Variable& x) {
  Tensor y = core::relu(checked(x, "relu", "x").value());
  return Variable::from_op(
      std::move(y), {x},
      [](std::vector<Variable>& in, const Tensor& g) {
        const Tensor& v = in[0].value();
        give(in[0], core::mul(g, core::gt(v, scalar_like(0.0, v))), "relu");
      },
      "relu");
}

Variable sigmoid(const Variable& x) {
  Tensor y = core::sigmoid(checked(x, "sigmoid", "x").value());
  return Variable::from_op(
      y, {x},
      [y](std::vector<Variable>& in, const Tensor& g) {
        // s (1 - s)
        give(in[0], core::mul(g, core::mul(y, core::add(core::neg(y), 1.0))), "sigmoid");
      },
      "sigmoid");
}

Variable gelu(const Variable& x) {
  Tensor y = core::gelu_forward(checked(x, "gelu", "x").value());
  return Variable::from_op(
      std::move(y), {x},
      [](std::vector<Variable>& in, const Tensor& g) {
        give(in[0], core::gelu_backward(in[0].value(), g), "gelu");
      },
      "gelu");
}

}  // namespace headlab::autograd
