// matmul on OpenBLAS: a [..., M, K] @ b [..., K, N] -> [..., M, N].
//
// A transposed view is handed to BLAS as CblasTrans with its own leading
// dimension, never copied. A batch of products against one shared right
// operand (the Linear layer's case) becomes a single GEMM over batch * M rows.
// Many small products run in parallel across the batch; there OpenBLAS's
// OpenMP build sees it is inside a parallel region and stays single-threaded.
#include <cblas.h>

#include <algorithm>
#include <stdexcept>
#include <string>

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

template <class T>
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda, const T* b, int64_t ldb, T* c,
          int64_t ldc) {
  const auto TA = ta ? CblasTrans : CblasNoTrans, TB = tb ? CblasTrans : CblasNoTrans;
  if constexpr (std::is_same_v<T, float>) {
    cblas_sgemm(CblasRowMajor, TA, TB, static_cast<blasint>(m), static_cast<blasint>(n), static_cast<blasint>(k),
                1.0f, a, static_cast<blasint>(lda), b, static_cast<blasint>(ldb), 0.0f, c,
                static_cast<blasint>(ldc));
  } else {
    cblas_dgemm(CblasRowMajor, TA, TB, static_cast<blasint>(m), static_cast<blasint>(n), static_cast<blasint>(k),
                1.0, a, static_cast<blasint>(lda), b, static_cast<blasint>(ldb), 0.0, c, static_cast<blasint>(ldc));
  }
}

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
      gemm<T>(A.trans, B.trans, rows, n, k, pa + a_off[0], A.ld, pb + b_off[0], B.ld, pc, n);
      return;
    }
    // Threads only pay off when the whole batch is real work and each product is
    // too small for BLAS to split well on its own.
    const bool parallel = m * n * k < (1 << 18) && batch_count * m * n * k >= kParallelGrain;
#pragma omp parallel for schedule(static) if (parallel)
    for (int64_t i = 0; i < batch_count; ++i)
      gemm<T>(A.trans, B.trans, m, n, k, pa + a_off[i], A.ld, pb + b_off[i], B.ld, pc + i * m * n, n);
  });
  if (a_vec) out = out.squeeze(-2);
  if (b_vec) out = out.squeeze(-1);
  return out;
}

}  // namespace headlab::core
