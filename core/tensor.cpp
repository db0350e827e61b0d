#include "core/tensor.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iomanip>
#include <limits>
#include <mutex>
#include <new>
#include <numeric>
#include <sstream>
#include <stdexcept>
#include <unordered_map>

#include "core/ops.h"
#include "core/strided.h"

namespace headlab::core {

std::string to_string(DType dtype) { return dtype == DType::f32 ? "f32" : "f64"; }

std::size_t dtype_size(DType dtype) { return dtype == DType::f32 ? 4 : 8; }

std::string to_string(const Shape& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

int64_t numel_of(const Shape& shape) {
  int64_t n = 1;
  for (int64_t s : shape) {
    if (s < 0) throw std::invalid_argument("shape " + to_string(shape) + " has a negative size");
    if (s != 0 && n > std::numeric_limits<int64_t>::max() / s)
      throw std::invalid_argument("shape " + to_string(shape) + " has too many elements");
    n *= s;
  }
  return n;
}

Shape contiguous_strides(const Shape& shape) {
  Shape strides(shape.size(), 1);
  for (int64_t d = static_cast<int64_t>(shape.size()) - 2; d >= 0; --d)
    strides[d] = strides[d + 1] * std::max<int64_t>(shape[d + 1], 1);
  return strides;
}

Shape unravel_index(int64_t flat, const Shape& shape) {
  const int64_t n = numel_of(shape);
  if (flat < 0 || flat >= n)
    throw std::out_of_range("unravel_index: element " + std::to_string(flat) + " is not in a tensor of shape " +
                            to_string(shape) + " (" + std::to_string(n) + " elements, 0 to " + std::to_string(n - 1) +
                            ")");
  Shape index(shape.size());
  for (std::size_t d = shape.size(); d-- > 0;) {
    index[d] = flat % shape[d];
    flat /= shape[d];
  }
  return index;
}

// --- Storage ---

namespace {

constexpr std::size_t kAlign = 64;

std::size_t rounded_size(std::size_t nbytes) {
  return std::max<std::size_t>(kAlign, (nbytes + kAlign - 1) / kAlign * kAlign);
}

// Freed buffers are kept for reuse, keyed by their exact rounded size. A
// training step allocates the same sizes every step; without the cache glibc
// hands large blocks back to the kernel (they are mmap'd) and every step
// page-faults its activations in again, ~15% of a small model's step.
// The cache is bounded, so a process whose sizes keep changing cannot hoard
// memory. Under AddressSanitizer it is off: reuse would hide use-after-free.
class BufferCache {
 public:
  void* take(std::size_t size) {
#if !defined(__SANITIZE_ADDRESS__)
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = free_.find(size);
    if (it != free_.end() && !it->second.empty()) {
      void* p = it->second.back();
      it->second.pop_back();
      cached_bytes_ -= size;
      return p;
    }
#endif
    return std::aligned_alloc(kAlign, size);
  }

  void give(void* p, [[maybe_unused]] std::size_t size) {
#if !defined(__SANITIZE_ADDRESS__)
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (cached_bytes_ + size <= limit_) {
        free_[size].push_back(p);
        cached_bytes_ += size;
        return;
      }
    }
#endif
    std::free(p);
  }

  // Frees kept buffers, largest sizes first, until at most `bytes` are kept.
  void set_limit(std::size_t bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    limit_ = bytes;
    while (cached_bytes_ > limit_) {
      auto largest = free_.begin();
      for (auto it = free_.begin(); it != free_.end(); ++it)
        if (it->first > largest->first) largest = it;
      for (void* p : largest->second) std::free(p);
      cached_bytes_ -= largest->first * largest->second.size();
      free_.erase(largest);
    }
  }

  std::size_t bytes() {
    std::lock_guard<std::mutex> lock(mutex_);
    return cached_bytes_;
  }

 private:
  std::size_t limit_ = std::size_t{1} << 30;
  std::mutex mutex_;
  std::unordered_map<std::size_t, std::vector<void*>> free_;
  std::size_t cached_bytes_ = 0;
};

// Never destroyed: tensors with static storage duration may outlive any
// destructor order; the cached blocks stay reachable, so no leak is reported.
BufferCache& buffer_cache() {
  static BufferCache* cache = new BufferCache;
  return *cache;
}

}  // namespace

void set_buffer_cache_limit(std::size_t bytes) { buffer_cache().set_limit(bytes); }
std::size_t buffer_cache_bytes() { return buffer_cache().bytes(); }

Storage::Storage(std::size_t nbytes) : nbytes_(nbytes) {
  data_ = buffer_cache().take(rounded_size(nbytes));
  if (!data_) throw std::bad_alloc();
}

Storage::~Storage() { buffer_cache().give(data_, rounded_size(nbytes_)); }

// --- construction ---

Tensor::Tensor(std::shared_ptr<Storage> storage, Shape shape, Shape strides, int64_t offset, DType dtype)
    : storage_(std::move(storage)),
      shape_(std::move(shape)),
      strides_(std::move(strides)),
      offset_(offset),
      dtype_(dtype) {}

Tensor Tensor::with_layout(Shape shape, Shape strides, int64_t offset) const {
  return Tensor(storage_, std::move(shape), std::move(strides), offset, dtype_);
}

Tensor Tensor::empty(const Shape& shape, DType dtype) {
  const int64_t n = numel_of(shape);
  auto storage = std::make_shared<Storage>(static_cast<std::size_t>(n) * dtype_size(dtype));
  return Tensor(std::move(storage), shape, contiguous_strides(shape), 0, dtype);
}

Tensor Tensor::zeros(const Shape& shape, DType dtype) { return full(shape, 0.0, dtype); }
Tensor Tensor::ones(const Shape& shape, DType dtype) { return full(shape, 1.0, dtype); }

Tensor Tensor::full(const Shape& shape, double value, DType dtype) {
  Tensor t = empty(shape, dtype);
  t.fill_(value);
  return t;
}

Tensor Tensor::scalar(double value, DType dtype) { return full({}, value, dtype); }

Tensor Tensor::arange(int64_t n, DType dtype) {
  if (n < 0) throw std::invalid_argument("arange: n must be >= 0, got " + std::to_string(n));
  Tensor t = empty({n}, dtype);
  dispatch(dtype, [&](auto tag) {
    using T = decltype(tag);
    T* p = t.data<T>();
    for (int64_t i = 0; i < n; ++i) p[i] = static_cast<T>(i);
  });
  return t;
}

Tensor Tensor::from_vector(const std::vector<double>& values, const Shape& shape, DType dtype) {
  if (static_cast<int64_t>(values.size()) != numel_of(shape))
    throw std::invalid_argument("from_vector: " + std::to_string(values.size()) + " values do not fill shape " +
                                core::to_string(shape) + " (" + std::to_string(numel_of(shape)) + " elements)");
  Tensor t = empty(shape, dtype);
  dispatch(dtype, [&](auto tag) {
    using T = decltype(tag);
    std::transform(values.begin(), values.end(), t.data<T>(), [](double v) { return static_cast<T>(v); });
  });
  return t;
}

// --- metadata ---

void Tensor::check_dtype(DType expected, const char* op) const {
  if (!defined()) throw std::invalid_argument(std::string(op) + ": the tensor is undefined");
  if (dtype_ != expected)
    throw std::invalid_argument(std::string(op) + ": expected a " + core::to_string(expected) + " tensor, got " +
                                core::to_string(dtype_));
}

int64_t Tensor::wrap_axis(int64_t axis, const char* op) const {
  const int64_t n = dim();
  if (axis < -n || axis >= n)
    throw std::invalid_argument(std::string(op) + ": axis " + std::to_string(axis) + " is out of range for shape " +
                                core::to_string(shape_) + " (valid: " + std::to_string(-n) + " to " +
                                std::to_string(n - 1) + ")");
  return axis < 0 ? axis + n : axis;
}

int64_t Tensor::size(int64_t axis) const { return shape_[wrap_axis(axis, "size")]; }

bool Tensor::is_contiguous() const {
  int64_t expected = 1;
  for (int64_t d = dim() - 1; d >= 0; --d) {
    if (shape_[d] != 1 && strides_[d] != expected) return false;
    expected *= shape_[d];
  }
  return true;
}

void* Tensor::raw_data() const {
  if (!defined()) throw std::invalid_argument("raw_data: the tensor is undefined");
  return static_cast<char*>(storage_->data()) + offset_ * static_cast<int64_t>(dtype_size(dtype_));
}

// --- element access ---

static int64_t element_offset(const Tensor& t, const std::vector<int64_t>& index) {
  if (static_cast<int64_t>(index.size()) != t.dim())
    throw std::invalid_argument("at: index has " + std::to_string(index.size()) + " entries for shape " +
                                to_string(t.shape()));
  int64_t off = 0;
  for (std::size_t d = 0; d < index.size(); ++d) {
    if (index[d] < 0 || index[d] >= t.shape()[d])
      throw std::invalid_argument("at: index " + to_string(index) + " is out of bounds for shape " +
                                  to_string(t.shape()));
    off += index[d] * t.strides()[d];
  }
  return off;
}

double Tensor::at(const std::vector<int64_t>& index) const {
  const int64_t off = element_offset(*this, index);
  return dispatch(dtype_, [&](auto tag) { return static_cast<double>(data<decltype(tag)>()[off]); });
}

void Tensor::set(const std::vector<int64_t>& index, double value) {
  const int64_t off = element_offset(*this, index);
  dispatch(dtype_, [&](auto tag) {
    using T = decltype(tag);
    data<T>()[off] = static_cast<T>(value);
  });
}

double Tensor::item() const {
  if (numel() != 1)
    throw std::invalid_argument("item: needs a tensor of one element, got shape " + core::to_string(shape_));
  return dispatch(dtype_, [&](auto tag) { return static_cast<double>(data<decltype(tag)>()[0]); });
}

std::vector<double> Tensor::to_vector() const {
  Tensor c = contiguous();
  std::vector<double> out(static_cast<std::size_t>(numel()));
  dispatch(dtype_, [&](auto tag) {
    using T = decltype(tag);
    const T* p = c.data<T>();
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<double>(p[i]);
  });
  return out;
}

// --- views ---

// Strides for viewing this tensor as `shape` without a copy, if possible
// (NumPy's attempt_nocopy_reshape): each run of new axes must map onto a run
// of old axes that is contiguous in memory.
static bool view_strides(const Shape& old_shape, const Shape& old_strides, const Shape& shape, Shape& strides) {
  strides.assign(shape.size(), 0);
  Shape os, ost;
  for (std::size_t i = 0; i < old_shape.size(); ++i)
    if (old_shape[i] != 1) {
      os.push_back(old_shape[i]);
      ost.push_back(old_strides[i]);
    }
  std::size_t oi = 0, ni = 0;
  while (ni < shape.size() || oi < os.size()) {
    if (ni < shape.size() && shape[ni] == 1) {
      strides[ni] = 1;
      ++ni;
      continue;
    }
    if (oi >= os.size() || ni >= shape.size()) return false;
    std::size_t oj = oi + 1, nj = ni + 1;
    int64_t op = os[oi], np = shape[ni];
    while (op != np) {
      if (op < np) {
        if (oj >= os.size()) return false;
        op *= os[oj++];
      } else {
        if (nj >= shape.size()) return false;
        np *= shape[nj++];
      }
    }
    for (std::size_t k = oi; k + 1 < oj; ++k)
      if (ost[k] != ost[k + 1] * os[k + 1]) return false;
    strides[nj - 1] = ost[oj - 1];
    for (std::size_t k = nj - 1; k > ni; --k) strides[k - 1] = strides[k] * shape[k];
    oi = oj;
    ni = nj;
  }
  return true;
}

static Shape infer_shape(const Shape& requested, int64_t numel, const Shape& from, const char* op) {
  Shape shape = requested;
  int64_t known = 1, infer = -1;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      if (infer >= 0) throw std::invalid_argument(std::string(op) + ": only one size may be -1, got " + to_string(requested));
      infer = static_cast<int64_t>(i);
    } else if (shape[i] < 0) {
      throw std::invalid_argument(std::string(op) + ": invalid size in " + to_string(requested));
    } else {
      known *= shape[i];
    }
  }
  if (infer >= 0) {
    if (known == 0 || numel % known != 0)
      throw std::invalid_argument(std::string(op) + ": cannot reshape " + to_string(from) + " (" +
                                  std::to_string(numel) + " elements) to " + to_string(requested));
    shape[infer] = numel / known;
  } else if (known != numel) {
    throw std::invalid_argument(std::string(op) + ": cannot reshape " + to_string(from) + " (" +
                                std::to_string(numel) + " elements) to " + to_string(requested) + " (" +
                                std::to_string(known) + " elements)");
  }
  return shape;
}

Tensor Tensor::view(const Shape& shape) const {
  const Shape target = infer_shape(shape, numel(), shape_, "view");
  Shape strides;
  if (!view_strides(shape_, strides_, target, strides))
    throw std::invalid_argument("view: the strides of shape " + core::to_string(shape_) +
                                " do not allow a view as " + core::to_string(target) + "; call reshape (copies)");
  return with_layout(target, strides, offset_);
}

Tensor Tensor::reshape(const Shape& shape) const {
  const Shape target = infer_shape(shape, numel(), shape_, "reshape");
  Shape strides;
  if (view_strides(shape_, strides_, target, strides)) return with_layout(target, strides, offset_);
  return clone().view(target);
}

Tensor Tensor::transpose(int64_t a, int64_t b) const {
  a = wrap_axis(a, "transpose");
  b = wrap_axis(b, "transpose");
  Shape shape = shape_, strides = strides_;
  std::swap(shape[a], shape[b]);
  std::swap(strides[a], strides[b]);
  return with_layout(shape, strides, offset_);
}

Tensor Tensor::permute(const std::vector<int64_t>& order) const {
  if (static_cast<int64_t>(order.size()) != dim())
    throw std::invalid_argument("permute: order " + core::to_string(order) + " does not match shape " +
                                core::to_string(shape_));
  Shape shape(order.size()), strides(order.size());
  std::vector<bool> seen(order.size(), false);
  for (std::size_t i = 0; i < order.size(); ++i) {
    const int64_t a = wrap_axis(order[i], "permute");
    if (seen[a]) throw std::invalid_argument("permute: order " + core::to_string(order) + " repeats an axis");
    seen[a] = true;
    shape[i] = shape_[a];
    strides[i] = strides_[a];
  }
  return with_layout(shape, strides, offset_);
}

Tensor Tensor::slice(int64_t axis, int64_t start, int64_t end, int64_t step) const {
  axis = wrap_axis(axis, "slice");
  const int64_t n = shape_[axis];
  if (step <= 0) throw std::invalid_argument("slice: step must be positive, got " + std::to_string(step));
  if (start < 0) start += n;
  if (end < 0) end += n;
  start = std::clamp<int64_t>(start, 0, n);
  end = std::clamp<int64_t>(end, start, n);
  Shape shape = shape_, strides = strides_;
  shape[axis] = (end - start + step - 1) / step;
  strides[axis] *= step;
  return with_layout(shape, strides, offset_ + start * strides_[axis]);
}

Tensor Tensor::select(int64_t axis, int64_t index) const {
  axis = wrap_axis(axis, "select");
  if (index < -shape_[axis] || index >= shape_[axis])
    throw std::invalid_argument("select: index " + std::to_string(index) + " is out of range for axis " +
                                std::to_string(axis) + " of shape " + core::to_string(shape_));
  if (index < 0) index += shape_[axis];
  Shape shape = shape_, strides = strides_;
  shape.erase(shape.begin() + axis);
  strides.erase(strides.begin() + axis);
  return with_layout(shape, strides, offset_ + index * strides_[axis]);
}

Tensor Tensor::expand(const Shape& shape) const {
  const int64_t lead = static_cast<int64_t>(shape.size()) - dim();
  if (lead < 0)
    throw std::invalid_argument("expand: cannot expand shape " + core::to_string(shape_) + " to fewer axes " +
                                core::to_string(shape));
  Shape strides(shape.size(), 0);
  for (int64_t d = 0; d < dim(); ++d) {
    const int64_t want = shape[lead + d];
    if (shape_[d] == want) {
      strides[lead + d] = strides_[d];
    } else if (shape_[d] != 1) {
      throw std::invalid_argument("expand: cannot expand shape " + core::to_string(shape_) + " to " +
                                  core::to_string(shape) + " (axis " + std::to_string(d) + " has size " +
                                  std::to_string(shape_[d]) + ", only size-1 axes broadcast)");
    }
  }
  return with_layout(shape, strides, offset_);
}

Tensor Tensor::unsqueeze(int64_t axis) const {
  if (axis < 0) axis += dim() + 1;
  if (axis < 0 || axis > dim())
    throw std::invalid_argument("unsqueeze: axis out of range for shape " + core::to_string(shape_));
  Shape shape = shape_, strides = strides_;
  const int64_t stride = axis < dim() ? strides_[axis] * shape_[axis] : 1;
  shape.insert(shape.begin() + axis, 1);
  strides.insert(strides.begin() + axis, stride);
  return with_layout(shape, strides, offset_);
}

Tensor Tensor::squeeze(int64_t axis) const {
  axis = wrap_axis(axis, "squeeze");
  if (shape_[axis] != 1)
    throw std::invalid_argument("squeeze: axis " + std::to_string(axis) + " of shape " + core::to_string(shape_) +
                                " has size " + std::to_string(shape_[axis]) + ", not 1");
  Shape shape = shape_, strides = strides_;
  shape.erase(shape.begin() + axis);
  strides.erase(strides.begin() + axis);
  return with_layout(shape, strides, offset_);
}

// --- copies ---

Tensor Tensor::contiguous() const {
  if (!defined()) throw std::invalid_argument("contiguous: the tensor is undefined");
  return is_contiguous() ? *this : clone();
}

Tensor Tensor::clone() const {
  Tensor out = empty(shape_, dtype_);
  out.copy_(*this);
  return out;
}

Tensor Tensor::to(DType dtype) const {
  if (dtype == dtype_) return *this;
  Tensor out = empty(shape_, dtype);
  out.copy_(*this);
  return out;
}

Tensor& Tensor::fill_(double value) {
  dispatch(dtype_, [&](auto tag) {
    using T = decltype(tag);
    const auto layout = detail::coalesce<1>(shape_, {&strides_});
    T* base = data<T>();
    const T v = static_cast<T>(value);
    detail::for_each_row(layout, [&](auto off, int64_t n, auto st) {
      T* p = base + off[0];
      for (int64_t i = 0; i < n; ++i) p[i * st[0]] = v;
    });
  });
  return *this;
}

template <class To, class From>
static void copy_strided(const Tensor& dst, const Tensor& src) {
  const auto layout = detail::coalesce<2>(dst.shape(), {&dst.strides(), &src.strides()});
  To* d = dst.data<To>();
  const From* s = src.data<From>();
  detail::for_each_row(layout, [&](auto off, int64_t n, auto st) {
    To* dp = d + off[0];
    const From* sp = s + off[1];
    if (st[0] == 1 && st[1] == 1) {
      for (int64_t i = 0; i < n; ++i) dp[i] = static_cast<To>(sp[i]);
    } else {
      for (int64_t i = 0; i < n; ++i) dp[i * st[0]] = static_cast<To>(sp[i * st[1]]);
    }
  });
}

Tensor& Tensor::copy_(const Tensor& src) {
  if (!defined() || !src.defined()) throw std::invalid_argument("copy_: the tensor is undefined");
  const Tensor s = src.shape() == shape_ ? src : src.expand(shape_);
  // Copying a tensor onto an overlapping view of itself would read values already overwritten.
  const Tensor from = s.shares_storage(*this) && !(s.offset() == offset_ && s.strides() == strides_) ? s.clone() : s;
  dispatch(dtype_, [&](auto to_tag) {
    dispatch(from.dtype(), [&](auto from_tag) { copy_strided<decltype(to_tag), decltype(from_tag)>(*this, from); });
  });
  return *this;
}

// --- printing ---

std::string Tensor::to_string() const {
  if (!defined()) return "tensor(undefined)";
  const std::vector<double> v = to_vector();
  std::ostringstream out;
  out << std::setprecision(dtype_ == DType::f32 ? 6 : 10);
  // Recursive over axes: depth d prints a bracketed list of sub-blocks.
  const Shape strides = contiguous_strides(shape_);
  auto print = [&](auto&& self, int64_t d, int64_t base) -> void {
    if (d == dim()) {
      out << v[static_cast<std::size_t>(base)];
      return;
    }
    out << '[';
    const int64_t n = shape_[d];
    const bool elide = n > 12;
    for (int64_t i = 0; i < n; ++i) {
      if (elide && i == 3) {
        out << "..., ";
        i = n - 3;
      }
      if (i > 0 && !(elide && i == n - 3)) out << (d + 1 == dim() ? ", " : ",\n" + std::string(static_cast<std::size_t>(d + 1), ' '));
      self(self, d + 1, base + i * strides[d]);
    }
    out << ']';
  };
  print(print, 0, 0);
  out << ", shape=" << core::to_string(shape_) << ", dtype=" << core::to_string(dtype_);
  return "tensor(" + out.str() + ")";
}

}  // namespace headlab::core
