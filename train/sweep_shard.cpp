#include "train/sweep_shard.h"

#include <charconv>
#include <cstdint>
#include <cstdlib>

#include "train/errors.h"

namespace headlab::train {
namespace {

std::optional<int64_t> whole_number(const std::string& text) {
  int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

}  // namespace

Shard parse_shard(const std::string& text) {
  const std::size_t slash = text.find('/');
  const auto k = whole_number(text.substr(0, slash));
  const auto n = slash == std::string::npos ? std::nullopt : whole_number(text.substr(slash + 1));
  if (!k || !n || *n < 1 || *k < 1 || *k > *n || *n > kMaxShards)
    throw UsageError("--shard '" + text + "': write K/N with 1 <= K <= N <= " + std::to_string(kMaxShards) +
                     ", like 2/4 (the second of four shards)");
  return {static_cast<int>(*k), static_cast<int>(*n)};
}

std::optional<Shard> shard_from_slurm(const char* (*getenv)(const char*)) {
  const char* id = getenv("SLURM_ARRAY_TASK_ID");
  const char* count = getenv("SLURM_ARRAY_TASK_COUNT");
  if (id == nullptr || count == nullptr) return std::nullopt;
  const char* min = getenv("SLURM_ARRAY_TASK_MIN");
  const char* step = getenv("SLURM_ARRAY_TASK_STEP");
  const auto i = whole_number(id), n = whole_number(count);
  const auto lo = min != nullptr ? whole_number(min) : std::optional<int64_t>(0);
  const auto by = step != nullptr ? whole_number(step) : std::optional<int64_t>(1);
  // Job array indexes are 0 or more; in int64 then, no difference below overflows.
  const auto valid = [](const std::optional<int64_t>& v) { return v && *v >= 0 && *v <= INT32_MAX; };
  if (!valid(i) || !valid(n) || !valid(lo) || !valid(by) || *n < 1 || *n > kMaxShards || *by < 1 || *i < *lo ||
      (*i - *lo) % *by != 0 || (*i - *lo) / *by >= *n)
    throw UsageError("cannot tell the shard from SLURM_ARRAY_TASK_ID " + std::string(id) + ", SLURM_ARRAY_TASK_COUNT " +
                     count + (min ? ", SLURM_ARRAY_TASK_MIN " + std::string(min) : std::string()) +
                     (step ? ", SLURM_ARRAY_TASK_STEP " + std::string(step) : std::string()) +
                     " (a shard K of N <= " + std::to_string(kMaxShards) + "; give --shard K/N)");
  return Shard{static_cast<int>((*i - *lo) / *by + 1), static_cast<int>(*n)};
}

std::string shard_file_name(const Shard& shard) {
  return "shard-" + std::to_string(shard.index) + "-of-" + std::to_string(shard.count) + ".json";
}

RunStatus status_from_name(const std::string& name) {
  for (const RunStatus s : {RunStatus::done, RunStatus::failed, RunStatus::interrupted})
    if (status_name(s) == name) return s;
  throw std::invalid_argument("unknown run status '" + name + "'");
}

}  // namespace headlab::train
