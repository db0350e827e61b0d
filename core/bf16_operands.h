// bf16 mixed precision: operands rounded once per training step, not once
// per product (docs/performance.md, "Rounded once per step").
//
// Every weight is read by two products of a step (the forward, and the
// backward's dx = g W), and every Linear's input by two (the forward, and
// dW = g^T x; QKV's shared input by six). Without this, each product
// rounds its operands to bf16 in a pass of its own. While a Bf16Operands
// scope is open on a thread, the Linears' products issued from that thread
// keep each operand they round (keyed by its memory and layout, and valid
// only while that memory's storage lives: a freed one's address may be
// reused) and the later products that read the same storage in the same
// layout take that copy.
// Rounding is deterministic, so the products are the bits of the packing
// path. The kernels whose outputs a Linear reads next (LayerNorm, the
// residual add with LayerNorm, the fused bias and GELU) write that copy
// themselves, row by row (bf16_copy_of_output), sparing the product's pass.
// A Linear holds its input's copy for its backward's dW = g^T x
// (held_bf16_copy), so the input's float32 values, which no backward then
// reads, can be freed after the forward (docs/performance.md, "Activations
// kept in bf16").
//
// A copy is valid only while its float32 source is unchanged. The scope is
// for the training step's forward and backward, where the only writer of a
// product's operands is headlab's own code, which never writes into a
// value the graph saved (autograd's backward would read it too); the
// optimizer, checkpoint loads and Python run outside it. User code inside
// the scope can only be a hook: every hook visit drops every copy
// (forget_bf16_operands, called by layers::HookScope), so whatever the hook
// changes in place is rounded afresh by the next product that reads it.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/bf16.h"

namespace headlab::core {

class Storage;

// While alive, this thread's bf16 products reuse rounded operands (above).
// Nested scopes are one: the outermost opens and closes. Closing drops every
// copy and the storages they hold (the buffers are kept for the next scope).
class Bf16Operands {
 public:
  Bf16Operands();
  ~Bf16Operands();
  Bf16Operands(const Bf16Operands&) = delete;
  Bf16Operands& operator=(const Bf16Operands&) = delete;

 private:
  bool opened_ = false;
};

// Drops every copy of this thread's open scope (none open: nothing to do).
void forget_bf16_operands();

class Tensor;

// For a kernel that writes `out` (float32, contiguous, rows of `cols`), read
// next by a Linear: a buffer for its rounded copy, [numel / cols, cols],
// kept by this thread's open scope as if the Linear's product had rounded
// it, so that the product takes it instead of a pass over `out` of its own.
// The kernel writes each row's copy while the row is in cache, before any
// product reads `out`. Null when no scope is open or the products are not
// in bf16: then nothing is to be written.
bf16_t* bf16_copy_of_output(const Tensor& out, int64_t cols);

// A kept copy, held: the rounded values of a [rows, cols] float32 matrix,
// alive with the handle, after its source is freed and its scope closed.
struct Bf16Copy {
  std::shared_ptr<const std::vector<bf16_t>> values;
  int64_t rows = 0, cols = 0;
  explicit operator bool() const { return values != nullptr; }
  const bf16_t* data() const { return values->data(); }
};

// The open scope's copy of x (float32, contiguous [rows, cols]: a Linear's
// input as its products read it), or an empty handle: no scope open, or no
// product or kernel rounded x in it since the last forget.
Bf16Copy held_bf16_copy(const Tensor& x);

// A [rows, cols] rounded matrix that exists only as bf16, for a kernel to
// fill through `*writable` and hand on: a backward's output gradient that
// only its Linear's products read (core::gelu_backward_rounded). The buffer
// is this thread's, reused by the next call once no handle holds it, so a
// backward that makes and drops one per layer allocates it once.
Bf16Copy spare_bf16_copy(int64_t rows, int64_t cols, bf16_t** writable);

namespace detail {

// An operand as stored: [rows, cols] floats with leading dimension ld at
// `data`, inside `owner`'s memory.
struct StoredOperand {
  const float* data = nullptr;
  int64_t rows = 0, cols = 0, ld = 0;
  bool operator==(const StoredOperand&) const = default;
};

// The dense rounded copy of `op` kept by this thread's open scope, or null
// (no scope, or not rounded yet).
const bf16_t* find_bf16_operand(const StoredOperand& op);
// A buffer of rows * cols bf16 for `op`, kept by the open scope (while
// `owner`, op's storage, lives) for the later find_bf16_operand calls; the
// caller fills it with op's rounding before any product reads it. Null
// without a scope.
bf16_t* keep_bf16_operand(const StoredOperand& op, const std::shared_ptr<Storage>& owner);

}  // namespace detail
}  // namespace headlab::core
