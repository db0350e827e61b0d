// Helpers shared by the train tests.
#pragma once

#include <string>
#include <vector>

#include "layers/transformer.h"

namespace headlab::train::test {

inline bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// Every parameter's values, in the model's order, as one list.
inline std::vector<double> flat_weights(layers::Transformer& m) {
  std::vector<double> out;
  for (const auto& [name, p] : m.named_parameters()) {
    const auto v = p.value().to_vector();
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

}  // namespace headlab::train::test
