#include "autograd/op_util.h"

#include <algorithm>
#include <stdexcept>

namespace headlab::autograd::detail {

Tensor reduce_grad(const Tensor& g, const Shape& shape, const char* op) {
  Tensor r = g.shape() == shape ? g : core::sum_to(g, shape);
  if (r.shape() != shape)
    throw std::runtime_error(std::string("backward of '") + op + "': reducing a gradient of shape " +
                             core::to_string(g.shape()) + " gave " + core::to_string(r.shape()) + ", expected " +
                             core::to_string(shape));
  return r;
}

const Variable& checked(const Variable& v, const char* op, const char* name) {
  if (!v.defined()) throw std::invalid_argument(std::string(op) + ": " + name + " is an undefined Variable");
  return v;
}

std::vector<int64_t> normalize_axes(const std::vector<int64_t>& axes, int64_t dim, const char* op) {
  std::vector<int64_t> out;
  if (axes.empty()) {
    for (int64_t a = 0; a < dim; ++a) out.push_back(a);
    return out;
  }
  for (int64_t a : axes) {
    const int64_t w = a < 0 ? a + dim : a;
    if (w < 0 || w >= dim)
      throw std::invalid_argument(std::string(op) + ": axis " + std::to_string(a) + " is out of range for " +
                                  std::to_string(dim) + " axes (use -" + std::to_string(dim) + " .. " +
                                  std::to_string(dim - 1) + ")");
    out.push_back(w);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

Shape keepdim_shape(const Shape& shape, const std::vector<int64_t>& axes) {
  Shape out = shape;
  for (int64_t a : axes) out[static_cast<std::size_t>(a)] = 1;
  return out;
}

}  // namespace headlab::autograd::detail
