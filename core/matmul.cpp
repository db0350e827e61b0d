// matmul on the GEMM backend (core/gemm.h): a [..., M, K] @ b [..., K, N] -> [..., M, N].
//
// A transposed view is handed to the GEMM as transposed with its own leading
// dimension, never copied. A batch of products against one shared right
// operand (the Linear layer's case) becomes a single GEMM over batch * M rows,
// split into fixed blocks among the threads (core/blas.h); many small
// products run in parallel across the batch, each on one thread.
#include <algorithm>
#include <memory>
#include <stdexcept>
#include <string>

#include "core/bf16_operands.h"
#include "core/blas.h"
#include "core/ops.h"
#include "core/strided.h"

namespace headlab::core {
namespace {

struct Operand {
  Tensor t;  // expanded to batch + [rows, cols]
  bool trans = false;
  int64_t ld = 0;
};

// How BLAS can read a [rows, cols] matrix with strides (rs, cs), if at all.
bool blas_layout(int64_t rows, int64_t cols, int64_t rs, int64_t cs, Operand& op) {
  if ((cs == 1 || cols == 1) && (rows == 1 || rs >= std::max<int64_t>(cols, 1))) {
    op.trans = false;
    op.ld = rows == 1 ? std::max<int64_t>(cols, 1) : rs;
    return true;
  }
  if ((rs == 1 || rows == 1) && (cols == 1 || cs >= std::max<int64_t>(rows, 1))) {
    op.trans = true;
    op.ld = cols == 1 ? std::max<int64_t>(rows, 1) : cs;
    return true;
  }
  return false;
}

Operand prepare(const Tensor& t, const Shape& batch) {
  Shape full = batch;
  full.push_back(t.size(-2));
  full.push_back(t.size(-1));
  Operand op;
  op.t = t.expand(full);
  const int64_t n = op.t.dim();
  if (!blas_layout(op.t.shape()[n - 2], op.t.shape()[n - 1], op.t.strides()[n - 2], op.t.strides()[n - 1], op)) {
    // Only the matrix axes need BLAS's layout; the batch axes may stay broadcast.
    Tensor c = t.contiguous().expand(full);
    op.t = c;
    blas_layout(full[n - 2], full[n - 1], c.strides()[n - 2], c.strides()[n - 1], op);
  }
  return op;
}

using detail::gemm;

// Offsets of each batch element of an operand (row-major over the batch axes).
std::vector<int64_t> batch_offsets(const Tensor& t, int64_t batch_rank) {
  std::vector<int64_t> out{0};
  for (int64_t d = 0; d < batch_rank; ++d) {
    std::vector<int64_t> next;
    next.reserve(out.size() * static_cast<std::size_t>(t.shape()[d]));
    for (int64_t base : out)
      for (int64_t i = 0; i < t.shape()[d]; ++i) next.push_back(base + i * t.strides()[d]);
    out.swap(next);
  }
  return out;
}

// The storage `op` reads, when it is `source`'s own (not a contiguous copy
// made for BLAS): what a Linear hands its products so that, in bf16 mixed
// precision inside a Bf16Operands scope, the operand is rounded once for the
// forward and the backward (core/bf16_operands.h). Null otherwise.
const std::shared_ptr<Storage>* kept_storage(const Operand& op, const Tensor& source) {
  return op.t.shares_storage(source) ? &op.t.storage() : nullptr;
}

}  // namespace

Tensor matmul(const Tensor& a_in, const Tensor& b_in) {
  if (!a_in.defined() || !b_in.defined()) throw std::invalid_argument("matmul: the tensor is undefined");
  if (a_in.dim() == 0 || b_in.dim() == 0)
    throw std::invalid_argument("matmul: operands must have at least one axis, got shapes " +
                                to_string(a_in.shape()) + " and " + to_string(b_in.shape()));
  if (a_in.dtype() != b_in.dtype())
    throw std::invalid_argument("matmul: dtypes differ (" + to_string(a_in.dtype()) + " and " +
                                to_string(b_in.dtype()) + ")");
  const bool a_vec = a_in.dim() == 1, b_vec = b_in.dim() == 1;
  const Tensor a = a_vec ? a_in.unsqueeze(0) : a_in;
  const Tensor b = b_vec ? b_in.unsqueeze(1) : b_in;
  const int64_t m = a.size(-2), k = a.size(-1), n = b.size(-1);
  if (b.size(-2) != k)
    throw std::invalid_argument("matmul: shapes " + to_string(a_in.shape()) + " and " + to_string(b_in.shape()) +
                                " do not fit: the inner sizes " + std::to_string(k) + " and " +
                                std::to_string(b.size(-2)) + " must be equal");
  const Shape batch = broadcast_shapes(Shape(a.shape().begin(), a.shape().end() - 2),
                                       Shape(b.shape().begin(), b.shape().end() - 2), "matmul (batch axes)");
  Shape out_shape = batch;
  out_shape.push_back(m);
  out_shape.push_back(n);
  Tensor out = Tensor::empty(out_shape, a.dtype());
  const int64_t batch_count = numel_of(batch);
  if (k == 0) out.fill_(0.0);
  if (k == 0 || m == 0 || n == 0 || batch_count == 0) {
    if (a_vec) out = out.squeeze(-2);
    if (b_vec) out = out.squeeze(-1);
    return out;
  }

  const Operand A = prepare(a, batch), B = prepare(b, batch);
  const auto br = static_cast<int64_t>(batch.size());
  const std::vector<int64_t> a_off = batch_offsets(A.t, br), b_off = batch_offsets(B.t, br);

  dispatch(a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* pa = A.t.data<T>();
    const T* pb = B.t.data<T>();
    T* pc = out.data<T>();
    // One GEMM when every batch element shares B and A's rows are evenly spaced.
    bool fold = batch_count > 1 && !A.trans;
    for (int64_t i = 0; fold && i < batch_count; ++i)
      fold = b_off[i] == b_off[0] && a_off[i] == a_off[0] + i * m * A.ld;
    if (fold || batch_count == 1) {
      const int64_t rows = fold ? batch_count * m : m;
      detail::parallel_gemms<T>({{A.trans, B.trans, rows, n, k, pa + a_off[0], A.ld, pb + b_off[0], B.ld, pc, n}});
      return;
    }
    // One parallel region over the batch, each product single-threaded inside
    // it, costs one fork instead of one per product (BLAS would fork for each
    // product big enough to split). Each product is computed whole by one
    // thread: the bits do not depend on the thread count.
    const bool parallel = batch_count * m * n * k >= kParallelGemmWork;
#pragma omp parallel for schedule(dynamic, 1) if (parallel)
    for (int64_t i = 0; i < batch_count; ++i)
      gemm<T>(A.trans, B.trans, m, n, k, pa + a_off[i], A.ld, pb + b_off[i], B.ld, pc + i * m * n, n);
  });
  if (a_vec) out = out.squeeze(-2);
  if (b_vec) out = out.squeeze(-1);
  return out;
}

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  if (!x.defined() || !weight.defined()) throw std::invalid_argument("linear: x and weight must be defined");
  if (x.dim() != 2 || weight.dim() != 2 || x.size(1) != weight.size(1))
    throw std::invalid_argument("linear: x " + to_string(x.shape()) + " and weight " + to_string(weight.shape()) +
                                " do not fit; expected x [N, in] and weight [out, in]");
  if (x.dtype() != weight.dtype()) throw std::invalid_argument("linear: x and weight dtypes differ");
  const int64_t rows = x.size(0), in = x.size(1), out_features = weight.size(0);
  if (bias.defined() && (bias.shape() != Shape{out_features} || bias.dtype() != x.dtype()))
    throw std::invalid_argument("linear: bias " + to_string(bias.shape()) + " " + to_string(bias.dtype()) +
                                " does not fit; expected [" + std::to_string(out_features) + "] " +
                                to_string(x.dtype()));
  Tensor out = Tensor::empty({rows, out_features}, x.dtype());
  if (rows == 0 || out_features == 0) return out;
  if (in == 0) return bias.defined() ? out.copy_(bias) : out.fill_(0.0);
  // op(A) = x [N, in], op(B) = weight^T [in, out]: read weight as transposed.
  const Operand A = prepare(x, {}), W = prepare(weight.transpose(0, 1), {});
  dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    // The bias is added by the product as it writes each row (oneDNN's
    // epilogue; elsewhere C's rows start as the bias, core/gemm.h): not a
    // pass of its own over `out` before the product.
    const Tensor b = bias.defined() ? bias.contiguous() : Tensor();
    detail::parallel_gemms<T>({{.ta = A.trans, .tb = W.trans, .m = rows, .n = out_features, .k = in,
                                .a = A.t.data<T>(), .lda = A.ld, .b = W.t.data<T>(), .ldb = W.ld,
                                .c = out.data<T>(), .ldc = out_features, .a_owner = kept_storage(A, x),
                                .b_owner = kept_storage(W, weight), .bias = b.defined() ? b.data<T>() : nullptr}});
  });
  return out;
}

namespace {

// linear_backward for grad [N, out] and weight [out, in], with x [N, in]
// given as a float tensor (x16 null) or as its rounded copy (x16, bf16
// precision), and grad as a tensor (g16 null) or only as its rounded copy
// (g16, bf16 precision, no bias gradient): their shapes and dtypes checked
// by the caller.
LinearGrads linear_grads(const Tensor& grad, const Bf16Copy* g16, const Tensor& x, const Bf16Copy* x16,
                         const Tensor& weight, bool want_dx, bool want_dweight, bool want_dbias) {
  const int64_t rows = g16 != nullptr ? g16->rows : grad.size(0), in = weight.size(1), out_features = weight.size(0);
  const DType dtype = weight.dtype();
  LinearGrads r;
  if (want_dx) r.dx = Tensor::empty({rows, in}, dtype);
  if (want_dweight) r.dweight = Tensor::empty({out_features, in}, dtype);
  if (rows == 0 || out_features == 0 || in == 0) {  // empty sums
    if (want_dx) r.dx.fill_(0.0);
    if (want_dweight) r.dweight.fill_(0.0);
    if (want_dbias) r.dbias = sum(grad, {0});
    return r;
  }
  // g16 stands for a dense [N, out] g, read from its rounded copy.
  const Operand G = g16 != nullptr ? Operand{.t = Tensor(), .trans = false, .ld = out_features} : prepare(grad, {});
  const Operand W = prepare(weight, {});
  const Operand X = x16 != nullptr ? Operand{} : prepare(x, {});
  // The bias gradient joins the products' region when g is stored by rows.
  const bool sums_inside = want_dbias && !G.trans && (want_dx || want_dweight);
  if (want_dbias) r.dbias = sums_inside ? Tensor::empty({out_features}, dtype) : sum(grad, {0});
  dispatch(dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *pg = g16 != nullptr ? nullptr : G.t.data<T>(), *pw = W.t.data<T>();
    // dx = g W: [N, out] @ [out, in].
    detail::GemmCall<T> dx{G.trans, W.trans, rows, in, out_features, pg, G.ld, pw, W.ld,
                           want_dx ? r.dx.data<T>() : nullptr, in, T(1), T(0), nullptr, kept_storage(W, weight)};
    // dW = g^T x: [out, N] @ [N, in]; g^T is g read with the transpose flag flipped.
    detail::GemmCall<T> dw{!G.trans, X.trans, out_features, in, rows, pg, G.ld, nullptr, in,
                           want_dweight ? r.dweight.data<T>() : nullptr, in, T(1), T(0)};
    if (g16 != nullptr) dx.a_rounded = dw.a_rounded = g16->data();
    if (x16 != nullptr) {
      dw.b_rounded = x16->data();
    } else {
      dw.b = X.t.data<T>();
      dw.ldb = X.ld;
      dw.b_owner = kept_storage(X, x);
    }
    // db = g's column sums [out].
    const detail::ColumnSums<T> db{pg, rows, out_features, G.ld, sums_inside ? r.dbias.data<T>() : nullptr};
    const detail::ColumnSums<T>* sums = sums_inside ? &db : nullptr;
    if (want_dx && want_dweight)
      detail::parallel_gemms<T>({dx, dw}, sums);
    else if (want_dx)
      detail::parallel_gemms<T>({dx}, sums);
    else if (want_dweight)
      detail::parallel_gemms<T>({dw}, sums);
  });
  return r;
}

void check_linear_grads(const Tensor& grad, const Shape& x, DType x_dtype, const Tensor& weight) {
  if (!grad.defined() || !weight.defined() || grad.dim() != 2 || x.size() != 2 || weight.dim() != 2 ||
      grad.size(0) != x[0] || grad.size(1) != weight.size(0) || x[1] != weight.size(1) || grad.dtype() != x_dtype ||
      weight.dtype() != x_dtype)
    throw std::invalid_argument("linear_backward: grad " + to_string(grad.shape()) + ", x " + to_string(x) +
                                " and weight " + to_string(weight.shape()) +
                                " do not fit; expected grad [N, out], x [N, in], weight [out, in] of one dtype");
}

}  // namespace

LinearGrads linear_backward(const Tensor& grad, const Tensor& x, const Tensor& weight, bool want_dx,
                            bool want_dweight, bool want_dbias) {
  if (!x.defined()) throw std::invalid_argument("linear_backward: x is undefined");
  check_linear_grads(grad, x.shape(), x.dtype(), weight);
  return linear_grads(grad, nullptr, x, nullptr, weight, want_dx, want_dweight, want_dbias);
}

LinearGrads linear_backward(const Tensor& grad, const Bf16Copy& x, const Tensor& weight, bool want_dx,
                            bool want_dweight, bool want_dbias) {
  if (!x) throw std::invalid_argument("linear_backward: the rounded x is empty");
  check_linear_grads(grad, {x.rows, x.cols}, DType::f32, weight);
  if (gemm_precision() == GemmPrecision::bf16)
    return linear_grads(grad, nullptr, Tensor(), &x, weight, want_dx, want_dweight, want_dbias);
  // Products in f32 since the forward: x's float32 values are gone, so its
  // rounded ones stand in, exactly.
  Tensor wide = Tensor::empty({x.rows, x.cols}, DType::f32);
  float* w = wide.data<float>();
  for (int64_t i = 0; i < x.rows * x.cols; ++i) w[i] = from_bf16(x.data()[i]);
  return linear_grads(grad, nullptr, wide, nullptr, weight, want_dx, want_dweight, want_dbias);
}

LinearGrads linear_backward(const Bf16Copy& grad, const Tensor& x, const Bf16Copy& x16, const Tensor& weight,
                            bool want_dx, bool want_dweight) {
  if (!grad) throw std::invalid_argument("linear_backward: the rounded grad is empty");
  if (gemm_precision() != GemmPrecision::bf16)
    throw std::invalid_argument("linear_backward: grad given rounded to bf16 needs bf16 products (--precision bf16)");
  const Shape x_shape = x16 ? Shape{x16.rows, x16.cols} : x.defined() ? x.shape() : Shape{};
  if (!x16 && !x.defined()) throw std::invalid_argument("linear_backward: x is undefined");
  if (x_shape.size() != 2 || weight.dim() != 2 || grad.rows != x_shape[0] || grad.cols != weight.size(0) ||
      x_shape[1] != weight.size(1) || weight.dtype() != DType::f32 || (!x16 && x.dtype() != DType::f32))
    throw std::invalid_argument("linear_backward: grad [" + std::to_string(grad.rows) + ", " +
                                std::to_string(grad.cols) + "] (rounded), x " + to_string(x_shape) + " and weight " +
                                to_string(weight.shape()) +
                                " do not fit; expected grad [N, out], x [N, in], weight [out, in] of float32");
  return linear_grads(Tensor(), &grad, x16 ? Tensor() : x, x16 ? &x16 : nullptr, weight, want_dx, want_dweight,
                      false);
}

}  // namespace headlab::core
