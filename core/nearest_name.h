// "Did you mean ...?" for a mistyped flag, config key or hook name.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace headlab::core {

// The candidate nearest to `name` in edit distance, with '_' and '-' counted
// as the same character (so d_model matches d-model), when it is near enough
// to be a typo: at most 2 edits and fewer edits than half the longer name.
// The first such candidate wins a tie. Failing that, the one candidate that
// `name` (3 characters or more) begins, as an abbreviation: vers for
// version. "" when none is near.
std::string nearest_name(const std::string& name, const std::vector<std::string>& candidates);

// The (at most) `count` candidates nearest to `name` in the same edit
// distance, however far, nearest first (ties in candidate order).
std::vector<std::string> nearest_names(const std::string& name, const std::vector<std::string>& candidates,
                                       std::size_t count);

}  // namespace headlab::core
