// Checkpoints: round trip, documented names, byte layout, rejection of bad files.
#include "train/checkpoint.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <span>

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
  c.model.d_model = 16;
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

// Checkpoints written before the MLP's activation was a choice have no
// "activation" in their model: they are GELU models. A wrong type is refused.
TEST(Checkpoint, ModelWithoutActivationIsGelu) {
  layers::ModelSpec relu;
  relu.activation = "relu";
  nlohmann::json j = model_json(relu);
  EXPECT_EQ(j["activation"], "relu");
  EXPECT_EQ(model_from_json(j).activation, "relu");
  j.erase("activation");
  EXPECT_EQ(model_from_json(j).activation, "gelu");
  j["activation"] = 1;
  EXPECT_THROW(model_from_json(j), std::invalid_argument);
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
  wide.model.d_model = 32;
  Session other(wide);
  try {
    load_weights(other.model(), read_checkpoint(path).file, "--init ck");
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("shape"), std::string::npos) << e.what();
  }
}

TEST(Checkpoint, ReadsTheSameFromItsBytes) {
  TempDir dir;
  Session s(tiny_config());
  s.step();
  const std::string path = (dir.path / "ck.safetensors").string();
  s.save(path);
  std::ifstream in(path, std::ios::binary);
  const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const Checkpoint a = read_checkpoint(path), b = read_checkpoint(bytes, path);
  EXPECT_EQ(b.file.metadata, a.file.metadata);
  EXPECT_EQ(b.file.tensors.size(), a.file.tensors.size());
  EXPECT_EQ(model_json(b.model), model_json(a.model));
  EXPECT_EQ(b.info.step, 1);
  EXPECT_THROW(read_checkpoint(std::span(bytes).first(bytes.size() / 2), path), UsageError);
}

// Saves a small checkpoint (2 attention-only layers, 1 step), lets `edit`
// change its tensors and metadata, then `load`s it: returns the UsageError's
// message, or "" if it loads.
std::string rejection_of_edited(
    const std::function<void(core::SafetensorsFile&)>& edit,
    const std::function<void(const std::string&)>& load = [](const std::string& path) { read_checkpoint(path); }) {
  TempDir dir;
  TrainConfig c = tiny_config();
  c.model.layers = 2;
  c.model.attn_only = true;
  Session s(c);
  s.step();
  const std::string path = (dir.path / "ck.safetensors").string();
  s.save(path);
  core::SafetensorsFile f = core::load_safetensors(path);
  edit(f);
  core::save_safetensors(path, f.tensors, f.metadata);
  try {
    load(path);
    return "";
  } catch (const UsageError& e) {
    return e.what();
  }
}

// Only the last layer's tensors used to be checked, so a 4 KB file claiming 30
// million layers made eval and analyze build them all (tens of GB) before
// load_weights could notice the missing ones.
TEST(Checkpoint, ALayerCountTheTensorsDoNotHoldIsRejectedBeforeBuilding) {
  const std::string message = rejection_of_edited([](core::SafetensorsFile& f) {
    constexpr int64_t kLayers = 30'000'000;
    for (const char* key : {"model", "config"}) {
      nlohmann::json j = nlohmann::json::parse(f.metadata.at(key));
      j["layers"] = kLayers;
      f.metadata[key] = j.dump();
    }
    for (auto& [name, t] : f.tensors)
      if (name.starts_with("blocks.1.")) name = "blocks." + std::to_string(kLayers - 1) + "." + name.substr(9);
  });
  EXPECT_NE(message.find("no tensor \"blocks.29999998.attn.q.weight\""), std::string::npos) << message;
}

// The trainer's sums are numbers a resumed Trainer converts and adds to:
// "steps": 1e300 converted to int64 is undefined behaviour, not an error message.
TEST(Checkpoint, TrainerSumsOfTheWrongTypeOrRangeAreRejected) {
  auto with_trainer = [](const std::string& trainer) {
    return rejection_of_edited([&](core::SafetensorsFile& f) { f.metadata["trainer"] = trainer; });
  };
  EXPECT_EQ(with_trainer(R"({"loss": 2.5, "accuracy": 0.5, "steps": 1, "tokens": 40})"), "");
  for (const std::string bad : {R"({"loss": 2.5, "accuracy": 0.5, "steps": 1e300, "tokens": 40})",
                                R"({"loss": 2.5, "accuracy": 0.5, "steps": 2, "tokens": 40})",
                                R"({"loss": 2.5, "accuracy": 0.5, "steps": -1, "tokens": 40})",
                                R"({"loss": 2.5, "accuracy": 0.5, "steps": 1, "tokens": 9223372036854775807})",
                                R"({"loss": "2.5", "accuracy": 0.5, "steps": 1, "tokens": 40})",
                                R"({"loss": 2.5, "steps": 1, "tokens": 40})", R"([1, 2])"}) {
    const std::string message = with_trainer(bad);
    EXPECT_NE(message.find("metadata \"trainer\""), std::string::npos) << bad << " -> " << message;
  }
}

// An optimizer step count of 2^63-1 passed import_state, and the next training
// step overflowed it (undefined behaviour; UBSan in fuzz/checkpoint_fuzz, which
// takes a step from the restored state). Every step steps the optimizer once,
// so the two counts must agree.
TEST(Checkpoint, AnOptimizerStepCountOtherThanTheCheckpointsIsRejected) {
  auto with_optimizer_steps = [](const std::string& steps) {
    return rejection_of_edited(
        [&](core::SafetensorsFile& f) {
          for (auto& [key, value] : f.metadata)
            if (key.starts_with("optimizer.") && key.ends_with(".step")) value = steps;
        },
        [](const std::string& path) { Session resumed(read_checkpoint(path)); });
  };
  EXPECT_EQ(with_optimizer_steps("1"), "");
  for (const std::string steps : {"9223372036854775807", "2"}) {
    const std::string message = with_optimizer_steps(steps);
    EXPECT_NE(message.find("its optimizer has taken " + steps + " steps"), std::string::npos) << message;
  }
}

// A checkpoint written again from a model read from one (Python's Model.save):
// the optimizer state as exported, so that a Session reads the file, and the
// "edited" provenance, which reads back and which --init's record keeps.
TEST(Checkpoint, AnExportedOptimizerStateAndTheEditedRecordRoundTrip) {
  TempDir dir;
  Session a(tiny_config());
  a.step();
  CheckpointInfo info = a.checkpoint_info();
  info.edited = {{"source", {{"path", "/runs/x/checkpoint.safetensors"}}}, {"replaced", {"head.bias"}}};
  const std::string path = (dir.path / "edited.safetensors").string();
  save_checkpoint(path, a.model(), a.optimizer().export_state(), info);
  const Checkpoint ck = read_checkpoint(path);
  EXPECT_EQ(ck.info.edited, info.edited);
  EXPECT_EQ(init_identity(path, ck)["edited"], info.edited);
  Session b(ck);
  EXPECT_EQ(b.optimizer().step_count(), 1);
  EXPECT_NE(rejection_of_edited([](core::SafetensorsFile& f) { f.metadata["edited"] = "[1]"; })
                .find("metadata \"edited\" must be a JSON object"),
            std::string::npos);
  EXPECT_EQ(rejection_of_edited([](core::SafetensorsFile& f) { f.metadata.erase("edited"); }), "");
}

}  // namespace
}  // namespace headlab::train
