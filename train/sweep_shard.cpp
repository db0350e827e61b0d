#include "train/sweep_shard.h"

#include <charconv>
#include <cstdlib>

#include "train/errors.h"

namespace headlab::train {
namespace {

std::optional<int> whole_number(const std::string& text) {
  int value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

}  // namespace

Shard parse_shard(const std::string& text) {
  const std::size_t slash = text.find('/');
  const auto k = whole_number(text.substr(0, slash));
  const auto n = slash == std::string::npos ? std::nullopt : whole_number(text.substr(slash + 1));
  if (!k || !n || *n < 1 || *k < 1 || *k > *n)
    throw UsageError("--shard '" + text + "': write K/N with 1 <= K <= N, like 2/4 (the second of four shards)");
  return {*k, *n};
}

std::optional<Shard> shard_from_slurm(const char* (*getenv)(const char*)) {
  const char* id = getenv("SLURM_ARRAY_TASK_ID");
  const char* count = getenv("SLURM_ARRAY_TASK_COUNT");
  if (id == nullptr || count == nullptr) return std::nullopt;
  const char* min = getenv("SLURM_ARRAY_TASK_MIN");
  const char* step = getenv("SLURM_ARRAY_TASK_STEP");
  const auto i = whole_number(id), n = whole_number(count);
  const auto lo = min != nullptr ? whole_number(min) : std::optional<int>(0);
  const auto by = step != nullptr ? whole_number(step) : std::optional<int>(1);
  if (!i || !n || !lo || !by || *by < 1 || *i < *lo || (*i - *lo) % *by != 0 || (*i - *lo) / *by >= *n)
    throw UsageError("cannot tell the shard from SLURM_ARRAY_TASK_ID " + std::string(id) + " and SLURM_ARRAY_TASK_COUNT " +
                     count + " (give --shard K/N)");
  return Shard{(*i - *lo) / *by + 1, *n};
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
