#include "analysis/ablation.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "analysis/donors.h"
#include "core/ops.h"

namespace headlab::analysis {
namespace {

// What an ablation of `kind` evaluates on one batch: the replacement (empty
// for zero ablation), the examples scored and the base loss over them.
// Resample ablation scores only the rows that have a donor, against the base
// over those rows: a row left out compares nothing with nothing.
struct Prepared {
  std::vector<core::Tensor> replacement;
  std::vector<int32_t> targets;  // the rows with a donor's, when some have none
  Examples examples;
  EvalResult base;
};

Prepared prepare(const layers::Transformer& model, const Examples& examples, const EvalResult& base,
                 AblationKind kind) {
  Prepared p{{}, {}, examples, base};
  if (kind == AblationKind::zero) return p;
  const std::vector<core::Tensor> clean = record_head_outputs(model, examples);
  if (kind == AblationKind::mean) {
    MeanOutputSums mean;
    mean.add(clean, examples.lengths);
    p.replacement = mean.replacement(examples.batch);
    return p;
  }
  const std::vector<int64_t> donors =
      next_donors(examples.lengths, examples.batch, resample_rule(model.spec().causal));
  p.replacement = resample_outputs(clean, donor_rows(donors, 0).from);
  const int64_t reached = rows_with_donor(donors);
  if (reached == 0)
    throw std::invalid_argument("resample ablation: none of the " + std::to_string(examples.batch) +
                                " examples has a donor (another example at least as long, or as long when "
                                "bidirectional); give examples that share lengths");
  if (reached < examples.batch) {
    p.targets = targets_with_donor(examples.targets, examples.seq_len, donors);
    p.examples.targets = p.targets;
    p.base = evaluate(model, p.examples);
  }
  return p;
}

// `rows` copies of `row` [T, d]: [rows, T, d].
core::Tensor repeated(const core::Tensor& row, int64_t rows) {
  core::Tensor out = core::Tensor::zeros({rows, row.size(0), row.size(1)}, row.dtype());
  for (int64_t b = 0; b < rows; ++b) out.select(0, b).copy_(row);
  return out;
}

Ablation delta(const EvalSums& ablated, const EvalResult& base) {
  const EvalResult r = ablated.result();
  return {r.loss - base.loss, r.accuracy - base.accuracy};
}

}  // namespace

std::vector<core::Tensor> record_head_outputs(const layers::Transformer& model, const Examples& examples) {
  layers::Probe probe(model.num_layers(), layers::ProbeOutputs::only_head_outputs());
  evaluate(model, examples, &probe);
  std::vector<core::Tensor> out;
  for (const layers::LayerProbe& layer : probe.layers) out.push_back(layer.head_outputs);
  return out;
}

void add_ablated(EvalSums& sums, const layers::Transformer& model, const Examples& examples,
                 const std::vector<std::size_t>& heads, const std::vector<core::Tensor>& replacement,
                 const Prefix& clean) {
  const int64_t L = model.num_layers(), H = model.spec().heads;
  // Read for its logits alone: it keeps no layer's attention, head outputs or residual.
  layers::Probe probe(L, layers::ProbeOutputs::none());
  int64_t first = heads.empty() ? 0 : L;  // the first layer ablated
  for (std::size_t i : heads) {
    if (i >= static_cast<std::size_t>(L * H))
      throw std::invalid_argument("ablate_set: head index " + std::to_string(i) + " is outside the model's " +
                                  std::to_string(L * H) + " heads");
    const auto l = static_cast<std::size_t>(static_cast<int64_t>(i) / H);
    const int64_t h = static_cast<int64_t>(i) % H;
    first = std::min(first, static_cast<int64_t>(l));
    layers::LayerProbe& layer = probe.layers[l];
    if (replacement.empty()) {
      if (!layer.gates.defined()) layer.gates = autograd::Variable(core::Tensor::ones({H}, model.dtype()));
      layer.gates.mutable_value().set({h}, 0.0);
    } else {
      if (layer.replace_heads.empty()) {
        layer.replace_heads.assign(static_cast<std::size_t>(H), false);
        layer.replacement = replacement[l];
      }
      layer.replace_heads[static_cast<std::size_t>(h)] = true;
    }
  }
  sums.add(clean.logits(model, examples, probe, first), examples.targets);
}

Ablation ablate_set(const layers::Transformer& model, const Examples& examples, const EvalResult& base,
                    const std::vector<std::size_t>& heads, AblationKind kind) {
  const Prepared p = prepare(model, examples, base, kind);
  EvalSums sums;
  add_ablated(sums, model, p.examples, heads, p.replacement);
  return delta(sums, p.base);
}

std::vector<Ablation> ablate_heads(const layers::Transformer& model, const Examples& examples, const EvalResult& base,
                                   AblationKind kind) {
  const auto n = static_cast<std::size_t>(model.num_layers() * model.spec().heads);
  const Prepared p = prepare(model, examples, base, kind);
  std::vector<Ablation> out;
  for (std::size_t i = 0; i < n; ++i) {
    EvalSums sums;
    add_ablated(sums, model, p.examples, {i}, p.replacement);
    out.push_back(delta(sums, p.base));
  }
  return out;
}

void MeanOutputSums::add(const std::vector<core::Tensor>& clean, std::span<const int32_t> lengths) {
  if (layers_.empty()) layers_.resize(clean.size());
  if (clean.size() != layers_.size())
    throw std::invalid_argument("mean ablation: outputs of " + std::to_string(clean.size()) + " layers after " +
                                std::to_string(layers_.size()));
  const int64_t B = clean.at(0).size(0), T = clean[0].size(1);
  for (std::size_t l = 0; l < clean.size(); ++l) {
    Layer& layer = layers_[l];
    const int64_t D = clean[l].size(2);
    if (!layer.sum.defined()) {
      layer.sum = core::Tensor::zeros({T, D}, clean[l].dtype());
      layer.real_sum.assign(static_cast<std::size_t>(T * D), 0.0);
      layer.real_rows.assign(static_cast<std::size_t>(T), 0);
    }
    // Every row, in the outputs' dtype: mean ablation's sum over a batch of full rows.
    for (int64_t b = 0; b < B; ++b) layer.sum = core::add(layer.sum, clean[l].select(0, b));
    // The real positions, in doubles: its sum over padded rows (each value
    // read where it is, without a float64 copy of the layer).
    const core::Tensor c = clean[l].contiguous();
    core::dispatch(c.dtype(), [&](auto zero) {
      const auto* p = c.data<decltype(zero)>();
      for (int64_t t = 0; t < T; ++t)
        for (int64_t b = 0; b < B; ++b)
          if (lengths.empty() || t < lengths[static_cast<std::size_t>(b)]) {
            for (int64_t i = 0; i < D; ++i)
              layer.real_sum[static_cast<std::size_t>(t * D + i)] += static_cast<double>(p[(b * T + t) * D + i]);
            ++layer.real_rows[static_cast<std::size_t>(t)];
          }
    });
  }
  rows_ += B;
  padded_ = padded_ || std::any_of(lengths.begin(), lengths.end(), [&](int32_t n) { return n < T; });
}

std::vector<core::Tensor> MeanOutputSums::replacement(int64_t rows) const {
  std::vector<core::Tensor> out;
  for (const Layer& layer : layers_) {
    if (!padded_) {
      out.push_back(repeated(core::mul(layer.sum, 1.0 / static_cast<double>(rows_)), rows));
      continue;
    }
    // Padded rows: at each position the mean over the rows where it is real
    // (a pad position's output is no output of the sequence); a position no
    // row reaches keeps 0, as it only replaces padding.
    const int64_t T = layer.sum.size(0), D = layer.sum.size(1);
    std::vector<double> mean = layer.real_sum;
    for (int64_t t = 0; t < T; ++t) {
      const int64_t n = layer.real_rows[static_cast<std::size_t>(t)];
      for (int64_t i = 0; i < D && n > 0; ++i) mean[static_cast<std::size_t>(t * D + i)] /= static_cast<double>(n);
    }
    out.push_back(repeated(core::Tensor::from_vector(mean, {T, D}, core::DType::f64).to(layer.sum.dtype()), rows));
  }
  return out;
}

std::vector<core::Tensor> resample_outputs(const std::vector<core::Tensor>& outputs, std::span<const int64_t> from) {
  std::vector<core::Tensor> out;
  for (const core::Tensor& layer : outputs) {
    const int64_t rows = layer.size(0);
    core::Tensor r = core::Tensor::zeros({static_cast<int64_t>(from.size()), layer.size(1), layer.size(2)}, layer.dtype());
    for (std::size_t b = 0; b < from.size(); ++b) {
      if (from[b] < 0 || from[b] >= rows)
        throw std::invalid_argument("resample_outputs: row " + std::to_string(from[b]) + " of outputs of " +
                                    std::to_string(rows) + " rows");
      r.select(0, static_cast<int64_t>(b)).copy_(layer.select(0, from[b]));
    }
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace headlab::analysis
