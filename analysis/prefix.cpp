#include "analysis/prefix.h"

#include <stdexcept>
#include <string>

namespace headlab::analysis {

Prefix::Prefix(const layers::Probe& pass) {
  for (const layers::LayerProbe& layer : pass.layers) residual_.push_back(layer.residual);
}

namespace {

// The prefix's residual entering block `first` (>= 1), checked against the examples.
const core::Tensor& entering(const std::vector<core::Tensor>& residual, const Examples& examples, int64_t first,
                             const char* op) {
  if (first < 1 || first > static_cast<int64_t>(residual.size()))
    throw std::invalid_argument(std::string(op) + ": block " + std::to_string(first) + " of a prefix of " +
                                std::to_string(residual.size()) + " blocks" +
                                (first == 0 ? " (block 0 reads the embedding, which a prefix does not keep)" : ""));
  const core::Tensor& resid = residual[static_cast<std::size_t>(first - 1)];
  if (!resid.defined() || resid.dim() != 3 || resid.size(0) != examples.batch || resid.size(1) != examples.seq_len)
    throw std::invalid_argument(std::string(op) + ": the prefix's residual after block " + std::to_string(first - 1) +
                                " is " + (resid.defined() ? core::to_string(resid.shape()) : std::string("missing")) +
                                ", not of the " + std::to_string(examples.batch) + " examples of " +
                                std::to_string(examples.seq_len) + " tokens");
  return resid;
}

}  // namespace

core::Tensor Prefix::logits(const layers::Transformer& model, const Examples& examples, layers::Probe& probe,
                            int64_t first) const {
  autograd::NoGradGuard no_grad;
  const core::Tensor mask = examples.padding_mask();
  if (first == 0 || residual_.empty())
    return model.forward(examples.tokens, examples.batch, examples.seq_len, &mask, &probe).value();
  const core::Tensor& resid = entering(residual_, examples, first, "Prefix::logits");
  return model.forward_from(first, autograd::Variable(resid), &mask, &probe).value();
}

core::Tensor Prefix::attention(const layers::Transformer& model, const Examples& examples, int64_t layer) const {
  autograd::NoGradGuard no_grad;
  const core::Tensor& resid = entering(residual_, examples, layer, "Prefix::attention");
  const core::Tensor mask = examples.padding_mask();
  // TransformerBlock::forward's first half, without hooks: ln1, then the attention.
  const layers::TransformerBlock& block = model.block(layer);
  autograd::Variable x(resid);
  if (block.ln1() != nullptr) x = block.ln1()->forward(x);
  layers::LayerProbe probe;
  probe.keep = {.attention = true, .head_outputs = false, .residual = false};
  (void)block.attention().forward(x, &mask, &probe);
  return probe.attention;
}

void Prefix::advance(const layers::Probe& pass, int64_t first) {
  // Without a prefix the pass ran from the embedding: every block is its.
  const auto from = residual_.empty() ? std::size_t{0} : static_cast<std::size_t>(first);
  residual_.resize(pass.layers.size());
  for (std::size_t l = from; l < residual_.size(); ++l)
    residual_[l] = pass.layers.at(l).residual;
}

}  // namespace headlab::analysis
