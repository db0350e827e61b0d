// The whole headlab command line as a function: `headlab COMMAND [flags]` with
// argv[0] the program's name. The binary's main() is this call; the Python
// package calls it too, so that `headlab.train(**flags)` runs exactly the code
// of `headlab train --flags`.
#pragma once

#include <string>

namespace headlab::cli {

// Parses and runs one command; returns its exit status (0, 1, 2, 128 + signal).
// A failure is printed on stderr as one line (unless !print_error: a caller
// that reports it itself, as the Python package raises it), never thrown.
int run_command_line(int argc, char** argv, bool print_error = true);

// The error line of the last run_command_line on this thread ("" after a success).
const std::string& last_error();

}  // namespace headlab::cli
