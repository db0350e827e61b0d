#include "analysis/prefix.h"

#include <stdexcept>
#include <string>

namespace headlab::analysis {

Prefix::Prefix(const layers::Probe& pass) {
  for (const layers::LayerProbe& layer : pass.layers) residual_.push_back(layer.residual);
}

core::Tensor Prefix::logits(const layers::Transformer& model, const Examples& examples, layers::Probe& probe,
                            int64_t first) const {
  autograd::NoGradGuard no_grad;
  const core::Tensor mask = examples.padding_mask();
  if (first == 0 || residual_.empty())
    return model.forward(examples.tokens, examples.batch, examples.seq_len, &mask, &probe).value();
  if (first < 0 || first > static_cast<int64_t>(residual_.size()))
    throw std::invalid_argument("Prefix::logits: block " + std::to_string(first) + " of a prefix of " +
                                std::to_string(residual_.size()) + " blocks");
  const core::Tensor& resid = residual_[static_cast<std::size_t>(first - 1)];
  if (!resid.defined() || resid.dim() != 3 || resid.size(0) != examples.batch || resid.size(1) != examples.seq_len)
    throw std::invalid_argument("Prefix::logits: the prefix's residual after block " + std::to_string(first - 1) +
                                " is " + (resid.defined() ? core::to_string(resid.shape()) : std::string("missing")) +
                                ", not of the " + std::to_string(examples.batch) + " examples of " +
                                std::to_string(examples.seq_len) + " tokens");
  return model.forward_from(first, autograd::Variable(resid), &mask, &probe).value();
}

void Prefix::advance(const layers::Probe& pass, int64_t first) {
  // Without a prefix the pass ran from the embedding: every block is its.
  const auto from = residual_.empty() ? std::size_t{0} : static_cast<std::size_t>(first);
  residual_.resize(pass.layers.size());
  for (std::size_t l = from; l < residual_.size(); ++l)
    residual_[l] = pass.layers.at(l).residual;
}

}  // namespace headlab::analysis
