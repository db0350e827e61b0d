// The CLI's "did you mean ...?": it lives in core/ since the layers' hook
// names use it too.
#pragma once

#include "core/nearest_name.h"

namespace headlab::train {

using core::nearest_name;

}  // namespace headlab::train
