// TrainConfig: validation messages, JSON round trip, unknown keys.
#include "train/config.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "train/errors.h"
#include "train/run_builder.h"

namespace headlab::train {
namespace {

std::string error_of(const TrainConfig& c) {
  try {
    c.validate();
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(TrainConfig, DefaultsAreTheLessonDemo) {
  const TrainConfig c;
  EXPECT_EQ(c.task, "first-prev-pair");
  EXPECT_EQ(c.model.layers, 1);
  EXPECT_EQ(c.model.heads, 2);
  EXPECT_EQ(c.model.d_model, 64);
  EXPECT_EQ(c.optimizer, "adamw");
  EXPECT_EQ(error_of(c), "");
}

TEST(TrainConfig, IndivisibleDModelNamesBothNumbers) {
  TrainConfig c;
  c.model.d_model = 30;
  c.model.heads = 4;
  const std::string m = error_of(c);
  EXPECT_NE(m.find("--d-model 30"), std::string::npos) << m;
  EXPECT_NE(m.find("--heads 4"), std::string::npos) << m;
}

TEST(TrainConfig, EveryBadValueIsAUsageError) {
  const std::vector<std::function<void(TrainConfig&)>> bad = {
      [](TrainConfig& c) { c.model.layers = 0; },  [](TrainConfig& c) { c.model.heads = -1; },
      [](TrainConfig& c) { c.steps = -5; },
      [](TrainConfig& c) { c.lr = 0; },            [](TrainConfig& c) { c.lr = -1e-3; },
      [](TrainConfig& c) { c.clip = -1; },         [](TrainConfig& c) { c.optimizer = "lion"; },
      [](TrainConfig& c) { c.schedule = "wavy"; }, [](TrainConfig& c) { c.log_every = -1; },
      [](TrainConfig& c) { c.threads = -2; },      [](TrainConfig& c) { c.min_lr = 1.0; },
      [](TrainConfig& c) { c.model.d_model = 1 << 20; }, [](TrainConfig& c) { c.eval_batch = 0; },
      [](TrainConfig& c) { c.gemm = "mkl"; },
      [](TrainConfig& c) { c.batch = -1; },        [](TrainConfig& c) { c.train_size = -1; },
      [](TrainConfig& c) { c.train_fraction = 1; }, [](TrainConfig& c) { c.train_fraction = -0.5; },
      [](TrainConfig& c) { c.train_size = 10, c.train_fraction = 0.5; },
      [](TrainConfig& c) { c.data = "x.jsonl", c.train_size = 10; },
      [](TrainConfig& c) { c.betas = {0.9}; },     [](TrainConfig& c) { c.betas = {0.9, 1.0}; },
      [](TrainConfig& c) { c.betas = {-0.1, 0.9}; }, [](TrainConfig& c) { c.eps = 0; },
      [](TrainConfig& c) { c.optimizer = "sgd", c.eps = 1e-6; },   [](TrainConfig& c) { c.eps = 1e30; },
      [](TrainConfig& c) { c.eps = 0.0100001; },
      [](TrainConfig& c) { c.model.activation = "tanh"; },
      [](TrainConfig& c) { c.init_std = "0"; },     [](TrainConfig& c) { c.init_std = "fanin"; },
      [](TrainConfig& c) { c.init_std = "0.1x"; },  [](TrainConfig& c) { c.init_std = "nan"; },
      [](TrainConfig& c) { c.init_std = "fan-in", c.init = "run"; },
      [](TrainConfig& c) { c.loss_dtype = "f16"; },
      [](TrainConfig& c) { c.split_seed = -2; },  [](TrainConfig& c) { c.split_seed = 4; },
  };
  for (std::size_t i = 0; i < bad.size(); ++i) {
    TrainConfig c;
    bad[i](c);
    EXPECT_NE(error_of(c), "") << "case " << i;
  }
}

TEST(TrainConfig, GrokkingOptionsNameTheirValueAndFix) {
  TrainConfig c;
  c.init_std = "-1";
  EXPECT_NE(error_of(c).find("--init-std must be a positive standard deviation (such as 0.02, the default), fan-in or "
                             "nanda, got '-1'"),
            std::string::npos)
      << error_of(c);
  c = TrainConfig{};
  c.loss_dtype = "double";
  EXPECT_NE(error_of(c).find("--loss-dtype must be f32 or f64, got 'double'"), std::string::npos) << error_of(c);
  c = TrainConfig{};
  c.split_seed = 7;
  EXPECT_NE(error_of(c).find("give --train-size, --train-fraction or --eval-fraction"), std::string::npos)
      << error_of(c);
  c.train_fraction = 0.3;
  c.init_std = "fan-in";
  c.loss_dtype = "f64";
  EXPECT_EQ(error_of(c), "");
  c.init_std = "nanda";
  EXPECT_EQ(error_of(c), "");
  c.init_std = "1e-3";
  EXPECT_EQ(error_of(c), "");
}

// Numbers in messages read back as the value given: "got 1", never
// printf's "got 1.000000" (issue 29.16).
TEST(TrainConfig, MessagesPrintNumbersInShortestForm) {
  TrainConfig c;
  c.betas = {0.9, 1.0};
  EXPECT_NE(error_of(c).find("[0, 1), got 1"), std::string::npos) << error_of(c);
  EXPECT_EQ(error_of(c).find("1.000000"), std::string::npos) << error_of(c);
  c = TrainConfig();
  c.train_fraction = 1.5;
  EXPECT_NE(error_of(c).find("got 1.5"), std::string::npos) << error_of(c);
  EXPECT_EQ(error_of(c).find("1.500000"), std::string::npos) << error_of(c);
}

// --eps up to 0.01 is Adam; above it the update is a slowed SGD (docs).
TEST(TrainConfig, EpsAboveTheLimitIsRefusedSayingWhy) {
  TrainConfig c;
  c.eps = kMaxEps;
  EXPECT_EQ(error_of(c), "");
  c.eps = 1e30;
  const std::string m = error_of(c);
  EXPECT_NE(m.find("--eps 1e+30 is above 0.01"), std::string::npos) << m;
  EXPECT_NE(m.find("lr * m / eps"), std::string::npos) << m;
}

// A float setting that cannot work is refused naming its flag and value, not
// met later as an infinite loss blamed on --lr or --clip.
TEST(TrainConfig, FloatSettingsThatCannotWorkNameTheFlagAndValue) {
  const auto error_with = [](const std::function<void(TrainConfig&)>& set) {
    TrainConfig c;
    set(c);
    return error_of(c);
  };
  const std::vector<std::pair<std::function<void(TrainConfig&)>, std::string>> bad = {
      {[](TrainConfig& c) { c.weight_decay = 1e308; }, "--weight-decay 1e+308 is too large for --lr 0.001"},
      {[](TrainConfig& c) { c.weight_decay = 1000; }, "--weight-decay below 1000 here"},
      {[](TrainConfig& c) { c.lr = 0.5, c.weight_decay = 2; }, "--weight-decay 2 is too large for --lr 0.5"},
      {[](TrainConfig& c) { c.weight_decay = std::nan(""); }, "--weight-decay must be a number"},
      {[](TrainConfig& c) { c.weight_decay = std::nan(""); }, "got nan"},
      {[](TrainConfig& c) { c.init_std = "1e308"; }, "--init-std 1e308 is above 100"},
      {[](TrainConfig& c) { c.eps = 1e-300; }, "--eps 1e-300 is below 1.18e-38"},
      {[](TrainConfig& c) { c.lr = 1e-320; }, "--lr 1e-320 is below 1.18e-38"},
      {[](TrainConfig& c) { c.lr = 1e39; }, "--lr 1e+39 is beyond 3.4e38"},
      {[](TrainConfig& c) { c.clip = 1e-320; }, "--clip 1e-320 is below 1.18e-38"},
  };
  for (const auto& [set, message] : bad) EXPECT_NE(error_with(set).find(message), std::string::npos) << error_with(set);
  // The edges that work, and a --clip above every norm (no clipping).
  const std::vector<std::function<void(TrainConfig&)>> good = {
      [](TrainConfig& c) { c.weight_decay = 999; }, [](TrainConfig& c) { c.init_std = "100"; },
      [](TrainConfig& c) { c.eps = 1e-30; },        [](TrainConfig& c) { c.lr = 1e30; },
      [](TrainConfig& c) { c.clip = 1e308; },       [](TrainConfig& c) { c.weight_decay = -5; },
  };
  for (std::size_t i = 0; i < good.size(); ++i) EXPECT_EQ(error_with(good[i]), "") << "case " << i;
}

TEST(TrainConfig, InertSettingsAreListedOnlyWhenTheyDoNothing) {
  TrainConfig c;
  EXPECT_TRUE(c.inert_settings().empty());
  c.steps = 5;
  c.keep_snapshots = 3;
  c.snapshot_every = 100;
  c.warmup = 100;
  const std::vector<std::string> inert = c.inert_settings();
  ASSERT_EQ(inert.size(), 2u);
  EXPECT_NE(inert[0].find("--snapshot-every 100 takes no snapshot"), std::string::npos) << inert[0];
  EXPECT_NE(inert[1].find("--warmup 100 outlasts the run's --steps 5"), std::string::npos) << inert[1];
  c.steps = 100;  // a snapshot at step 100, and a warmup that ends with the run
  c.snapshot_every = 100;
  EXPECT_TRUE(c.inert_settings().empty());
  c.snapshot_every = 0;
  ASSERT_EQ(c.inert_settings().size(), 1u);
  EXPECT_NE(c.inert_settings()[0].find("--keep-snapshots 3 does nothing"), std::string::npos);
}

// An attention-only model has no MLP: its width and activation do nothing.
TEST(TrainConfig, MlpSettingsOfAnAttentionOnlyModelAreInert) {
  TrainConfig c;
  c.model.d_ff = 128;
  c.model.activation = "relu";
  EXPECT_TRUE(c.inert_settings().empty()) << "an MLP model uses both";
  c.model.attn_only = true;
  const std::vector<std::string> inert = c.inert_settings();
  ASSERT_EQ(inert.size(), 2u);
  EXPECT_EQ(inert[0], "--d-ff 128 does nothing with --attn-only: the model has no MLP");
  EXPECT_EQ(inert[1], "--activation relu does nothing with --attn-only: the model has no MLP");
  c.model.d_ff = 0;  // the defaults given by no one
  c.model.activation = "gelu";
  EXPECT_TRUE(c.inert_settings().empty());
}

// A decaying schedule's warmup must end before its horizon.
TEST(TrainConfig, WarmupReachingADecaysHorizonIsRefused) {
  TrainConfig c;
  c.schedule = "linear";
  c.steps = 10;
  c.warmup = 10;
  EXPECT_NE(error_of(c).find("--warmup 10 leaves no room for the linear decay, which ends at step 10 (--steps)"),
            std::string::npos)
      << error_of(c);
  c.warmup = 9;
  EXPECT_EQ(error_of(c), "");
  c.schedule_steps = 5;
  EXPECT_NE(error_of(c).find("ends at step 5 (--schedule-steps)"), std::string::npos) << error_of(c);
  c.schedule = "constant";  // no decay to leave room for: a warmup beyond the run is only inert
  c.warmup = 50;
  EXPECT_EQ(error_of(c), "");
}

// A flag whose default is an environment variable's value: `value` there
// becomes the default, `fallback` without it, and "bogus" is refused naming
// the flag, the value and the variable.
void expect_default_from(const char* variable, const char* flag, std::string TrainConfig::*field,
                         const std::string& value, const std::string& fallback) {
  SCOPED_TRACE(variable);
  const char* saved = std::getenv(variable);
  const std::string previous = saved ? saved : "";
  ::setenv(variable, value.c_str(), 1);
  EXPECT_EQ(TrainConfig().*field, value);
  ::unsetenv(variable);
  EXPECT_EQ(TrainConfig().*field, fallback);
  ::setenv(variable, "bogus", 1);
  const std::string m = error_of(TrainConfig());
  EXPECT_NE(m.find(flag), std::string::npos) << m;
  EXPECT_NE(m.find("'bogus'"), std::string::npos) << m;
  EXPECT_NE(m.find(variable), std::string::npos) << m;
  if (saved)
    ::setenv(variable, previous.c_str(), 1);
  else
    ::unsetenv(variable);
}

TEST(TrainConfig, GemmBackendAndPrecisionComeFromTheEnvironmentAndAreChecked) {
  expect_default_from("HEADLAB_GEMM", "--gemm", &TrainConfig::gemm, "openblas", "onednn");
  expect_default_from("HEADLAB_PRECISION", "--precision", &TrainConfig::precision, "bf16", "f32");
}

// A stored config without the precision key is from before it, when every
// run trained in f32: f32 even where HEADLAB_PRECISION=bf16 makes bf16 the
// default of a new config; a stored key is kept.
TEST(TrainConfig, AStoredConfigWithoutPrecisionIsF32WhateverTheDefault) {
  const char* saved = std::getenv("HEADLAB_PRECISION");
  const std::string previous = saved ? saved : "";
  ::setenv("HEADLAB_PRECISION", "bf16", 1);
  const TrainConfig fresh;
  nlohmann::json old = to_json(fresh);
  old.erase("precision");
  const TrainConfig read_old = stored_config(old, "old");
  const TrainConfig read_new = stored_config(to_json(fresh), "new");
  if (saved)
    ::setenv("HEADLAB_PRECISION", previous.c_str(), 1);
  else
    ::unsetenv("HEADLAB_PRECISION");
  EXPECT_EQ(fresh.precision, "bf16");
  EXPECT_EQ(read_new.precision, "bf16");
  EXPECT_EQ(read_old.precision, "f32");
  old["precision"] = "f32";
  EXPECT_EQ(to_json(read_old), old) << "every other key as stored";
}

TEST(TrainConfig, JsonRoundTripKeepsEveryField) {
  TrainConfig c;
  c.task = "induction";
  c.model.heads = 4;
  c.lr = 3e-4;
  c.model.attn_only = true;
  c.seed = 12345678901234ULL;
  c.betas = {0.8, 0.98};
  c.eps = 1e-6;
  c.model.activation = "relu";
  c.train_fraction = 0.3;
  c.eval_data = "held-out.jsonl";
  c.init_std = "nanda";
  c.loss_dtype = "f64";
  c.split_seed = 5;
  TrainConfig d;
  apply_json(d, to_json(c), "test");
  EXPECT_EQ(to_json(d), to_json(c));
  EXPECT_TRUE(to_json(c).contains("d-model"));  // keys are the flag names
}

TEST(TrainConfig, UnknownKeyAndWrongTypeNameTheKey) {
  TrainConfig c;
  try {
    apply_json(c, nlohmann::json{{"d_modle", 3}}, "cfg.json");
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("d_modle"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("cfg.json"), std::string::npos);
  }
  EXPECT_THROW(apply_json(c, nlohmann::json{{"heads", "two"}}, "cfg.json"), UsageError);
  EXPECT_THROW(apply_json(c, nlohmann::json{{"heads", 2.5}}, "cfg.json"), UsageError);
  EXPECT_THROW(apply_json(c, nlohmann::json::array(), "cfg.json"), UsageError);
  EXPECT_THROW(apply_json(c, nlohmann::json{{"betas", 0.9}}, "cfg.json"), UsageError);
  EXPECT_THROW(apply_json(c, nlohmann::json{{"betas", {0.9, "x"}}}, "cfg.json"), UsageError);
  EXPECT_THROW(apply_json(c, nlohmann::json{{"batch", "half"}}, "cfg.json"), UsageError);
  apply_json(c, nlohmann::json{{"batch", "full"}}, "cfg.json");  // as --batch full
  EXPECT_EQ(c.batch, 0);
}

// A --config value of the wrong type or range is refused with the key, the
// value and what fits, for every type of key (as the flags' messages say it).
TEST(TrainConfig, AWrongConfigValueSaysWhatFits) {
  const auto message = [](const nlohmann::json& j) {
    TrainConfig c;
    try {
      apply_json(c, j, "cfg.json");
    } catch (const UsageError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  const std::vector<std::pair<nlohmann::json, std::vector<std::string>>> cases = {
      {{{"d-model", 32.0}}, {"\"d-model\"", "a whole number", "32.0"}},
      {{{"threads", int64_t{1} << 40}}, {"\"threads\"", "a whole number from -2147483648 to 2147483647"}},
      {{{"seed", -1}}, {"\"seed\"", "a whole number from 0 to 18446744073709551615", "-1"}},
      {{{"lr", "0.1"}}, {"\"lr\"", "a number", "\"0.1\""}},
      {{{"optimizer", 3}}, {"\"optimizer\"", "a string", "3"}},
      {{{"attn-only", 1}}, {"\"attn-only\"", "true or false", "1"}},
      {{{"bidirectional", "yes"}}, {"\"bidirectional\"", "true or false", "\"yes\""}},
      {{{"betas", 0.9}}, {"\"betas\"", "a list of numbers", "0.9"}},
      {{{"batch", "half"}}, {"\"batch\"", "a whole number", "\"full\"", "\"half\""}},
  };
  for (const auto& [j, mentions] : cases) {
    const std::string m = message(j);
    ASSERT_NE(m, "") << j.dump();
    EXPECT_NE(m.find("cfg.json"), std::string::npos) << m;
    for (const std::string& mention : mentions) EXPECT_NE(m.find(mention), std::string::npos) << m << " lacks " << mention;
  }
}

// "got 1" would read as the value 1.
TEST(TrainConfig, BetasOfTheWrongCountNameTheNumbersGiven) {
  TrainConfig c;
  c.betas = {0.9};
  EXPECT_NE(error_of(c).find("got 1 number: 0.9"), std::string::npos) << error_of(c);
  c.betas = {0.9, 0.98, 0.5};
  EXPECT_NE(error_of(c).find("got 3 numbers: 0.9,0.98,0.5"), std::string::npos) << error_of(c);
}

TEST(TrainConfig, ModelSpecFollowsTheFlags) {
  TrainConfig c;
  apply_json(c, nlohmann::json{{"bidirectional", true}, {"no-layernorm", true}}, "test");
  const layers::ModelSpec o = model_spec_for(c, *make_task_for(c));
  EXPECT_FALSE(o.causal);
  EXPECT_FALSE(o.layernorm);
  EXPECT_EQ(o.d_ff, 256);
  EXPECT_EQ(o.classes, 64);
  EXPECT_EQ(to_json(c)["no-layernorm"], true);
  EXPECT_EQ(to_json(c)["bidirectional"], true);
}

}  // namespace
}  // namespace headlab::train
