// Elementwise kernels: unary maps and broadcasting binary/ternary zips.
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "core/ops.h"
#include "core/strided.h"

namespace headlab::core {

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  const std::size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (std::size_t i = 0; i < n; ++i) {
    const int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1)
      throw std::invalid_argument(std::string(op) + ": shapes " + to_string(a) + " and " + to_string(b) +
                                  " do not broadcast (axis " + std::to_string(i) + ": " + std::to_string(da) +
                                  " vs " + std::to_string(db) + "; sizes must match or one must be 1)");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

namespace {

void require_defined(const Tensor& t, const char* op) {
  if (!t.defined()) throw std::invalid_argument(std::string(op) + ": the tensor is undefined");
}

void require_same_dtype(const Tensor& a, const Tensor& b, const char* op) {
  require_defined(a, op);
  require_defined(b, op);
  if (a.dtype() != b.dtype())
    throw std::invalid_argument(std::string(op) + ": dtypes differ (" + to_string(a.dtype()) + " and " +
                                to_string(b.dtype()) + "); convert one with .to()");
}

// out[i] = f(x[i]) for any layout of x; out is fresh and contiguous.
template <class F>
Tensor map(const Tensor& x, const char* op, F f) {
  require_defined(x, op);
  Tensor out = Tensor::empty(x.shape(), x.dtype());
  dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const auto layout = detail::coalesce<2>(x.shape(), {&out.strides(), &x.strides()});
    T* o = out.data<T>();
    const T* p = x.data<T>();
    detail::for_each_row(layout, [&](auto off, int64_t n, auto st) {
      T* op_ = o + off[0];
      const T* xp = p + off[1];
      if (st[1] == 1) {
#pragma omp simd
        for (int64_t i = 0; i < n; ++i) op_[i] = f(xp[i]);
      } else {
        for (int64_t i = 0; i < n; ++i) op_[i] = f(xp[i * st[1]]);
      }
    });
  });
  return out;
}

// out[i] = f(a[i], b[i]) with a and b broadcast to a common shape.
template <class F>
Tensor zip(const Tensor& a, const Tensor& b, const char* op, F f) {
  require_same_dtype(a, b, op);
  const Shape shape = broadcast_shapes(a.shape(), b.shape(), op);
  const Tensor ea = a.expand(shape), eb = b.expand(shape);
  Tensor out = Tensor::empty(shape, a.dtype());
  dispatch(a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const auto layout = detail::coalesce<3>(shape, {&out.strides(), &ea.strides(), &eb.strides()});
    T* o = out.data<T>();
    const T* pa = ea.data<T>();
    const T* pb = eb.data<T>();
    detail::for_each_row(layout, [&](auto off, int64_t n, auto st) {
      T* op_ = o + off[0];
      const T* x = pa + off[1];
      const T* y = pb + off[2];
      if (st[1] == 1 && st[2] == 1) {
#pragma omp simd
        for (int64_t i = 0; i < n; ++i) op_[i] = f(x[i], y[i]);
      } else if (st[1] == 1 && st[2] == 0) {
        const T yv = *y;
#pragma omp simd
        for (int64_t i = 0; i < n; ++i) op_[i] = f(x[i], yv);
      } else {
        for (int64_t i = 0; i < n; ++i) op_[i] = f(x[i * st[1]], y[i * st[2]]);
      }
    });
  });
  return out;
}

}  // namespace

// Each functor is written once for float and double through `auto`.
#define HEADLAB_UNARY(name, expr)                                                       \
  Tensor name(const Tensor& x) {                                                        \
    return map(x, #name, [](auto v) { return static_cast<decltype(v)>(expr); });        \
  }
HEADLAB_UNARY(neg, -v)
HEADLAB_UNARY(exp, std::exp(v))
HEADLAB_UNARY(log, std::log(v))
HEADLAB_UNARY(sqrt, std::sqrt(v))
HEADLAB_UNARY(tanh, std::tanh(v))
HEADLAB_UNARY(erf, std::erf(v))
HEADLAB_UNARY(abs, std::abs(v))
HEADLAB_UNARY(sign, (v > 0) - (v < 0))
HEADLAB_UNARY(relu, v > 0 ? v : 0)
HEADLAB_UNARY(sigmoid, 1 / (1 + std::exp(-v)))
#undef HEADLAB_UNARY

Tensor pow(const Tensor& x, double exponent) {
  return map(x, "pow", [exponent](auto v) {
    using T = decltype(v);
    return static_cast<T>(std::pow(v, static_cast<T>(exponent)));
  });
}

#define HEADLAB_BINARY(name, expr)                                                                \
  Tensor name(const Tensor& a, const Tensor& b) {                                                 \
    return zip(a, b, #name, [](auto x, auto y) { return static_cast<decltype(x)>(expr); });       \
  }
HEADLAB_BINARY(add, x + y)
HEADLAB_BINARY(sub, x - y)
HEADLAB_BINARY(mul, x * y)
HEADLAB_BINARY(div, x / y)
HEADLAB_BINARY(pow, std::pow(x, y))
HEADLAB_BINARY(maximum, x > y || std::isnan(x) ? x : y)
HEADLAB_BINARY(minimum, x < y || std::isnan(x) ? x : y)
HEADLAB_BINARY(eq, x == y)
HEADLAB_BINARY(ne, x != y)
HEADLAB_BINARY(lt, x < y)
HEADLAB_BINARY(le, x <= y)
HEADLAB_BINARY(gt, x > y)
HEADLAB_BINARY(ge, x >= y)
#undef HEADLAB_BINARY

Tensor add(const Tensor& a, double b) {
  return map(a, "add", [b](auto v) { return static_cast<decltype(v)>(v + static_cast<decltype(v)>(b)); });
}

Tensor mul(const Tensor& a, double b) {
  return map(a, "mul", [b](auto v) { return static_cast<decltype(v)>(v * static_cast<decltype(v)>(b)); });
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  require_same_dtype(a, b, "where");
  require_defined(cond, "where");
  const Shape shape = broadcast_shapes(broadcast_shapes(cond.shape(), a.shape(), "where"), b.shape(), "where");
  const Tensor c = cond.to(a.dtype()).expand(shape), ea = a.expand(shape), eb = b.expand(shape);
  Tensor out = Tensor::empty(shape, a.dtype());
  dispatch(a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const auto layout = detail::coalesce<4>(shape, {&out.strides(), &c.strides(), &ea.strides(), &eb.strides()});
    T* o = out.data<T>();
    const T *pc = c.data<T>(), *pa = ea.data<T>(), *pb = eb.data<T>();
    detail::for_each_row(layout, [&](auto off, int64_t n, auto st) {
      for (int64_t i = 0; i < n; ++i)
        o[off[0] + i * st[0]] = pc[off[1] + i * st[1]] != 0 ? pa[off[2] + i * st[2]] : pb[off[3] + i * st[3]];
    });
  });
  return out;
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape())
    throw std::invalid_argument("max_abs_diff: shapes differ: " + to_string(a.shape()) + " and " +
                                to_string(b.shape()));
  const std::vector<double> x = a.to_vector(), y = b.to_vector();
  double m = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double d = std::abs(x[i] - y[i]);
    if (std::isnan(d)) return d;
    m = std::max(m, d);
  }
  return m;
}

bool allclose(const Tensor& a, const Tensor& b, double rtol, double atol) {
  if (a.shape() != b.shape()) return false;
  const std::vector<double> x = a.to_vector(), y = b.to_vector();
  for (std::size_t i = 0; i < x.size(); ++i)
    if (!(std::abs(x[i] - y[i]) <= atol + rtol * std::abs(y[i]))) return false;
  return true;
}

}  // namespace headlab::core
