#include "train/shell_word.h"

#include <cstdio>
#include <string>

#include <gtest/gtest.h>

namespace headlab::train {
namespace {

// What /bin/sh makes of `printf %s WORD`: the one word it read.
std::string through_the_shell(const std::string& word) {
  const std::string command = "printf %s " + shell_word(word);
  FILE* sh = popen(command.c_str(), "r");
  if (sh == nullptr) return "(popen failed)";
  std::string out;
  char buf[256];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, sh)) > 0;) out.append(buf, n);
  pclose(sh);
  return out;
}

TEST(ShellWord, APlainPathStaysAsItIs) {
  EXPECT_EQ(shell_word("runs/first-prev-pair-2024_01.x"), "runs/first-prev-pair-2024_01.x");
  EXPECT_EQ(shell_word("/tmp/über/run"), "/tmp/über/run");  // UTF-8 is not special to a shell
}

TEST(ShellWord, ThePathAShellReadsBackIsTheOneQuoted) {
  for (const std::string word : {"runs/my run", "it's", "a'b'c", "$HOME", "`id`", "a;b", "x*", "~/r", "a\"b", "a\\b",
                                 "tab\there", "new\nline", "", "(1)", "#1", "!x"}) {
    SCOPED_TRACE(word);
    EXPECT_NE(shell_word(word), word);
    EXPECT_EQ(through_the_shell(word), word);
  }
}

}  // namespace
}  // namespace headlab::train
