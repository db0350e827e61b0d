// ModuleList: children named by their index ("0", "1", ...), so that a
// stack of blocks yields names like "blocks.0.attn.q.weight".
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "layers/module.h"

namespace headlab::layers {

class ModuleList : public Module {
 public:
  template <class M>
  std::shared_ptr<M> push_back(std::shared_ptr<M> module) {
    return register_module(std::to_string(size()), std::move(module));
  }
  int64_t size() const { return static_cast<int64_t>(named_children().size()); }
};

}  // namespace headlab::layers
