#include "train/cli/dump_activations.h"

#include <algorithm>
#include <filesystem>
#include <stdexcept>

#include "autograd/variable.h"
#include "layers/hook_set.h"
#include "layers/hooks.h"
#include "layers/hooks_short_names.h"
#include "layers/padding_mask.h"
#include "train/errors.h"
#include "train/signals.h"

namespace headlab::cli {

std::vector<std::string> hooks_to_dump(const layers::ModelSpec& spec, const std::vector<std::string>& hooks) {
  std::vector<std::string> every = layers::hook_names(spec);
  if (hooks.size() == 1 && hooks[0] == kEveryHook) return every;
  if (hooks.empty()) {
    // TransformerLens's copy points (4h + 1 copies of the residual stream
    // per block) only when named or with all, as Python's names=None.
    std::erase_if(every, [](const std::string& name) { return layers::is_copy_point(name); });
    return every;
  }
  // TransformerLens's compact names ("pattern0") are written as the hook
  // names they stand for, so the dump names each point one way.
  std::vector<std::string> full;
  for (const std::string& given : hooks) {
    if (given == kEveryHook)
      throw train::UsageError("--hooks " + std::string(kEveryHook) + " dumps every point, so it takes no other name; "
                              "give it alone, or the names alone");
    try {
      full.push_back(layers::full_hook_name(given));
    } catch (const std::invalid_argument& e) {
      throw train::UsageError(std::string("--hooks: ") + e.what());
    }
    try {
      layers::check_hook_name(spec, full.back());
    } catch (const std::invalid_argument& e) {
      const std::string stands_for = given == full.back() ? "" : " (--hooks " + given + " is " + full.back() + ")";
      throw train::UsageError(std::string("--hooks: ") + e.what() + stands_for);
    }
    if (std::find(full.begin(), full.end() - 1, full.back()) != full.end() - 1)
      throw train::UsageError("--hooks: " + (given == full.back() ? given : given + " (" + full.back() + ")") +
                              " is listed twice");
  }
  return full;
}

std::vector<int64_t> row_lengths(const train::Batch& batch) {
  if (batch.lengths.empty()) return std::vector<int64_t>(static_cast<std::size_t>(batch.batch), batch.seq_len);
  return {batch.lengths.begin(), batch.lengths.end()};
}

void dump_activations(const layers::Transformer& model, train::Task& task, int64_t total, int64_t rows,
                      uint64_t seed, const std::vector<std::string>& names, const std::string& path,
                      const core::Metadata& metadata) {
  const layers::ModelSpec& spec = model.spec();
  std::unique_ptr<core::SafetensorsStream> out;
  int64_t seq_len = 0;
  for (int64_t first = 0; first < total; first += rows) {
    train::throw_if_stopped();  // eval's stop handlers: the temporary file goes with the unwinding
    const train::Batch batch = task.eval_slice(first, std::min(rows, total - first), seed);
    if (!out) {
      // Every slice of one task has the same length: the first one fixes the shapes.
      seq_len = batch.seq_len;
      std::vector<core::SafetensorsStream::Declared> entries;
      for (const std::string& name : names)
        entries.push_back({name, layers::hook_shape(spec, name, total, seq_len), core::DType::f32});
      entries.push_back({"tokens", {total, seq_len}, core::DType::f32, true});
      entries.push_back({"lengths", {total}, core::DType::f32, true});
      out = std::make_unique<core::SafetensorsStream>(path, std::move(entries), metadata);
    }
    if (batch.seq_len != seq_len)
      throw std::logic_error("dump_activations: slices of " + std::to_string(batch.seq_len) + " and " +
                             std::to_string(seq_len) + " tokens");
    layers::HookSet hooks(spec, names);
    layers::Probe probe;
    probe.hooks = &hooks;
    {
      autograd::NoGradGuard no_grad;
      const core::Tensor mask = layers::padding_mask(batch.lengths, batch.batch, batch.seq_len);
      model.forward(batch.tokens, batch.batch, batch.seq_len, &mask, &probe);
    }
    for (const auto& [name, value] : hooks.cache())
      out->write_rows(name, first, value.dtype() == core::DType::f32 ? value : value.to(core::DType::f32));
    out->write_rows("tokens", first, std::vector<int64_t>(batch.tokens.begin(), batch.tokens.end()));
    out->write_rows("lengths", first, row_lengths(batch));
  }
  if (out) out->finish();
}

}  // namespace headlab::cli
