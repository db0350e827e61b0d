// Numbers in messages and files: the shortest text that reads back as the
// same double ("0.001", "1e-07", "0"), never printf's fixed "0.000000".
#pragma once

#include <string>

namespace headlab::core {

std::string shortest(double value);

}  // namespace headlab::core
