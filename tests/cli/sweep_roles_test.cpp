// `headlab sweep` on what a run's heads.json says beyond "specialized", and on
// switches as grid axes, each on sweeps of 2-step runs:
// - F14: a run that found its task's expected roles (induction's one role)
//   without specializing (which wants two) counts in the roles' rate, read
//   from the run folders' heads.json; a task without roles says n/a; the
//   target accuracy defaults to the task's own (induction 0.9).
// - A sweep.json (and shards' files) from before the roles' rate still
//   redraws, resumes and collects.
// - A --task list's sweep is named by its tasks, not by the default task, and
//   its runs are found by its plan, never by parsing their folders' names.
// - F10: --attn-only true,false is an axis of the grid; --attn-only alone
//   still sets it for every run; a bad value names itself and what fits.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "tests/cli/fixtures.h"

namespace headlab::cli_test {
namespace {

namespace fs = std::filesystem;

nlohmann::json read_json(const std::string& path) { return nlohmann::json::parse(read_bytes(path)); }
void write_json(const std::string& path, const nlohmann::json& j) { write_bytes(path, j.dump(2) + "\n"); }

// sweep ARGS... with the tiny model trained 2 steps, to completion (exit 0 expected).
RunResult tiny_sweep(const std::string& cwd, std::vector<std::string> args,
                     const std::vector<std::pair<std::string, std::string>>& changes = {}) {
  args.insert(args.begin(), "sweep");
  std::vector<std::pair<std::string, std::string>> all = {{"--steps", "2"}, {"--threads", "-"}};
  all.insert(all.end(), changes.begin(), changes.end());
  for (const std::string& flag : tiny(all)) args.push_back(flag);
  return run_headlab(args, cwd);
}

// The keys of the roles' rate, taken out of a sweep's file as a headlab from
// before it wrote them.
void drop_roles_keys(nlohmann::json& file) {
  for (nlohmann::json& r : file.at("runs")) EXPECT_EQ(r.erase("roles_found"), 1u);
  const auto drop = [](nlohmann::json& c) {
    for (const char* key : {"runs_expecting_roles", "roles_found", "roles_found_share", "roles_found_ci"})
      EXPECT_EQ(c.erase(key), 1u) << key;
  };
  for (nlohmann::json& c : file.at("configs")) drop(c);
  for (nlohmann::json& f : file.at("flags"))
    for (nlohmann::json& v : f.at("values")) drop(v);
}

// The repro's finding: each induction run's heads.json says roles found, none
// specialized, and the sweep said 0%. Here the run folders' heads.json are
// edited to say so (2-step runs find nothing), and --resume reads them back.
TEST(SweepRoles, RunsWhoseHeadsJsonFoundTheRolesButDidNotSpecializeCountAsRolesFound) {
  TempDir cwd;
  const std::string sweep = cwd / "sweep";
  const RunResult first = tiny_sweep(cwd.path(), {"--task", "induction", "--seeds", "0-2", "--jobs", "1", "--out", sweep});
  ASSERT_EQ(first.exit_code, 0) << first.describe();
  // The task's own target, not 0.99: induction is solved at 90%.
  EXPECT_NE(first.out.find("acc >= 90.0%"), std::string::npos) << first.out;
  EXPECT_EQ(read_json(sweep + "/sweep.json").at("target_accuracy"), 0.9);

  for (int seed = 0; seed < 3; ++seed) {
    const std::string path = sweep + "/h2-s" + std::to_string(seed) + "/heads.json";
    nlohmann::json heads = read_json(path);
    ASSERT_FALSE(heads.at("expected_roles").empty()) << "induction expects its induction heads";
    nlohmann::json& verdict = heads.at("verdict");
    verdict["specialized"] = false;
    verdict["roles_found"] = seed < 2;
    verdict["success"] = seed < 2;
    write_json(path, heads);
  }
  const RunResult resumed = run_headlab({"sweep", "--resume", sweep}, cwd.path());
  ASSERT_EQ(resumed.exit_code, 0) << resumed.describe();
  EXPECT_NE(resumed.err.find("h2 s0: acc "), std::string::npos) << resumed.err;
  EXPECT_NE(resumed.err.find(", not specialized, roles found, "), std::string::npos) << resumed.err;
  EXPECT_NE(resumed.err.find(", not specialized, roles not found, "), std::string::npos) << resumed.err;
  // 0 of 3 specialized, 2 of 3 found the roles: Wilson 95% [21-94%].
  EXPECT_NE(resumed.out.find("specialized              roles found"), std::string::npos) << resumed.out;
  EXPECT_NE(resumed.out.find("0 (0%)   [0-56%]         2 (67%)  [21-94%]"), std::string::npos) << resumed.out;

  const nlohmann::json s = read_json(sweep + "/sweep.json");
  const nlohmann::json& c = s.at("configs").at(0);
  EXPECT_EQ(c.at("specialized"), 0);
  EXPECT_EQ(c.at("runs_expecting_roles"), 3);
  EXPECT_EQ(c.at("roles_found"), 2);
  EXPECT_EQ(c.at("roles_found_ci"), nlohmann::json({0.2077, 0.9385}));
  EXPECT_EQ(s.at("runs").at(0).at("roles_found"), true);
  EXPECT_EQ(s.at("runs").at(2).at("roles_found"), false);
  EXPECT_NE(read_bytes(sweep + "/sweep.html").find("2 of 3 found the expected roles (95% CI 21-94%)"), std::string::npos);
}

TEST(SweepRoles, ATaskWithoutExpectedRolesSaysNAAndTheTargetStays99) {
  TempDir cwd;
  const std::string sweep = cwd / "sweep";
  const RunResult r = tiny_sweep(cwd.path(), {"--task", "first-prev-sum", "--seeds", "0", "--jobs", "1", "--out", sweep});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_NE(r.out.find("acc >= 99.0%"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("[0-79%]       n/a   "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("roles found: n/a, the runs' task expects no roles"), std::string::npos) << r.out;
  const nlohmann::json s = read_json(sweep + "/sweep.json");
  EXPECT_EQ(s.at("target_accuracy"), 0.99);
  EXPECT_EQ(s.at("configs").at(0).at("runs_expecting_roles"), 0);
  EXPECT_TRUE(s.at("configs").at(0).at("roles_found_share").is_null());
  EXPECT_TRUE(s.at("runs").at(0).at("roles_found").is_null());
  // --target-accuracy, when given, is the one used and kept.
  const RunResult given = tiny_sweep(cwd.path(), {"--task", "induction", "--seeds", "0", "--target-accuracy", "0.5",
                                                  "--jobs", "1", "--out", cwd / "given"});
  ASSERT_EQ(given.exit_code, 0) << given.describe();
  EXPECT_EQ(read_json(cwd / "given/sweep.json").at("target_accuracy"), 0.5);
}

// Old folders stay readable: a sweep.json and shards' files without the
// roles' keys redraw, resume (keeping their 0.99 target) and collect.
TEST(SweepRoles, FilesFromBeforeTheRolesRateStillRedrawResumeAndCollect) {
  TempDir cwd;
  const std::string sweep = cwd / "sweep";
  const RunResult first =
      tiny_sweep(cwd.path(), {"--task", "induction", "--seeds", "0-1", "--lr", "1e-3,3e-3", "--jobs", "1", "--out", sweep});
  ASSERT_EQ(first.exit_code, 0) << first.describe();
  nlohmann::json old = read_json(sweep + "/sweep.json");
  drop_roles_keys(old);
  old["target_accuracy"] = 0.99;  // the default before the task's own
  write_json(sweep + "/sweep.json", old);

  const RunResult redrawn = run_headlab({"sweep", "--redraw", sweep}, cwd.path());
  ASSERT_EQ(redrawn.exit_code, 0) << redrawn.describe();
  const std::string page = read_bytes(sweep + "/sweep.html");
  const std::size_t item = page.find("<li>lr 0.001, h2: ");
  ASSERT_NE(item, std::string::npos);
  const std::string line = page.substr(item, page.find("</li>", item) - item);
  EXPECT_EQ(line.find("roles"), std::string::npos) << "an old file's page says nothing of the roles: " << line;
  // A damaged value is still refused.
  nlohmann::json bad = old;
  bad.at("runs").at(0)["roles_found"] = "yes";
  write_json(sweep + "/sweep.json", bad);
  EXPECT_TRUE(clean_failure(run_headlab({"sweep", "--redraw", sweep}, cwd.path()), 2, {"\"roles_found\"", "\"yes\""}));
  write_json(sweep + "/sweep.json", old);

  fs::remove_all(sweep + "/lr0.003-h2-s1");
  const RunResult resumed = run_headlab({"sweep", "--resume", sweep}, cwd.path());
  ASSERT_EQ(resumed.exit_code, 0) << resumed.describe();
  EXPECT_NE(resumed.out.find("acc >= 99.0%"), std::string::npos) << "the sweep's own target: " << resumed.out;
  const nlohmann::json now = read_json(sweep + "/sweep.json");
  EXPECT_EQ(now.at("target_accuracy"), 0.99);
  EXPECT_EQ(now.at("configs").at(0).at("runs_expecting_roles"), 2) << "written again with the roles' rate";

  const std::string shards = cwd / "shards";
  for (const char* shard : {"1/2", "2/2"}) {
    const RunResult r = tiny_sweep(cwd.path(), {"--task", "induction", "--seeds", "0-1", "--jobs", "1", "--shard", shard,
                                                "--out", shards});
    ASSERT_EQ(r.exit_code, 0) << r.describe();
  }
  for (const char* name : {"/shard-1-of-2.json", "/shard-2-of-2.json"}) {
    nlohmann::json shard = read_json(shards + name);
    drop_roles_keys(shard);
    write_json(shards + name, shard);
  }
  const RunResult collected = run_headlab({"sweep", "--collect", shards}, cwd.path());
  ASSERT_EQ(collected.exit_code, 0) << collected.describe();
  EXPECT_EQ(read_json(shards + "/sweep.json").at("configs").at(0).at("runs_expecting_roles"), 2);
}

// F10: a switch takes a list in a sweep and is then an axis of the grid.
TEST(SweepSwitches, AttnOnlyTrueFalseIsAGridAxisAndAloneStillSetsEveryRun) {
  TempDir cwd;
  // A --config file that turns it on: the "off" runs must train without it all the same.
  write_bytes(cwd / "on.json", "{\"attn-only\": true}\n");
  const std::string grid = cwd / "grid";
  const RunResult r = tiny_sweep(cwd.path(), {"--config", "on.json", "--attn-only", "true,false", "--seeds", "0",
                                              "--jobs", "1", "--out", grid});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_NE(r.err.find("(attn-only on,off x heads 2 x seeds 0, 2 steps each)"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("attn-only on, h2 "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("attn-only off, h2 "), std::string::npos) << r.out;
  EXPECT_EQ(read_json(grid + "/attn-only-on-h2-s0/config.json").at("attn-only"), true);
  EXPECT_EQ(read_json(grid + "/attn-only-off-h2-s0/config.json").at("attn-only"), false);
  const nlohmann::json s = read_json(grid + "/sweep.json");
  EXPECT_EQ(s.at("grid"), (nlohmann::json{{"attn-only", {true, false}}}));
  EXPECT_EQ(s.at("flags").at(0).at("flag"), "attn-only");
  EXPECT_EQ(s.at("flags").at(0).at("values").size(), 2u);
  // The plan reads back: --redraw checks it as --resume does.
  const RunResult redrawn = run_headlab({"sweep", "--redraw", grid}, cwd.path());
  ASSERT_EQ(redrawn.exit_code, 0) << redrawn.describe();

  // Alone, as before: every run with it, and no axis.
  const RunResult plain = tiny_sweep(cwd.path(), {"--attn-only", "--seeds", "0", "--jobs", "1", "--out", cwd / "plain"});
  ASSERT_EQ(plain.exit_code, 0) << plain.describe();
  EXPECT_EQ(read_json(cwd / "plain/h2-s0/config.json").at("attn-only"), true);
  EXPECT_TRUE(read_json(cwd / "plain/sweep.json").at("grid").empty());

  EXPECT_TRUE(clean_failure(run_headlab({"sweep", "--attn-only", "maybe", "--out", cwd / "bad"}, cwd.path()), 2,
                            {"--attn-only 'maybe'", "'maybe' is not on or off", "true,false"}));
  EXPECT_TRUE(clean_failure(run_headlab({"sweep", "--no-layernorm", "on,on", "--out", cwd / "bad"}, cwd.path()), 2,
                            {"--no-layernorm 'on,on'", "on is listed twice"}));
  EXPECT_FALSE(fs::exists(cwd / "bad"));
}

TEST(SweepRoles, ASweepOfATaskListIsNamedByItsTasks) {
  TempDir cwd;
  const std::string sweep = cwd / "tasks";
  const RunResult r = tiny_sweep(cwd.path(), {"--task", "previous,first", "--seeds", "0", "--jobs", "1", "--out", sweep});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_NE(r.err.find("runs of tasks previous, first ("), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("first-prev-pair"), std::string::npos) << r.err;
  EXPECT_EQ(read_json(sweep + "/sweep.json").at("task"), "previous,first");
  EXPECT_NE(read_bytes(sweep + "/sweep.html").find("headlab sweep: tasks previous, first"), std::string::npos);
}

// A --task list's run folders (taskfirst-prev-sum-h2-s0: the task's own "-s"
// blurs the name's parts) are never parsed: --resume finds each run by the
// folder name its plan gives, and reads its configuration from the plan, which
// is each run's config.json's.
TEST(SweepRoles, ATaskListSweepsRunsAreFoundByThePlanNotByParsingTheirNames) {
  TempDir cwd;
  const std::string sweep = cwd / "tasks";
  ASSERT_EQ(tiny_sweep(cwd.path(), {"--task", "first-prev-sum,previous", "--seeds", "0,1", "--jobs", "1", "--out", sweep})
                .exit_code,
            0);
  const std::string redo = sweep + "/taskfirst-prev-sum-h2-s1";
  fs::remove_all(redo);
  const RunResult resumed = run_headlab({"sweep", "--resume", sweep}, cwd.path());
  ASSERT_EQ(resumed.exit_code, 0) << resumed.describe();
  // The three others found finished, the removed one run again.
  for (const char* line : {"task first-prev-sum, h2 s0: ", "task previous, h2 s0: ", "task previous, h2 s1: "}) {
    const std::size_t at = resumed.err.find(line);
    ASSERT_NE(at, std::string::npos) << line << resumed.err;
    EXPECT_NE(resumed.err.substr(at, resumed.err.find('\n', at) - at).find("(finished earlier)"), std::string::npos)
        << line << resumed.err;
  }
  EXPECT_TRUE(fs::exists(redo + "/heads.json"));
  const nlohmann::json runs = read_json(sweep + "/sweep.json").at("runs");
  ASSERT_EQ(runs.size(), 4u);
  for (const nlohmann::json& r : runs) {
    const nlohmann::json config = read_json(sweep + "/" + r.at("dir").get<std::string>() + "/config.json");
    EXPECT_EQ(r.at("settings").at("task"), config.at("task")) << r.at("dir");
    EXPECT_EQ(r.at("seed"), config.at("seed")) << r.at("dir");
    EXPECT_EQ(r.at("status"), "done") << r.at("dir");
  }
}

}  // namespace
}  // namespace headlab::cli_test
