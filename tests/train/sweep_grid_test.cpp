// Grid sweeps: the lists of any training flag, the cross product, the run
// folders that name the varied values, the grouping per configuration and per
// flag, saved plans checked as strictly as flags, and the keys two shards
// differ in.
#include "train/sweep_grid.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "train/errors.h"

namespace headlab::train {
namespace {

std::string axis_error(const std::string& flag, const std::string& text) {
  try {
    (void)parse_grid_axis(flag, text);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

// The UsageError message of plan_from_json, or "" if it read.
std::string plan_error(const nlohmann::json& j) {
  try {
    (void)plan_from_json(j, "sweep.json");
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(SweepGrid, EveryNumberChoiceAndSwitchTakesAList) {
  for (const char* flag : {"lr", "layers", "weight-decay", "d-model", "steps", "optimizer", "schedule", "task",
                           "activation", "batch", "warmup", "clip", "train-size", "attn-only", "no-layernorm",
                           "bidirectional", "shuffle"})
    EXPECT_TRUE(is_grid_flag(flag)) << flag;
  // The sweep's own per-run flags, file names and lists take none.
  for (const char* flag : {"seed", "heads", "threads", "data", "eval-data", "init", "betas", "nope"})
    EXPECT_FALSE(is_grid_flag(flag)) << flag;
}

// F10: a switch is an axis like any other: true,false (or on,off, 1,0).
TEST(SweepGrid, ASwitchTakesTrueFalseOnOffOrOneZero) {
  const std::vector<nlohmann::json> both = {true, false};
  EXPECT_EQ(parse_grid_axis("attn-only", "true,false").values, both);
  EXPECT_EQ(parse_grid_axis("attn-only", "on, off").values, both);
  EXPECT_EQ(parse_grid_axis("no-layernorm", "1,0").values, both);
  EXPECT_EQ(parse_grid_axis("bidirectional", "OFF,On").values, (std::vector<nlohmann::json>{false, true}));
  EXPECT_EQ(parse_grid_axis("attn-only", "true").values, std::vector<nlohmann::json>{true});  // what --attn-only alone gives
  EXPECT_NE(axis_error("attn-only", "maybe")
                .find("--attn-only 'maybe': 'maybe' is not on or off (write true,false, on,off or 1,0; --attn-only alone is on)"),
            std::string::npos)
      << axis_error("attn-only", "maybe");
  EXPECT_NE(axis_error("attn-only", "true,2").find("'2' is not on or off"), std::string::npos);
  EXPECT_NE(axis_error("attn-only", "true,on").find("on is listed twice"), std::string::npos);
}

TEST(SweepGrid, ASwitchAxisNamesItsRunsOnAndOffAndTheirConfigsHoldIt) {
  SweepPlan plan;
  plan.axes = {parse_grid_axis("attn-only", "true,false"), parse_grid_axis("no-layernorm", "off,on")};
  plan.heads = {2};
  plan.seeds = {0};
  const std::vector<SweepRun> runs = plan.runs();
  ASSERT_EQ(runs.size(), 4u);
  EXPECT_EQ(runs[0].dir, "attn-only-on-no-layernorm-off-h2-s0");
  EXPECT_EQ(runs[3].dir, "attn-only-off-no-layernorm-on-h2-s0");
  EXPECT_EQ(runs[3].cell().name(), "attn-only off, no-layernorm on, h2");
  EXPECT_EQ(plan.varied(), (std::vector<std::string>{"attn-only", "no-layernorm"}));
  const TrainConfig on = cell_config(TrainConfig{}, plan.cells()[0]);
  EXPECT_TRUE(on.model.attn_only);
  EXPECT_TRUE(on.model.layernorm);
  TrainConfig base;
  base.model.attn_only = true;  // as a --config file may set it: the cell's value wins
  const TrainConfig off = cell_config(base, plan.cells()[3]);
  EXPECT_FALSE(off.model.attn_only);
  EXPECT_FALSE(off.model.layernorm);
  // sweep.json keeps the switch's values as config.json does, and reads them back.
  nlohmann::json saved = {{"seeds", {0}}, {"heads", {2}}, {"grid", grid_json(plan.axes)}, {"target_accuracy", 0.99}};
  EXPECT_EQ(saved["grid"], (nlohmann::json{{"attn-only", {true, false}}, {"no-layernorm", {false, true}}}));
  EXPECT_EQ(plan_from_json(saved, "sweep.json").runs()[3].dir, "attn-only-off-no-layernorm-on-h2-s0");
  saved["grid"]["attn-only"] = {1, 0};
  EXPECT_NE(plan_error(saved).find("1 is not a value of --attn-only (want true or false)"), std::string::npos)
      << plan_error(saved);
}

// F14: --target-accuracy's default is the task's own target where it has one.
TEST(SweepGrid, TheTargetAccuracyDefaultsToTheTasksOwn) {
  TrainConfig config;
  config.task = "induction";
  EXPECT_DOUBLE_EQ(default_target_accuracy(config, {}), 0.9);
  EXPECT_NE(task_targets_text().find("induction 0.9"), std::string::npos) << task_targets_text();
  config.task = "first-prev-pair";
  EXPECT_DOUBLE_EQ(default_target_accuracy(config, {}), kDefaultTargetAccuracy);
  // A --task list: the tasks' one target, or 0.99 when they differ.
  EXPECT_DOUBLE_EQ(default_target_accuracy(config, {parse_grid_axis("task", "induction,first-prev-pair")}), 0.99);
  EXPECT_DOUBLE_EQ(default_target_accuracy(config, {parse_grid_axis("lr", "0.1,0.2")}), 0.99);
  config.task = "induction";
  EXPECT_DOUBLE_EQ(default_target_accuracy(config, {parse_grid_axis("lr", "0.1,0.2")}), 0.9);
  config.data = "seqs.jsonl";  // a data file's runs have no task's target
  EXPECT_DOUBLE_EQ(default_target_accuracy(config, {}), 0.99);
}

TEST(SweepGrid, ReadsListsOfNumbersRangesAndChoices) {
  EXPECT_EQ(parse_grid_axis("lr", "1e-3,3e-3, 1e-2").values, (std::vector<nlohmann::json>{1e-3, 3e-3, 1e-2}));
  EXPECT_EQ(parse_grid_axis("layers", "1-3,8").values, (std::vector<nlohmann::json>{1, 2, 3, 8}));
  EXPECT_EQ(parse_grid_axis("weight-decay", "0,1").values, (std::vector<nlohmann::json>{0.0, 1.0}));
  EXPECT_EQ(parse_grid_axis("weight-decay", "-1,0.1").values, (std::vector<nlohmann::json>{-1.0, 0.1}));
  EXPECT_EQ(parse_grid_axis("optimizer", "adamw,sgd").values, (std::vector<nlohmann::json>{"adamw", "sgd"}));
  EXPECT_EQ(parse_grid_axis("batch", "full,32").values, (std::vector<nlohmann::json>{"full", 32}));
  EXPECT_EQ(parse_grid_axis("lr", "0.01").values.size(), 1u);
}

TEST(SweepGrid, RefusesBadListsNamingTheFlagAndTheItem) {
  EXPECT_NE(axis_error("lr", "1e-3,abc").find("--lr '1e-3,abc': 'abc' is not a finite number"), std::string::npos);
  EXPECT_NE(axis_error("lr", "1e-3,inf").find("'inf' is not a finite number"), std::string::npos);
  EXPECT_NE(axis_error("lr", "1e-3,0.001").find("0.001 is listed twice"), std::string::npos);
  EXPECT_NE(axis_error("layers", "1,1.5").find("'1.5' is not a whole number"), std::string::npos);
  EXPECT_NE(axis_error("layers", "3-1").find("the range 3-1 runs backwards"), std::string::npos);
  EXPECT_NE(axis_error("layers", "1-100000").find("more than 1000 values"), std::string::npos);
  EXPECT_NE(axis_error("layers", "1,").find("an empty item"), std::string::npos);
  EXPECT_NE(axis_error("layers", "").find("the list is empty"), std::string::npos);
  EXPECT_NE(axis_error("optimizer", "adamw,../x").find("is not a value of --optimizer"), std::string::npos);
  EXPECT_NE(axis_error("seed", "1,2").find("--seed takes no list"), std::string::npos);
}

// The example: --lr 1e-3,1e-2 --layers 1,2 --seeds 0-2 is 12 runs in 4 cells.
SweepPlan example_plan() {
  SweepPlan plan;
  plan.axes = {parse_grid_axis("layers", "1,2"), parse_grid_axis("lr", "1e-3,1e-2")};
  plan.heads = {2};
  plan.seeds = {0, 1, 2};
  return plan;
}

TEST(SweepGrid, ThePlanIsTheCrossProductAndItsFoldersNameTheVariedValues) {
  const SweepPlan plan = example_plan();
  const std::vector<SweepCell> cells = plan.cells();
  ASSERT_EQ(cells.size(), 4u);
  EXPECT_EQ(cells[0].name(), "layers 1, lr 0.001, h2");
  EXPECT_EQ(cells[3].name(), "layers 2, lr 0.01, h2");
  const std::vector<SweepRun> runs = plan.runs();
  ASSERT_EQ(runs.size(), 12u);
  EXPECT_EQ(runs[0].dir, "layers1-lr0.001-h2-s0");
  EXPECT_EQ(runs[11].dir, "layers2-lr0.01-h2-s2");
  std::set<std::string> dirs;
  for (const SweepRun& r : runs) dirs.insert(r.dir);
  EXPECT_EQ(dirs.size(), 12u);
  EXPECT_EQ(plan.varied(), (std::vector<std::string>{"layers", "lr"}));
  // Without a grid the folders are as before: h2-s0.
  SweepPlan plain;
  plain.heads = {1, 2};
  plain.seeds = {0};
  EXPECT_EQ(plain.runs()[1].dir, "h2-s0");
  EXPECT_EQ(plain.varied(), (std::vector<std::string>{"heads"}));
}

TEST(SweepGrid, ACellsConfigHoldsItsValues) {
  const SweepCell cell = example_plan().cells()[3];
  const TrainConfig c = cell_config(TrainConfig{}, cell);
  EXPECT_EQ(c.model.layers, 2);
  EXPECT_DOUBLE_EQ(c.lr, 1e-2);
  EXPECT_EQ(c.model.heads, 2);
}

TEST(SweepGrid, RunsAreGroupedPerCellAndPerFlagValue) {
  std::vector<SweepRun> runs = example_plan().runs();
  for (std::size_t i = 0; i < runs.size(); ++i) {
    runs[i].status = RunStatus::done;
    runs[i].accuracy = i % 3 == 0 ? 1.0 : 0.5;  // the first seed of each cell reaches the target
    runs[i].specialized = runs[i].settings.at("layers") == 2;
  }
  const std::vector<ConfigSummary> cells = summarize(runs, example_plan().cells(), 0.99);
  ASSERT_EQ(cells.size(), 4u);
  for (const ConfigSummary& c : cells) {
    EXPECT_EQ(c.runs, 3);
    EXPECT_EQ(c.reached_target, 1);
    EXPECT_EQ(c.specialized, c.cell.settings.at("layers") == 2 ? 3 : 0);
  }
  const nlohmann::json first = config_json(cells[0]);
  EXPECT_EQ(first["name"], "layers 1, lr 0.001, h2");
  EXPECT_EQ(first["settings"], (nlohmann::json{{"layers", 1}, {"lr", 0.001}}));
  const std::vector<nlohmann::json> layers = {1, 2};
  const FlagSummary by_layers = summarize_flag(runs, "layers", layers, 0.99);
  ASSERT_EQ(by_layers.values.size(), 2u);
  EXPECT_EQ(by_layers.values[0].runs, 6);
  EXPECT_EQ(by_layers.values[1].specialized, 6);
  const nlohmann::json j = flag_json(by_layers);
  EXPECT_EQ(j["flag"], "layers");
  EXPECT_EQ(j["values"][1]["value"], 2);
  EXPECT_EQ(j["values"][1]["specialized_share"], 1.0);
  const std::vector<nlohmann::json> heads = {2};
  EXPECT_EQ(summarize_flag(runs, "heads", heads, 0.99).values[0].runs, 12);
  EXPECT_NE(summary_text(cells, 0.99).find("layers 2, lr 0.01, h2      3       0      1 (33%)"), std::string::npos) << summary_text(cells, 0.99);
}

nlohmann::json saved_plan() {
  return {{"seeds", {0, 1, 2}}, {"heads", {2}}, {"grid", {{"layers", {1, 2}}, {"lr", {0.001, 0.01}}}},
          {"target_accuracy", 0.99}};
}

TEST(SweepGrid, ASavedPlanReadsBackAsTheSamePlan) {
  const SweepPlan plan = plan_from_json(saved_plan(), "sweep.json");
  EXPECT_EQ(plan.runs().size(), 12u);
  EXPECT_EQ(plan.runs()[11].dir, "layers2-lr0.01-h2-s2");
  EXPECT_EQ(nlohmann::json(grid_json(plan.axes)), saved_plan()["grid"]);
}

TEST(SweepGrid, ASavedPlanKeepsTheFlagsOrderWhateverTheFilesKeyOrder) {
  nlohmann::json j = saved_plan();
  // JSON sorts the keys: layers, vocab; the flags come as vocab, layers.
  j["grid"] = {{"layers", {1, 2}}, {"vocab", {16, 32}}};
  const SweepPlan plan = plan_from_json(j, "sweep.json");
  ASSERT_EQ(plan.axes.size(), 2u);
  EXPECT_EQ(plan.axes[0].flag, "vocab");
  EXPECT_EQ(plan.runs()[0].dir, "vocab16-layers1-h2-s0");
}

TEST(SweepGrid, ASavedPlanIsCheckedAsStrictlyAsFlags) {
  const auto with = [](const char* key, nlohmann::json value) {
    nlohmann::json j = saved_plan();
    j[key] = std::move(value);
    return j;
  };
  EXPECT_NE(plan_error(with("seeds", {5, 5})).find("5 is listed twice"), std::string::npos);
  EXPECT_NE(plan_error(with("seeds", {-3})).find("-3 is not from 0"), std::string::npos);
  EXPECT_NE(plan_error(with("seeds", nlohmann::json::array())).find("non-empty list"), std::string::npos);
  EXPECT_NE(plan_error(with("seeds", {1.5})).find("not a whole number"), std::string::npos);
  EXPECT_NE(plan_error(with("seeds", std::vector<int64_t>(10001, 0))).find("more than 10000"), std::string::npos);
  EXPECT_NE(plan_error(with("heads", {0})).find("0 is not from 1"), std::string::npos);
  EXPECT_NE(plan_error(with("target_accuracy", 1e308)).find("not a fraction"), std::string::npos);
  EXPECT_NE(plan_error(with("grid", {{"seed", {1, 2}}})).find("not a flag a sweep varies"), std::string::npos);
  EXPECT_NE(plan_error(with("grid", {{"lr", {0.1, 0.1}}})).find("listed twice"), std::string::npos);
  EXPECT_NE(plan_error(with("grid", {{"layers", {1, "x"}}})).find("is not a value of --layers"), std::string::npos);
  EXPECT_NE(plan_error(with("grid", {{"task", {"a/b", "c"}}})).find("is not a value of --task"), std::string::npos);
  // 100 x 100 x 10 seeds: more runs than a sweep takes.
  std::vector<int64_t> hundred(100);
  for (int i = 0; i < 100; ++i) hundred[static_cast<std::size_t>(i)] = i + 1;
  nlohmann::json big = with("grid", {{"layers", hundred}, {"d-model", hundred}});
  big["seeds"] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  EXPECT_NE(plan_error(big).find("more than 10000 runs"), std::string::npos);
  nlohmann::json missing = saved_plan();
  missing.erase("heads");
  EXPECT_NE(plan_error(missing).find("no \"heads\""), std::string::npos);
  EXPECT_EQ(plan_error(saved_plan()), "");
}

TEST(SweepGrid, DifferingKeysNameBothValues) {
  const nlohmann::json a = {{"steps", 20}, {"lr", 0.001}, {"d-model", 64}, {"task", "x"}};
  const nlohmann::json b = {{"steps", 40}, {"lr", 0.01}, {"d-model", 64}, {"task", "x"}, {"extra", true}};
  EXPECT_EQ(differing_keys(a, b), (std::vector<std::string>{"lr 0.001 vs 0.01", "steps 20 vs 40", "extra none vs true"}));
  EXPECT_TRUE(differing_keys(a, a).empty());
}

TEST(SweepResults, AnImpossibleAccuracyIsRefused) {
  SweepRun run;
  analysis::RunAnalysis result;
  result.accuracy = 1e308;
  EXPECT_THROW(record_analysis(run, result), std::invalid_argument);
  EXPECT_NE(run.status, RunStatus::done);
  result.accuracy = 0.5;
  result.loss = -1;
  EXPECT_THROW(record_analysis(run, result), std::invalid_argument);
  result.loss = 0.25;
  record_analysis(run, result);
  EXPECT_EQ(run.status, RunStatus::done);
}

}  // namespace
}  // namespace headlab::train
