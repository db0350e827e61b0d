#include "train/rank_agreement.h"

#include <algorithm>
#include <cstdio>
#include <map>

#include <nlohmann/json.hpp>

#include "train/checkpoint.h"
#include "train/errors.h"

namespace headlab::train {
namespace {

// A JSON value as a message prints it: strings without their quotes.
std::string text_of(const nlohmann::json& value) {
  return value.is_string() ? value.get<std::string>() : value.dump();
}

// FNV-1a 64 over the bytes, continuing from `hash`.
uint64_t fnv1a(uint64_t hash, const void* data, std::size_t bytes) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < bytes; ++i) hash = (hash ^ p[i]) * 0x100000001b3ULL;
  return hash;
}

uint64_t hash_tensors(uint64_t hash, const core::NamedTensors& tensors) {
  for (const auto& [name, tensor] : tensors) {
    hash = fnv1a(hash, name.data(), name.size());
    const core::Tensor t = tensor.contiguous();
    hash = fnv1a(hash, t.raw_data(), static_cast<std::size_t>(t.numel()) * core::dtype_size(t.dtype()));
  }
  return hash;
}

// The state a session starts from: parameters, optimizer state and metadata,
// the data generator and the task's stream position.
std::string state_hash(Session& session) {
  uint64_t hash = 0xcbf29ce484222325ULL;
  core::NamedTensors params;
  for (const auto& [name, p] : session.model().named_parameters()) params.emplace_back(name, p.value());
  hash = hash_tensors(hash, params);
  const optim::OptimizerState optimizer = session.optimizer().export_state();
  hash = hash_tensors(hash, optimizer.tensors);
  for (const auto& [key, value] : optimizer.metadata) {
    hash = fnv1a(hash, key.data(), key.size());
    hash = fnv1a(hash, value.data(), value.size());
  }
  const CheckpointInfo info = session.checkpoint_info();
  hash = fnv1a(hash, info.data_rng.data(), sizeof info.data_rng);
  if (info.data_position) {
    hash = fnv1a(hash, &info.data_position->epoch_seed, sizeof info.data_position->epoch_seed);
    hash = fnv1a(hash, &info.data_position->next, sizeof info.data_position->next);
  }
  char text[19];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(hash));
  return text;
}

nlohmann::json to_json(const RunFingerprint& fingerprint) {
  nlohmann::json out = nlohmann::json::array();
  for (const FingerprintEntry& e : fingerprint) out.push_back({e.key, e.value, e.derived});
  return out;
}

// Another rank's fingerprint; one that does not read (it never should) has
// no entries, so every key differs.
RunFingerprint from_json(const std::string& text) {
  RunFingerprint out;
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_array()) return out;
  for (const nlohmann::json& e : j) {
    if (!e.is_array() || e.size() != 3 || !e[0].is_string() || !e[1].is_string() || !e[2].is_boolean()) return {};
    out.push_back({e[0].get<std::string>(), e[1].get<std::string>(), e[2].get<bool>()});
  }
  return out;
}

// "process 1" or "processes 1, 2, 3" (at most four numbers, then how many more).
std::string processes(const std::vector<int>& ranks) {
  std::string out = ranks.size() == 1 ? "process " : "processes ";
  for (std::size_t i = 0; i < ranks.size() && i < 4; ++i) out += (i ? ", " : "") + std::to_string(ranks[i]);
  if (ranks.size() > 4) out += " and " + std::to_string(ranks.size() - 4) + " more";
  return out;
}

}  // namespace

RunFingerprint run_fingerprint(Session& session) {
  RunFingerprint out;
  const nlohmann::json config = train::to_json(session.config());
  for (auto it = config.begin(); it != config.end(); ++it)
    if (it.key() != "threads") out.push_back({"--" + it.key(), text_of(it.value()), false});
  const nlohmann::json model = model_json(session.model().spec());
  for (auto it = model.begin(); it != model.end(); ++it)
    out.push_back({"the model's " + it.key(), text_of(it.value()), true});
  out.push_back({"the step it starts from", std::to_string(session.steps_done()), false});
  out.push_back({"the hash of its weights, optimizer state and data stream", state_hash(session), true});
  return out;
}

std::string disagreement(const std::vector<RunFingerprint>& by_rank) {
  if (by_rank.size() < 2) return "";
  // Every key any rank has, in the order the first rank holding it lists it.
  std::vector<std::string> keys;
  std::map<std::string, bool> derived;
  std::vector<std::map<std::string, std::string>> values(by_rank.size());
  for (std::size_t r = 0; r < by_rank.size(); ++r)
    for (const FingerprintEntry& e : by_rank[r]) {
      if (!derived.contains(e.key)) keys.push_back(e.key), derived[e.key] = e.derived;
      values[r][e.key] = e.value;
    }
  std::vector<std::string> differing[2];  // [0]: given, [1]: derived
  for (const std::string& key : keys) {
    const auto value = [&](std::size_t r) {
      const auto it = values[r].find(key);
      return it == values[r].end() ? std::string("(none)") : it->second;
    };
    for (std::size_t r = 1; r < by_rank.size(); ++r)
      if (value(r) != value(0)) {
        differing[derived[key] ? 1 : 0].push_back(key);
        break;
      }
  }
  const std::vector<std::string>& named = differing[0].empty() ? differing[1] : differing[0];
  if (named.empty()) return "";
  std::string out;
  for (std::size_t k = 0; k < named.size() && k < 5; ++k) {
    // Each value once, with the ranks that hold it, in rank order.
    std::vector<std::pair<std::string, std::vector<int>>> groups;
    for (std::size_t r = 0; r < by_rank.size(); ++r) {
      const auto it = values[r].find(named[k]);
      const std::string v = it == values[r].end() ? std::string("(none)") : it->second;
      auto g = std::find_if(groups.begin(), groups.end(), [&](const auto& x) { return x.first == v; });
      if (g == groups.end()) groups.push_back({v, {}}), g = groups.end() - 1;
      g->second.push_back(static_cast<int>(r));
    }
    out += (k ? "; " : "") + named[k] + " is ";
    for (std::size_t g = 0; g < groups.size(); ++g)
      out += (g ? ", " : "") + groups[g].first + " on " + processes(groups[g].second);
  }
  if (named.size() > 5) out += "; and " + std::to_string(named.size() - 5) + " more";
  return "the " + std::to_string(by_rank.size()) + " processes of this job would train different runs: " + out +
         " (every process must be given the same settings, and resume the same checkpoint)";
}

void check_ranks_agree(const dist::World& world, const RunFingerprint& mine) {
  if (world.size() == 1) return;
  std::vector<RunFingerprint> by_rank;
  for (const std::string& text : world.all_gather(to_json(mine).dump())) by_rank.push_back(from_json(text));
  if (const std::string message = disagreement(by_rank); !message.empty()) {
    dist::mark_failure_shared();
    throw UsageError(message);
  }
}

}  // namespace headlab::train
