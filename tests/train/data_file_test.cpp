#include "train/data_file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "test_util.h"
#include "train/errors.h"
#include "train/run_builder.h"
#include "train/session.h"

namespace headlab::train {
namespace {

using test::contains;

namespace fs = std::filesystem;

// A fresh file per test under the system temp folder, removed afterwards.
class DataFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() / ("headlab-data-" + std::to_string(getpid()) + "-" + test->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write(const std::string& content, const std::string& name = "data.jsonl") {
    const fs::path path = dir_ / name;
    std::ofstream(path, std::ios::binary) << content;
    return path.string();
  }

  // The UsageError message of loading `content` into a model with vocab 8, 8
  // classes and seq-len 6.
  std::string error_of(const std::string& content) {
    const std::string path = write(content);
    try {
      DataFile data(path, 8, 8, 6);
    } catch (const UsageError& e) {
      return e.what();
    }
    ADD_FAILURE() << "no UsageError for:\n" << content;
    return "";
  }

  fs::path dir_;
};

std::vector<int32_t> row_tokens(const Batch& batch, int64_t row) {
  const auto begin = batch.tokens.begin() + static_cast<std::ptrdiff_t>(row * batch.seq_len);
  return {begin, begin + batch.seq_len};
}

std::vector<int32_t> row_targets(const Batch& batch, int64_t row) {
  const auto begin = batch.targets.begin() + static_cast<std::ptrdiff_t>(row * batch.seq_len);
  return {begin, begin + batch.seq_len};
}

// A file of n sequences whose first token is the sequence's index, so that a
// batch row says which sequence it came from.
std::string numbered(int n) {
  std::string content;
  for (int i = 0; i < n; ++i) content += "{\"tokens\": [" + std::to_string(i) + ", 1]}\n";
  return content;
}

TEST_F(DataFileTest, ReadsTokensAndExplicitTargetsAndPadsToTheModelSeqLen) {
  DataFile data(write("{\"tokens\": [1, 2, 3], \"targets\": [-1, 5, 0]}\n"), 8, 8, 6);
  EXPECT_EQ(data.size(), 1);
  EXPECT_EQ(data.vocab(), 8);
  EXPECT_EQ(data.num_classes(), 8);
  EXPECT_EQ(data.seq_len(), 6);
  core::Generator gen(0);
  const Batch batch = data.sample(1, gen);
  EXPECT_EQ(batch.batch, 1);
  EXPECT_EQ(batch.seq_len, 6);
  EXPECT_EQ(batch.tokens, (std::vector<int32_t>{1, 2, 3, 0, 0, 0}));
  EXPECT_EQ(batch.targets, (std::vector<int32_t>{-1, 5, 0, -1, -1, -1}));
}

TEST_F(DataFileTest, WithoutTargetsTheTargetsAreNextTokenAndTheLastPositionHasNone) {
  DataFile data(write("{\"tokens\": [4, 6, 2, 7]}\n"), 8, 8, 6);
  core::Generator gen(0);
  const Batch batch = data.sample(1, gen);
  EXPECT_EQ(batch.tokens, (std::vector<int32_t>{4, 6, 2, 7, 0, 0}));
  EXPECT_EQ(batch.targets, (std::vector<int32_t>{6, 2, 7, -1, -1, -1}));
}

TEST_F(DataFileTest, SkipsBlankLinesAndAcceptsWindowsLineEndingsAndAFullLengthSequence) {
  DataFile data(write("\n{\"tokens\": [1, 2]}\r\n   \n\t\n{\"targets\": [0,0,0,0,0,0], \"tokens\": [0,1,2,3,4,5]}"), 8,
                8, 6);
  EXPECT_EQ(data.size(), 2);
  const Batch all = data.rows(0, 2);
  EXPECT_EQ(row_tokens(all, 0), (std::vector<int32_t>{1, 2, 0, 0, 0, 0}));
  EXPECT_EQ(row_tokens(all, 1), (std::vector<int32_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(row_targets(all, 1), (std::vector<int32_t>{0, 0, 0, 0, 0, 0}));
}

TEST_F(DataFileTest, BatchesFollowFileOrderAndWrapAround) {
  DataFile data(write(numbered(3)), 8, 8, 2);
  core::Generator gen(5);
  const auto state = gen.state();
  const Batch first = data.sample(2, gen);
  const Batch second = data.sample(4, gen);
  EXPECT_EQ(first.tokens, (std::vector<int32_t>{0, 1, 1, 1}));
  EXPECT_EQ(second.tokens, (std::vector<int32_t>{2, 1, 0, 1, 1, 1, 2, 1}));
  EXPECT_EQ(gen.state(), state) << "file order draws nothing from the generator";
}

TEST_F(DataFileTest, NameSaysItIsADataFile) {
  const std::string path = write(numbered(1));
  EXPECT_EQ(DataFile(path, 8, 8, 6).name(), "data:" + path);
}

std::vector<int32_t> firsts_of(const Batch& batch) {
  std::vector<int32_t> firsts;
  for (int64_t row = 0; row < batch.batch; ++row) firsts.push_back(row_tokens(batch, row)[0]);
  return firsts;
}

// The first tokens of `count` sequences drawn in batches of `batch`.
std::vector<int32_t> stream(DataFile& data, core::Generator& gen, int64_t batch, int64_t count) {
  std::vector<int32_t> out;
  while (static_cast<int64_t>(out.size()) < count) {
    const auto firsts = firsts_of(data.sample(batch, gen));
    out.insert(out.end(), firsts.begin(), firsts.end());
  }
  out.resize(static_cast<std::size_t>(count));
  return out;
}

TEST_F(DataFileTest, ShuffleCoversEverySequenceOncePerEpochInADifferentOrderEachEpoch) {
  const int n = 50;
  DataFile data(write(numbered(n)), 64, 64, 2, /*shuffle=*/true);
  core::Generator gen(9);
  // Batches of 7 straddle the epoch boundaries.
  const auto order = stream(data, gen, 7, 3 * n);
  std::vector<int32_t> identity(n);
  for (int i = 0; i < n; ++i) identity[static_cast<std::size_t>(i)] = i;
  std::vector<std::vector<int32_t>> epochs;
  for (int e = 0; e < 3; ++e) {
    std::vector<int32_t> epoch(order.begin() + e * n, order.begin() + (e + 1) * n);
    EXPECT_NE(epoch, identity) << "epoch " << e << " is shuffled";
    epochs.push_back(epoch);
    std::sort(epoch.begin(), epoch.end());
    EXPECT_EQ(epoch, identity) << "epoch " << e << " holds every sequence exactly once";
  }
  EXPECT_NE(epochs[0], epochs[1]);
  EXPECT_NE(epochs[1], epochs[2]);
}

TEST_F(DataFileTest, ShuffleIsDeterministicGivenTheSeedAndDiffersAcrossSeeds) {
  const std::string path = write(numbered(40));
  DataFile a(path, 64, 64, 2, true), b(path, 64, 64, 2, true), c(path, 64, 64, 2, true);
  core::Generator gen_a(1), gen_b(1), gen_c(2);
  const auto from_a = stream(a, gen_a, 16, 100);
  EXPECT_EQ(from_a, stream(b, gen_b, 16, 100));
  EXPECT_NE(from_a, stream(c, gen_c, 16, 100));
}

TEST_F(DataFileTest, RestoringThePositionAndGeneratorContinuesTheStreamExactly) {
  const std::string path = write(numbered(13));
  DataFile data(path, 64, 64, 2, true);
  core::Generator gen(4);
  stream(data, gen, 5, 20);  // mid-way through the second epoch
  const auto position = *data.position();
  const auto state = gen.state();
  const auto expected = stream(data, gen, 5, 40);

  DataFile resumed(path, 64, 64, 2, true);
  resumed.set_position(position);
  core::Generator resumed_gen(0);
  resumed_gen.set_state(state);
  EXPECT_EQ(stream(resumed, resumed_gen, 5, 40), expected);
  EXPECT_THROW(resumed.set_position({0, 14}), std::invalid_argument);
  EXPECT_THROW(resumed.set_position({0, -1}), std::invalid_argument);
}

TEST_F(DataFileTest, RowsReadsTheFileInOrderWithoutMovingTheStream) {
  DataFile data(write(numbered(5)), 8, 8, 3, true);
  core::Generator gen(0), same(0);
  EXPECT_EQ(firsts_of(data.rows(1, 3)), (std::vector<int32_t>{1, 2, 3}));
  DataFile fresh(write(numbered(5), "copy.jsonl"), 8, 8, 3, true);
  EXPECT_EQ(firsts_of(data.sample(5, gen)), firsts_of(fresh.sample(5, same)));
  EXPECT_THROW(data.rows(4, 2), std::invalid_argument);
  EXPECT_THROW(data.rows(0, 0), std::invalid_argument);
  EXPECT_THROW(data.rows(-1, 1), std::invalid_argument);
}

TEST_F(DataFileTest, SampleRejectsANonPositiveBatch) {
  DataFile data(write(numbered(2)), 8, 8, 2);
  core::Generator gen(0);
  EXPECT_THROW(data.sample(0, gen), std::invalid_argument);
}

TEST_F(DataFileTest, MissingFileIsAUsageErrorNamingIt) {
  const std::string path = (dir_ / "absent.jsonl").string();
  try {
    DataFile data(path, 8, 8, 6);
    FAIL() << "no error";
  } catch (const UsageError& e) {
    EXPECT_TRUE(contains(e.what(), path)) << e.what();
    EXPECT_TRUE(contains(e.what(), "No such file")) << e.what();
  }
}

TEST_F(DataFileTest, DirectoryIsAUsageError) {
  try {
    DataFile data(dir_.string(), 8, 8, 6);
    FAIL() << "no error";
  } catch (const UsageError& e) {
    EXPECT_TRUE(contains(e.what(), "is a directory")) << e.what();
  }
}

TEST_F(DataFileTest, EmptyFileAndBlankOnlyFileAreUsageErrors) {
  EXPECT_TRUE(contains(error_of(""), "no sequences")) << error_of("");
  EXPECT_TRUE(contains(error_of("\n  \n\n"), "no sequences"));
}

TEST_F(DataFileTest, InvalidJsonNamesFileAndLine) {
  const std::string message = error_of("{\"tokens\": [1, 2]}\n\n{\"tokens\": [1, 2}\n");
  EXPECT_TRUE(contains(message, "data.jsonl:3: invalid JSON")) << message;
  EXPECT_TRUE(contains(message, "at column 17")) << message;
  EXPECT_FALSE(contains(message, "json.exception")) << message;
  EXPECT_FALSE(contains(message, "line 1")) << "the only line number is the file's: " << message;
}

// Bytes that are not UTF-8 are named by line and offset, never echoed raw
// (issue 29.16); so are control characters the parser quotes.
TEST_F(DataFileTest, InvalidUtf8NamesTheLineAndByteWithoutEchoingIt) {
  const auto printable = [](const std::string& m) {
    return std::all_of(m.begin(), m.end(), [](char c) { return static_cast<unsigned char>(c) >= 0x20 && c != 0x7f; });
  };
  for (const std::string bad : {"\xff", "\xc0\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xe2\x82"}) {
    const std::string message = error_of("{\"tokens\": [1, 2]}\n{\"tokens\": [1, 2], \"x\xc3\xa9" + bad + "\": 1}\n");
    EXPECT_TRUE(contains(message, "data.jsonl:2: invalid JSON: invalid UTF-8 at byte 23 (0x")) << message;
    EXPECT_TRUE(printable(message) && message.find(bad) == std::string::npos) << message;
  }
  // Well-formed multi-byte text passes the check (and reaches the key check).
  EXPECT_TRUE(contains(error_of("{\"tokens\": [1], \"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\": 1}\n"), "unknown key"));
  const std::string tab = error_of("{\"tokens\": [1], \"a\tb\": 1}\n");
  EXPECT_TRUE(printable(tab)) << tab;
}

TEST_F(DataFileTest, ALineThatIsNotAnObjectIsAUsageError) {
  EXPECT_TRUE(contains(error_of("[1, 2, 3]\n"), "data.jsonl:1: expected a JSON object")) << error_of("[1, 2, 3]\n");
  EXPECT_TRUE(contains(error_of("7\n"), "expected a JSON object"));
}

// A binary file given by mistake (a checkpoint, /dev/zero) is refused at its
// first byte, not read up to the line bound (1 MiB and more) first.
TEST_F(DataFileTest, ALineIsRefusedAtAFirstByteThatCannotStartAnObject) {
  const std::string binary = std::string("{\"tokens\": [1, 2]}\n") + std::string(3 << 20, '\0');
  const std::string message = error_of(binary);
  EXPECT_TRUE(contains(message, "data.jsonl:2: expected a JSON object")) << message;
  EXPECT_TRUE(contains(message, "starts with byte 0x00")) << message;
  EXPECT_TRUE(contains(error_of("  [1, 2]\n"), "starts with '['")) << error_of("  [1, 2]\n");
  // Blanks and a byte order mark (which the parser skips) may come first.
  const DataFile data(write("\xef\xbb\xbf{\"tokens\": [1, 2]}\n \t{\"tokens\": [3]}\n"), 8, 8, 6);
  EXPECT_EQ(data.size(), 2);
}

// Without a seq-len the lines are bounded as for 65536 tokens (5 MiB), not
// for 2^24 (1 GiB): a file of one endless line costs little memory.
TEST_F(DataFileTest, TheLinesOfAFileWhoseSeqLenIsInferredAreBounded) {
  const std::string path = write("{\"tokens\": [1, 2" + std::string(6 << 20, ' ') + "]}\n");
  try {
    const DataFile data(path, DataFile::Sizes{});
    FAIL() << "no error";
  } catch (const UsageError& e) {
    EXPECT_TRUE(contains(e.what(), "data.jsonl:1: the line is longer than " +
                                       std::to_string(DataFile::max_line_bytes(DataFile::kInferredPositions))))
        << e.what();
    EXPECT_TRUE(contains(e.what(), "--seq-len")) << e.what();
  }
  // A seq-len given bounds them as the model's.
  EXPECT_EQ(DataFile(path, DataFile::Sizes{.vocab = 0, .classes = 0, .seq_len = 1 << 17}).needs().seq_len, 2);
}

// Sizes left at 0 are read in the file's one pass: a pipe, read once, gives
// them and its rows (it was read twice, the second time empty), and so does a
// file, naming the lines that set them.
TEST_F(DataFileTest, SizesLeftToTheFileAreReadInItsOnePass) {
  const std::string rows = "{\"tokens\": [1, 2]}\n{\"tokens\": [0, 4, 1], \"targets\": [-1, 6, 2]}\n";
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  ASSERT_EQ(::write(fds[1], rows.data(), rows.size()), static_cast<ssize_t>(rows.size()));
  ::close(fds[1]);
  const DataFile piped("/dev/fd/" + std::to_string(fds[0]), DataFile::Sizes{.least_seq_len = 3});
  ::close(fds[0]);
  const DataFile file(write(rows), DataFile::Sizes{.least_seq_len = 3});
  for (const DataFile* data : {&piped, &file}) {
    EXPECT_EQ(data->size(), 2);
    EXPECT_EQ(data->vocab(), 7);  // the target 6 is a token too
    EXPECT_EQ(data->num_classes(), 7);
    EXPECT_EQ(data->seq_len(), 3);
    EXPECT_EQ(row_targets(data->rows(1, 1), 0), (std::vector<int32_t>{-1, 6, 2}));
  }
  EXPECT_EQ(file.inferred_sizes(),
            "vocab 7, classes 7 and seq-len 3 inferred from " + file.path() +
                " (largest target 6 at line 2; longest sequence 3 tokens at line 2)");
  // --classes given: the vocab is the tokens' alone, and the targets are checked against the classes.
  const DataFile classes(write(rows), DataFile::Sizes{.vocab = 0, .classes = 9, .seq_len = 0, .least_seq_len = 4});
  EXPECT_EQ(classes.vocab(), 5);
  EXPECT_EQ(classes.num_classes(), 9);
  EXPECT_EQ(classes.inferred_sizes(), "vocab 5 and seq-len 4 inferred from " + classes.path() +
                                          " (largest token 4 at line 2; longest sequence 3 tokens at line 2, raised "
                                          "to the analysis's least 4)");
  try {
    const DataFile few(write(rows), DataFile::Sizes{.vocab = 0, .classes = 5});
    ADD_FAILURE() << "a target beyond --classes read";
  } catch (const UsageError& e) {
    EXPECT_TRUE(contains(e.what(), "data.jsonl:2: target 6 (targets[1]) is out of range")) << e.what();
  }
  EXPECT_EQ(DataFile(write(rows), 8, 8, 6).inferred_sizes(), "");
}

TEST_F(DataFileTest, MissingOrMalformedTokensAreUsageErrors) {
  EXPECT_TRUE(contains(error_of("{\"targets\": [1]}"), ":1: missing \"tokens\"")) << error_of("{\"targets\": [1]}");
  EXPECT_TRUE(contains(error_of("{\"tokens\": 3}"), "\"tokens\" must be an array"));
  EXPECT_TRUE(contains(error_of("{\"tokens\": []}"), "\"tokens\" is empty"));
}

TEST_F(DataFileTest, UnknownKeyIsAUsageErrorSoATypoCannotMeanNextToken) {
  const std::string message = error_of("{\"tokens\": [1, 2], \"target\": [2, -1]}");
  EXPECT_TRUE(contains(message, "unknown key \"target\"")) << message;
}

TEST_F(DataFileTest, NonIntegerTokenIsAUsageErrorNamingTheValue) {
  const std::string message = error_of("{\"tokens\": [1, 2]}\n{\"tokens\": [1, 2.5]}");
  EXPECT_TRUE(contains(message, "data.jsonl:2: token 2.5 (tokens[1]) is not an integer")) << message;
  EXPECT_TRUE(contains(error_of("{\"tokens\": [\"a\"]}"), "token \"a\" (tokens[0]) is not an integer"));
  EXPECT_TRUE(contains(error_of("{\"tokens\": [true]}"), "is not an integer"));
  EXPECT_TRUE(contains(error_of("{\"tokens\": [null]}"), "is not an integer"));
}

// nlohmann reads an integer literal beyond 64 bits as a double: it is out of
// range, not "not an integer", and shown as an integer, not as 1e+20.
TEST_F(DataFileTest, AnIntegerBeyond64BitsIsOutOfRangeShownAsAnInteger) {
  const std::string message = error_of("{\"tokens\": [1, 2], \"targets\": [99999999999999999999, 1]}");
  EXPECT_TRUE(contains(message, "data.jsonl:1: target 100000000000000000000 (targets[0]) is out of the range of a "
                                "64-bit integer: targets must be -1 (none) or in [0, 8)"))
      << message;
  const std::string token = error_of("{\"tokens\": [-99999999999999999999]}");
  EXPECT_TRUE(contains(token, "token -100000000000000000000 (tokens[0]) is out of the range of a 64-bit integer: "
                              "tokens must be in [0, 8)"))
      << token;
  const std::string key = error_of("{\"tokens\": [1, 2], \"attend\": {\"p\": [null, 99999999999999999999]}}");
  EXPECT_TRUE(contains(key, "= 100000000000000000000 is out of the range of a 64-bit integer")) << key;
  EXPECT_TRUE(contains(error_of("{\"tokens\": [1e300]}"), "is out of the range of a 64-bit integer"));
  // A float within 64 bits stays a non-integer, whole or not.
  EXPECT_TRUE(contains(error_of("{\"tokens\": [1.5e3]}"), "token 1500.0 (tokens[0]) is not an integer"))
      << error_of("{\"tokens\": [1.5e3]}");
}

// With the sizes left to the file there is no vocab yet: a bad token or
// target is named by what ids may be, not by a bound of [0, 2147483647) that
// no flag of the user's set.
TEST_F(DataFileTest, ABadIdInAFileThatSetsTheSizesIsNamedWithoutAnInternalBound) {
  const auto error_with_sizes_from_the_file = [&](const std::string& content) {
    try {
      DataFile data(write(content), DataFile::Sizes{});
    } catch (const UsageError& e) {
      return std::string(e.what());
    }
    ADD_FAILURE() << "no UsageError for:\n" << content;
    return std::string();
  };
  const std::string token = error_with_sizes_from_the_file("{\"tokens\": [1, -2, 3]}\n");
  EXPECT_TRUE(contains(token, "data.jsonl:1: token -2 (tokens[1]) is negative: tokens are ids 0 or more")) << token;
  const std::string huge = error_with_sizes_from_the_file("{\"tokens\": [1, 99999999999]}\n");
  EXPECT_TRUE(contains(huge, "token 99999999999 (tokens[1]) is beyond the largest vocab, 2147483647")) << huge;
  const std::string target = error_with_sizes_from_the_file("{\"tokens\": [1, 2], \"targets\": [-2, 1]}\n");
  EXPECT_TRUE(contains(target, "target -2 (targets[0]) is negative: targets are ids 0 or more, or -1 (none)"))
      << target;
  for (const std::string& m : {token, target}) EXPECT_FALSE(contains(m, "2147483647")) << m;
  // A size given keeps its range in the message.
  EXPECT_TRUE(contains(error_of("{\"tokens\": [1, -2]}"), "tokens must be in [0, 8)"));
}

// An editor's "Unicode" (Notepad, PowerShell 5's >) is UTF-16 with a byte
// order mark: named as such, not as a first byte 0xff.
TEST_F(DataFileTest, AUtf16OrUtf32FileIsNamedByItsByteOrderMark) {
  const std::string object = "{\"tokens\": [1, 2]}\n";
  std::string utf16le = "\xff\xfe", utf16be = "\xfe\xff", utf32le("\xff\xfe\0\0", 4), utf32be("\0\0\xfe\xff", 4);
  for (const char c : object) {
    utf16le += std::string{c, '\0'};
    utf16be += std::string{'\0', c};
    utf32le += std::string{c, '\0', '\0', '\0'};
    utf32be += std::string{'\0', '\0', '\0', c};
  }
  for (const auto& [text, encoding] : {std::pair{utf16le, "UTF-16 (little-endian)"}, std::pair{utf16be, "UTF-16 (big-endian)"},
                                       std::pair{utf32le, "UTF-32 (little-endian)"}, std::pair{utf32be, "UTF-32 (big-endian)"}}) {
    const std::string message = error_of(text);
    EXPECT_TRUE(contains(message, std::string("data.jsonl:1: the file is ") + encoding + " (it starts with that byte "
                                  "order mark); save it as UTF-8"))
        << message;
  }
  // Without the mark, the NUL bytes that pad the first characters name it.
  for (const auto& [text, encoding] :
       {std::pair{utf16le.substr(2), "UTF-16 (little-endian)"}, std::pair{utf16be.substr(2), "UTF-16 (big-endian)"},
        std::pair{utf32le.substr(4), "UTF-32 (little-endian)"}, std::pair{utf32be.substr(4), "UTF-32 (big-endian)"}}) {
    const std::string message = error_of(text);
    EXPECT_TRUE(contains(message, std::string("data.jsonl:1: the file looks like ") + encoding +
                                      " without a byte order mark (NUL bytes pad its first characters); save it as "
                                      "UTF-8"))
        << message;
  }
  // Past the first line, 0xff 0xfe is no byte order mark but a stray byte.
  EXPECT_TRUE(contains(error_of(object + "\xff\xfe{}\n"), "data.jsonl:2: expected a JSON object")) << error_of(object + "\xff\xfe{}\n");
}

TEST_F(DataFileTest, OutOfVocabTokenIsAUsageErrorNamingTheValueAndTheVocab) {
  const std::string message = error_of("{\"tokens\": [1, 8]}");
  EXPECT_TRUE(contains(message, "data.jsonl:1: token 8 (tokens[1]) is out of the vocab")) << message;
  EXPECT_TRUE(contains(message, "[0, 8)")) << message;
  EXPECT_TRUE(contains(error_of("{\"tokens\": [-1]}"), "token -1 (tokens[0]) is out of the vocab"));
  EXPECT_TRUE(contains(error_of("{\"tokens\": [18446744073709551615]}"), "token 18446744073709551615"));
}

TEST_F(DataFileTest, SequenceLongerThanTheModelSeqLenIsAUsageError) {
  const std::string message = error_of("{\"tokens\": [1, 2, 3, 4, 5, 6, 7]}");
  EXPECT_TRUE(contains(message, "data.jsonl:1: 7 tokens, longer than the model's seq-len 6")) << message;
}

TEST_F(DataFileTest, TargetsOfTheWrongLengthAreAUsageError) {
  const std::string message = error_of("{\"tokens\": [1, 2, 3], \"targets\": [1, 2]}");
  EXPECT_TRUE(contains(message, "data.jsonl:1: 2 targets for 3 tokens")) << message;
  EXPECT_TRUE(contains(error_of("{\"tokens\": [1], \"targets\": 1}"), "\"targets\" must be an array"));
}

TEST_F(DataFileTest, TargetOutOfRangeIsAUsageError) {
  const std::string high = error_of("{\"tokens\": [1, 2], \"targets\": [8, -1]}");
  EXPECT_TRUE(contains(high, "target 8 (targets[0]) is out of range")) << high;
  EXPECT_TRUE(contains(high, "[0, 8)")) << high;
  EXPECT_TRUE(contains(error_of("{\"tokens\": [1, 2], \"targets\": [-2, 1]}"), "target -2 (targets[0])"));
  EXPECT_TRUE(contains(error_of("{\"tokens\": [1, 2], \"targets\": [0.5, 1]}"), "target 0.5 (targets[0]) is not"));
}

TEST_F(DataFileTest, NextTokenTargetBeyondTheModelClassesIsAUsageError) {
  const std::string path = write("{\"tokens\": [1, 9]}");
  try {
    DataFile data(path, 10, 5, 6);
    FAIL() << "no error";
  } catch (const UsageError& e) {
    EXPECT_TRUE(contains(e.what(), "next-token target 9 (tokens[1]) is out of range")) << e.what();
  }
}

TEST_F(DataFileTest, AFileWithoutAnyTargetIsAUsageError) {
  EXPECT_TRUE(
      contains(error_of("{\"tokens\": [1]}\n{\"tokens\": [2], \"targets\": [-1]}"), "no position has a target"));
}

// A line's number counts the blank lines before it; a line has no target
// when every target is -1, or when it is a single token without "targets".
TEST_F(DataFileTest, LinesWithNoTargetAreListedByTheirLineNumbers) {
  const DataFile data(write("{\"tokens\": [1, 2, 3]}\n"                      // next-token targets
                            "{\"tokens\": [4]}\n"                            // one token: none
                            "\n"                                              // blank
                            "{\"tokens\": [1, 2], \"targets\": [-1, -1]}\n"  // none
                            "{\"tokens\": [1, 2], \"targets\": [-1, 5]}\n"),
                      8, 8, 6);
  EXPECT_EQ(data.size(), 4);  // read whole: eval and analyze take such lines
  EXPECT_EQ(data.lines_with_no_target(), (std::vector<int64_t>{2, 4}));
}

// The refusal of a new run from `config`, or "" when it is built.
std::string new_run_refusal(const TrainConfig& config) {
  try {
    Session session(config);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

// No training step learns from a line without a target: a new run refuses
// the file, naming the first five such lines and their count, whatever
// --eval-fraction holds out; resuming, evaluating and analyzing a run
// (make_task_for) read it as it is.
TEST_F(DataFileTest, ANewRunRefusesLinesWithNoTargetNamingThem) {
  std::string text;
  for (int line = 1; line <= 20; ++line)
    text += line % 3 == 0 ? "{\"tokens\": [1, 2, 3], \"targets\": [-1, -1, -1]}\n" : "{\"tokens\": [1, 2, 3, 4]}\n";
  TrainConfig c;
  c.data = write(text);
  c.model.d_model = 16;
  const std::string refused = new_run_refusal(c);
  EXPECT_TRUE(contains(refused, "--data " + c.data + ": 6 of its 20 sequences have no target (lines 3, 6, 9, 12, 15 "
                                "and 1 more: every target -1, or a single token without \"targets\")"))
      << refused;
  EXPECT_TRUE(contains(refused, "give them targets, or remove them from the file")) << refused;
  EXPECT_EQ(make_task_for(c)->size(), 20);
  for (const int seed : {0, 1, 2, 3}) {
    TrainConfig split = c;
    split.eval_fraction = 0.25;
    split.split_seed = seed;
    EXPECT_EQ(new_run_refusal(split), refused) << "split seed " << seed;
    EXPECT_EQ(make_task_for(split)->size(), 15) << "split seed " << seed;
  }
  c.data = write("{\"tokens\": [1, 2, 3, 4]}\n{\"tokens\": [2]}\n", "one.jsonl");
  const std::string one = new_run_refusal(c);
  EXPECT_TRUE(contains(one, "1 of its 2 sequences has no target (line 2: ")) << one;
  EXPECT_TRUE(contains(one, "give it targets, or remove it from the file")) << one;
  c.data = write("{\"tokens\": [1, 2, 3, 4]}\n{\"tokens\": [2, 1]}\n", "fixed.jsonl");
  EXPECT_EQ(new_run_refusal(c), "");
}


TEST_F(DataFileTest, AttendPatternsAreReadPerPositionAndBecomeTheRunsExpectedRoles) {
  DataFile data(write("{\"tokens\": [1, 9, 4, 2], \"targets\": [-1, -1, -1, 4], "
                      "\"attend\": {\"after-marker\": [null, null, 2, 2], \"both\": [0, [0, 1], null, [1, 3]]}}\n"
                      "{\"tokens\": [9, 3, 5], \"targets\": [-1, -1, 3], \"attend\": {\"after-marker\": [null, 1, 1]}}\n"),
                8 + 2, 10, 6);
  Batch b = data.eval_batch(2, 0);
  ASSERT_EQ(b.attend.size(), 2u);
  EXPECT_EQ(b.attend[0].name, "after-marker");
  EXPECT_EQ(b.attend[0].at(0, 3), std::vector<int32_t>{2});
  EXPECT_TRUE(b.attend[0].at(0, 0).empty());
  EXPECT_EQ(b.attend[0].at(1, 2), std::vector<int32_t>{1});
  EXPECT_TRUE(b.attend[0].at(1, 4).empty()) << "padding is never scored";
  EXPECT_EQ(b.attend[1].at(0, 1), (std::vector<int32_t>{0, 1}));
  EXPECT_TRUE(b.attend[1].at(1, 0).empty()) << "a line without the pattern scores none of its queries";
  data.describe(b);
  EXPECT_EQ(b.roles, (std::vector<analysis::ExpectedRole>{{"after-marker", "after-marker"}, {"both", "both"}}));
}

TEST_F(DataFileTest, BadAttendEntriesAreUsageErrorsNamingTheLineAndTheEntry) {
  const std::string head = "{\"tokens\": [1, 2, 3], \"attend\": ";
  EXPECT_TRUE(contains(error_of(head + "[0, 1, 2]}\n"), "must be an object"));
  EXPECT_TRUE(contains(error_of(head + "{\"p\": [0, 1]}}\n"), "has 2 entries for 3 tokens"));
  EXPECT_TRUE(contains(error_of(head + "{\"p\": [0, 2, 1]}}\n"), "[1] = 2 is not a key query 1 can see: keys are in [0, 1]"));
  EXPECT_TRUE(contains(error_of(head + "{\"p\": [0, -1, 1]}}\n"), "[1] = -1 is not a key"));
  EXPECT_TRUE(contains(error_of(head + "{\"p\": [0, \"x\", 1]}}\n"), "is not a key position"));
  EXPECT_TRUE(contains(error_of(head + "{\"p\": [0, [], 1]}}\n"), "empty list: use null"));
  EXPECT_TRUE(contains(error_of(head + "{\"p\": [0, [0, 0], 1]}}\n"), "lists a key twice"));
  EXPECT_TRUE(contains(error_of(head + "{\"mixed\": [0, 0, 0]}}\n"), "is a label of its own"));
  EXPECT_TRUE(contains(error_of(head + "{\"first\": [0, 0, 0]}}\n"),
                       "data.jsonl:1: \"attend\": pattern name 'first' reads as the built-in pattern first-token"));
  EXPECT_TRUE(contains(error_of(head + "{\"p\": [0, 1]}}\n"), "data.jsonl:1: \"attend\" pattern \"p\""));
}

// A pattern no line gives a key could never be scored: the file is refused,
// naming the pattern and the line it first appears on. One that only some
// lines have, or have keys for, is read.
TEST_F(DataFileTest, APatternWithoutAnyKeyIsRefusedButOneThatSomeLinesLackIsRead) {
  const std::string keyless = "{\"tokens\": [1, 2, 3], \"attend\": {\"p\": [null, null, null]}}\n";
  const std::string error = error_of("{\"tokens\": [4, 5]}\n" + keyless + keyless);
  EXPECT_TRUE(contains(error, "data.jsonl:2: \"attend\" pattern \"p\" gives no query a key in this line nor in any other"))
      << error;
  EXPECT_TRUE(contains(error, "leave the pattern out")) << error;

  DataFile data(write(keyless + "{\"tokens\": [4, 5]}\n{\"tokens\": [1, 2, 3], \"attend\": {\"p\": [null, 0, null]}}\n"),
                8, 8, 6);
  const Batch first = data.rows(0, 2);
  ASSERT_EQ(first.attend.size(), 1u);
  EXPECT_FALSE(first.attend[0].keyed()) << "a slice of the file without a key of the pattern is no error";
  EXPECT_EQ(data.rows(2, 1).attend[0].at(0, 1), std::vector<int32_t>{0});
}

TEST_F(DataFileTest, BidirectionalModelsMayAttendToLaterKeys) {
  DataFile data(write("{\"tokens\": [1, 2, 3], \"attend\": {\"next\": [1, 2, null]}}\n"), 8, 8, 6, false,
                /*causal=*/false);
  EXPECT_EQ(data.eval_batch(1, 0).attend[0].at(0, 0), std::vector<int32_t>{1});
}

TEST_F(DataFileTest, TheMarkerFileOfTheTestsReadsWithItsAfterMarkerPattern) {
  DataFile data(std::string(HEADLAB_SOURCE_ROOT) + "/tests/train/data/marker.jsonl", 10, 10, 10);
  const Batch b = data.eval_batch(data.size(), 0);
  ASSERT_EQ(b.attend.size(), 1u);
  for (int64_t row = 0; row < b.batch; ++row) {
    const auto keys = b.attend[0].at(row, 9);
    ASSERT_EQ(keys.size(), 1u);
    EXPECT_EQ(b.tokens[static_cast<std::size_t>(row * 10 + keys[0] - 1)], 9) << "the key follows the marker";
    EXPECT_EQ(b.targets[static_cast<std::size_t>(row * 10 + 9)], b.tokens[static_cast<std::size_t>(row * 10 + keys[0])]);
  }
}

}  // namespace
}  // namespace headlab::train
