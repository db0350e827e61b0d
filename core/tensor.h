// core::Tensor: a strided view onto shared, 64-byte-aligned storage.
//
// A Tensor is plain data: dtype (f32 or f64), shape, strides (in elements),
// an offset and a shared storage. Views (reshape when strides allow,
// transpose, permute, slice, expand, squeeze/unsqueeze) share the storage;
// contiguous() copies only when the view is not already contiguous.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

namespace headlab::core {

enum class DType { f32, f64 };

std::string to_string(DType dtype);
std::size_t dtype_size(DType dtype);

template <class T>
constexpr DType dtype_of() {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>, "headlab tensors hold float or double");
  return std::is_same_v<T, float> ? DType::f32 : DType::f64;
}

using Shape = std::vector<int64_t>;

std::string to_string(const Shape& shape);  // "[2, 3]"
int64_t numel_of(const Shape& shape);
Shape contiguous_strides(const Shape& shape);
// The index, one entry per dimension, of element `flat` of a contiguous
// (row-major) tensor of `shape`: [1, 2] for element 5 of a [2, 3]. The
// messages that name one element of a tensor (a gradient check's worst
// entry, a hook's first NaN, a bad weight) give it so. Throws
// std::out_of_range unless 0 <= flat < numel_of(shape).
Shape unravel_index(int64_t flat, const Shape& shape);

// Freed storage is kept for reuse at the same size (a training step
// allocates the same sizes every step), up to a limit: 1 GiB unless set.
// Setting it frees what is kept beyond it, so 0 returns every kept buffer to
// the allocator (the Python package keeps less: a notebook's caches vary in
// size, and a kept buffer of another size is only held memory).
void set_buffer_cache_limit(std::size_t bytes);
// The bytes of freed storage kept for reuse now.
std::size_t buffer_cache_bytes();

// Raw bytes, 64-byte aligned, never resized. Shared by every view.
class Storage {
 public:
  explicit Storage(std::size_t nbytes);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  void* data() const { return data_; }
  std::size_t nbytes() const { return nbytes_; }

 private:
  void* data_ = nullptr;
  std::size_t nbytes_ = 0;
};

class Tensor {
 public:
  Tensor() = default;  // undefined: no storage

  // --- creation ---
  static Tensor empty(const Shape& shape, DType dtype = DType::f32);
  static Tensor zeros(const Shape& shape, DType dtype = DType::f32);
  static Tensor ones(const Shape& shape, DType dtype = DType::f32);
  static Tensor full(const Shape& shape, double value, DType dtype = DType::f32);
  static Tensor scalar(double value, DType dtype = DType::f32);  // shape []
  static Tensor arange(int64_t n, DType dtype = DType::f32);     // 0, 1, ..., n-1
  // Copies `values` (row-major) into a new tensor of the given shape.
  static Tensor from_vector(const std::vector<double>& values, const Shape& shape, DType dtype = DType::f32);
  static Tensor zeros_like(const Tensor& t) { return zeros(t.shape(), t.dtype()); }

  // --- metadata ---
  bool defined() const { return storage_ != nullptr; }
  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  const Shape& strides() const { return strides_; }
  int64_t offset() const { return offset_; }
  int64_t dim() const { return static_cast<int64_t>(shape_.size()); }
  int64_t size(int64_t axis) const;  // negative axes count from the end
  int64_t numel() const { return numel_of(shape_); }
  bool is_contiguous() const;
  const std::shared_ptr<Storage>& storage() const { return storage_; }
  bool shares_storage(const Tensor& other) const { return storage_ == other.storage_; }

  // Typed pointer to element 0 of this view; throws if T is not the dtype.
  template <class T>
  T* data() const {
    check_dtype(dtype_of<T>(), "data");
    return static_cast<T*>(storage_->data()) + offset_;
  }
  void* raw_data() const;  // untyped pointer to element 0 of this view

  // --- element access (slow; for tests and small reads) ---
  double item() const;  // a tensor of one element
  double at(const std::vector<int64_t>& index) const;
  void set(const std::vector<int64_t>& index, double value);
  std::vector<double> to_vector() const;  // row-major copy

  // --- views (share storage) ---
  Tensor reshape(const Shape& shape) const;  // view if strides allow, else copies; one -1 allowed
  Tensor view(const Shape& shape) const;     // view only; throws if strides do not allow it
  Tensor transpose(int64_t a, int64_t b) const;
  Tensor permute(const std::vector<int64_t>& order) const;
  Tensor slice(int64_t axis, int64_t start, int64_t end, int64_t step = 1) const;
  Tensor select(int64_t axis, int64_t index) const;  // removes the axis
  Tensor expand(const Shape& shape) const;           // size-1 axes broadcast with stride 0
  Tensor unsqueeze(int64_t axis) const;
  Tensor squeeze(int64_t axis) const;
  Tensor flatten() const { return reshape({numel()}); }

  // --- copies ---
  Tensor contiguous() const;  // this if already contiguous
  Tensor clone() const;       // always a fresh contiguous copy
  Tensor to(DType dtype) const;

  // --- in place ---
  Tensor& fill_(double value);
  Tensor& copy_(const Tensor& src);  // src broadcasts to this shape; dtype converts

  std::string to_string() const;  // values and shape, numpy style

  // Throws std::invalid_argument naming `op` unless dtype matches.
  void check_dtype(DType expected, const char* op) const;
  // Normalizes a possibly negative axis; throws naming `op` if out of range.
  int64_t wrap_axis(int64_t axis, const char* op) const;

 private:
  Tensor(std::shared_ptr<Storage> storage, Shape shape, Shape strides, int64_t offset, DType dtype);
  Tensor with_layout(Shape shape, Shape strides, int64_t offset) const;

  std::shared_ptr<Storage> storage_;
  Shape shape_;
  Shape strides_;
  int64_t offset_ = 0;
  DType dtype_ = DType::f32;
};

// Calls f(T{}) with T = float or double according to dtype.
template <class F>
decltype(auto) dispatch(DType dtype, F&& f) {
  if (dtype == DType::f32) return f(float{});
  return f(double{});
}

}  // namespace headlab::core
