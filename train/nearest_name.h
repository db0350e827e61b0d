// "Did you mean ...?" for a mistyped flag or config key.
#pragma once

#include <string>
#include <vector>

namespace headlab::train {

// The candidate nearest to `name` in edit distance, with '_' and '-' counted
// as the same character (so d_model matches d-model), when it is near enough
// to be a typo: at most 2 edits and fewer edits than half the longer name.
// The first such candidate wins a tie; "" when none is near.
std::string nearest_name(const std::string& name, const std::vector<std::string>& candidates);

}  // namespace headlab::train
