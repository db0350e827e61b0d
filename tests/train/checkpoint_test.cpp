// Checkpoints: round trip, documented names, byte layout, rejection of bad files.
#include "train/checkpoint.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/ops.h"
#include "train/errors.h"
#include "train/session.h"

namespace headlab::train {
namespace {

namespace fs = std::filesystem;

struct TempDir {
  fs::path path;
  TempDir() : path(fs::temp_directory_path() / ("headlab-ck-" + std::to_string(::getpid()) + "-" +
                                                 ::testing::UnitTest::GetInstance()->current_test_info()->name())) {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

TrainConfig tiny_config() {
  TrainConfig c;
  c.d_model = 16;
  c.batch = 8;
  c.eval_batch = 16;
  c.steps = 3;
  return c;
}

TEST(Checkpoint, RoundTripRestoresWeightsOptimizerAndStep) {
  TempDir dir;
  Session a(tiny_config());
  for (int i = 0; i < 3; ++i) a.step();
  const std::string path = (dir.path / "ck.safetensors").string();
  a.save(path);
  const Checkpoint ck = read_checkpoint(path);
  EXPECT_EQ(ck.info.step, 3);
  EXPECT_EQ(ck.info.task, "first-prev-pair");
  EXPECT_EQ(to_json(ck.info.config), to_json(a.config()));
  Session b(ck);
  const auto pa = a.model().named_parameters(), pb = b.model().named_parameters();
  ASSERT_EQ(pa.size(), pb.size());
  for (std::size_t i = 0; i < pa.size(); ++i) {
    EXPECT_EQ(pa[i].first, pb[i].first);
    EXPECT_EQ(core::max_abs_diff(pa[i].second.value(), pb[i].second.value()), 0.0) << pa[i].first;
  }
  EXPECT_EQ(b.optimizer().step_count(), a.optimizer().step_count());
}

TEST(Checkpoint, HoldsTheDocumentedTensorNamesAndShapes) {
  TempDir dir;
  Session s(tiny_config());
  const std::string path = (dir.path / "ck.safetensors").string();
  s.save(path);
  const core::SafetensorsFile f = core::load_safetensors(path);
  // The 1-layer demo model at d_model 16, vocabulary 8, 6 positions, 64 classes.
  const std::vector<std::pair<std::string, core::Shape>> expected = {
      {"tok_emb.weight", {8, 16}},  {"pos_emb.weight", {6, 16}},
      {"blocks.0.ln1.weight", {16}}, {"blocks.0.ln1.bias", {16}},
      {"blocks.0.attn.q.weight", {16, 16}}, {"blocks.0.attn.q.bias", {16}},
      {"blocks.0.attn.k.weight", {16, 16}}, {"blocks.0.attn.k.bias", {16}},
      {"blocks.0.attn.v.weight", {16, 16}}, {"blocks.0.attn.v.bias", {16}},
      {"blocks.0.attn.o.weight", {16, 16}}, {"blocks.0.attn.o.bias", {16}},
      {"blocks.0.ln2.weight", {16}}, {"blocks.0.ln2.bias", {16}},
      {"blocks.0.mlp.fc1.weight", {64, 16}}, {"blocks.0.mlp.fc1.bias", {64}},
      {"blocks.0.mlp.fc2.weight", {16, 64}}, {"blocks.0.mlp.fc2.bias", {16}},
      {"ln_f.weight", {16}}, {"ln_f.bias", {16}},
      {"head.weight", {64, 16}}, {"head.bias", {64}},
  };
  for (const auto& [name, shape] : expected) {
    ASSERT_TRUE(f.contains(name)) << name;
    EXPECT_EQ(f.get(name).shape(), shape) << name;
    EXPECT_EQ(f.get(name).dtype(), core::DType::f32) << name;
  }
  EXPECT_EQ(f.metadata.at("format"), "headlab-checkpoint");
  EXPECT_EQ(nlohmann::json::parse(f.metadata.at("model")).at("heads"), 2);
}

TEST(Checkpoint, FileIsValidSafetensorsBytes) {
  TempDir dir;
  Session s(tiny_config());
  const std::string path = (dir.path / "ck.safetensors").string();
  s.save(path);
  std::ifstream in(path, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_GT(bytes.size(), 8u);
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);  // little-endian header length
  ASSERT_LE(8 + n, bytes.size());
  const auto header = nlohmann::json::parse(std::string(bytes.data() + 8, n));
  const auto& q = header.at("blocks.0.attn.q.weight");
  EXPECT_EQ(q.at("dtype"), "F32");
  EXPECT_EQ(q.at("shape"), nlohmann::json({16, 16}));
  const auto offsets = q.at("data_offsets").get<std::vector<uint64_t>>();
  EXPECT_EQ(offsets[1] - offsets[0], 16u * 16u * 4u);
  // The bytes at those offsets are the parameter's values.
  float first = 0;
  std::memcpy(&first, bytes.data() + 8 + n + offsets[0], 4);
  EXPECT_EQ(first, static_cast<float>(s.model().parameter("blocks.0.attn.q.weight").value().at({0, 0})));
}

TEST(Checkpoint, CorruptFilesAreRejectedWithAClearMessage) {
  TempDir dir;
  Session s(tiny_config());
  const std::string good = (dir.path / "good.safetensors").string();
  s.save(good);
  std::ifstream in(good, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto write = [&](const std::string& name, const std::string& content) {
    const std::string p = (dir.path / name).string();
    std::ofstream(p, std::ios::binary) << content;
    return p;
  };
  EXPECT_THROW(read_checkpoint((dir.path / "missing.safetensors").string()), UsageError);
  EXPECT_THROW(read_checkpoint(write("truncated", bytes.substr(0, bytes.size() / 2))), UsageError);
  EXPECT_THROW(read_checkpoint(write("short", "abc")), UsageError);
  std::string bad_len = bytes;
  bad_len[7] = '\x7f';  // a header length beyond the file
  EXPECT_THROW(read_checkpoint(write("badlen", bad_len)), UsageError);
  // A plain safetensors file without headlab's metadata.
  const std::string plain = (dir.path / "plain.safetensors").string();
  core::save_safetensors(plain, {{"x", core::Tensor::zeros({2})}}, {});
  try {
    read_checkpoint(plain);
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("not a headlab checkpoint"), std::string::npos) << e.what();
  }
}

TEST(Checkpoint, WeightsOfAnotherShapeAreRejected) {
  TempDir dir;
  Session small(tiny_config());
  const std::string path = (dir.path / "ck.safetensors").string();
  small.save(path);
  TrainConfig wide = tiny_config();
  wide.d_model = 32;
  Session other(wide);
  try {
    load_weights(other.model(), read_checkpoint(path).file, "--init ck");
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("shape"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace headlab::train
