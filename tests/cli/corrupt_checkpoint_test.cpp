// A checkpoint is user input: whatever is wrong with one (cut short, a wrong
// header length, invalid JSON, unknown dtypes, shapes or offsets out of
// bounds, absurd sizes, missing or extra tensors, metadata that contradicts
// the tensors) every command that reads it -- eval, analyze, train --init and
// train --resume -- says what is wrong in one line and exits 2, writing nothing.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "tests/cli/fixtures.h"

namespace headlab::cli_test {
namespace {

using nlohmann::json;

// The commands that read a checkpoint; a case names those that must refuse it.
enum Mode : unsigned { kEval = 1, kAnalyze = 2, kInit = 4, kResume = 8 };
constexpr unsigned kAll = kEval | kAnalyze | kInit | kResume;
// analyze and resume rebuild the whole training session (config, optimizer),
// eval and --init only the model.
constexpr unsigned kSession = kAnalyze | kResume;

struct Corruption {
  std::string name;
  std::function<std::string(RawSafetensors&)> apply;  // returns the file's new bytes
  unsigned refused_by;                                 // the others must accept the file
  std::string mention;                                 // in the error line
};

std::ostream& operator<<(std::ostream& os, const Corruption& c) { return os << c.name; }

// Edits of the parsed header; the data stays.
std::function<std::string(RawSafetensors&)> edit(std::function<void(RawSafetensors&)> f) {
  return [f](RawSafetensors& raw) {
    f(raw);
    return raw.bytes();
  };
}

std::function<std::string(RawSafetensors&)> edit_model(const std::string& key, const json& value) {
  return edit([key, value](RawSafetensors& raw) {
    json model = raw.meta_json("model");
    if (value.is_null())
      model.erase(key);
    else
      model[key] = value;
    raw.set_meta_json("model", model);
  });
}

std::function<std::string(RawSafetensors&)> edit_config(const std::string& key, const json& value) {
  return edit([key, value](RawSafetensors& raw) {
    json config = raw.meta_json("config");
    config[key] = value;
    raw.set_meta_json("config", config);
  });
}

std::function<std::string(RawSafetensors&)> set_meta(const std::string& key, const std::string& value) {
  return edit([key, value](RawSafetensors& raw) { raw.header["__metadata__"][key] = value; });
}

// Writes `value` over float `index` of a tensor's data.
std::function<std::string(RawSafetensors&)> poison(const std::string& name, std::size_t index, float value) {
  return edit([name, index, value](RawSafetensors& raw) {
    const std::size_t at = raw.header.at(name).at("data_offsets")[0].get<std::size_t>() + 4 * index;
    std::memcpy(raw.data.data() + at, &value, 4);
  });
}

// A JSON text nested `depth` arrays deep.
std::string nested(std::size_t depth) { return std::string(depth, '[') + std::string(depth, ']'); }

std::string with_header_length(const std::string& bytes, uint64_t n) {
  std::string out = bytes;
  for (int i = 0; i < 8; ++i) out[static_cast<std::size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out;
}

uint64_t header_length(const std::string& bytes) {
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[static_cast<std::size_t>(i)]);
  return n;
}

const std::vector<Corruption>& corruptions() {
  static const std::vector<Corruption> all = {
      // The file as bytes.
      {"empty_file", [](RawSafetensors&) { return std::string(); }, kAll, "0 bytes"},
      {"shorter_than_the_length_field", [](RawSafetensors& r) { return r.bytes().substr(0, 5); }, kAll, "8-byte"},
      {"cut_inside_the_header", [](RawSafetensors& r) { return r.bytes().substr(0, 100); }, kAll, "header length"},
      {"cut_inside_the_data",
       [](RawSafetensors& r) {
         const std::string b = r.bytes();
         return b.substr(0, b.size() - r.data.size() / 2);
       },
       kAll, "beyond the data buffer"},
      {"bytes_after_the_last_tensor", [](RawSafetensors& r) { return r.bytes() + "garbage"; }, kAll,
       "belong to no tensor"},
      {"header_length_too_long",
       [](RawSafetensors& r) {
         const std::string b = r.bytes();
         return with_header_length(b, header_length(b) + 40);
       },
       kAll, "JSON"},
      {"header_length_too_short",
       [](RawSafetensors& r) {
         const std::string b = r.bytes();
         return with_header_length(b, header_length(b) - 40);
       },
       kAll, "JSON"},
      {"header_length_absurd", [](RawSafetensors& r) { return with_header_length(r.bytes(), uint64_t{1} << 62); }, kAll,
       "absurd"},
      {"header_not_json",
       [](RawSafetensors& r) {
         std::string b = r.bytes();
         b[8] = 'x';
         return b;
       },
       kAll, "JSON"},
      // Tensor entries.
      {"unknown_dtype", edit([](RawSafetensors& r) { r.header["tok_emb.weight"]["dtype"] = "BF16"; }), kAll, "BF16"},
      {"dtype_not_a_string", edit([](RawSafetensors& r) { r.header["tok_emb.weight"]["dtype"] = 4; }), kAll, "dtype"},
      {"shape_disagrees_with_bytes", edit([](RawSafetensors& r) { r.header["tok_emb.weight"]["shape"] = {8, 17}; }),
       kAll, "shape"},
      {"negative_shape", edit([](RawSafetensors& r) { r.header["tok_emb.weight"]["shape"] = {-8, 16}; }), kAll,
       "shape"},
      {"absurd_shape",
       edit([](RawSafetensors& r) { r.header["tok_emb.weight"]["shape"] = {int64_t{1} << 40, int64_t{1} << 40}; }),
       kAll, "overflows"},
      {"offsets_beyond_the_file",
       edit([](RawSafetensors& r) {
         auto& o = r.header["head.bias"]["data_offsets"];
         o[1] = 1'000'000'000'000;
       }),
       kAll, "beyond the data buffer"},
      {"offsets_reversed",
       edit([](RawSafetensors& r) {
         auto& o = r.header["head.bias"]["data_offsets"];
         o = {o[1], o[0]};
       }),
       kAll, "end before they begin"},
      {"tensors_overlap",
       edit([](RawSafetensors& r) { r.header["blocks.0.ln1.bias"]["data_offsets"] = r.header["blocks.0.ln1.weight"]["data_offsets"]; }),
       kAll, "overlaps"},
      {"parameter_missing", edit([](RawSafetensors& r) { r.remove("head.bias"); }), kAll, "head.bias"},
      {"parameter_extra",
       edit([](RawSafetensors& r) { r.add("blocks.0.attn.extra", "F32", {4}, std::string(16, '\0')); }), kAll,
       "blocks.0.attn.extra"},
      {"layer_extra",
       edit([](RawSafetensors& r) { r.add("blocks.1.attn.q.weight", "F32", {16, 16}, std::string(1024, '\0')); }),
       kAll, "blocks.1.attn.q.weight"},
      {"parameter_wrong_shape", edit([](RawSafetensors& r) { r.header["head.bias"]["shape"] = {8, 8}; }), kAll,
       "head.bias"},
      {"optimizer_state_missing", edit([](RawSafetensors& r) { r.remove("optimizer.head.bias.exp_avg_sq"); }), kSession,
       "optimizer.head.bias.exp_avg_sq"},
      {"optimizer_state_wrong_shape",
       edit([](RawSafetensors& r) { r.header["optimizer.head.bias.exp_avg"]["shape"] = {8, 8}; }), kSession,
       "optimizer.head.bias.exp_avg"},
      {"optimizer_of_another_kind", set_meta("optimizer.kind", "sgd"), kSession, "sgd"},
      // Metadata.
      {"no_metadata", edit([](RawSafetensors& r) { r.header.erase("__metadata__"); }), kAll, "not a headlab checkpoint"},
      {"another_format", set_meta("format", "gguf"), kAll, "gguf"},
      {"newer_format_version", set_meta("format_version", "2"), kAll, "version 2"},
      {"model_not_json", set_meta("model", "{\"vocab\": 8,"), kAll, "\"model\""},
      {"model_key_missing", edit_model("vocab", nullptr), kAll, "vocab"},
      {"model_size_not_an_integer", edit_model("d_model", "16"), kAll, "d_model"},
      {"model_size_a_huge_float", edit_model("d_model", 1e300), kAll, "d_model"},
      {"model_d_model_disagrees_with_tensors", edit_model("d_model", 32), kAll, "tok_emb.weight"},
      {"model_absurd_size", edit_model("d_model", 100000), kAll, "tok_emb.weight"},
      {"model_more_layers_than_tensors", edit_model("layers", 3), kAll, "blocks.2"},
      {"model_heads_do_not_divide_d_model", edit_model("heads", 3), kAll, "heads"},
      {"config_not_json", set_meta("config", "[1, 2"), kAll, "\"config\""},
      {"config_unknown_key", edit_config("bogus", 1), kAll, "bogus"},
      {"config_disagrees_with_tensors", edit_config("d-model", 32), kSession, "d_model 32"},
      {"config_absurd_size", edit_config("d-model", 12800), kSession, "d_model 12800"},
      {"config_unknown_task", edit_config("task", "nope"), kEval | kSession, "nope"},
      {"config_vocab_of_another_model", edit_config("vocab", 5), kEval | kSession, "vocab 5"},
      {"step_not_a_number", set_meta("step", "twenty"), kAll, "twenty"},
      {"step_negative", set_meta("step", "-3"), kAll, "-3"},
      {"step_beyond_64_bits", set_meta("step", "99999999999999999999999"), kAll, "99999999999999999999999"},
      {"rng_state_too_short", set_meta("rng.data", "[1, 2]"), kAll, "rng.data"},
      {"rng_state_not_an_array", set_meta("rng.data", "\"seed\""), kAll, "rng.data"},
      {"rng_state_all_zero", set_meta("rng.data", "[0, 0, 0, 0, 0, 0]"), kAll, "all-zero"},
      // Deep nesting, which a recursive dump of the value would overflow the stack on.
      {"model_nested_deep", set_meta("model", nested(100000)), kAll, "nesting"},
      {"config_nested_deep", set_meta("config", "{\"task\": " + nested(100000) + "}"), kAll, "nesting"},
      {"trainer_nested_deep", set_meta("trainer", nested(100000)), kAll, "nesting"},
      {"config_duplicate_key", set_meta("config", "{\"d-model\": 16, \"d-model\": 32}"), kAll, "twice"},
      {"config_nul_byte", set_meta("config", std::string("{}\0garbage", 10)), kAll, "NUL"},
      // Non-finite numbers: every tensor is checked and the first bad one named.
      {"nan_in_a_weight", poison("blocks.0.attn.q.weight", 5, std::nanf("")), kAll, "blocks.0.attn.q.weight"},
      {"inf_in_a_bias", poison("head.bias", 0, std::numeric_limits<float>::infinity()), kAll, "head.bias"},
      {"nan_in_an_optimizer_moment", poison("optimizer.head.bias.exp_avg", 1, std::nanf("")), kAll,
       "optimizer.head.bias.exp_avg"},
      // Values no training writes: a negative second moment (Adam's square root would make it NaN).
      {"negative_exp_avg_sq", poison("optimizer.head.bias.exp_avg_sq", 2, -1.0f), kSession,
       "optimizer.head.bias.exp_avg_sq' holds -1 at element 2"},
      // An eval batch no memory holds: named as the checkpoint's, never as a flag not given.
      {"eval_batch_absurd", edit_config("eval-batch", 2'000'000'000), kEval | kSession, "eval-batch 2000000000"},
      // A float64 copy of a weight holding a value no float32 can: it would load as an infinity.
      {"f64_beyond_float_range", edit([](RawSafetensors& r) {
         const std::string f32 = r.tensor_bytes("tok_emb.weight");
         std::vector<double> values(f32.size() / 4);
         for (std::size_t i = 0; i < values.size(); ++i) {
           float v = 0;
           std::memcpy(&v, f32.data() + 4 * i, 4);
           values[i] = v;
         }
         values[3] = 1e300;
         const std::vector<int64_t> shape = r.header.at("tok_emb.weight").at("shape").get<std::vector<int64_t>>();
         r.remove("tok_emb.weight");
         r.add("tok_emb.weight", "F64", shape, std::string(reinterpret_cast<const char*>(values.data()), 8 * values.size()));
       }), kAll, "beyond float32's range"},
      // The control: an intact copy, which every command accepts.
      {"none", edit([](RawSafetensors&) {}), 0, ""},
  };
  return all;
}

class CorruptCheckpoint : public ::testing::TestWithParam<Corruption> {};

TEST_P(CorruptCheckpoint, EveryReaderRefusesItCleanly) {
  const Corruption& c = GetParam();
  TempDir cwd, files;
  copy_dir(shared_run(), files / "run");
  RawSafetensors raw = RawSafetensors::read(files / "run/checkpoint.safetensors");
  const std::string ck = files / "run/checkpoint.safetensors";
  write_bytes(ck, c.apply(raw));
  const auto before = snapshot(files.path());

  struct Command {
    Mode mode;
    std::vector<std::string> args;
  };
  const auto init = train_command(cwd / "init", {{"--steps", "2"}, {"--init", ck}});
  const std::vector<Command> commands = {
      {kEval, {"eval", ck}},
      {kAnalyze, {"analyze", ck, "--out", cwd / "analysis"}},
      {kInit, init},
      {kResume, {"train", "--resume", files / "run", "--steps", "22"}},
  };
  for (const Command& command : commands) {
    std::string line = "headlab";
    for (const std::string& a : command.args) line += " " + a;
    SCOPED_TRACE(line);
    const RunResult r = run_headlab(command.args, cwd.path());
    if (c.refused_by & command.mode) {
      EXPECT_TRUE(clean_failure(r, 2, {c.mention}));
      EXPECT_TRUE(is_empty_dir(cwd.path())) << "nothing may be written for a refused checkpoint";
      EXPECT_EQ(snapshot(files.path()), before) << "the run folder must stay as it was";
    } else {
      EXPECT_EQ(r.exit_code, 0) << r.describe();
    }
    if (!(c.refused_by & command.mode)) {
      // An accepted file may be written next to; start the next command clean.
      std::filesystem::remove_all(cwd / "init");
      std::filesystem::remove_all(cwd / "analysis");
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Cli, CorruptCheckpoint, ::testing::ValuesIn(corruptions()),
                         [](const ::testing::TestParamInfo<Corruption>& p) { return p.param.name; });

}  // namespace
}  // namespace headlab::cli_test
