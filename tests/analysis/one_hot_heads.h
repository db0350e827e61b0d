// Attention maps made by hand for the analysis tests.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "core/tensor.h"

namespace headlab::analysis::testing {

// [1, heads, T, T] in f64: head h attends, at query q, to key keys[h](q) alone.
inline core::Tensor one_hot_heads(int64_t len, const std::vector<std::function<int64_t(int64_t)>>& keys) {
  std::vector<double> v;
  for (const auto& key : keys)
    for (int64_t q = 0; q < len; ++q)
      for (int64_t k = 0; k < len; ++k) v.push_back(k == key(q) ? 1.0 : 0.0);
  return core::Tensor::from_vector(v, {1, static_cast<int64_t>(keys.size()), len, len}, core::DType::f64);
}

}  // namespace headlab::analysis::testing
