#include "layers/hooks.h"

#include <algorithm>
#include <iterator>
#include <optional>
#include <stdexcept>
#include <string>

#include "autograd/ops.h"
#include "core/bf16_operands.h"
#include "core/nearest_name.h"
#include "layers/hooks_finite.h"
#include "layers/hooks_short_names.h"

namespace headlab::layers {

namespace {

// The copy points (is_copy_point): the heads' inputs, [B, T, h, d_model], and the MLP's.
constexpr const char* kHeadInputPoints[] = {"hook_attn_in", "hook_q_input", "hook_k_input", "hook_v_input"};
constexpr const char* kMlpInPoint = "hook_mlp_in";

// A block's points in forward order, with the spec's conditions.
std::vector<std::string> block_points(const ModelSpec& s) {
  std::vector<std::string> p{"hook_resid_pre"};
  for (const char* input : kHeadInputPoints) p.emplace_back(input);
  if (s.layernorm)
    for (const char* n : {"ln1.hook_scale", "ln1.hook_normalized"}) p.emplace_back(n);
  for (const char* a : {"attn.hook_q", "attn.hook_k", "attn.hook_v", "attn.hook_attn_scores", "attn.hook_pattern",
                        "attn.hook_z", "attn.hook_result"})
    p.emplace_back(a);
  p.emplace_back("hook_attn_out");
  if (!s.attn_only) {
    for (const char* r : {"hook_resid_mid", kMlpInPoint}) p.emplace_back(r);
    if (s.layernorm)
      for (const char* n : {"ln2.hook_scale", "ln2.hook_normalized"}) p.emplace_back(n);
    for (const char* m : {"mlp.hook_pre", "mlp.hook_post", "hook_mlp_out"}) p.emplace_back(m);
  }
  p.emplace_back("hook_resid_post");
  return p;
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

}  // namespace

std::vector<std::string> hook_names(const ModelSpec& spec) {
  const ModelSpec s = spec.resolved();
  std::vector<std::string> names{"hook_embed", "hook_pos_embed"};
  const std::vector<std::string> points = block_points(s);
  for (int64_t i = 0; i < s.layers; ++i)
    for (const std::string& p : points) names.push_back("blocks." + std::to_string(i) + "." + p);
  if (s.layernorm)
    for (const char* n : {"ln_final.hook_scale", "ln_final.hook_normalized"}) names.emplace_back(n);
  return names;
}

void check_hook_name(const ModelSpec& spec, const std::string& name) {
  const std::vector<std::string> names = hook_names(spec);
  if (std::find(names.begin(), names.end(), name) != names.end()) return;
  // A compact name whose short name is misspelled ("patern1"): the nearest
  // short names in the same form. (A known one was expanded by
  // full_hook_name before it came here.)
  if (const std::optional<CompactHookName> compact = split_compact_hook_name(name);
      compact && !is_short_hook_name(compact->name)) {
    std::string list;
    for (const std::string& s : core::nearest_names(compact->name, short_hook_names(), 3))
      list += (list.empty() ? "" : ", ") + s + std::to_string(compact->layer) + compact->layer_type;
    throw std::invalid_argument("unknown hook name '" + name + "' ('" + compact->name +
                                "' is no short activation name; nearest: " + list +
                                "; or a full hook name, listed in docs/architecture.md (Hook points) and, in Python, "
                                "by model.hook_names())");
  }
  // A point without its block ("hook_pattern") names that point of every
  // block; otherwise the nearest names by spelling.
  std::vector<std::string> near;
  for (const std::string& n : names)
    if (ends_with(n, "." + name) && near.size() < 3) near.push_back(n);
  if (near.empty()) {
    // A name given without its module path is spelled against the last part
    // of each name ("hook_patern" finds blocks.0.attn.hook_pattern), one
    // without its block against the part after "blocks.{i}.".
    const bool bare = name.find('.') == std::string::npos, blockless = !name.starts_with("blocks.");
    std::vector<std::string> points;
    for (const std::string& n : names)
      points.push_back(bare ? n.substr(n.rfind('.') + 1)
                            : blockless && n.starts_with("blocks.") ? n.substr(n.find('.', 7) + 1) : n);
    for (const std::string& p : core::nearest_names(name, points, 3))
      for (std::size_t i = 0; i < names.size(); ++i)
        if (points[i] == p && std::find(near.begin(), near.end(), names[i]) == near.end()) {
          near.push_back(names[i]);
          break;
        }
  }
  std::string list;
  for (const std::string& n : near) list += (list.empty() ? "" : ", ") + n;
  const int64_t layers = spec.resolved().layers;
  const std::string blocks = layers == 1 ? "blocks.0 only" : "blocks.0 to blocks." + std::to_string(layers - 1);
  // "blocks.K." past the last block: the name is right but the model is smaller.
  std::string beyond;
  if (name.starts_with("blocks.")) {
    const std::size_t dot = name.find('.', 7);
    const std::string index = name.substr(7, dot == std::string::npos ? std::string::npos : dot - 7);
    if (!index.empty() && index.size() < 10 && std::all_of(index.begin(), index.end(), [](char c) { return c >= '0' && c <= '9'; }) &&
        std::stoll(index) >= layers)
      beyond = "this model has " + std::to_string(layers) + (layers == 1 ? " layer" : " layers") + ", " + blocks +
               "; ";
  }
  throw std::invalid_argument("unknown hook name '" + name + "' (" + beyond + "nearest: " + list +
                              "; this model has " + std::to_string(names.size()) + " hook names" +
                              (beyond.empty() ? " over " + blocks : "") + ", listed in docs/architecture.md (Hook points) and, in Python, by "
                              "model.hook_names())");
}

bool is_copy_point(const std::string& name) {
  if (ends_with(name, std::string(".") + kMlpInPoint)) return true;
  return std::any_of(std::begin(kHeadInputPoints), std::end(kHeadInputPoints),
                     [&](const char* input) { return ends_with(name, std::string(".") + input); });
}

Shape hook_shape(const ModelSpec& spec, const std::string& name, int64_t batch, int64_t seq_len) {
  check_hook_name(spec, name);
  const ModelSpec s = spec.resolved();
  if (ends_with(name, ".hook_q") || ends_with(name, ".hook_k") || ends_with(name, ".hook_v") ||
      ends_with(name, ".hook_z"))
    return {batch, seq_len, s.heads, s.d_k()};
  if (ends_with(name, ".hook_attn_scores") || ends_with(name, ".hook_pattern")) return {batch, s.heads, seq_len, seq_len};
  if (ends_with(name, ".hook_result")) return {batch, seq_len, s.heads, s.d_model};
  for (const char* input : kHeadInputPoints)
    if (ends_with(name, std::string(".") + input)) return {batch, seq_len, s.heads, s.d_model};
  if (ends_with(name, ".hook_scale")) return {batch, seq_len, 1};
  if (ends_with(name, ".hook_pre") || ends_with(name, ".hook_post")) return {batch, seq_len, s.d_ff};
  return {batch, seq_len, s.d_model};
}

Variable HookScope::visit_wanted(const char* point, const Variable& x, const Shape& layout,
                                 const core::Tensor* padding_mask) const {
  return visit_hooks(point, x, layout, true, padding_mask);
}

Variable HookScope::visit_hooks(const char* point, const Variable& x, const Shape& layout, bool in_place,
                                const core::Tensor* padding_mask) const {
  const std::string name = prefix + point;
  const Variable view = layout.empty() || layout == x.shape() ? x : autograd::reshape(x, layout);
  std::optional<FiniteBefore> before;
  if (in_place && hooks->may_edit_in_place(name)) before.emplace(name, view.value());
  const Variable out = hooks->visit(name, view);
  // The hook may have changed any tensor in place: no bf16 copy rounded
  // before it may be used after it (core/bf16_operands.h).
  core::forget_bf16_operands();
  if (out.node() == view.node()) {  // kept, perhaps edited in place: no reshape back
    if (before) before->refuse_edit(view.value());
    return x;
  }
  if (!out.defined() || out.shape() != view.shape() || out.dtype() != view.dtype())
    throw std::invalid_argument("hook '" + name + "' returned " +
                                (out.defined() ? core::to_string(out.dtype()) + " " + core::to_string(out.shape())
                                               : std::string("an undefined variable")) +
                                "; expected " + core::to_string(view.dtype()) + " " + core::to_string(view.shape()));
  refuse_non_finite(name, view.value(), out.value(), padding_mask);
  return out.shape() == x.shape() ? out : autograd::reshape(out, x.shape());
}

Variable HookScope::replacement(const char* point, const Variable& copy) const {
  const Variable given = visit_side(point, copy);
  return given.node() == copy.node() ? Variable() : given;
}

Variable patch(const Variable& x, const core::Tensor& replacement) {
  const core::Tensor v = x.value().contiguous(), r = replacement.contiguous();
  // changed: 1 where the hook changed the entry (NaN kept as NaN is kept);
  // constant: the changed entries' new values, 0 elsewhere.
  core::Tensor changed = core::Tensor::empty(v.shape(), v.dtype()), constant = core::Tensor::empty(v.shape(), v.dtype());
  core::dispatch(v.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T *a = v.template data<T>(), *b = r.template data<T>();
    T *m = changed.template data<T>(), *c = constant.template data<T>();
    for (int64_t i = 0, n = v.numel(); i < n; ++i) {
      const bool same = a[i] == b[i] || (a[i] != a[i] && b[i] != b[i]);
      m[i] = same ? T(0) : T(1);
      c[i] = same ? T(0) : b[i];
    }
  });
  // x where kept (x + 0), the new value where changed (0 + value): replacement's values, -inf included.
  return autograd::add(autograd::masked_fill(x, changed, 0.0), Variable(constant));
}

Variable hook_copy(const Variable& x) {
  // concat writes its one input into a new tensor; its backward hands the
  // gradient on.
  return autograd::concat({x}, -1);
}

}  // namespace headlab::layers
