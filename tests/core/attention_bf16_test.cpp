// Fused attention in bf16 mixed precision (core/attention_bf16.cpp): every
// output against a double-precision reference of the documented arithmetic
// (operands rounded to bf16, f32 softmax), on both backends, causal with a
// short last chunk, padded, and gated; and the forward's bits against the
// three-stage form (attention_split.h), which runs the float32 kernel's
// generic bf16 products; and without a kept P, the recomputing backward's
// bits against the kept P's; and with q, k and v rounded whole and held for
// the backward, every bit against the per-chunk rounding's.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "core/attention_bf16.h"
#include "core/attention_kernels.h"
#include "core/attention_split.h"
#include "core/bf16.h"
#include "core/gemm.h"
#include "tests/core/gemm_test_util.h"
#include "tests/precision.h"

namespace headlab::core {
namespace {

double r(double x) { return from_bf16(to_bf16(static_cast<float>(x))); }

struct Case {
  const char* what;
  int64_t B, T, h, dk;
  bool causal, padded, gated;
};

// 70 causal rows: a chunk of 64 and one of 6 (core/attention_blocks.h).
// 12 sequences of 8 heads x 128 tokens: more than 8 blocks, one sequence each
// (a chunk of two would exceed kBlockScores).
const Case kCases[] = {{"causal, two chunks", 3, 70, 2, 8, true, false, false},
                       {"causal, one sequence a block", 12, 128, 8, 4, true, false, false},
                       {"padded", 2, 20, 4, 16, false, true, false},
                       {"gated, causal", 2, 33, 2, 16, true, false, true}};

TEST(AttentionBf16, EveryOutputMatchesTheRoundedReferenceOnBothBackends) {
  SKIP_WITHOUT_BF16_UNITS();
  for (const Case& c : kCases)
    for (const GemmBackend backend : {GemmBackend::onednn, GemmBackend::openblas}) {
      SCOPED_TRACE(std::string(c.what) + ", " + gemm_backend_name(backend));
      const test::Scope on(backend, GemmPrecision::bf16);
      const int64_t B = c.B, T = c.T, h = c.h, dk = c.dk, d = h * dk;
      const std::vector<float> q = test::random_floats(B * T * d, 1), k = test::random_floats(B * T * d, 2),
                               v = test::random_floats(B * T * d, 3), dout = test::random_floats(B * T * d, 4);
      std::vector<double> real(static_cast<std::size_t>(B * T), 1.0);
      if (c.padded) real[3] = real[T + 7] = real[T + 8] = 0.0;
      const std::vector<double> gates_v = {1.0, 0.5};
      const AttentionShape shape{h, c.causal, 1.0 / std::sqrt(static_cast<double>(dk))};
      const Tensor Q = Tensor::from_vector(std::vector<double>(q.begin(), q.end()), {B, T, d}, DType::f32);
      const Tensor K = Tensor::from_vector(std::vector<double>(k.begin(), k.end()), {B, T, d}, DType::f32);
      const Tensor V = Tensor::from_vector(std::vector<double>(v.begin(), v.end()), {B, T, d}, DType::f32);
      const Tensor dO = Tensor::from_vector(std::vector<double>(dout.begin(), dout.end()), {B, T, d}, DType::f32);
      const Tensor mask = c.padded ? Tensor::from_vector(real, {B, T}, DType::f32) : Tensor();
      const Tensor gates = c.gated ? Tensor::from_vector(gates_v, {h}, DType::f32) : Tensor();
      const AttentionForward f = attention_forward(Q, K, V, shape, mask, gates);
      const AttentionGrads g = attention_backward(dO, Q, K, V, f.probs, shape, mask, gates, c.gated);
      const std::vector<double> P = f.probs.to_vector(), out = f.out.to_vector();
      const std::vector<double> dq = g.dq.to_vector(), dkv = g.dk.to_vector(), dv = g.dv.to_vector();
      const auto at = [&](int64_t b, int64_t t, int64_t head, int64_t x) { return (b * T + t) * d + head * dk + x; };
      const auto p_at = [&](int64_t b, int64_t head, int64_t i, int64_t j) { return ((b * h + head) * T + i) * T + j; };
      for (int64_t b = 0; b < B; ++b)
        for (int64_t head = 0; head < h; ++head) {
          const double gate = c.gated ? gates_v[static_cast<std::size_t>(head)] : 1.0;
          std::vector<double> ds(static_cast<std::size_t>(T * T), 0.0);
          for (int64_t i = 0; i < T; ++i) {
            // The probabilities: softmax of the scaled rounded product over the visible real keys.
            const int64_t n = c.causal ? i + 1 : T;
            std::vector<double> s(static_cast<std::size_t>(n), -INFINITY);
            double top = -INFINITY, sum = 0;
            for (int64_t j = 0; j < n; ++j) {
              if (real[static_cast<std::size_t>(b * T + j)] == 0.0) continue;
              double dot = 0;
              for (int64_t x = 0; x < dk; ++x) dot += r(q[at(b, i, head, x)]) * r(k[at(b, j, head, x)]);
              s[static_cast<std::size_t>(j)] = dot * shape.scale;
              top = std::max(top, s[static_cast<std::size_t>(j)]);
            }
            for (int64_t j = 0; j < n; ++j) sum += std::exp(s[static_cast<std::size_t>(j)] - top);
            for (int64_t j = 0; j < T; ++j) {
              const double want = j < n ? std::exp(s[static_cast<std::size_t>(j)] - top) / sum : 0.0;
              ASSERT_NEAR(P[p_at(b, head, i, j)], want, 2e-6) << "P " << b << "," << head << "," << i << "," << j;
            }
            // dS from the kernel's own P: dP = dO' V^T of the rounded operands.
            std::vector<double> dp(static_cast<std::size_t>(T), 0.0);
            double dot_pd = 0;
            for (int64_t j = 0; j < n; ++j) {
              for (int64_t x = 0; x < dk; ++x) dp[j] += r(gate * dout[at(b, i, head, x)]) * r(v[at(b, j, head, x)]);
              dot_pd += dp[j] * P[p_at(b, head, i, j)];
            }
            for (int64_t j = 0; j < n; ++j)
              ds[i * T + j] = shape.scale * P[p_at(b, head, i, j)] * (dp[j] - dot_pd);
          }
          // out = gate * (rounded P) (rounded V); dV = (rounded P)^T (rounded dO');
          // dQ = (rounded dS) (rounded K); dK = (rounded dS)^T (rounded Q).
          for (int64_t i = 0; i < T; ++i)
            for (int64_t x = 0; x < dk; ++x) {
              double o = 0, o_size = 0, gv = 0, gv_size = 0, gq = 0, gq_size = 0, gq_top = 0, gk = 0, gk_size = 0,
                     gk_top = 0;
              for (int64_t j = 0; j < T; ++j) {
                const double po = r(P[p_at(b, head, i, j)]) * r(v[at(b, j, head, x)]);
                const double pv = r(P[p_at(b, head, j, i)]) * r(gate * dout[at(b, j, head, x)]);
                const double sq = r(ds[i * T + j]) * r(k[at(b, j, head, x)]);
                const double sk = r(ds[j * T + i]) * r(q[at(b, j, head, x)]);
                o += po, o_size += std::abs(po), gv += pv, gv_size += std::abs(pv);
                gq += sq, gq_size += std::abs(sq), gq_top = std::max(gq_top, std::abs(sq));
                gk += sk, gk_size += std::abs(sk), gk_top = std::max(gk_top, std::abs(sk));
              }
              const auto e = static_cast<std::size_t>(at(b, i, head, x));
              ASSERT_NEAR(out[e], gate * o, 1e-5 * (1 + o_size)) << "out " << b << "," << i << "," << head;
              ASSERT_NEAR(dv[e], gv, 1e-5 * (1 + gv_size)) << "dv " << b << "," << i << "," << head;
              // dS is computed in f32 by the kernel and in double here: where
              // it lies on a bf16 rounding boundary the two round apart by one
              // bf16 step (2^-8 of a term), a few terms of a sum at most.
              ASSERT_NEAR(dq[e], gq, 1e-5 * (1 + gq_size) + 0x1p-6 * gq_top) << "dq " << b << "," << i << "," << head;
              ASSERT_NEAR(dkv[e], gk, 1e-5 * (1 + gk_size) + 0x1p-6 * gk_top) << "dk " << b << "," << i << "," << head;
            }
        }
      // The forward's bits are those of the three stages (the float32 kernel's products).
      const Tensor S = attention_scores_forward(Q, K, shape, mask);
      const Tensor P3 = attention_softmax_forward(S, c.causal);
      EXPECT_EQ(P3.to_vector(), P);
      EXPECT_EQ(attention_apply_forward(P3, V, shape, gates).to_vector(), out);
    }
}

// A float tensor's bits (a -0 against a 0 counts).
std::vector<uint32_t> bits(const Tensor& t) {
  std::vector<uint32_t> b(static_cast<std::size_t>(t.numel()));
  std::memcpy(b.data(), t.contiguous().data<float>(), b.size() * sizeof(float));
  return b;
}

// A [B, T, h * dk] float32 tensor of normal values.
Tensor random_seq(const Case& c, uint64_t seed) {
  const std::vector<float> x = test::random_floats(c.B * c.T * c.h * c.dk, seed);
  return Tensor::from_vector(std::vector<double>(x.begin(), x.end()), {c.B, c.T, c.h * c.dk}, DType::f32);
}

// [B, T]: padded keys in every sequence, in a different place in each.
Tensor padding_of(const Case& c) {
  std::vector<double> real(static_cast<std::size_t>(c.B * c.T), 1.0);
  for (int64_t b = 0; b < c.B; ++b)
    for (int64_t j = 0; j < c.T; ++j)
      if ((j * 7 + b * 3) % 11 == 0) real[static_cast<std::size_t>(b * c.T + j)] = 0.0;
  return Tensor::from_vector(real, {c.B, c.T}, DType::f32);
}

// The gated case's gates [h], all 1 but the second's 0.5; else undefined.
Tensor gates_of(const Case& c) {
  if (!c.gated) return {};
  std::vector<double> gates(static_cast<std::size_t>(c.h), 1.0);
  gates[1] = 0.5;
  return Tensor::from_vector(gates, {c.h}, DType::f32);
}

// 150 causal rows: chunks of 64, 64 and 22. The first two cases' shapes
// have blocks of one sequence each (core/attention_blocks.h), the last one
// block of both.
const Case kRecomputeCases[] = {{"causal, three chunks, padded", 3, 150, 2, 16, true, true, false},
                                {"causal, gated, padded", 3, 70, 3, 8, true, true, true},
                                {"bidirectional, padded", 2, 40, 4, 16, false, true, false}};

TEST(AttentionBf16, WithoutKeptProbabilitiesTheBackwardRecomputesTheirBitsOnBothBackends) {
  SKIP_WITHOUT_BF16_UNITS();
  for (const Case& c : kRecomputeCases)
    for (const GemmBackend backend : {GemmBackend::onednn, GemmBackend::openblas}) {
      SCOPED_TRACE(std::string(c.what) + ", " + gemm_backend_name(backend));
      const test::Scope on(backend, GemmPrecision::bf16);
      const Tensor Q = random_seq(c, 5), K = random_seq(c, 6), V = random_seq(c, 7), dO = random_seq(c, 8);
      const Tensor mask = padding_of(c), gates = gates_of(c);
      const AttentionShape shape{c.h, c.causal, 1.0 / std::sqrt(static_cast<double>(c.dk))};
      const AttentionForward kept = attention_forward(Q, K, V, shape, mask, gates);
      const AttentionForward dropped = attention_forward(Q, K, V, shape, mask, gates, false);
      ASSERT_TRUE(kept.probs.defined());
      ASSERT_FALSE(dropped.probs.defined());  // so the backward below recomputes them
      const AttentionGrads a = attention_backward(dO, Q, K, V, kept.probs, shape, mask, gates, false);
      const AttentionGrads b = attention_backward(dO, Q, K, V, dropped.probs, shape, mask, gates, false);
      EXPECT_EQ(bits(kept.out), bits(dropped.out));
      EXPECT_EQ(bits(a.dq), bits(b.dq));
      EXPECT_EQ(bits(a.dk), bits(b.dk));
      EXPECT_EQ(bits(a.dv), bits(b.dv));
      // The gates' gradient reads P: without it, a clear error.
      if (c.gated) {
        EXPECT_THROW(attention_backward(dO, Q, K, V, dropped.probs, shape, mask, gates, true), std::invalid_argument);
      }
    }
  // float32 keeps P whatever is asked: its backward reads it.
  const test::Scope f32(gemm_backend(), GemmPrecision::f32);
  const Tensor x = Tensor::from_vector(std::vector<double>(2 * 5 * 4, 0.5), {2, 5, 4}, DType::f32);
  EXPECT_TRUE(attention_forward(x, x, x, {2, true, 0.5}, Tensor(), Tensor(), false).probs.defined());
}

// The middle case has blocks of one or two sequences (10 batch rows in 8
// blocks), so a block's copies start past the first sequence's.
const Case kHeldCases[] = {{"causal, three chunks, padded", 3, 150, 2, 16, true, true, false},
                           {"causal, gated, padded, blocks of two", 10, 70, 2, 16, true, true, true},
                           {"bidirectional, padded, one block", 2, 40, 4, 16, false, true, false}};

TEST(AttentionBf16, HeldRoundedOperandsGiveEveryBitOfTheFloatOnesOnBothBackends) {
  SKIP_WITHOUT_BF16_UNITS();
  for (const Case& c : kHeldCases)
    for (const GemmBackend backend : {GemmBackend::onednn, GemmBackend::openblas})
      for (const bool keep_probs : {true, false}) {
        SCOPED_TRACE(std::string(c.what) + ", " + gemm_backend_name(backend) + (keep_probs ? ", P kept" : ""));
        const test::Scope on(backend, GemmPrecision::bf16);
        const int64_t B = c.B, T = c.T, h = c.h, dk = c.dk, d = h * dk;
        Tensor Q = random_seq(c, 9), K = random_seq(c, 10), V = random_seq(c, 11);
        const Tensor dO1 = random_seq(c, 12), dO2 = random_seq(c, 13), mask = padding_of(c), gates = gates_of(c);
        const AttentionShape shape{h, c.causal, 1.0 / std::sqrt(static_cast<double>(dk))};
        const AttentionForward plain = attention_forward(Q, K, V, shape, mask, gates, keep_probs);
        const AttentionForward held = attention_forward(Q, K, V, shape, mask, gates, keep_probs, true);
        ASSERT_FALSE(plain.rounded);
        ASSERT_TRUE(held.rounded);
        EXPECT_EQ(bits(plain.out), bits(held.out));
        ASSERT_EQ(plain.probs.defined(), held.probs.defined());
        if (keep_probs) {
          EXPECT_EQ(bits(plain.probs), bits(held.probs));
        }
        // The copies: q, k and v rounded, head-major [B, h, T, dk].
        const RoundedQkv& r16 = *held.rounded;
        EXPECT_EQ(r16.shape(), Q.shape());
        const Tensor* sources[] = {&Q, &K, &V};
        for (int which = 0; which < 3; ++which) {
          const float* xf = sources[which]->data<float>();
          const bf16_t* x16 = r16.operand(which);
          int64_t wrong = 0;
          for (int64_t b = 0; b < B; ++b)
            for (int64_t head = 0; head < h; ++head)
              for (int64_t t = 0; t < T; ++t)
                for (int64_t j = 0; j < dk; ++j)
                  wrong += x16[((b * h + head) * T + t) * dk + j] != to_bf16(xf[(b * T + t) * d + head * dk + j]);
          EXPECT_EQ(wrong, 0) << "operand " << which;
        }
        // Two gradients in turn, so that a rounded dO left from the first
        // shows in the second; q, k and v overwritten before the held
        // backward, which must not read them.
        const AttentionGrads a1 = attention_backward(dO1, Q, K, V, plain.probs, shape, mask, gates, false);
        const AttentionGrads a2 = attention_backward(dO2, Q, K, V, plain.probs, shape, mask, gates, false);
        for (Tensor* x : {&Q, &K, &V}) x->fill_(0.0);
        const AttentionGrads b1 = attention_backward(dO1, r16, held.probs, shape, mask, gates);
        const AttentionGrads b2 = attention_backward(dO2, r16, held.probs, shape, mask, gates);
        for (const auto& [a, b] : {std::pair{&a1, &b1}, std::pair{&a2, &b2}}) {
          EXPECT_EQ(bits(a->dq), bits(b->dq));
          EXPECT_EQ(bits(a->dk), bits(b->dk));
          EXPECT_EQ(bits(a->dv), bits(b->dv));
          EXPECT_FALSE(b->dgates.defined());
        }
        EXPECT_NE(bits(b1.dq), bits(b2.dq));  // the two gradients differ: the check above can fail
        // A dout unlike q: a clear error.
        EXPECT_THROW(attention_backward(dO1.reshape({B * T, d}), r16, held.probs, shape, mask, gates),
                     std::invalid_argument);
      }
  // float32 products read q, k and v themselves: nothing is rounded or held.
  const test::Scope f32(gemm_backend(), GemmPrecision::f32);
  const Tensor x = Tensor::from_vector(std::vector<double>(2 * 5 * 4, 0.5), {2, 5, 4}, DType::f32);
  EXPECT_FALSE(attention_forward(x, x, x, {2, true, 0.5}, Tensor(), Tensor(), false, true).rounded);
}

}  // namespace
}  // namespace headlab::core
