#include "train/head_metrics.h"

#include <cmath>
#include <stdexcept>
#include <string>

namespace headlab::train {
namespace {

// A contiguous [B, h, T, T] view of one layer's attention, read as doubles.
template <class T>
struct Probs {
  const T* data;
  int64_t batch, heads, len;
  const T* row(int64_t b, int64_t h, int64_t q) const { return data + ((b * heads + h) * len + q) * len; }
};

// Number of keys query q can see.
int64_t visible_keys(int64_t q, int64_t len, bool causal) { return causal ? q + 1 : len; }

std::string shape_of(const core::Tensor& t) { return core::to_string(t.shape()); }

// Scores of one head on one example; the batch functions average these.
template <class T>
HeadScores example_scores(const Probs<T>& p, int64_t b, int64_t h, std::span<const int32_t> tokens, bool causal) {
  const int64_t len = p.len;
  HeadScores s;
  double prev = 0, first = 0, self = 0;
  for (int64_t q = 2; q < len; ++q) {
    const T* a = p.row(b, h, q);
    prev += a[q - 1];
    first += a[0];
    self += a[q];
  }
  const auto n_late = static_cast<double>(len - 2);
  s.previous_token = prev / n_late;
  s.first_token = first / n_late;
  s.self = self / n_late;

  double entropy = 0, distance = 0;
  int64_t n_entropy = 0;
  for (int64_t q = 0; q < len; ++q) {
    const T* a = p.row(b, h, q);
    const int64_t keys = visible_keys(q, len, causal);
    double hq = 0, dq = 0;
    for (int64_t k = 0; k < keys; ++k) {
      const double v = a[k];
      if (v > 0) hq -= v * std::log(v);
      dq += v * static_cast<double>(q > k ? q - k : k - q);
    }
    distance += dq;
    if (keys >= 2) {
      entropy += hq / std::log(static_cast<double>(keys));
      ++n_entropy;
    }
  }
  s.entropy = n_entropy > 0 ? entropy / static_cast<double>(n_entropy) : 0.0;
  s.distance = distance / static_cast<double>(len);

  if (!tokens.empty()) {
    const int32_t* x = tokens.data() + b * len;
    double induction = 0, duplicate = 0;
    int64_t n_queries = 0;
    // Copies at j >= q - 2 are left out: there the key after the copy (j + 1)
    // or the copy itself would be the query or its previous token, and a
    // previous-token or self head would score as induction or duplicate-token.
    for (int64_t q = 3; q < len; ++q) {
      const T* a = p.row(b, h, q);
      bool seen = false;
      double ind = 0, dup = 0;
      for (int64_t j = 0; j + 2 < q; ++j) {
        if (x[j] != x[q]) continue;
        seen = true;
        ind += a[j + 1];  // the token right after the earlier copy
        dup += a[j];      // the earlier copy
      }
      if (seen) {
        induction += ind;
        duplicate += dup;
        ++n_queries;
      }
    }
    if (n_queries > 0) {
      s.induction = induction / static_cast<double>(n_queries);
      s.duplicate_token = duplicate / static_cast<double>(n_queries);
    }
  }
  return s;
}

template <class T>
void check_rows(const Probs<T>& p, bool causal, const char* op) {
  for (int64_t b = 0; b < p.batch; ++b)
    for (int64_t h = 0; h < p.heads; ++h)
      for (int64_t q = 0; q < p.len; ++q) {
        const T* a = p.row(b, h, q);
        double sum = 0;
        for (int64_t k = 0; k < p.len; ++k) {
          const double v = a[k];
          const bool hidden = causal && k > q;
          if (!(v >= -1e-6) || (hidden && v > 1e-6))
            throw std::invalid_argument(std::string(op) + ": attention[" + std::to_string(b) + ", " +
                                        std::to_string(h) + ", " + std::to_string(q) + ", " + std::to_string(k) +
                                        "] = " + std::to_string(v) +
                                        (hidden ? " lies above the diagonal of a causal head (pass causal=false for "
                                                  "bidirectional attention)"
                                                : " is not a probability; pass softmax outputs, not scores"));
          sum += v;
        }
        if (!(std::abs(sum - 1.0) <= 1e-3))
          throw std::invalid_argument(std::string(op) + ": attention row [" + std::to_string(b) + ", " +
                                      std::to_string(h) + ", " + std::to_string(q) + ", :] sums to " +
                                      std::to_string(sum) + ", expected 1 (softmax over keys)");
      }
}

template <class F>
decltype(auto) with_probs(const core::Tensor& attn, F&& f) {
  const core::Tensor c = attn.contiguous();
  return core::dispatch(c.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const Probs<T> p{c.data<T>(), c.size(0), c.size(1), c.size(2)};
    return f(p);
  });
}

HeadScores mean_scores(const std::vector<HeadScores>& per_example) {
  HeadScores m;
  double ind = 0, dup = 0;
  int64_t n_ind = 0;
  for (const HeadScores& s : per_example) {
    m.previous_token += s.previous_token;
    m.first_token += s.first_token;
    m.self += s.self;
    m.entropy += s.entropy;
    m.distance += s.distance;
    if (s.induction) {  // induction and duplicate-token exist together
      ind += *s.induction;
      dup += *s.duplicate_token;
      ++n_ind;
    }
  }
  const auto n = static_cast<double>(per_example.size());
  m.previous_token /= n;
  m.first_token /= n;
  m.self /= n;
  m.entropy /= n;
  m.distance /= n;
  if (n_ind > 0) {
    m.induction = ind / static_cast<double>(n_ind);
    m.duplicate_token = dup / static_cast<double>(n_ind);
  }
  return m;
}

}  // namespace

void check_attention(const core::Tensor& attn, std::span<const int32_t> tokens, bool causal, const char* op) {
  if (!attn.defined()) throw std::invalid_argument(std::string(op) + ": attention tensor is undefined");
  if (attn.dim() != 4 || attn.size(2) != attn.size(3))
    throw std::invalid_argument(std::string(op) + ": attention has shape " + shape_of(attn) +
                                ", expected [batch, heads, T, T]");
  if (attn.size(0) < 1 || attn.size(1) < 1 || attn.size(2) < 3)
    throw std::invalid_argument(std::string(op) + ": attention has shape " + shape_of(attn) +
                                ", needs batch >= 1, heads >= 1 and T >= 3 (the positional scores use q >= 2)");
  const int64_t expected = attn.size(0) * attn.size(2);
  if (!tokens.empty() && static_cast<int64_t>(tokens.size()) != expected)
    throw std::invalid_argument(std::string(op) + ": " + std::to_string(tokens.size()) + " tokens for attention " +
                                shape_of(attn) + ", expected batch*T = " + std::to_string(expected) + " or none");
  with_probs(attn, [&](const auto& p) { check_rows(p, causal, op); });
}

std::vector<HeadScores> example_head_scores(const core::Tensor& attn, std::span<const int32_t> tokens, bool causal,
                                            int64_t b) {
  check_attention(attn, tokens, causal, "example_head_scores");
  if (b < 0 || b >= attn.size(0))
    throw std::invalid_argument("example_head_scores: example " + std::to_string(b) + " is outside the batch of " +
                                std::to_string(attn.size(0)));
  return with_probs(attn, [&](const auto& p) {
    std::vector<HeadScores> out;
    for (int64_t h = 0; h < p.heads; ++h) out.push_back(example_scores(p, b, h, tokens, causal));
    return out;
  });
}

std::vector<HeadScores> head_scores(const core::Tensor& attn, std::span<const int32_t> tokens, bool causal) {
  check_attention(attn, tokens, causal, "head_scores");
  return with_probs(attn, [&](const auto& p) {
    std::vector<HeadScores> out;
    for (int64_t h = 0; h < p.heads; ++h) {
      std::vector<HeadScores> per_example;
      for (int64_t b = 0; b < p.batch; ++b) per_example.push_back(example_scores(p, b, h, tokens, causal));
      out.push_back(mean_scores(per_example));
    }
    return out;
  });
}

double js_divergence(std::span<const double> p, std::span<const double> q) {
  if (p.size() != q.size())
    throw std::invalid_argument("js_divergence: rows of length " + std::to_string(p.size()) + " and " +
                                std::to_string(q.size()) + ", expected equal lengths");
  // JS = H(m) - (H(p) + H(q)) / 2 with m = (p + q) / 2, written term by term
  // so that zeros contribute nothing and rounding cannot make it negative.
  double js = 0;
  for (std::size_t k = 0; k < p.size(); ++k) {
    const double m = 0.5 * (p[k] + q[k]);
    if (p[k] > 0) js += 0.5 * p[k] * std::log2(p[k] / m);
    if (q[k] > 0) js += 0.5 * q[k] * std::log2(q[k] / m);
  }
  return js < 0 ? 0.0 : js;
}

std::vector<std::vector<double>> js_distance_matrix(const std::vector<core::Tensor>& layers, bool causal) {
  if (layers.empty()) throw std::invalid_argument("js_distance_matrix: no layers given");
  for (std::size_t l = 0; l < layers.size(); ++l) {
    check_attention(layers[l], {}, causal, "js_distance_matrix");
    if (layers[l].size(0) != layers[0].size(0) || layers[l].size(2) != layers[0].size(2))
      throw std::invalid_argument("js_distance_matrix: layer " + std::to_string(l) + " has attention " +
                                  shape_of(layers[l]) + " but layer 0 has " + shape_of(layers[0]) +
                                  "; every layer needs the same batch and T");
  }
  const int64_t batch = layers[0].size(0), len = layers[0].size(2);
  // Every head's rows as doubles: rows[head][(b * T + q) * T + k].
  std::vector<std::vector<double>> rows;
  for (const core::Tensor& layer : layers) {
    const core::Tensor c = layer.to(core::DType::f64).contiguous();
    const double* d = c.data<double>();
    const int64_t heads = c.size(1);
    for (int64_t h = 0; h < heads; ++h) {
      std::vector<double> r(static_cast<std::size_t>(batch * len * len));
      for (int64_t b = 0; b < batch; ++b)
        for (int64_t i = 0; i < len * len; ++i)
          r[static_cast<std::size_t>(b * len * len + i)] = d[(b * heads + h) * len * len + i];
      rows.push_back(std::move(r));
    }
  }
  const std::size_t n = rows.size();
  const int64_t q0 = causal ? 1 : 0;
  const auto pairs = static_cast<double>(batch * (len - q0));
  std::vector<std::vector<double>> js(n, std::vector<double>(n, 0.0));
  for (std::size_t a = 0; a < n; ++a)
    for (std::size_t c = a + 1; c < n; ++c) {
      double total = 0;
      for (int64_t b = 0; b < batch; ++b)
        for (int64_t q = q0; q < len; ++q) {
          const std::size_t at = static_cast<std::size_t>((b * len + q) * len);
          const auto keys = static_cast<std::size_t>(visible_keys(q, len, causal));
          total += js_divergence(std::span(rows[a]).subspan(at, keys), std::span(rows[c]).subspan(at, keys));
        }
      js[a][c] = js[c][a] = total / pairs;
    }
  return js;
}

}  // namespace headlab::train
