#include "layers/hooks_short_names.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <stdexcept>
#include <system_error>

namespace headlab::layers {
namespace {

// Where a short name's point sits.
enum class Where {
  top,    // hook_X, no block
  block,  // blocks.{l}.hook_X
  attn,   // blocks.{l}.attn.hook_X
  mlp,    // blocks.{l}.mlp.hook_X
  ln,     // a LayerNorm's: blocks.{l}.{ln1|ln2}.hook_X, or ln_final.hook_X
};

const std::map<std::string, Where>& places() {
  static const std::map<std::string, Where> kPlaces{
      {"embed", Where::top},       {"pos_embed", Where::top},     {"resid_pre", Where::block},
      {"resid_mid", Where::block}, {"resid_post", Where::block},  {"attn_out", Where::block},
      {"mlp_out", Where::block},   {"attn_in", Where::block},     {"q_input", Where::block},
      {"k_input", Where::block},   {"v_input", Where::block},     {"mlp_in", Where::block},
      {"q", Where::attn},          {"k", Where::attn},            {"v", Where::attn},
      {"z", Where::attn},          {"result", Where::attn},       {"attn_scores", Where::attn},
      {"pattern", Where::attn},    {"pre", Where::mlp},           {"post", Where::mlp},
      {"scale", Where::ln},        {"normalized", Where::ln}};
  return kPlaces;
}

const std::map<std::string, std::string>& aliases() {
  static const std::map<std::string, std::string> kAliases{
      {"attn", "pattern"}, {"attn_logits", "attn_scores"}, {"query", "q"},      {"key", "k"},
      {"value", "v"},      {"mlp_pre", "pre"},             {"mlp_post", "post"}};
  return kAliases;
}

}  // namespace

std::vector<std::string> short_hook_names() {
  std::vector<std::string> names;
  for (const auto& [name, where] : places()) names.push_back(name);
  for (const auto& [alias, name] : aliases()) names.push_back(alias);
  std::sort(names.begin(), names.end());
  return names;
}

bool is_short_hook_name(const std::string& name) { return places().count(name) || aliases().count(name); }

std::string act_name(const std::string& name, std::optional<int64_t> layer, const std::string& layer_type) {
  const auto alias = aliases().find(name);
  const std::string point = alias == aliases().end() ? name : alias->second;
  const auto place = places().find(point);
  if (place == places().end()) {
    std::string list;
    for (const auto& [n, where] : places()) list += (list.empty() ? "" : ", ") + n;
    throw std::invalid_argument("unknown activation name '" + name + "'; the short names are " + list +
                                " (and a full hook name, listed in docs/architecture.md, Hook points)");
  }
  const std::string hook = "hook_" + point;
  if (place->second == Where::top) {
    if (layer) throw std::invalid_argument("'" + name + "' is not a block's (" + hook + "): give no layer");
    return hook;
  }
  if (!layer) {
    if (place->second == Where::ln && (layer_type.empty() || layer_type == "ln_final")) return "ln_final." + hook;
    throw std::invalid_argument("'" + name + "' is a block's activation: give its layer (" + name + "0, or ('" +
                                name + "', 0) in Python)");
  }
  const std::string block = "blocks." + std::to_string(*layer) + ".";
  switch (place->second) {
    case Where::block: return block + hook;
    case Where::attn: return block + "attn." + hook;
    case Where::mlp: return block + "mlp." + hook;
    default: break;
  }
  if (layer_type != "ln1" && layer_type != "ln2")
    throw std::invalid_argument("'" + name + "' of a block needs layer_type 'ln1' or 'ln2' (which LayerNorm: " +
                                name + std::to_string(*layer) + "ln1 or " + name + std::to_string(*layer) +
                                "ln2 in one word)" + (layer_type.empty() ? "" : ", got '" + layer_type + "'"));
  return block + layer_type + "." + hook;
}

std::optional<CompactHookName> split_compact_hook_name(const std::string& name) {
  const std::size_t digits = name.find_first_of("0123456789");
  if (digits == 0 || digits == std::string::npos ||
      name.find_first_not_of("abcdefghijklmnopqrstuvwxyz_") != digits)
    return std::nullopt;
  const std::size_t tail = std::min(name.find_first_not_of("0123456789", digits), name.size());
  CompactHookName out{name.substr(0, digits), 0, name.substr(tail)};
  if (!out.layer_type.empty() && out.layer_type != "ln1" && out.layer_type != "ln2") return std::nullopt;
  int32_t layer = 0;  // 2^31 blocks are more than any model has: past that, no compact name
  const auto [end, ec] = std::from_chars(name.data() + digits, name.data() + tail, layer);
  if (ec != std::errc() || end != name.data() + tail) return std::nullopt;
  out.layer = layer;
  return out;
}

std::string full_hook_name(const std::string& name) {
  if (name.find('.') != std::string::npos || name.starts_with("hook_")) return name;
  if (const std::optional<CompactHookName> compact = split_compact_hook_name(name);
      compact && is_short_hook_name(compact->name))
    return act_name(compact->name, compact->layer, compact->layer_type);
  return is_short_hook_name(name) ? act_name(name, std::nullopt) : name;
}

}  // namespace headlab::layers
