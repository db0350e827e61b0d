// Shards of a sweep: --shard K/N, the shard of a Slurm job array's task, and
// which runs a shard holds.
#include "train/sweep_shard.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "train/errors.h"

namespace headlab::train {
namespace {

std::map<std::string, std::string> g_env;
const char* fake_getenv(const char* name) {
  const auto it = g_env.find(name);
  return it == g_env.end() ? nullptr : it->second.c_str();
}

TEST(SweepShard, ParsesKOfN) {
  const Shard s = parse_shard("2/4");
  EXPECT_EQ(s.index, 2);
  EXPECT_EQ(s.count, 4);
  for (const char* bad : {"0/2", "3/2", "2", "a/2", "1/0", "1/2x", ""}) EXPECT_THROW(parse_shard(bad), UsageError) << bad;
}

TEST(SweepShard, EveryRunInExactlyOneShard) {
  for (std::size_t run = 0; run < 10; ++run) {
    int holders = 0;
    for (int k = 1; k <= 3; ++k) holders += Shard{k, 3}.holds(run) ? 1 : 0;
    EXPECT_EQ(holders, 1) << run;
  }
  EXPECT_TRUE((Shard{2, 3}.holds(4)));
}

TEST(SweepShard, FromASlurmJobArray) {
  g_env.clear();
  EXPECT_FALSE(shard_from_slurm(fake_getenv));
  g_env = {{"SLURM_ARRAY_TASK_ID", "0"}, {"SLURM_ARRAY_TASK_COUNT", "4"}};
  EXPECT_EQ(shard_from_slurm(fake_getenv)->index, 1);
  // --array=1-4
  g_env = {{"SLURM_ARRAY_TASK_ID", "4"}, {"SLURM_ARRAY_TASK_MIN", "1"}, {"SLURM_ARRAY_TASK_COUNT", "4"}};
  EXPECT_EQ(shard_from_slurm(fake_getenv)->index, 4);
  // --array=0-6:2 (0, 2, 4, 6)
  g_env = {{"SLURM_ARRAY_TASK_ID", "4"}, {"SLURM_ARRAY_TASK_STEP", "2"}, {"SLURM_ARRAY_TASK_COUNT", "4"}};
  const auto s = shard_from_slurm(fake_getenv);
  EXPECT_EQ(s->index, 3);
  EXPECT_EQ(s->count, 4);
  g_env = {{"SLURM_ARRAY_TASK_ID", "9"}, {"SLURM_ARRAY_TASK_COUNT", "4"}};
  EXPECT_THROW(shard_from_slurm(fake_getenv), UsageError);
}

// Values near INT_MAX overflowed int arithmetic (UBSan) and named a shard of
// 2147483647; now every such value is refused, in 64-bit arithmetic.
TEST(SweepShard, HugeJobArrayValuesAreRefusedWithoutOverflow) {
  g_env = {{"SLURM_ARRAY_TASK_ID", "2147483647"},
           {"SLURM_ARRAY_TASK_COUNT", "2147483647"},
           {"SLURM_ARRAY_TASK_MIN", "-2147483648"}};
  EXPECT_THROW(shard_from_slurm(fake_getenv), UsageError);
  g_env = {{"SLURM_ARRAY_TASK_ID", "2147483647"}, {"SLURM_ARRAY_TASK_COUNT", "3"}, {"SLURM_ARRAY_TASK_MIN", "-2147483648"}};
  EXPECT_THROW(shard_from_slurm(fake_getenv), UsageError);
  g_env = {{"SLURM_ARRAY_TASK_ID", "99999999999999999999"}, {"SLURM_ARRAY_TASK_COUNT", "2"}};
  EXPECT_THROW(shard_from_slurm(fake_getenv), UsageError);
  g_env = {{"SLURM_ARRAY_TASK_ID", "0"}, {"SLURM_ARRAY_TASK_COUNT", std::to_string(kMaxShards + 1)}};
  EXPECT_THROW(shard_from_slurm(fake_getenv), UsageError);
  g_env = {{"SLURM_ARRAY_TASK_ID", std::to_string(kMaxShards - 1)}, {"SLURM_ARRAY_TASK_COUNT", std::to_string(kMaxShards)}};
  EXPECT_EQ(shard_from_slurm(fake_getenv)->index, kMaxShards);
  EXPECT_THROW(parse_shard("1/2147483647"), UsageError);
  EXPECT_THROW(parse_shard("1/99999999999"), UsageError);
  EXPECT_EQ(parse_shard("10000/10000").index, 10000);
}

TEST(SweepShard, FileNameAndStatus) {
  EXPECT_EQ(shard_file_name({2, 4}), "shard-2-of-4.json");
  for (const RunStatus s : {RunStatus::done, RunStatus::failed, RunStatus::interrupted})
    EXPECT_EQ(status_from_name(status_name(s)), s);
  EXPECT_THROW(status_from_name("nope"), std::invalid_argument);
}

TEST(SweepShard, AFileNameIsReadBackOnlyAsShardFileNameWritesIt) {
  const std::optional<Shard> s = shard_of_file_name("shard-2-of-4.json");
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->index, 2);
  EXPECT_EQ(s->count, 4);
  for (const char* other : {"shard-02-of-4.json", "shard-5-of-4.json", "shard-0-of-4.json", "shard-1-of-4.json.tmp",
                            "shard-1of4.json", "shard--of-4.json", "shard-1-of-10001.json", "sweep.json"})
    EXPECT_FALSE(shard_of_file_name(other).has_value()) << other;
}

}  // namespace
}  // namespace headlab::train
