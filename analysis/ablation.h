// Ablation: what a head (or a set of heads) is worth to the loss and accuracy,
// measured by running the model through a probe with those heads' outputs
// (before W_O) removed or replaced. The model is never changed.
//
//   zero      the head's gate is 0: its output is 0
//   mean      its output at each position is the mean over the batch's
//             examples of its output at that position (over the examples
//             where the position is real, when rows are padded)
//   resample  example b gets the head's output on its donor: example
//             (b + 1) mod B when every row is full, else the next example
//             (cyclically) that is real wherever b is (donors.h); an example
//             without a donor is left out of the loss and of its base
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "analysis/evaluate.h"
#include "analysis/prefix.h"
#include "layers/transformer.h"

namespace headlab::analysis {

struct Ablation {
  double delta_loss = 0;      // loss(ablated) - base loss, nats
  double delta_accuracy = 0;  // accuracy(ablated) - base accuracy, fraction
};

enum class AblationKind { zero, mean, resample };

// One entry per head, layer-major (index = layer * heads + head), against
// `base` = evaluate(model, examples) (resample ablation with rows left out:
// against the base over the rows it reaches; std::invalid_argument when it
// reaches none). Never changes the model.
std::vector<Ablation> ablate_heads(const layers::Transformer& model, const Examples& examples, const EvalResult& base,
                                   AblationKind kind = AblationKind::zero);

// The heads `heads` (layer-major indices) ablated together. Throws
// std::invalid_argument for an index outside the model.
Ablation ablate_set(const layers::Transformer& model, const Examples& examples, const EvalResult& base,
                    const std::vector<std::size_t>& heads, AblationKind kind = AblationKind::zero);

// Every layer's head outputs [B, T, d_model] on `examples`, unablated.
std::vector<core::Tensor> record_head_outputs(const layers::Transformer& model, const Examples& examples);

// The same pieces for a set read in chunks (analyze_model.h), each chunk
// ablated with what the whole set gives:

// Adds the loss of `examples` with `heads` ablated to `sums`: zero-ablated
// when `replacement` is empty, else their outputs replaced by it (one tensor
// [B, T, d_model] per layer, as mean_outputs and resample_outputs make).
// `clean`: the residual stream of the examples' unablated pass, from which
// the pass starts at the first ablated head's layer (prefix.h); none: from
// the embedding. The same bits either way.
void add_ablated(EvalSums& sums, const layers::Transformer& model, const Examples& examples,
                 const std::vector<std::size_t>& heads, const std::vector<core::Tensor>& replacement = {},
                 const Prefix& clean = Prefix());

// The mean ablation's outputs of a set read in chunks: add() each chunk's
// clean head outputs with its lengths; replacement(rows) is, for a chunk of
// `rows` examples, what mean ablation of one batch holding every chunk puts
// in every row -- the same sums in the same order.
class MeanOutputSums {
 public:
  void add(const std::vector<core::Tensor>& clean, std::span<const int32_t> lengths);
  std::vector<core::Tensor> replacement(int64_t rows) const;

 private:
  struct Layer {
    core::Tensor sum;               // [T, d] in the outputs' dtype, over every row
    std::vector<double> real_sum;   // [T * d] over the rows where the position is real
    std::vector<int64_t> real_rows;  // [T]
  };
  std::vector<Layer> layers_;
  int64_t rows_ = 0;
  bool padded_ = false;  // some row is shorter than T
};

// Resample ablation's outputs: per layer, row r of the result [from.size(),
// T, d] is row from[r] of `outputs` [R, T, d] (a chunk's clean outputs, then
// those of the donors read beyond it). The whole row is copied: positions
// past the receiver's length are its padding, which no real query reads.
std::vector<core::Tensor> resample_outputs(const std::vector<core::Tensor>& outputs, std::span<const int64_t> from);

}  // namespace headlab::analysis
