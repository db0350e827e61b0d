#include "train/run_identity.h"

#include <algorithm>
#include <filesystem>
#include <optional>

#include "core/shortest.h"
#include "train/errors.h"
#include "train/input_file.h"
#include "train/json_input.h"

namespace headlab::train {
namespace {

// Whether config.json's `file` for a data flag is the run folder's own copy
// of the checkpoint's `recorded` file: a resume of a moved run folder names
// its own copy from its start (run_data.h), the checkpoint from its next save.
bool relocated_data(const std::string& key, const nlohmann::json& recorded, const nlohmann::json& file,
                    const std::string& dir) {
  if ((key != "data" && key != "eval-data") || !recorded.is_string() || !file.is_string()) return false;
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path own = fs::path(dir) / fs::path(recorded.get<std::string>()).filename();
  return fs::absolute(own, ec).lexically_normal() == fs::path(file.get<std::string>());
}

// The keys config.json and the checkpoint's config give different values,
// as "KEY X in the checkpoint, Y in config.json".
std::vector<std::string> differing_settings(const nlohmann::json& checkpoint, const nlohmann::json& file,
                                            const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& item : checkpoint.items()) {
    const auto there = file.find(item.key());
    if (there == file.end() || *there == item.value()) continue;
    if (std::find(kResumeFlags.begin(), kResumeFlags.end(), item.key()) != kResumeFlags.end()) continue;
    if (relocated_data(item.key(), item.value(), *there, dir)) continue;
    out.push_back(item.key() + " " + brief_json(item.value()) + " in the checkpoint, " + brief_json(*there) +
                  " in config.json");
  }
  return out;
}

// config.json as JSON, or nothing when the folder has none.
std::optional<nlohmann::json> folder_config(const RunFolder& folder, const CheckpointUse& use) {
  std::error_code ec;
  if (!std::filesystem::exists(folder.config(), ec)) return std::nullopt;
  constexpr std::size_t kMaxBytes = 1 << 20;  // as a --config file
  const std::string text = read_input(folder.config(), folder.config(), kMaxBytes, "it is the run's own file");
  try {
    if (text.size() > kMaxBytes) throw std::invalid_argument("over " + std::to_string(kMaxBytes) + " bytes");
    nlohmann::json j = parse_user_json(text);
    if (!j.is_object()) throw std::invalid_argument("not a JSON object");
    return j;
  } catch (const std::invalid_argument& e) {
    throw UsageError(use.prefix() + folder.config() + " is not the run's settings (" + e.what() +
                     "); it is needed to check that the checkpoint is this run's: restore it");
  }
}

}  // namespace

void check_checkpoint_is_the_folders(const RunFolder& folder, const Checkpoint& checkpoint, const CheckpointUse& use) {
  std::vector<std::string> problems;
  if (const std::optional<nlohmann::json> file = folder_config(folder, use)) {
    // The raw metadata, as config.json: keys a newer or older headlab added
    // are in one only, and are skipped.
    const nlohmann::json ours = parse_user_json(checkpoint.file.metadata.at("config"));
    for (const std::string& d : differing_settings(ours, *file, folder.dir)) problems.push_back(d);
    const auto steps = file->find("steps");
    if (steps != file->end() && steps->is_number_unsigned() && steps->get<uint64_t>() < static_cast<uint64_t>(checkpoint.info.step))
      problems.push_back("the checkpoint is at step " + std::to_string(checkpoint.info.step) + ", beyond the " +
                         std::to_string(steps->get<uint64_t>()) + " steps of config.json");
  }
  // A model edited from Python and saved (Model.save) keeps its source's
  // config, step and seed, so the witnesses above cannot tell it from the
  // run's own; its "edited" record does: the run never trained those weights.
  if (const nlohmann::json& edited = checkpoint.info.edited; edited.is_object()) {
    std::string replaced;
    for (const nlohmann::json& name : edited.value("replaced", nlohmann::json::array()))
      if (name.is_string()) replaced += (replaced.empty() ? "" : ", ") + name.get<std::string>();
    problems.push_back("it holds weights edited from Python (" + (replaced.empty() ? "none" : replaced) +
                       " replaced), which the run never trained");
  }
  const nlohmann::json& trainer = checkpoint.info.trainer;
  if (trainer.is_object() && trainer.contains("logged")) {
    const auto step = trainer["logged"]["step"].get<int64_t>();
    const auto loss = trainer["logged"]["loss"].get<double>();
    for (const nlohmann::json& line : read_metrics(folder.metrics())) {
      if (!line.is_object() || line.value("step", int64_t{-1}) != step || !line.contains("loss")) continue;
      if (!line["loss"].is_number() || line["loss"].get<double>() != loss)
        problems.push_back("metrics.jsonl has loss " + brief_json(line["loss"]) + " at step " + std::to_string(step) +
                           ", where the checkpoint's run logged " + core::shortest(loss));
      break;
    }
  }
  if (problems.empty()) return;
  std::string listed;
  for (std::size_t i = 0; i < problems.size() && i < 6; ++i) listed += (i ? "; " : "") + problems[i];
  if (problems.size() > 6) listed += "; and " + std::to_string(problems.size() - 6) + " more";
  throw UsageError(use.prefix() + use.path + " is not the checkpoint of the run in " + folder.dir +
                   " (was it copied from another run?): " + listed + ". " + use.fix);
}

}  // namespace headlab::train
