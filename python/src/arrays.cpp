#include "arrays.h"

#include <memory>
#include <span>
#include <stdexcept>

#include "layers/padding_mask.h"

namespace headlab::python {

namespace {

template <class T>
py::array view_of(const core::Tensor& contiguous) {
  // The capsule owns a reference to the storage: the array outlives the Tensor.
  auto* owner = new std::shared_ptr<core::Storage>(contiguous.storage());
  py::capsule base(owner, [](void* p) { delete static_cast<std::shared_ptr<core::Storage>*>(p); });
  std::vector<py::ssize_t> shape(contiguous.shape().begin(), contiguous.shape().end());
  return py::array_t<T>(shape, static_cast<const T*>(contiguous.raw_data()), base);
}

}  // namespace

py::array to_numpy(const core::Tensor& t) {
  const core::Tensor c = t.contiguous();
  if (c.dtype() == core::DType::f32) return view_of<float>(c);
  return view_of<double>(c);
}

py::array to_numpy_copy(const core::Tensor& t) { return to_numpy(t.clone()); }

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

core::Tensor tensor_from(const py::array& array, const core::Shape& shape, core::DType dtype, const std::string& what) {
  const char kind = array.dtype().kind();
  std::vector<int64_t> got(array.shape(), array.shape() + array.ndim());
  // Floats only: an integer or bool array in place of floats is almost surely a mistake, never cast.
  if (got != shape || kind != 'f')
    throw std::invalid_argument(what + ": expected a float array of shape " + shape_text(shape) + ", got " +
                                (kind == 'f' ? "shape " + shape_text(got)
                                             : "dtype " + std::string(py::str(array.dtype())) +
                                                   (kind == 'i' || kind == 'u' || kind == 'b'
                                                        ? " (convert it with .astype(np.float32))"
                                                        : "")));
  core::Tensor out = core::Tensor::empty(shape, dtype);
  if (dtype == core::DType::f32) {
    const auto src = py::array_t<float, py::array::c_style | py::array::forcecast>::ensure(array);
    std::copy(src.data(), src.data() + src.size(), out.data<float>());
  } else {
    const auto src = py::array_t<double, py::array::c_style | py::array::forcecast>::ensure(array);
    std::copy(src.data(), src.data() + src.size(), out.data<double>());
  }
  return out;
}

Tokens tokens_from(const IntArray& array) {
  if (array.ndim() != 2)
    throw std::invalid_argument("tokens: expected an int array of shape [batch, seq_len], got " +
                                std::to_string(array.ndim()) + " dimensions");
  Tokens t;
  t.batch = array.shape(0);
  t.seq_len = array.shape(1);
  t.ids.assign(array.data(), array.data() + array.size());
  return t;
}

core::Tensor padding_mask_of(const std::optional<IntArray>& lengths, const Tokens& tokens) {
  if (!lengths) return {};
  const std::span<const int32_t> rows(lengths->data(), static_cast<std::size_t>(lengths->size()));
  return layers::padding_mask(rows, tokens.batch, tokens.seq_len);
}

}  // namespace headlab::python
