#include "train/analysis_chunk.h"

#include <algorithm>
#include <cmath>

namespace headlab::train {

double analysis_bytes_per_row(const layers::ModelSpec& model) {
  const layers::ModelSpec m = model.resolved();
  const double T = static_cast<double>(m.max_seq_len), L = static_cast<double>(m.layers),
               H = static_cast<double>(m.heads), C = static_cast<double>(m.classes),
               d = static_cast<double>(m.d_model), ff = m.attn_only ? 0.0 : static_cast<double>(m.d_ff);
  // Float32 values per row, the largest terms of what analyze_chunks keeps
  // at once (analysis/analyze_model.cpp):
  //   - attention [H, T, T] per layer: the scoring pass's probe, a second
  //     probed pass's (direct logit attribution) and a float64 copy, 4 L H T^2;
  //   - logits [T, C]: the scoring pass's, an ablated pass's, a patched
  //     pass's and a float64 softmax of one, 5 T C;
  //   - per layer [T, d]: head outputs and the residual of both probed
  //     passes, with --patch the replacements and the clean outputs, 6 L T d;
  //   - one layer's forward: Q, K, V, its output and the MLP's hidden
  //     activations, T (4 d + d_ff), and its scores H T^2.
  // The growth of the peak resident size per row of one chunk (/usr/bin/time,
  // 2,000 to 20,000 rows) was 0.8 to 1.1 times this: 6 positions of 64
  // classes, with and without --patch; 64 positions, 2 layers of 4 heads.
  const double floats = 4 * L * H * T * T + 5 * T * C + 6 * L * T * d + T * (4 * d + ff) + H * T * T;
  return 4 * floats;
}

int64_t default_analysis_chunk(const layers::ModelSpec& model) {
  const double rows = std::floor(kAnalysisChunkBytes / analysis_bytes_per_row(model));
  // Clamped before the cast: a tiny model's quotient is large but finite.
  return static_cast<int64_t>(std::clamp(rows, 1.0, 1e15));
}

}  // namespace headlab::train
