// Prefix: the residual stream of a forward pass the analysis has run, block
// by block, so that a later pass on the same examples that changes the
// model only from block l on (a head of layer l ablated, patched or
// replaced) starts at block l from it: the blocks before would compute the
// same bits again (Transformer::forward_from). The head analysis's
// ablations, pruning curve and patching each change one layer onward of a
// pass it has run; a head of the last layer costs one block instead of L
// (docs/head-metrics.md, "What the analysis costs").
#pragma once

#include <cstdint>
#include <vector>

#include "analysis/evaluate.h"
#include "core/tensor.h"
#include "layers/probe.h"
#include "layers/transformer.h"

namespace headlab::analysis {

class Prefix {
 public:
  // None: every pass starts at the embedding.
  Prefix() = default;
  // The residuals `pass` (a probe of one entry per layer, after its forward)
  // kept, block by block.
  explicit Prefix(const layers::Probe& pass);

  // The logits of a pass over `examples` with `probe`, run from block
  // `first` on (from the embedding when first is 0 or there is no prefix).
  // The caller vouches that the probe changes nothing before block `first`
  // that the prefix's pass did not: its gates and replacements there are
  // not read. Throws std::invalid_argument when the prefix is of another
  // batch or sequence length.
  core::Tensor logits(const layers::Transformer& model, const Examples& examples, layers::Probe& probe,
                      int64_t first) const;

  // Block `layer`'s attention probabilities [B, h, T, T] in the prefix's
  // pass, computed again from the residual stream entering it (layer >= 1):
  // ln1 and the attention, nothing after. The same bits as that pass's probe
  // would have kept, for the same examples; the scores ask for a layer's
  // attention again rather than hold every layer's (docs/head-metrics.md,
  // "What the analysis holds"). Throws std::invalid_argument as logits does,
  // and for layer 0 (whose input, the embedding, no prefix keeps).
  core::Tensor attention(const layers::Transformer& model, const Examples& examples, int64_t layer) const;

  // After a pass run by logits(..., first): its residuals from block `first`
  // on replace these, so that the prefix is that pass's (its blocks before
  // `first` were this one's). The pruning curve goes on this way from each
  // point to the next, one more head removed.
  void advance(const layers::Probe& pass, int64_t first);

  bool empty() const { return residual_.empty(); }

 private:
  std::vector<core::Tensor> residual_;  // after each block [B, T, d_model]
};

}  // namespace headlab::analysis
