#include "train/checkpoint.h"

#include <set>
#include <stdexcept>

#include "train/errors.h"

namespace headlab::train {

nlohmann::json model_json(const layers::TransformerOptions& o) {
  return {{"vocab", o.vocab()},
          {"classes", o.classes()},
          {"max_seq_len", o.max_seq_len()},
          {"layers", o.layers()},
          {"heads", o.heads()},
          {"d_model", o.d_model()},
          {"d_ff", o.d_ff()},
          {"attn_only", o.attn_only()},
          {"layernorm", o.layernorm()},
          {"causal", o.causal()}};
}

layers::TransformerOptions model_from_json(const nlohmann::json& j) {
  layers::TransformerOptions o;
  o.vocab(j.at("vocab").get<int64_t>())
      .classes(j.at("classes").get<int64_t>())
      .max_seq_len(j.at("max_seq_len").get<int64_t>())
      .layers(j.at("layers").get<int64_t>())
      .heads(j.at("heads").get<int64_t>())
      .d_model(j.at("d_model").get<int64_t>())
      .d_ff(j.at("d_ff").get<int64_t>())
      .attn_only(j.at("attn_only").get<bool>())
      .layernorm(j.at("layernorm").get<bool>())
      .causal(j.at("causal").get<bool>());
  return o;
}

void save_checkpoint(const std::string& path, const layers::Transformer& model, const optim::Optimizer* optimizer,
                     const CheckpointInfo& info) {
  core::NamedTensors tensors;
  for (const auto& [name, param] : model.named_parameters()) tensors.emplace_back(name, param.value());
  core::Metadata meta;
  if (optimizer) {
    optim::OptimizerState state = optimizer->export_state();
    for (auto& t : state.tensors) tensors.push_back(std::move(t));
    meta = std::move(state.metadata);
  }
  meta["format"] = kCheckpointFormat;
  meta["format_version"] = kCheckpointVersion;
  meta["model"] = model_json(model.options()).dump();
  meta["config"] = to_json(info.config).dump();
  meta["task"] = info.task;
  meta["step"] = std::to_string(info.step);
  meta["rng.data"] = nlohmann::json(info.data_rng).dump();
  if (info.data_position)
    meta["data.position"] =
        nlohmann::json{{"epoch_seed", info.data_position->epoch_seed}, {"next", info.data_position->next}}.dump();
  core::save_safetensors(path, tensors, meta);
}

namespace {

const std::string& meta_at(const core::Metadata& meta, const std::string& key, const std::string& path) {
  const auto it = meta.find(key);
  if (it == meta.end())
    throw UsageError(path + ": not a headlab checkpoint (its metadata has no \"" + key + "\")");
  return it->second;
}

nlohmann::json parse_meta_json(const core::Metadata& meta, const std::string& key, const std::string& path) {
  try {
    return nlohmann::json::parse(meta_at(meta, key, path));
  } catch (const nlohmann::json::exception& e) {
    throw UsageError(path + ": metadata \"" + key + "\" is not valid JSON (" + e.what() + ")");
  }
}

}  // namespace

Checkpoint read_checkpoint(const std::string& path) {
  Checkpoint ck;
  try {
    ck.file = core::load_safetensors(path);
  } catch (const std::exception& e) {
    throw UsageError(std::string("cannot load checkpoint: ") + e.what());
  }
  const core::Metadata& meta = ck.file.metadata;
  if (meta_at(meta, "format", path) != kCheckpointFormat)
    throw UsageError(path + ": format is \"" + meta.at("format") + "\", expected \"" + kCheckpointFormat + "\"");
  if (meta_at(meta, "format_version", path) != kCheckpointVersion)
    throw UsageError(path + ": checkpoint format version " + meta.at("format_version") +
                     " is not supported by this headlab (it reads version " + kCheckpointVersion + ")");
  try {
    ck.model = model_from_json(parse_meta_json(meta, "model", path));
    ck.model.validate();
    apply_json(ck.info.config, parse_meta_json(meta, "config", path), path + " (config)");
    ck.info.task = meta_at(meta, "task", path);
    ck.info.step = std::stoll(meta_at(meta, "step", path));
    ck.info.data_rng = parse_meta_json(meta, "rng.data", path).get<core::Generator::State>();
    if (meta.count("data.position")) {
      const nlohmann::json p = parse_meta_json(meta, "data.position", path);
      ck.info.data_position = DataFile::Position{p.at("epoch_seed").get<uint64_t>(), p.at("next").get<int64_t>()};
    }
  } catch (const UsageError&) {
    throw;
  } catch (const std::exception& e) {
    throw UsageError(path + ": invalid checkpoint metadata: " + e.what());
  }
  if (ck.info.step < 0) throw UsageError(path + ": negative step " + std::to_string(ck.info.step));
  return ck;
}

void load_weights(layers::Transformer& model, const core::SafetensorsFile& file, const std::string& source) {
  std::set<std::string> expected;
  for (const auto& [name, param] : model.named_parameters()) {
    expected.insert(name);
    if (!file.contains(name)) throw UsageError(source + ": the checkpoint has no tensor \"" + name + "\"");
    const core::Tensor& t = file.get(name);
    if (t.shape() != param.shape())
      throw UsageError(source + ": tensor \"" + name + "\" has shape " + core::to_string(t.shape()) +
                       ", the model needs " + core::to_string(param.shape()));
    param.mutable_value().copy_(t);
  }
  for (const auto& [name, t] : file.tensors)
    if (!expected.count(name) && name.rfind("optimizer.", 0) != 0)
      throw UsageError(source + ": unexpected tensor \"" + name + "\" (not a parameter of this model)");
}

}  // namespace headlab::train
