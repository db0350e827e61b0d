// headlab: train toy transformers and find out what their attention heads learn.
#include "train/cli/command_line.h"

int main(int argc, char** argv) { return headlab::cli::run_command_line(argc, argv); }
