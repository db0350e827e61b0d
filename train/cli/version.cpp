#include "train/cli/version.h"

// Generated at build time by cmake/version_header.cmake (in the build folder).
#include "headlab_version.h"

namespace headlab::cli {

std::string version_line() { return HEADLAB_VERSION_LINE; }

}  // namespace headlab::cli
