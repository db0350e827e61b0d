// The per-thread store of rounded operands: see bf16_operands.h.
#include "core/bf16_operands.h"

#include <algorithm>
#include <vector>

#include "core/gemm.h"
#include "core/tensor.h"

namespace headlab::core {
namespace {

struct Kept {
  detail::StoredOperand op;
  // op.data's storage. The copy stands for it only while it lives: once it
  // is freed, a new tensor may take its address.
  std::weak_ptr<Storage> source;
  // Shared with the backwards that hold the copy (held_bf16_copy); the
  // capacity of one no backward holds is reused by the next scope.
  std::shared_ptr<std::vector<bf16_t>> buffer;
};

// A step keeps a few operands per Linear (tens to a few hundred in all):
// a linear search costs less than one row of rounding.
struct Store {
  bool open = false;
  std::vector<Kept> kept;
  std::size_t used = 0;  // kept[0, used) are this scope's

  void forget() {
    for (std::size_t i = 0; i < used; ++i) kept[i].source.reset();
    used = 0;
  }
};

Store& store() {
  thread_local Store s;
  return s;
}

// The open scope's copy of `op`, if its source still lives.
const Kept* find_kept(const detail::StoredOperand& op) {
  const Store& s = store();
  if (!s.open) return nullptr;
  for (std::size_t i = 0; i < s.used; ++i)
    if (s.kept[i].op == op && !s.kept[i].source.expired()) return &s.kept[i];
  return nullptr;
}

}  // namespace

Bf16Operands::Bf16Operands() {
  Store& s = store();
  if (s.open) return;  // nested: the outer scope keeps its copies
  s.open = true;
  opened_ = true;
}

Bf16Operands::~Bf16Operands() {
  if (!opened_) return;
  Store& s = store();
  s.forget();
  s.open = false;
}

void forget_bf16_operands() { store().forget(); }

bf16_t* bf16_copy_of_output(const Tensor& out, int64_t cols) {
  if (!store().open || cols <= 0 || !out.defined() || out.dtype() != DType::f32 || !out.is_contiguous() ||
      out.numel() == 0 || out.numel() % cols != 0 || gemm_precision() != GemmPrecision::bf16)
    return nullptr;
  return detail::keep_bf16_operand({out.data<float>(), out.numel() / cols, cols, cols}, out.storage());
}

Bf16Copy held_bf16_copy(const Tensor& x) {
  if (!x.defined() || x.dtype() != DType::f32 || x.dim() != 2 || !x.is_contiguous()) return {};
  const Kept* k = find_kept({x.data<float>(), x.size(0), x.size(1), x.size(1)});
  if (k == nullptr) return {};
  return {k->buffer, x.size(0), x.size(1)};
}

Bf16Copy spare_bf16_copy(int64_t rows, int64_t cols, bf16_t** writable) {
  // Few at once: one per backward running on this thread.
  thread_local std::vector<std::shared_ptr<std::vector<bf16_t>>> spares;
  auto spare = std::find_if(spares.begin(), spares.end(), [](const auto& b) { return b.use_count() == 1; });
  if (spare == spares.end()) spare = spares.insert(spares.end(), std::make_shared<std::vector<bf16_t>>());
  (*spare)->resize(static_cast<std::size_t>(rows * cols));
  *writable = (*spare)->data();
  return {*spare, rows, cols};
}

namespace detail {

const bf16_t* find_bf16_operand(const StoredOperand& op) {
  const Kept* k = find_kept(op);
  return k != nullptr ? k->buffer->data() : nullptr;
}

bf16_t* keep_bf16_operand(const StoredOperand& op, const std::shared_ptr<Storage>& owner) {
  Store& s = store();
  if (!s.open || owner == nullptr) return nullptr;
  if (s.used == s.kept.size()) s.kept.emplace_back();
  Kept& k = s.kept[s.used++];
  k.op = op;
  k.source = owner;
  if (k.buffer == nullptr || k.buffer.use_count() > 1) k.buffer = std::make_shared<std::vector<bf16_t>>();
  k.buffer->resize(static_cast<std::size_t>(op.rows * op.cols));
  return k.buffer->data();
}

}  // namespace detail
}  // namespace headlab::core
