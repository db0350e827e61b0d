// How many rows `headlab analyze --data` analyzes at a time when --batch
// does not say: as many as keep one chunk's estimated memory within a
// budget. Each chunk costs the analysis dozens of forward passes whatever
// its size (one per head ablated, the importance, the second pass), so a
// small model reads its file in few large chunks, and a large model's
// chunks stay within the budget (docs/head-metrics.md, "Analysis in chunks").
#pragma once

#include <cstdint>

#include "layers/model_spec.h"

namespace headlab::train {

// What one chunk may hold, estimated: 64 MiB. Not more, as larger is not
// always faster: a 1.2 GB chunk ran slower than chunks of 16 rows (likely
// the page faults of tensors too large for the allocator to keep, mapped
// afresh at every pass; docs/head-metrics.md).
inline constexpr double kAnalysisChunkBytes = 64.0 * 1024 * 1024;

// The bytes one row of a chunk holds while the analysis runs, estimated for
// rows of the model's max_seq_len T (the attention, logits and head outputs
// of its probed passes, and one layer's working set); see the .cpp.
double analysis_bytes_per_row(const layers::ModelSpec& model);

// The rows whose estimate fits in kAnalysisChunkBytes, at least 1: a row
// over the budget is analyzed alone.
int64_t default_analysis_chunk(const layers::ModelSpec& model);

}  // namespace headlab::train
