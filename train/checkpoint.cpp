#include "train/checkpoint.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <set>
#include <stdexcept>
#include <type_traits>
#include <utility>

#include "core/shortest.h"
#include "train/errors.h"
#include "train/input_file.h"
#include "train/json_input.h"

namespace headlab::train {

nlohmann::json model_json(const layers::ModelSpec& spec) {
  nlohmann::json j = nlohmann::json::object();
  const layers::ModelSpec resolved = spec.resolved();
  layers::ModelSpec::visit_fields(resolved, [&](const char* name, const auto& field) { j[name] = field; });
  return j;
}

layers::ModelSpec model_from_json(const nlohmann::json& j) {
  if (!j.is_object()) throw std::invalid_argument("the model must be a JSON object, got " + brief_json(j, 40));
  layers::ModelSpec spec;
  layers::ModelSpec::visit_fields(spec, [&](const char* key, auto& field) {
    // Checkpoints written before the activation was a choice have none: GELU.
    if (std::string(key) == "activation" && !j.contains(key)) return;
    const nlohmann::json& v = j.at(key);
    // Strict types: nlohmann would convert 1e300 to an int64 (undefined behaviour).
    if constexpr (std::is_same_v<std::decay_t<decltype(field)>, bool>) {
      if (!v.is_boolean())
        throw std::invalid_argument(std::string("\"") + key + "\" must be true or false, got " + brief_json(v, 40));
    } else if constexpr (std::is_same_v<std::decay_t<decltype(field)>, std::string>) {
      if (!v.is_string())
        throw std::invalid_argument(std::string("\"") + key + "\" must be a string, got " + brief_json(v, 40));
    } else if (!v.is_number_integer()) {
      throw std::invalid_argument(std::string("\"") + key + "\" must be an integer, got " + brief_json(v, 40));
    }
    field = v.get<std::decay_t<decltype(field)>>();
  });
  return spec;
}

namespace {

template <class T>
std::optional<int64_t> first_non_finite_index(const core::Tensor& t) {
  const T* p = t.data<T>();
  for (int64_t i = 0, n = t.numel(); i < n; ++i)
    if (!std::isfinite(p[i])) return i;
  return std::nullopt;
}

}  // namespace

namespace {

std::optional<int64_t> first_beyond_float(const core::Tensor& t) {
  const double* p = t.data<double>();
  for (int64_t i = 0, n = t.numel(); i < n; ++i)
    if (std::abs(p[i]) > static_cast<double>(std::numeric_limits<float>::max())) return i;
  return std::nullopt;
}

}  // namespace

std::optional<std::string> first_non_finite(const core::NamedTensors& tensors) {
  for (const auto& [name, tensor] : tensors) {
    const core::Tensor t = tensor.contiguous();
    const std::optional<int64_t> at =
        t.dtype() == core::DType::f32 ? first_non_finite_index<float>(t) : first_non_finite_index<double>(t);
    if (!at) continue;
    const double value = t.dtype() == core::DType::f32 ? t.data<float>()[*at] : t.data<double>()[*at];
    return "\"" + name + "\" holds " + (std::isnan(value) ? "NaN" : value > 0 ? "+inf" : "-inf") + " at element " +
           std::to_string(*at) + " (of " + std::to_string(t.numel()) + ")";
  }
  return std::nullopt;
}

void save_checkpoint(const std::string& path, const layers::Transformer& model, const optim::Optimizer* optimizer,
                     const CheckpointInfo& info) {
  save_checkpoint(path, model, optimizer ? optimizer->export_state() : optim::OptimizerState{}, info);
}

void save_checkpoint(const std::string& path, const layers::Transformer& model,
                     const optim::OptimizerState& optimizer_state, const CheckpointInfo& info) {
  core::NamedTensors tensors;
  for (const auto& [name, param] : model.named_parameters()) tensors.emplace_back(name, param.value());
  for (const auto& t : optimizer_state.tensors) tensors.push_back(t);
  core::Metadata meta = optimizer_state.metadata;
  if (const auto bad = first_non_finite(tensors))
    throw NonFiniteState("the model is not finite at step " + std::to_string(info.step) + ": " + *bad);
  meta["format"] = kCheckpointFormat;
  meta["format_version"] = kCheckpointVersion;
  meta["model"] = model_json(model.spec()).dump();
  meta["config"] = to_json(info.config).dump();
  meta["task"] = info.task;
  meta["step"] = std::to_string(info.step);
  meta["rng.data"] = nlohmann::json(info.data_rng).dump();
  if (info.data_position)
    meta["data.position"] =
        nlohmann::json{{"epoch_seed", info.data_position->epoch_seed}, {"next", info.data_position->next}}.dump();
  const auto file_meta = [&meta](const char* key, const std::string& file, const std::optional<Task::Fingerprint>& f) {
    if (f) meta[key] = nlohmann::json{{"path", file}, {"size", f->size}, {"hash", f->hash}}.dump();
  };
  file_meta("data.file", info.config.data, info.data_file);
  file_meta("eval_data.file", info.config.eval_data, info.eval_data_file);
  if (!info.trainer.is_null()) meta["trainer"] = info.trainer.dump();
  if (!info.init.is_null()) meta["init"] = info.init.dump();
  if (!info.edited.is_null()) meta["edited"] = info.edited.dump();
  core::save_safetensors(path, tensors, meta);
}

namespace {

std::string json_problem(const std::exception& e) { return without_json_prefix(e.what()); }

const std::string& meta_at(const core::Metadata& meta, const std::string& key, const std::string& path) {
  const auto it = meta.find(key);
  if (it == meta.end())
    throw UsageError(path + ": not a headlab checkpoint (its metadata has no \"" + key + "\")");
  return it->second;
}

nlohmann::json parse_meta_json(const core::Metadata& meta, const std::string& key, const std::string& path) {
  try {
    return parse_user_json(meta_at(meta, key, path));
  } catch (const std::invalid_argument& e) {
    throw UsageError(path + ": metadata \"" + key + "\" is not valid JSON (" + e.what() + ")");
  }
}

// A data file's record (data.file, eval_data.file), or none when the
// checkpoint has none (an older one, or a run without that file).
std::optional<Task::Fingerprint> file_fingerprint(const core::Metadata& meta, const std::string& key,
                                                  const std::string& path) {
  if (!meta.count(key)) return std::nullopt;
  const nlohmann::json f = parse_meta_json(meta, key, path);
  if (!f.is_object() || !f.contains("size") || !f.contains("hash") || !f["size"].is_number_unsigned() ||
      !f["hash"].is_number_unsigned())
    throw UsageError(path + ": metadata \"" + key +
                     "\" must be {\"path\", \"size\": unsigned, \"hash\": unsigned}, got " + brief_json(f, 80));
  return Task::Fingerprint{f["size"].get<uint64_t>(), f["hash"].get<uint64_t>()};
}

// A step count: decimal digits only, within int64 (std::stoll would accept
// "12abc" and say only "stoll" on failure).
int64_t parse_step(const std::string& text, const std::string& path) {
  if (text.empty() || text.size() > 18 || text.find_first_not_of("0123456789") != std::string::npos)
    throw UsageError(path + ": metadata \"step\" is \"" + text + "\", not a step count");
  return std::stoll(text);
}

core::Generator::State parse_rng(const nlohmann::json& j, const std::string& path) {
  core::Generator::State state{};
  if (!j.is_array() || j.size() != state.size())
    throw UsageError(path + ": metadata \"rng.data\" must be an array of " + std::to_string(state.size()) +
                     " unsigned integers, got " + brief_json(j, 80));
  for (std::size_t i = 0; i < state.size(); ++i) {
    if (!j[i].is_number_unsigned())
      throw UsageError(path + ": metadata \"rng.data\"[" + std::to_string(i) + "] is " + brief_json(j[i], 40) +
                       ", not an unsigned integer");
    state[i] = j[i].get<uint64_t>();
  }
  // xoshiro's four words must not all be zero: it would return only zeros.
  if (state[0] == 0 && state[1] == 0 && state[2] == 0 && state[3] == 0)
    throw UsageError(path + ": metadata \"rng.data\" has an all-zero generator state, which no run writes");
  return state;
}

// The trainer's sums since its last log line (Trainer::checkpoint), which a
// resumed Trainer reads and adds to: finite numbers, and counts that the steps
// since that line could have made (a step has under 2^31 target tokens), so
// that none converts out of range or overflows.
void check_trainer(const nlohmann::json& j, int64_t step, const std::string& path) {
  auto bad = [&](const std::string& what) {
    return UsageError(path + ": metadata \"trainer\" " + what + ", got " + brief_json(j, 80));
  };
  if (!j.is_object()) throw bad("must be a JSON object");
  for (const char* key : {"loss", "accuracy"})
    if (!j.contains(key) || !j[key].is_number() || !std::isfinite(j[key].get<double>()))
      throw bad(std::string("needs \"") + key + "\", a finite number");
  auto count = [&](const char* key, uint64_t max) {
    if (!j.contains(key) || !j[key].is_number_unsigned() || j[key].get<uint64_t>() > max)
      throw bad(std::string("needs \"") + key + "\", an integer from 0 to " + std::to_string(max));
    return j[key].get<uint64_t>();
  };
  const uint64_t steps = count("steps", static_cast<uint64_t>(step));
  constexpr uint64_t kMaxCount = std::numeric_limits<int64_t>::max();
  count("tokens", steps > (kMaxCount >> 31) ? kMaxCount : steps << 31);
  // The last log line, of a step the checkpoint has done (checkpoints from
  // before it have none).
  if (const auto logged = j.find("logged"); logged != j.end())
    if (!logged->is_object() || !logged->contains("step") || !(*logged)["step"].is_number_unsigned() ||
        (*logged)["step"].get<uint64_t>() > static_cast<uint64_t>(step) || !logged->contains("loss") ||
        !(*logged)["loss"].is_number() || !std::isfinite((*logged)["loss"].get<double>()))
      throw bad("\"logged\" must be {\"step\": a step up to the checkpoint's, \"loss\": a finite number}");
}

std::string shape_text(const core::Shape& shape) { return core::to_string(shape); }

// The "model" metadata must describe the tensors the file holds before
// anything is built from it: a corrupt size would otherwise allocate whatever
// it claims. Checks the tensors that fix each size; load_weights later checks
// every parameter.
void check_model_matches_tensors(const layers::ModelSpec& m, const core::SafetensorsFile& file,
                                 const std::string& path) {
  const std::string described = "the model metadata (vocab " + std::to_string(m.vocab) + ", classes " +
                                std::to_string(m.classes) + ", max_seq_len " + std::to_string(m.max_seq_len) +
                                ", layers " + std::to_string(m.layers) + ", d_model " + std::to_string(m.d_model) +
                                (m.attn_only ? ", attention only" : ", d_ff " + std::to_string(m.d_ff)) + ")";
  auto expect = [&](const std::string& name, const core::Shape& shape) {
    if (!file.contains(name))
      throw UsageError(path + ": the checkpoint has no tensor \"" + name + "\", which " + described + " needs");
    const core::Shape& got = file.get(name).shape();
    if (got != shape)
      throw UsageError(path + ": tensor \"" + name + "\" has shape " + shape_text(got) + ", but " + described +
                       " needs " + shape_text(shape));
  };
  const int64_t d = m.d_model;
  expect("tok_emb.weight", {m.vocab, d});
  expect("pos_emb.weight", {m.max_seq_len, d});
  expect("head.weight", {m.classes, d});
  // Every layer, not only the last: a count of layers alone could otherwise
  // build millions of them. From the last one down (a missing layer is named
  // as the count's), stopping at the first missing: the loop is never longer
  // than the file's list of tensors.
  for (int64_t layer = m.layers - 1; layer >= 0; --layer) {
    const std::string block = "blocks." + std::to_string(layer) + ".";
    expect(block + "attn.q.weight", {d, d});
    if (!m.attn_only) expect(block + "mlp.fc1.weight", {m.d_ff, d});
  }
  const std::string beyond = "blocks." + std::to_string(m.layers) + ".";
  for (const auto& [name, t] : file.tensors)
    if (name.starts_with(beyond))
      throw UsageError(path + ": tensor \"" + name + "\" belongs to a layer beyond the " + std::to_string(m.layers) +
                       " of " + described);
}

// Checks a parsed file's metadata and builds the Checkpoint from it.
Checkpoint checkpoint_of(core::SafetensorsFile file, const std::string& path) {
  Checkpoint ck;
  ck.path = path;
  ck.file = std::move(file);
  const core::Metadata& meta = ck.file.metadata;
  if (meta_at(meta, "format", path) != kCheckpointFormat)
    throw UsageError(path + ": format is \"" + meta.at("format") + "\", expected \"" + kCheckpointFormat + "\"");
  if (meta_at(meta, "format_version", path) != kCheckpointVersion)
    throw UsageError(path + ": checkpoint format version " + meta.at("format_version") +
                     " is not supported by this headlab (it reads version " + kCheckpointVersion + ")");
  try {
    ck.model = model_from_json(parse_meta_json(meta, "model", path));
    ck.model.validate();
  } catch (const UsageError&) {
    throw;
  } catch (const std::exception& e) {
    throw UsageError(path + ": invalid metadata \"model\": " + json_problem(e));
  }
  check_model_matches_tensors(ck.model, ck.file, path);
  // headlab never writes a non-finite value (save_checkpoint); one here would
  // give a plausible loss (softmax turns a NaN row into zeros) or "-nan".
  if (const auto bad = first_non_finite(ck.file.tensors))
    throw UsageError(path + ": tensor " + *bad + "; a checkpoint holds only finite numbers (the file is damaged)");
  // The model computes in float32: an F64 value beyond its range would turn
  // into an infinity on loading, after the check above.
  for (const auto& [name, t] : ck.file.tensors)
    if (t.dtype() == core::DType::f64)
      if (const auto at = first_beyond_float(t))
        throw UsageError(path + ": tensor \"" + name + "\" holds " + core::shortest(t.data<double>()[*at]) +
                         " at element " + std::to_string(*at) +
                         ", beyond float32's range (the model computes in float32; the file is damaged)");
  ck.info.config = stored_config(parse_meta_json(meta, "config", path), path + " (config)");
  ck.info.task = meta_at(meta, "task", path);
  ck.info.step = parse_step(meta_at(meta, "step", path), path);
  ck.info.data_rng = parse_rng(parse_meta_json(meta, "rng.data", path), path);
  if (meta.count("trainer")) {
    ck.info.trainer = parse_meta_json(meta, "trainer", path);
    check_trainer(ck.info.trainer, ck.info.step, path);
  }
  if (meta.count("init")) {
    // Provenance only, never used to train: any object.
    ck.info.init = parse_meta_json(meta, "init", path);
    if (!ck.info.init.is_object())
      throw UsageError(path + ": metadata \"init\" must be a JSON object, got " + brief_json(ck.info.init, 80));
  }
  if (meta.count("edited")) {
    // Provenance only, as "init".
    ck.info.edited = parse_meta_json(meta, "edited", path);
    if (!ck.info.edited.is_object())
      throw UsageError(path + ": metadata \"edited\" must be a JSON object, got " + brief_json(ck.info.edited, 80));
  }
  if (meta.count("data.position")) {
    const nlohmann::json p = parse_meta_json(meta, "data.position", path);
    if (!p.is_object() || !p.contains("epoch_seed") || !p.contains("next") || !p["epoch_seed"].is_number_unsigned() ||
        !p["next"].is_number_integer())
      throw UsageError(path + ": metadata \"data.position\" must be {\"epoch_seed\": unsigned, \"next\": integer}, got " +
                       brief_json(p, 80));
    ck.info.data_position = DataFile::Position{p["epoch_seed"].get<uint64_t>(), p["next"].get<int64_t>()};
  }
  ck.info.data_file = file_fingerprint(meta, "data.file", path);
  ck.info.eval_data_file = file_fingerprint(meta, "eval_data.file", path);
  return ck;
}

}  // namespace

// What a checkpoint is, for a message about a file that is not one.
constexpr const char* kWhatIsACheckpoint =
    "a checkpoint is the checkpoint.safetensors that `headlab train` writes into its run folder; give that file or "
    "the folder";

Checkpoint read_checkpoint(const std::string& path) {
  core::SafetensorsFile file;
  try {
    file = core::load_safetensors(path);
  } catch (const core::SafetensorsError& e) {
    // Readable, but not in the format: most often another file of the run
    // folder (config.json, metrics.jsonl) given by mistake.
    throw UsageError("checkpoint " + std::string(e.what()) + " (" + kWhatIsACheckpoint + ")");
  } catch (const std::exception& e) {
    throw UsageError("checkpoint " + std::string(e.what()));  // "'path' cannot be opened: No such file ..."
  }
  return checkpoint_of(std::move(file), path);
}

Checkpoint read_checkpoint(std::span<const uint8_t> bytes, const std::string& path) {
  core::SafetensorsFile file;
  try {
    file = core::parse_safetensors(bytes);
  } catch (const std::exception& e) {
    throw UsageError("checkpoint '" + path + "' is not a valid safetensors file: " + e.what() + " (" +
                     kWhatIsACheckpoint + ")");
  }
  return checkpoint_of(std::move(file), path);
}

nlohmann::json init_identity(const std::string& path, const Checkpoint& checkpoint) {
  const ByteHash file = hash_file(path, "--init " + path, "a checkpoint is read whole");
  nlohmann::json identity{{"path", path},
                          {"size", file.size},
                          {"hash", file.hash},
                          {"step", checkpoint.info.step},
                          {"task", checkpoint.info.task},
                          {"config", to_json(checkpoint.info.config)}};
  // A chain of --init runs keeps every link.
  if (!checkpoint.info.init.is_null()) identity["init"] = checkpoint.info.init;
  if (!checkpoint.info.edited.is_null()) identity["edited"] = checkpoint.info.edited;
  return identity;
}

void load_weights(layers::Transformer& model, const core::SafetensorsFile& file, const std::string& source) {
  std::set<std::string> expected;
  for (const auto& [name, param] : model.named_parameters()) {
    expected.insert(name);
    if (std::any_of(file.integers.begin(), file.integers.end(), [&n = name](const auto& entry) { return entry.first == n; }))
      throw UsageError(source + ": tensor \"" + name + "\" is stored as I64 integers; a parameter is F32 (the file is "
                       "damaged)");
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
