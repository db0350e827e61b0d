#include "train/sweep_document.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <stdexcept>

#include "train/config.h"
#include "train/errors.h"
#include "train/json_input.h"
#include "train/sweep_shard.h"

namespace headlab::train {

int64_t file_int(const nlohmann::json& j, const char* key, int64_t lo, int64_t hi, const std::string& where) {
  const auto it = j.find(key);
  if (it == j.end() || !it->is_number_integer() || (it->is_number_unsigned() && it->get<uint64_t>() > INT64_MAX) ||
      it->get<int64_t>() < lo || it->get<int64_t>() > hi)
    throw UsageError(where + ": \"" + key + "\" " + (it == j.end() ? std::string("is missing") : brief_json(*it)) +
                     " is not a whole number from " + std::to_string(lo) + " to " + std::to_string(hi));
  return it->get<int64_t>();
}

RunEntry run_entry(const nlohmann::json& r, const std::vector<SweepRun>& plan, const std::string& where) {
  if (!r.is_object() || !r.contains("dir") || !r.at("dir").is_string())
    throw UsageError(where + ": a run without its \"dir\"");
  const std::string dir = r.at("dir").get<std::string>();
  const auto it = std::find_if(plan.begin(), plan.end(), [&](const SweepRun& p) { return p.dir == dir; });
  if (it == plan.end()) throw UsageError(where + ": the run " + brief_text(dir) + " is not in the plan");
  RunEntry entry{static_cast<std::size_t>(it - plan.begin()), *it};
  SweepRun& run = entry.run;
  const auto seconds = r.find("seconds");
  if (seconds == r.end() || !seconds->is_number() || !(seconds->get<double>() >= 0) || !std::isfinite(seconds->get<double>()))
    throw UsageError(where + ": the run " + dir + " has no \"seconds\" >= 0");
  run.seconds = seconds->get<double>();
  const auto status = r.find("status");
  try {
    run.status = status_from_name(status != r.end() && status->is_string() ? status->get<std::string>() : "");
  } catch (const std::invalid_argument&) {
    throw UsageError(where + ": the run " + dir + " has no \"status\" done, failed or interrupted");
  }
  if (run.status != RunStatus::done) {
    run.exit_code = static_cast<int>(file_int(r, "exit_code", 0, 255, where + ": the run " + dir));
    const auto error = r.find("error");
    run.error = error != r.end() && error->is_string() ? brief_text(error->get<std::string>(), 400) : "";
  }
  return entry;
}

namespace {

// file[key] as a list of objects.
void check_objects(const nlohmann::json& file, const char* key, const std::string& where) {
  const auto it = file.find(key);
  if (it == file.end() || !it->is_array() ||
      !std::all_of(it->begin(), it->end(), [](const nlohmann::json& x) { return x.is_object(); }))
    throw UsageError(where + ": \"" + key + "\" is " + (it == file.end() ? std::string("missing") : brief_json(*it)) +
                     ", not a list of objects");
}

// A finished run's results, of the types run_json gives them.
void check_results(const nlohmann::json& r, const std::string& where) {
  for (const char* key : {"loss", "accuracy", "specialized_step"}) {
    const auto it = r.find(key);
    if (it != r.end() && !it->is_null() && !it->is_number())
      throw UsageError(where + ": \"" + key + "\" " + brief_json(*it) + " is neither a number nor null");
  }
  // Absent from a sweep.json written before the roles' rate: drawn without.
  if (const auto it = r.find("roles_found"); it != r.end() && !it->is_null() && !it->is_boolean())
    throw UsageError(where + ": \"roles_found\" " + brief_json(*it) + " is neither true, false nor null");
  check_objects(r, "head_results", where);
}

}  // namespace

SweepPlan check_sweep_file(const nlohmann::json& file, const std::string& where) {
  if (!file.is_object() || file.value("format", nlohmann::json()) != "headlab-sweep/1")
    throw UsageError(where + " is not a sweep's file (no \"format\": \"headlab-sweep/1\")");
  const SweepPlan plan = plan_from_json(file, where);
  if (!file.contains("config")) throw UsageError(where + " holds no \"config\"");
  const TrainConfig config = stored_config(file.at("config"), where + " \"config\"");
  // Every configuration's settings, as --resume checks them before it runs.
  for (const SweepCell& cell : plan.cells()) {
    try {
      cell_config(config, cell).validate();
    } catch (const UsageError& e) {
      throw UsageError(where + " \"config\" (" + cell.name() + "): " + e.what());
    }
  }
  check_objects(file, "runs", where);
  const std::vector<SweepRun> runs = plan.runs();
  std::set<std::size_t> seen;
  for (const nlohmann::json& r : file.at("runs")) {
    const RunEntry entry = run_entry(r, runs, where);
    if (!seen.insert(entry.index).second)
      throw UsageError(where + ": the run " + entry.run.dir + " is listed twice");
    if (entry.run.status == RunStatus::done) check_results(r, where + ": the run " + entry.run.dir);
  }
  // Summaries an older headlab did not write are drawn without.
  for (const char* key : {"configs", "flags"})
    if (file.contains(key)) check_objects(file, key, where);
  return plan;
}

}  // namespace headlab::train
