// `headlab --version`: the release and the git commit the program was built from.
#pragma once

#include <string>

namespace headlab::cli {

// "headlab 0.1.0 (git 1a2b3c4)", "-dirty" after the commit when tracked files
// had changes at build time, "git unknown" when built outside a git checkout.
std::string version_line();

}  // namespace headlab::cli
