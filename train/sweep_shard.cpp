#include "train/sweep_shard.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <filesystem>

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

std::optional<Shard> shard_of_file_name(const std::string& name) {
  if (!name.starts_with("shard-") || !name.ends_with(".json")) return std::nullopt;
  const std::string middle = name.substr(6, name.size() - 6 - 5);  // "K-of-N"
  const std::size_t of = middle.find("-of-");
  if (of == std::string::npos) return std::nullopt;
  const auto k = whole_number(middle.substr(0, of)), n = whole_number(middle.substr(of + 4));
  if (!k || !n || *n < 1 || *k < 1 || *k > *n || *n > kMaxShards) return std::nullopt;
  const Shard shard{static_cast<int>(*k), static_cast<int>(*n)};
  if (shard_file_name(shard) != name) return std::nullopt;  // "shard-01-of-2.json"
  return shard;
}

std::map<int, std::vector<std::string>> shard_files(const std::string& dir) {
  std::map<int, std::map<int, std::string>> by_split;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec))
    if (const auto shard = shard_of_file_name(entry.path().filename().string()))
      by_split[shard->count][shard->index] = entry.path().filename().string();
  std::map<int, std::vector<std::string>> out;
  for (const auto& [n, files] : by_split)
    for (const auto& [k, name] : files) out[n].push_back(name);
  return out;
}

namespace {

std::string listed(const std::vector<std::string>& names, const std::string& dir, const std::string& separator) {
  std::string out;
  for (const std::string& name : names)
    out += (out.empty() ? "" : separator) + (dir.empty() ? name : (std::filesystem::path(dir) / name).string());
  return out;
}

}  // namespace

void check_same_split(const std::string& dir, const Shard& shard, const std::string& where) {
  std::vector<std::string> others;
  std::string counts;  // "2", "2 and 4"
  int first = 0;
  for (const auto& [count, names] : shard_files(dir)) {
    if (count == shard.count) continue;
    others.insert(others.end(), names.begin(), names.end());
    counts += (counts.empty() ? "" : " and ") + std::to_string(count);
    if (first == 0) first = count;
  }
  if (others.empty()) return;
  throw UsageError(where + " holds " + listed(others, "", ", ") + ", of this sweep split into " + counts +
                   " shards, and --collect merges the shards of one split: run this one as a shard of that split "
                   "(--shard K/" + std::to_string(first) + "), or remove those files first (rm " +
                   listed(others, dir, " ") + ") to split the sweep into " + std::to_string(shard.count));
}

void check_one_split(const std::string& dir, const std::string& where) {
  const std::map<int, std::vector<std::string>> splits = shard_files(dir);
  if (splits.size() < 2) return;
  // Kept: the split with the most shards done (of those, the first).
  int kept = splits.begin()->first;
  for (const auto& [n, names] : splits)
    if (names.size() > splits.at(kept).size()) kept = n;
  std::string described, removed;
  std::vector<std::string> remove;
  for (const auto& [n, names] : splits) {
    std::string missing;
    int absent = 0;
    for (int k = 1; k <= n; ++k)
      if (std::find(names.begin(), names.end(), shard_file_name({k, n})) == names.end() && absent++ < 5)
        missing += (missing.empty() ? "" : ", ") + std::to_string(k);
    if (absent > 5) missing += ", ...";
    described += (described.empty() ? "" : " and ") + std::to_string(n) + " shards (" + listed(names, "", ", ") +
                 (absent == 0 ? "; all done)" : (absent == 1 ? "; shard " : "; shards ") + missing + " missing)");
    if (n != kept) remove.insert(remove.end(), names.begin(), names.end());
  }
  throw UsageError(where + ": shard files of " + std::to_string(splits.size()) +
                   " splits of the sweep are mixed in one folder: " + described +
                   "; keep one split's files and remove the others', such as those of all but " +
                   std::to_string(kept) + " shards (rm " + listed(remove, dir, " ") + "), then --collect again");
}

RunStatus status_from_name(const std::string& name) {
  for (const RunStatus s : {RunStatus::done, RunStatus::failed, RunStatus::interrupted})
    if (status_name(s) == name) return s;
  throw std::invalid_argument("unknown run status '" + name + "'");
}

}  // namespace headlab::train
