// The circuit analysis's results as plain records, kept in RunAnalysis and
// written to heads.json (analysis/composition.h and analysis/pruning.h
// compute them).
#pragma once

#include <cstdint>
#include <vector>

namespace headlab::analysis {

// How strongly a later head (the reader) reads what an earlier head (the
// writer) writes, through its queries, keys or values; Frobenius ratios in [0, 1].
struct Composition {
  int64_t writer_layer = 0, writer_head = 0, reader_layer = 0, reader_head = 0;
  double q = 0, k = 0, v = 0;
};

// Accuracy and loss as heads are zero-ablated one after another; entry i is
// with the first i heads of the order removed (entry 0 = none, the last = all).
struct PruningCurve {
  std::vector<int64_t> order;                 // head indices (layer-major), least important first
  std::vector<double> loss, accuracy;         // [heads + 1], removing in `order`
  std::vector<double> random_loss, random_accuracy;  // [heads + 1], mean over the random orders
  int64_t random_orders = 0;
};

}  // namespace headlab::analysis
