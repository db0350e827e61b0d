#include "core/safetensors.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <string_view>

namespace {

using namespace headlab::core;
using Bytes = std::vector<uint8_t>;
namespace fs = std::filesystem;

// ------------------------------------------------------------------ helpers

// A safetensors file from a header text, used as is (no padding), and a data buffer.
Bytes file_of(const std::string& header, const Bytes& data = {}) {
  Bytes bytes;
  for (int byte = 0; byte < 8; ++byte) bytes.push_back(static_cast<uint8_t>(header.size() >> (8 * byte)));
  bytes.insert(bytes.end(), header.begin(), header.end());
  bytes.insert(bytes.end(), data.begin(), data.end());
  return bytes;
}

Bytes zeros(std::size_t n) { return Bytes(n, 0); }

std::string header_of(const Bytes& file) {
  uint64_t n = 0;
  for (int byte = 7; byte >= 0; --byte) n = (n << 8) | file.at(static_cast<std::size_t>(byte));
  return std::string(file.begin() + 8, file.begin() + 8 + static_cast<std::ptrdiff_t>(n));
}

std::string rejection(const Bytes& bytes) {
  try {
    parse_safetensors(bytes);
  } catch (const SafetensorsError& e) {
    return e.what();
  }
  ADD_FAILURE() << "the file was accepted";
  return "";
}

// The file is rejected with a SafetensorsError whose message mentions every
// one of `mentions`.
void expect_rejected(const Bytes& bytes, std::initializer_list<std::string_view> mentions) {
  const std::string message = rejection(bytes);
  for (std::string_view mention : mentions)
    EXPECT_NE(message.find(mention), std::string::npos) << "message \"" << message << "\" lacks \"" << mention << "\"";
}

// One well-formed F32 [2] entry named w, for files that break something else.
const std::string kGoodW = R"("w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";

bool same_bytes(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  const Tensor ca = a.contiguous(), cb = b.contiguous();
  return std::memcmp(ca.raw_data(), cb.raw_data(), static_cast<std::size_t>(a.numel()) * dtype_size(a.dtype())) == 0;
}

Bytes read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), {});
}

void write_bytes(const fs::path& path, const Bytes& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

std::vector<std::string> entries_of(const fs::path& folder) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(folder)) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// A fresh folder per test, removed afterwards (ctest runs tests in parallel).
struct ScratchDir {
  fs::path path;
  ScratchDir() {
    const auto* test = testing::UnitTest::GetInstance()->current_test_info();
    path = fs::temp_directory_path() /
           ("headlab_safetensors_" + std::string(test->name()) + "_" + std::to_string(::getpid()));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~ScratchDir() {
    std::error_code ignored;
    fs::permissions(path, fs::perms::owner_all, fs::perm_options::add, ignored);
    fs::remove_all(path, ignored);
  }
};

NamedTensors two_tensors() {
  return {{"b", Tensor::arange(6).reshape({2, 3})}, {"a", Tensor::from_vector({0.5, -1.5, 2.25, 8}, {4})}};
}

// --------------------------------------------------------------- round trips

TEST(SafetensorsRoundTrip, IntegersAreStoredAsI64AndComeBackAsIntegers) {
  const NamedIntArrays integers = {{"tokens", {{2, 3}, {0, 7, -1, 9'007'199'254'740'993, 4, 5}}},
                                   {"empty", {{0}, {}}}};
  const Bytes bytes = to_safetensors_bytes(two_tensors(), {}, integers);
  const std::string header = header_of(bytes);
  EXPECT_NE(header.find(R"("tokens":{"dtype":"I64","shape":[2,3])"), std::string::npos) << header;
  const SafetensorsFile file = parse_safetensors(bytes);
  ASSERT_EQ(file.tensors.size(), 2u);
  ASSERT_EQ(file.integers.size(), 2u);
  EXPECT_EQ(file.integers[0].first, "tokens");
  EXPECT_EQ(file.integers[0].second.shape, (Shape{2, 3}));
  // 2^53 + 1 has no exact double: it survives only as an integer.
  EXPECT_EQ(file.integers[0].second.values, integers[0].second.values);
  EXPECT_EQ(file.integers[1].second.shape, (Shape{0}));
  EXPECT_TRUE(file.integers[1].second.values.empty());
  EXPECT_TRUE(same_bytes(file.get("a"), two_tensors()[1].second));
  // Written back, the file is the same bytes.
  EXPECT_EQ(to_safetensors_bytes(file.tensors, file.metadata, file.integers), bytes);
}

TEST(SafetensorsRoundTrip, F32TensorsKeepNamesShapesValuesAndOrder) {
  const NamedTensors tensors = two_tensors();
  const SafetensorsFile file = parse_safetensors(to_safetensors_bytes(tensors, {}));
  ASSERT_EQ(file.tensors.size(), 2u);
  EXPECT_EQ(file.tensors[0].first, "b");  // the given order, not alphabetical
  EXPECT_EQ(file.tensors[1].first, "a");
  EXPECT_EQ(file.get("b").shape(), (Shape{2, 3}));
  EXPECT_EQ(file.get("b").dtype(), DType::f32);
  EXPECT_EQ(file.get("b").to_vector(), (std::vector<double>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(file.get("a").to_vector(), (std::vector<double>{0.5, -1.5, 2.25, 8}));
}

TEST(SafetensorsRoundTrip, F64ValuesAreBitExact) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const Tensor x = Tensor::from_vector({0.1, -1e300, 5e-324, -0.0, nan, 1.0 / 3.0}, {3, 2}, DType::f64);
  const SafetensorsFile file = parse_safetensors(to_safetensors_bytes({{"x", x}}, {}));
  EXPECT_EQ(file.get("x").dtype(), DType::f64);
  EXPECT_TRUE(same_bytes(file.get("x"), x));
}

TEST(SafetensorsRoundTrip, ScalarHasAnEmptyShape) {
  const Bytes bytes = to_safetensors_bytes({{"s", Tensor::scalar(3.5, DType::f64)}}, {});
  EXPECT_NE(header_of(bytes).find(R"("shape":[])"), std::string::npos);
  const SafetensorsFile file = parse_safetensors(bytes);
  EXPECT_EQ(file.get("s").shape(), Shape{});
  EXPECT_EQ(file.get("s").item(), 3.5);
}

TEST(SafetensorsRoundTrip, ZeroElementTensorsKeepTheirShapeAndPlace) {
  const NamedTensors tensors = {{"z", Tensor::zeros({2})}, {"empty", Tensor::empty({0, 3})}, {"a", Tensor::ones({1})}};
  const SafetensorsFile file = parse_safetensors(to_safetensors_bytes(tensors, {}));
  ASSERT_EQ(file.tensors.size(), 3u);
  EXPECT_EQ(file.tensors[1].first, "empty");
  EXPECT_EQ(file.tensors[1].second.shape(), (Shape{0, 3}));
  EXPECT_EQ(file.get("a").item(), 1.0);
}

TEST(SafetensorsRoundTrip, MetadataStringsSurviveEscapingAndUnicode) {
  const Metadata metadata = {{"config", R"({"d_model": 64, "path": "a\b"})"}, {"name", "na\u00efve \u2713\n"}};
  const SafetensorsFile file = parse_safetensors(to_safetensors_bytes(two_tensors(), metadata));
  EXPECT_EQ(file.metadata, metadata);
}

TEST(SafetensorsRoundTrip, EmptyMetadataWritesNoMetadataEntry) {
  const Bytes bytes = to_safetensors_bytes(two_tensors(), {});
  EXPECT_EQ(header_of(bytes).find("__metadata__"), std::string::npos);
  EXPECT_TRUE(parse_safetensors(bytes).metadata.empty());
}

TEST(SafetensorsRoundTrip, NoTensorsAtAllIsAValidFile) {
  const Bytes bytes = to_safetensors_bytes({}, {});
  EXPECT_EQ(header_of(bytes), "{}      ");
  EXPECT_TRUE(parse_safetensors(bytes).tensors.empty());
}

// -------------------------------------------------------------- byte layout

TEST(SafetensorsLayout, OneTensorMatchesTheHandBuiltBytes) {
  const std::string json = R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";  // 54 bytes
  Bytes expected = {56, 0, 0, 0, 0, 0, 0, 0};                                            // padded to 56
  expected.insert(expected.end(), json.begin(), json.end());
  expected.insert(expected.end(), {' ', ' '});
  expected.insert(expected.end(), {0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0xc0});  // 1.0f, -2.0f
  EXPECT_EQ(to_safetensors_bytes({{"w", Tensor::from_vector({1, -2}, {2})}}, {}), expected);
}

TEST(SafetensorsLayout, MetadataComesFirstAndTensorsFollowInTheGivenOrder) {
  const Bytes bytes =
      to_safetensors_bytes({{"y", Tensor::zeros({1}, DType::f64)}, {"x", Tensor::zeros({1, 1})}}, {{"step", "3"}});
  const std::string header = header_of(bytes);
  EXPECT_EQ(header.substr(0, header.rfind('}') + 1),
            R"({"__metadata__":{"step":"3"},"y":{"dtype":"F64","shape":[1],"data_offsets":[0,8]},)"
            R"("x":{"dtype":"F32","shape":[1,1],"data_offsets":[8,12]}})");
}

TEST(SafetensorsLayout, HeaderIsPaddedWithSpacesSoTheDataIsEightByteAligned) {
  for (std::string name = "a"; name.size() <= 9; name += 'a') {
    const std::string header = header_of(to_safetensors_bytes({{name, Tensor::zeros({1})}}, {}));
    EXPECT_EQ(header.size() % 8, 0u) << name;
    const std::size_t end_of_json = header.rfind('}') + 1;
    EXPECT_LT(header.size() - end_of_json, 8u);
    EXPECT_EQ(header.find_first_not_of(' ', end_of_json), std::string::npos) << name;
  }
}

TEST(SafetensorsLayout, NonContiguousTensorsAreWrittenInRowMajorOrder) {
  const Tensor m = Tensor::from_vector({1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor transposed = m.transpose(0, 1);  // [3, 2]
  const Tensor strided = m.slice(1, 0, 3, 2);   // [2, 2]: columns 0 and 2
  ASSERT_FALSE(transposed.is_contiguous());
  ASSERT_FALSE(strided.is_contiguous());
  const SafetensorsFile file = parse_safetensors(to_safetensors_bytes({{"t", transposed}, {"s", strided}}, {}));
  EXPECT_EQ(file.get("t").shape(), (Shape{3, 2}));
  EXPECT_EQ(file.get("t").to_vector(), (std::vector<double>{1, 4, 2, 5, 3, 6}));
  EXPECT_EQ(file.get("s").shape(), (Shape{2, 2}));
  EXPECT_EQ(file.get("s").to_vector(), (std::vector<double>{1, 3, 4, 6}));
}

// ------------------------------------------------------ writer rejections

TEST(SafetensorsWrite, RejectsIntegersWhoseCountDoesNotMatchTheirShapeAndNamesTakenTwice) {
  try {
    to_safetensors_bytes({}, {}, {{"tokens", {{2, 2}, {1, 2, 3}}}});
    ADD_FAILURE() << "three values for shape [2, 2] were written";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'tokens'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("3 values"), std::string::npos) << e.what();
  }
  EXPECT_THROW(to_safetensors_bytes(two_tensors(), {}, {{"a", {{1}, {1}}}}), std::invalid_argument);
}

TEST(SafetensorsWrite, RejectsDuplicateNames) {
  EXPECT_THROW(to_safetensors_bytes({{"w", Tensor::zeros({1})}, {"w", Tensor::zeros({2})}}, {}), std::invalid_argument);
}

TEST(SafetensorsWrite, RejectsUndefinedTensorsAndTheReservedName) {
  EXPECT_THROW(to_safetensors_bytes({{"w", Tensor()}}, {}), std::invalid_argument);
  EXPECT_THROW(to_safetensors_bytes({{"__metadata__", Tensor::zeros({1})}}, {}), std::invalid_argument);
}

TEST(SafetensorsWrite, RejectsNamesAndMetadataThatAreNotUtf8) {
  EXPECT_THROW(to_safetensors_bytes({{"w\xff", Tensor::zeros({1})}}, {}), std::invalid_argument);
  EXPECT_THROW(to_safetensors_bytes({}, {{"k", "\xc3"}}), std::invalid_argument);
}

// ------------------------------------------------------ reader rejections

TEST(SafetensorsRead, RejectsFilesShorterThanTheHeaderLength) {
  expect_rejected({}, {"0 bytes", "8-byte header length"});
  expect_rejected({1, 2, 3}, {"3 bytes", "8-byte header length"});
}

TEST(SafetensorsRead, RejectsAHeaderLengthPastTheEndOfTheFile) {
  Bytes bytes = file_of("{}");
  bytes[0] = 100;
  expect_rejected(bytes, {"header length 100", "2 bytes"});
}

TEST(SafetensorsRead, RejectsAnAbsurdHeaderLengthWithoutAllocatingIt) {
  Bytes bytes = file_of("{}");
  bytes[7] = 0x7f;  // about 9e18 bytes
  expect_rejected(bytes, {"absurd"});
  const uint64_t just_over = 100'000'001;
  for (int byte = 0; byte < 8; ++byte)
    bytes[static_cast<std::size_t>(byte)] = static_cast<uint8_t>(just_over >> (8 * byte));
  expect_rejected(bytes, {"100000001", "absurd"});
}

TEST(SafetensorsRead, RejectsInvalidJson) {
  expect_rejected(file_of(R"({"w": )"), {"not valid JSON"});
  expect_rejected(file_of(""), {"not valid JSON"});
  expect_rejected(file_of("{\"w\xff\": 1}"), {"not valid JSON"});  // not UTF-8
  expect_rejected(file_of(R"({"w": 1e999})"), {"not valid JSON"});
  expect_rejected(file_of("{} x"), {"not valid JSON"});
}

TEST(SafetensorsRead, RejectsAHeaderThatIsNotAnObject) {
  expect_rejected(file_of("[1, 2]"), {"not a JSON object", "[1,2]"});
}

TEST(SafetensorsRead, RejectsAnEntryThatIsNotAnObject) {
  expect_rejected(file_of(R"({"w": [0, 8]})"), {"'w'", "not a JSON object"});
}

TEST(SafetensorsRead, RejectsEntriesWithMissingFields) {
  expect_rejected(file_of(R"({"w":{"shape":[2],"data_offsets":[0,8]}})", zeros(8)), {"'w'", "no \"dtype\""});
  expect_rejected(file_of(R"({"w":{"dtype":"F32","data_offsets":[0,8]}})", zeros(8)), {"'w'", "no \"shape\""});
  expect_rejected(file_of(R"({"w":{"dtype":"F32","shape":[2]}})", zeros(8)), {"'w'", "no \"data_offsets\""});
}

TEST(SafetensorsRead, RejectsIllTypedFields) {
  expect_rejected(file_of(R"({"w":{"dtype":32,"shape":[2],"data_offsets":[0,8]}})", zeros(8)),
                  {"'w'", "\"dtype\" is not a string"});
  expect_rejected(file_of(R"({"w":{"dtype":"F32","shape":2,"data_offsets":[0,8]}})", zeros(8)),
                  {"'w'", "\"shape\" is not an array"});
  for (const char* offsets : {"[0]", "[0,8,8]", "\"0,8\"", "[0,-8]", "[0.0,8]", "[0,\"8\"]"})
    expect_rejected(
        file_of(std::string(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":)") + offsets + "}}", zeros(8)),
        {"'w'", "\"data_offsets\" is not [begin, end]"});
}

TEST(SafetensorsRead, RejectsShapeEntriesThatAreNotNonNegativeIntegers) {
  for (const char* shape : {"[-2]", "[2.5]", "[2.0]", "[\"2\"]", "[[2]]", "[null]"})
    expect_rejected(
        file_of(std::string(R"({"w":{"dtype":"F32","shape":)") + shape + R"(,"data_offsets":[0,8]}})", zeros(8)),
        {"'w'", "not a non-negative integer"});
}

TEST(SafetensorsRead, RejectsShapesWhoseElementCountOverflows) {
  expect_rejected(file_of(R"({"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", zeros(8)),
                  {"'w'", "overflows"});
  expect_rejected(file_of(R"({"w":{"dtype":"F32","shape":[18446744073709551615],"data_offsets":[0,8]}})", zeros(8)),
                  {"'w'", "overflows"});
  // No elements, but the strides of such a tensor would still overflow.
  expect_rejected(file_of(R"({"w":{"dtype":"F64","shape":[0,4611686018427387904,4],"data_offsets":[0,0]}})"),
                  {"'w'", "overflows"});
}

TEST(SafetensorsRead, RejectsDtypesOtherThanF32F64AndI64NamingThem) {
  expect_rejected(file_of(R"({"w":{"dtype":"BF16","shape":[2],"data_offsets":[0,4]}})", zeros(4)),
                  {"'w'", "BF16", "F32, F64 and I64"});
  expect_rejected(file_of(R"({"w":{"dtype":"I32","shape":[1],"data_offsets":[0,4]}})", zeros(4)),
                  {"'w'", "I32", "F32, F64 and I64"});
  expect_rejected(file_of(R"({"w":{"dtype":"f32","shape":[2],"data_offsets":[0,8]}})", zeros(8)), {"'w'", "f32"});
}

TEST(SafetensorsRead, RejectsOffsetsWhoseSizeDoesNotMatchTheShape) {
  expect_rejected(file_of(R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", zeros(8)),
                  {"'w'", "spanning 8 bytes", "need 12 bytes"});
  expect_rejected(file_of(R"({"w":{"dtype":"F64","shape":[2],"data_offsets":[0,8]}})", zeros(8)),
                  {"'w'", "need 16 bytes"});
}

TEST(SafetensorsRead, RejectsOffsetsOutsideTheBuffer) {
  expect_rejected(file_of(R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", zeros(8)),
                  {"'w'", "[0, 16]", "beyond the data buffer of 8 bytes"});
  expect_rejected(
      file_of(R"({"w":{"dtype":"F32","shape":[0],"data_offsets":[18446744073709551615,18446744073709551615]}})"),
      {"'w'", "beyond the data buffer"});
  expect_rejected(file_of(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", zeros(8)),
                  {"'w'", "end before they begin"});
}

TEST(SafetensorsRead, RejectsOverlappingTensors) {
  expect_rejected(file_of(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                          R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                          zeros(12)),
                  {"'b' overlaps tensor 'a'"});
  expect_rejected(file_of(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                          R"("b":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
                          zeros(8)),
                  {"overlaps"});
}

TEST(SafetensorsRead, RejectsBytesThatBelongToNoTensor) {
  expect_rejected(file_of(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                          R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
                          zeros(12)),
                  {"bytes [4, 8)", "belong to no tensor", "'b'"});
  expect_rejected(file_of(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", zeros(12)),
                  {"bytes [0, 4)", "belong to no tensor"});
  expect_rejected(file_of("{" + kGoodW + "}", zeros(12)), {"bytes [8, 12)", "belong to no tensor"});
}

TEST(SafetensorsRead, RejectsDuplicateNamesAndKeys) {
  expect_rejected(file_of("{" + kGoodW + "," + kGoodW + "}", zeros(8)), {"'w' twice"});
  expect_rejected(file_of(R"({"w":{"dtype":"F32","dtype":"F64","shape":[2],"data_offsets":[0,8]}})", zeros(8)),
                  {"'dtype' appears twice", "'w'"});
  expect_rejected(file_of(R"({"__metadata__":{"k":"1","k":"2"}})"), {"'k' appears twice in __metadata__"});
}

TEST(SafetensorsRead, RejectsMetadataThatIsNotAnObjectOfStrings) {
  expect_rejected(file_of(R"({"__metadata__":{"step":3},)" + kGoodW + "}", zeros(8)), {"'step'", "not a string"});
  expect_rejected(file_of(R"({"__metadata__":["a"],)" + kGoodW + "}", zeros(8)), {"__metadata__", "not an object"});
}

TEST(SafetensorsRead, RejectsAbsurdlyDeepNesting) {
  expect_rejected(file_of(R"({"w":{"dtype":"F32","shape":[[[[[[[[[[2]]]]]]]]]]}})"), {"nests deeper"});
}

TEST(SafetensorsRead, AcceptsNullMetadataAndIgnoresUnknownEntryFields) {
  // Both occur in files that Python's safetensors reads.
  const SafetensorsFile file = parse_safetensors(
      file_of(R"({"__metadata__":null,"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"extra":1}}  )", zeros(8)));
  EXPECT_TRUE(file.metadata.empty());
  EXPECT_EQ(file.get("w").to_vector(), (std::vector<double>{0, 0}));
}

TEST(SafetensorsRead, TensorsComeInTheOrderOfTheirData) {
  const SafetensorsFile file = parse_safetensors(file_of(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]},)"
                                                         R"("b":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
                                                         zeros(8)));
  ASSERT_EQ(file.tensors.size(), 2u);
  EXPECT_EQ(file.tensors[0].first, "b");
  EXPECT_EQ(file.tensors[1].first, "a");
}

// file.get(name) throws a SafetensorsError whose message mentions `mention`.
void expect_get_fails(const SafetensorsFile& file, const std::string& name, std::string_view mention) {
  try {
    file.get(name);
    ADD_FAILURE() << "get('" << name << "') returned a tensor";
  } catch (const SafetensorsError& e) {
    EXPECT_NE(std::string(e.what()).find(mention), std::string::npos) << e.what();
  }
}

TEST(SafetensorsFile, GetNamesAMissingTensorAndContainsAnswers) {
  const SafetensorsFile file = parse_safetensors(to_safetensors_bytes(two_tensors(), {}));
  EXPECT_TRUE(file.contains("a"));
  EXPECT_FALSE(file.contains("missing"));
  expect_get_fails(file, "missing", "'missing'");
}

TEST(SafetensorsFile, GetOfAnIntegerEntrySaysItHoldsIntegers) {
  const SafetensorsFile file = parse_safetensors(to_safetensors_bytes({}, {}, {{"ids", {{1}, {3}}}}));
  EXPECT_FALSE(file.contains("ids"));
  expect_get_fails(file, "ids", "I64 integers");
}

// -------------------------------------------------------------------- files

TEST(SafetensorsFiles, SaveThenLoadRoundTripsAndLeavesNoTemporaryFile) {
  ScratchDir dir;
  const std::string path = (dir.path / "model.safetensors").string();
  save_safetensors(path, two_tensors(), {{"step", "7"}});
  const SafetensorsFile file = load_safetensors(path);
  EXPECT_TRUE(same_bytes(file.get("b"), two_tensors()[0].second));
  EXPECT_EQ(file.metadata.at("step"), "7");
  EXPECT_EQ(entries_of(dir.path), std::vector<std::string>{"model.safetensors"});
}

TEST(SafetensorsFiles, SaveReplacesAnExistingFile) {
  ScratchDir dir;
  const std::string path = (dir.path / "model.safetensors").string();
  save_safetensors(path, two_tensors(), {});
  save_safetensors(path, {{"only", Tensor::ones({3})}}, {});
  EXPECT_EQ(load_safetensors(path).tensors.size(), 1u);
  EXPECT_EQ(entries_of(dir.path), std::vector<std::string>{"model.safetensors"});
}

TEST(SafetensorsFiles, LoadingAMissingFileNamesThePath) {
  ScratchDir dir;
  const std::string path = (dir.path / "absent.safetensors").string();
  try {
    load_safetensors(path);
    ADD_FAILURE() << "load did not throw";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(std::strerror(ENOENT)), std::string::npos) << e.what();
  }
}

TEST(SafetensorsFiles, LoadingADirectoryIsRejected) {
  ScratchDir dir;
  EXPECT_THROW(load_safetensors(dir.path.string()), std::runtime_error);
}

TEST(SafetensorsFiles, LoadingACorruptFileNamesThePathAndTheProblem) {
  ScratchDir dir;
  const std::string path = (dir.path / "bad.safetensors").string();
  write_bytes(path, {1, 2, 3});
  try {
    load_safetensors(path);
    ADD_FAILURE() << "load did not throw";
  } catch (const SafetensorsError& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("8-byte header length"), std::string::npos) << e.what();
  }
}

TEST(SafetensorsFiles, SavingOntoADirectoryThrowsAndLeavesEverythingAsItWas) {
  ScratchDir dir;
  const fs::path target = dir.path / "taken";
  fs::create_directory(target);
  try {
    save_safetensors(target.string(), two_tensors(), {});
    ADD_FAILURE() << "save did not throw";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(target.string()), std::string::npos) << e.what();
  }
  EXPECT_TRUE(fs::is_directory(target));
  EXPECT_EQ(entries_of(dir.path), std::vector<std::string>{"taken"});
}

TEST(SafetensorsFiles, SavingIntoAMissingFolderNamesThePath) {
  ScratchDir dir;
  const std::string path = (dir.path / "no" / "such" / "model.safetensors").string();
  try {
    save_safetensors(path, two_tensors(), {});
    ADD_FAILURE() << "save did not throw";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(std::strerror(ENOENT)), std::string::npos) << e.what();
  }
}

TEST(SafetensorsFiles, SavingIntoAnUnwritableFolderKeepsTheOldFile) {
  ScratchDir dir;
  const fs::path path = dir.path / "model.safetensors";
  save_safetensors(path.string(), two_tensors(), {});
  const Bytes before = read_bytes(path);
  fs::permissions(dir.path, fs::perms::owner_read | fs::perms::owner_exec | fs::perms::group_read |
                                fs::perms::group_exec | fs::perms::others_read | fs::perms::others_exec);
  // Root ignores permissions, so the save runs in a child process that drops
  // to an unprivileged user first.
  EXPECT_EXIT(
      {
        if (::geteuid() == 0 && ::setuid(65534) != 0) std::_Exit(3);
        try {
          save_safetensors(path.string(), {{"new", Tensor::ones({2})}}, {});
        } catch (const std::runtime_error& e) {
          std::_Exit(std::string(e.what()).find(path.string()) != std::string::npos ? 0 : 2);
        }
        std::_Exit(1);
      },
      testing::ExitedWithCode(0), "");
  EXPECT_EQ(read_bytes(path), before);
  EXPECT_EQ(entries_of(dir.path), std::vector<std::string>{"model.safetensors"});
}

TEST(SafetensorsFiles, AWriteThatFailsPartWayKeepsTheOldFileAndRemovesTheTemporary) {
  ScratchDir dir;
  const fs::path path = dir.path / "model.safetensors";
  save_safetensors(path.string(), two_tensors(), {});
  const Bytes before = read_bytes(path);
  // A file-size limit makes the write fail part-way, as a full disk would.
  rlimit saved{};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &saved), 0);
  rlimit small = saved;
  small.rlim_cur = 4096;
  const auto saved_handler = std::signal(SIGXFSZ, SIG_IGN);
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  std::string message;
  try {
    save_safetensors(path.string(), {{"big", Tensor::zeros({1 << 16})}}, {});
  } catch (const std::runtime_error& e) {
    message = e.what();
  }
  ::setrlimit(RLIMIT_FSIZE, &saved);
  std::signal(SIGXFSZ, saved_handler);
  EXPECT_NE(message.find(path.string()), std::string::npos) << message;
  EXPECT_NE(message.find(std::strerror(EFBIG)), std::string::npos) << message;
  EXPECT_EQ(read_bytes(path), before);
  EXPECT_EQ(entries_of(dir.path), std::vector<std::string>{"model.safetensors"});
}

}  // namespace

namespace {

// A dump streamed in slices, out of order, is the file save_safetensors writes
// at once; abandoned midway it leaves neither the file nor a temporary one.
TEST(SafetensorsStream, SlicesInAnyOrderGiveTheWholeFileAndAnAbandonedOneLeavesNothing) {
  const fs::path dir = fs::temp_directory_path() / ("headlab-stream-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const Tensor a = Tensor::from_vector({1, 2, 3, 4, 5, 6, 7, 8, 9}, {3, 3}, DType::f32);
  const IntArray ids{{3, 2}, {0, 1, 2, 3, 4, 5}};
  save_safetensors((dir / "whole").string(), {{"a", a}}, {{"k", "v"}}, {{"ids", ids}});
  {
    SafetensorsStream s((dir / "streamed").string(), {{"a", {3, 3}}, {"ids", {3, 2}, DType::f32, true}}, {{"k", "v"}});
    s.write_rows("a", 2, a.slice(0, 2, 3));
    s.write_rows("ids", 0, std::vector<int64_t>{0, 1, 2, 3, 4, 5});
    s.write_rows("a", 0, a.slice(0, 0, 2));
    EXPECT_THROW(s.write_rows("a", 2, a.slice(0, 0, 2)), std::invalid_argument);  // beyond row 3
    EXPECT_THROW(s.write_rows("a", 0, a.to(DType::f64)), std::invalid_argument);
    EXPECT_THROW(s.write_rows("b", 0, a), std::invalid_argument);
    s.finish();
  }
  std::ifstream w(dir / "whole", std::ios::binary), t(dir / "streamed", std::ios::binary);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(w), {}), std::string(std::istreambuf_iterator<char>(t), {}));
  {
    SafetensorsStream s((dir / "abandoned").string(), {{"a", {3, 3}}}, {});
    s.write_rows("a", 0, a);
  }
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 2);
  fs::remove_all(dir);
}

}  // namespace
