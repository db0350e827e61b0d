#include "analysis/progress_measures.h"

#include <stdexcept>
#include <string>

#include "analysis/fourier.h"
#include "analysis/fourier_loss.h"
#include "autograd/variable.h"
#include "core/gemm.h"
#include "layers/probe.h"

namespace headlab::analysis {

ProgressMeasures progress_measures(const layers::Transformer& model, int64_t p, const std::vector<bool>& train,
                                   int64_t keys) {
  const core::F32Gemms f32_gemms;  // analysis measures in f32 under any --precision (analyze_model.cpp)
  const layers::ModelSpec& spec = model.spec();
  const std::string mod_p = "addition mod " + std::to_string(p);
  // Frequencies 1 .. (p-1)/2 (fourier.h): none below 3.
  if (p < 3)
    throw std::invalid_argument("progress_measures: p = " + std::to_string(p) + ", but the Fourier measures of " +
                                mod_p + " need p >= 3 (a modular-addition model's p is its vocab - 1: vocab >= 4)");
  if (spec.vocab < p + 1 || spec.classes < p || spec.max_seq_len < 3)
    throw std::invalid_argument("progress_measures: a model for " + mod_p + " needs vocab >= p + 1 = " +
                                std::to_string(p + 1) + " (the tokens 0 .. p-1 and '='), classes >= p = " +
                                std::to_string(p) + " and max_seq_len >= 3 ([a, b, =]); this one has vocab " +
                                std::to_string(spec.vocab) + ", classes " + std::to_string(spec.classes) +
                                " and max_seq_len " + std::to_string(spec.max_seq_len));
  ProgressMeasures m;
  m.p = p;
  const int64_t d = spec.d_model;
  for (const auto& [name, w] : model.named_parameters())
    if (name == "tok_emb.weight") {
      const std::vector<double> all = w.value().to_vector();
      m.embedding_norms = frequency_norms(std::span<const double>(all).first(static_cast<std::size_t>(p * d)), p, d);
    }
  m.key_frequencies = key_frequencies(m.embedding_norms, keys);
  m.key_share = key_share(m.embedding_norms, m.key_frequencies);

  // Every input once, row a * p + b.
  const int64_t n = p * p;
  std::vector<int32_t> tokens;
  tokens.reserve(static_cast<std::size_t>(3 * n));
  for (int64_t a = 0; a < p; ++a)
    for (int64_t b = 0; b < p; ++b)
      tokens.insert(tokens.end(), {static_cast<int32_t>(a), static_cast<int32_t>(b), static_cast<int32_t>(p)});
  layers::Probe probe(spec.layers, {.head_outputs = false, .residual = false});
  std::vector<double> logits;
  {
    autograd::NoGradGuard no_grad;
    const std::vector<double> all = model.forward(tokens, n, 3, nullptr, &probe).value().to_vector();
    // The '=' position's logits [n, classes].
    const auto c = static_cast<std::size_t>(spec.classes);
    logits.reserve(static_cast<std::size_t>(n) * c);
    for (std::size_t r = 0; r < static_cast<std::size_t>(n); ++r)
      logits.insert(logits.end(), all.begin() + static_cast<std::ptrdiff_t>((3 * r + 2) * c),
                    all.begin() + static_cast<std::ptrdiff_t>((3 * r + 3) * c));
  }
  const FourierLosses losses = fourier_losses(logits, p, spec.classes, m.key_frequencies, train);
  m.full_loss = losses.full;
  m.restricted_loss = losses.restricted;
  m.excluded_loss = losses.excluded;
  for (const layers::LayerProbe& layer : probe.layers) {
    // A [n, h, 3, 3]: row 2 (the '=' query), keys 0 and 1.
    const std::vector<double> a = layer.attention.to_vector();
    for (int64_t h = 0; h < spec.heads; ++h) {
      double on_a = 0, on_b = 0;
      for (int64_t r = 0; r < n; ++r) {
        const auto at = static_cast<std::size_t>(((r * spec.heads + h) * 3 + 2) * 3);
        on_a += a[at];
        on_b += a[at + 1];
      }
      m.attention_a.push_back(on_a / static_cast<double>(n));
      m.attention_b.push_back(on_b / static_cast<double>(n));
    }
  }
  return m;
}

nlohmann::json to_json(const ProgressMeasures& m) {
  return {{"p", m.p},
          {"embedding_norms", m.embedding_norms},
          {"key_frequencies", m.key_frequencies},
          {"key_share", m.key_share},
          {"full_loss", m.full_loss},
          {"restricted_loss", m.restricted_loss},
          {"excluded_loss", m.excluded_loss},
          {"attention_a", m.attention_a},
          {"attention_b", m.attention_b}};
}

}  // namespace headlab::analysis
