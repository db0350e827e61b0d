// The default chunk of `analyze --data`: as many rows as fit the budget by
// the estimate, so a small model reads a large file in few chunks and a
// large one stays within the budget, one row at the least.
#include "train/analysis_chunk.h"

#include <gtest/gtest.h>

namespace headlab::train {
namespace {

layers::ModelSpec spec(int64_t layers, int64_t heads, int64_t d_model, int64_t seq_len, int64_t classes) {
  layers::ModelSpec m;
  m.layers = layers;
  m.heads = heads;
  m.d_model = d_model;
  m.max_seq_len = seq_len;
  m.vocab = classes;
  m.classes = classes;
  return m;
}

TEST(AnalysisChunk, FitsTheBudgetAndGrowsAsTheModelShrinks) {
  // The tests' tiny model (first-prev-pair: 6 positions, 64 classes): a
  // file of thousands of rows is one chunk, not dozens of 32.
  const layers::ModelSpec tiny = spec(1, 2, 16, 6, 64);
  EXPECT_GT(default_analysis_chunk(tiny), 4000);
  // A GPT-2-sized one: each row holds over a gigabyte of attention.
  const layers::ModelSpec large = spec(12, 12, 768, 1024, 50257);
  EXPECT_GT(analysis_bytes_per_row(large), kAnalysisChunkBytes);
  EXPECT_EQ(default_analysis_chunk(large), 1);
  for (const layers::ModelSpec& m : {tiny, spec(2, 4, 64, 32, 16), spec(4, 8, 256, 128, 1000)}) {
    const int64_t rows = default_analysis_chunk(m);
    EXPECT_LE(static_cast<double>(rows) * analysis_bytes_per_row(m), kAnalysisChunkBytes);
    EXPECT_GT(static_cast<double>(rows + 1) * analysis_bytes_per_row(m), kAnalysisChunkBytes) << "the largest that fits";
  }
  // Attention grows with the square of the length: twice the length, about a quarter of the rows.
  const int64_t short_rows = default_analysis_chunk(spec(2, 4, 64, 64, 16));
  const int64_t long_rows = default_analysis_chunk(spec(2, 4, 64, 128, 16));
  EXPECT_LT(long_rows * 3, short_rows);
}

}  // namespace
}  // namespace headlab::train
