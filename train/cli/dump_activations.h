// `headlab eval ... --dump-activations OUT.safetensors [--hooks NAME,...]`:
// the activations at the model's hook points (layers/hooks.h), under the
// hook names, as F32 [N, ...], plus the sequences' `tokens` [N, T] and their
// `lengths` [N] as I64: a row shorter than T is padded with token 0, and its
// positions from its length on are computed but meaningless.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/safetensors.h"
#include "layers/transformer.h"
#include "train/tasks.h"

namespace headlab::cli {

// `--hooks all`: every hook point, the copy points included.
inline constexpr const char* kEveryHook = "all";

// The hook names to dump: for an empty `hooks` all of the model's but
// TransformerLens's copy points (hook_attn_in, hook_q_input, hook_k_input,
// hook_v_input, hook_mlp_in), as Python's names=None caches; every one for
// {kEveryHook}; else those, checked (UsageError naming the nearest valid
// ones).
std::vector<std::string> hooks_to_dump(const layers::ModelSpec& spec, const std::vector<std::string>& hooks);

// Each row's number of real tokens (the rest of its T positions are
// padding), as the dumps' `lengths` [N] holds them: a batch without lengths
// is of full rows.
std::vector<int64_t> row_lengths(const train::Batch& batch);

// Runs `total` sequences of the task's evaluation rows through the model,
// `rows` at a time (memory bounded by `rows`, not the file), and streams
// each batch's activations into `path` (written atomically at the end).
void dump_activations(const layers::Transformer& model, train::Task& task, int64_t total, int64_t rows,
                      uint64_t seed, const std::vector<std::string>& names, const std::string& path,
                      const core::Metadata& metadata);

}  // namespace headlab::cli
