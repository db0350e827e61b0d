#include "analysis/patterns.h"

namespace headlab::analysis {

std::string pattern_key(const Pattern& pattern) {
  std::string key(pattern.name);
  for (char& c : key)
    if (c == '-') c = '_';
  return key;
}

}  // namespace headlab::analysis
