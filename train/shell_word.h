// A path as one word of a shell command, for the commands headlab suggests
// ("Continue with: headlab train --resume DIR"): a user copies them into a
// shell, where `runs/my run` would be two words and `it's` an open quote.
#pragma once

#include <string>
#include <string_view>

namespace headlab::train {

// `word` unchanged when no POSIX shell would split or expand it (letters,
// digits, `_ - . / , : = + @ %`, and UTF-8's non-ASCII bytes, which no shell
// treats specially), else in single quotes, each ' written as '\''.
std::string shell_word(std::string_view word);

}  // namespace headlab::train
