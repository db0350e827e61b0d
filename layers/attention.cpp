#include "layers/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "autograd/ops.h"

namespace headlab::layers {

namespace {

void check_options(const MultiHeadAttentionOptions& options) {
  if (options.d_model() <= 0 || options.heads() <= 0) {
    throw std::invalid_argument("MultiHeadAttention: d_model and heads must be positive, got d_model=" +
                                std::to_string(options.d_model()) + ", heads=" + std::to_string(options.heads()));
  }
  if (options.d_model() % options.heads() != 0) {
    throw std::invalid_argument("MultiHeadAttention: d_model=" + std::to_string(options.d_model()) +
                                " is not divisible by heads=" + std::to_string(options.heads()) +
                                " (d_k = d_model / heads must be a whole number)");
  }
}

bool all_ones(const Tensor& t) {
  for (double g : t.to_vector()) {
    if (g != 1.0) return false;
  }
  return true;
}

}  // namespace

MultiHeadAttention::MultiHeadAttention(const MultiHeadAttentionOptions& options, core::Generator& gen, DType dtype)
    : options_(options) {
  check_options(options);
  const int64_t d = options.d_model();
  q_ = register_module("q", std::make_shared<Linear>(LinearOptions(d, d), gen, dtype));
  k_ = register_module("k", std::make_shared<Linear>(LinearOptions(d, d), gen, dtype));
  v_ = register_module("v", std::make_shared<Linear>(LinearOptions(d, d), gen, dtype));
  o_ = register_module("o", std::make_shared<Linear>(LinearOptions(d, d), gen, dtype));
  gates_ = Variable(Tensor::ones({options.heads()}, dtype), /*requires_grad=*/false);
}

Tensor MultiHeadAttention::build_mask(int64_t batch, int64_t seq_len, const Tensor* padding_mask,
                                      Tensor& alive) const {
  const bool causal = options_.causal();
  if (!causal && padding_mask == nullptr) return {};
  std::vector<double> real;  // 1 = real token, per [b, t]
  if (padding_mask != nullptr) {
    if (padding_mask->shape() != Shape{batch, seq_len}) {
      throw std::invalid_argument("MultiHeadAttention::forward: padding mask " +
                                  core::to_string(padding_mask->shape()) + " does not match the input's [B, T] = " +
                                  core::to_string(Shape{batch, seq_len}));
    }
    real = padding_mask->to_vector();
  }
  const int64_t mb = padding_mask != nullptr ? batch : 1;
  const auto n = static_cast<std::size_t>(seq_len);
  std::vector<double> mask(static_cast<std::size_t>(mb) * n * n, 0.0);
  std::vector<double> alive_rows(static_cast<std::size_t>(mb) * n, 1.0);
  bool any_dead = false;
  for (std::size_t b = 0; b < static_cast<std::size_t>(mb); ++b) {
    for (std::size_t q = 0; q < n; ++q) {
      double* row = mask.data() + (b * n + q) * n;
      bool sees_some_key = false;
      for (std::size_t k = 0; k < n; ++k) {
        const bool hidden = (causal && k > q) || (!real.empty() && real[b * n + k] == 0.0);
        row[k] = hidden ? 1.0 : 0.0;
        sees_some_key = sees_some_key || !hidden;
      }
      if (!sees_some_key) {
        // softmax of an all -inf row is 0/0; leave the row unmasked and zero
        // its probabilities afterwards instead.
        std::fill(row, row + n, 0.0);
        alive_rows[b * n + q] = 0.0;
        any_dead = true;
      }
    }
  }
  const DType dtype = q_->weight().dtype();
  if (any_dead) alive = Tensor::from_vector(alive_rows, {mb, 1, seq_len, 1}, dtype);
  return Tensor::from_vector(mask, {mb, 1, seq_len, seq_len}, dtype);
}

Variable MultiHeadAttention::forward(const Variable& x, const Tensor* padding_mask) {
  using namespace autograd;
  const int64_t d_model = options_.d_model();
  const int64_t h = options_.heads();
  const int64_t dk = d_k();
  if (x.dim() != 3 || x.size(2) != d_model) {
    throw std::invalid_argument("MultiHeadAttention::forward: input " + core::to_string(x.shape()) +
                                " is not [B, T, d_model=" + std::to_string(d_model) + "]");
  }
  if (gates_.shape() != Shape{h} || gates_.dtype() != x.dtype()) {
    throw std::invalid_argument("MultiHeadAttention::forward: gates must be a " + core::to_string(x.dtype()) + " [" +
                                std::to_string(h) + "] tensor, got " + core::to_string(gates_.dtype()) + " " +
                                core::to_string(gates_.shape()));
  }
  const int64_t batch = x.size(0);
  const int64_t seq_len = x.size(1);

  // [B, T, d_model] -> [B, h, T, d_k]: head i reads columns i*d_k .. (i+1)*d_k - 1.
  auto split_heads = [&](const Variable& y) { return permute(reshape(y, {batch, seq_len, h, dk}), {0, 2, 1, 3}); };
  const Variable q = split_heads(q_->forward(x));
  const Variable k = split_heads(k_->forward(x));
  const Variable v = split_heads(v_->forward(x));

  // scores_i = Q_i K_i^T / sqrt(d_k), with the per-head d_k (never d_model): [B, h, T, T]
  Variable scores = matmul(q, transpose(k, 2, 3)) * (1.0 / std::sqrt(static_cast<double>(dk)));
  Tensor alive;
  const Tensor mask = build_mask(batch, seq_len, padding_mask, alive);
  if (mask.defined()) scores = masked_fill(scores, mask, -std::numeric_limits<double>::infinity());
  Variable attn = softmax(scores, -1);
  if (alive.defined()) attn = attn * Variable(alive);
  last_attention_ = attn.value();

  Variable heads_out = matmul(attn, v);  // [B, h, T, d_k]
  // Multiplying by all-ones gates changes no bit, so it is skipped unless a
  // gate differs from 1 or its gradient is wanted.
  if (gates_.requires_grad() || !all_ones(gates_.value())) heads_out = heads_out * reshape(gates_, {1, h, 1, 1});

  // concat(head_1..head_h): [B, h, T, d_k] -> [B, T, d_model]
  const Variable concat = reshape(permute(heads_out, {0, 2, 1, 3}), {batch, seq_len, d_model});
  return o_->forward(concat);
}

void MultiHeadAttention::set_gates(const Variable& gates) {
  const DType dtype = q_->weight().dtype();
  if (!gates.defined() || gates.shape() != Shape{options_.heads()} || gates.dtype() != dtype) {
    throw std::invalid_argument(
        "MultiHeadAttention::set_gates: gates must be a " + core::to_string(dtype) + " [" +
        std::to_string(options_.heads()) + "] variable, got " +
        (gates.defined() ? core::to_string(gates.dtype()) + " " + core::to_string(gates.shape()) : "undefined"));
  }
  gates_ = gates;
}

void MultiHeadAttention::check_head(int64_t head, const char* who) const {
  if (head < 0 || head >= options_.heads()) {
    throw std::invalid_argument(std::string("MultiHeadAttention::") + who + ": head " + std::to_string(head) +
                                " is outside [0, " + std::to_string(options_.heads()) + ")");
  }
}

Linear& MultiHeadAttention::projection(Projection which) const {
  switch (which) {
    case Projection::Q:
      return *q_;
    case Projection::K:
      return *k_;
    case Projection::V:
      return *v_;
  }
  throw std::invalid_argument("MultiHeadAttention: unknown projection");
}

Tensor MultiHeadAttention::head_weight(Projection which, int64_t head) const {
  check_head(head, "head_weight");
  return projection(which).weight().mutable_value().slice(0, head * d_k(), (head + 1) * d_k());
}

Tensor MultiHeadAttention::head_bias(Projection which, int64_t head) const {
  check_head(head, "head_bias");
  return projection(which).bias().mutable_value().slice(0, head * d_k(), (head + 1) * d_k());
}

Tensor MultiHeadAttention::head_output_weight(int64_t head) const {
  check_head(head, "head_output_weight");
  return o_->weight().mutable_value().slice(1, head * d_k(), (head + 1) * d_k());
}

}  // namespace headlab::layers
