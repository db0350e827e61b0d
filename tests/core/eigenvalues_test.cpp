// Eigenvalues of small nonsymmetric matrices with known answers.
#include "core/eigenvalues.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <stdexcept>
#include <vector>

#include "core/random.h"

namespace headlab::core {
namespace {

using C = std::complex<double>;

std::vector<C> sorted(std::vector<C> v) {
  std::sort(v.begin(), v.end(), [](C a, C b) { return a.real() != b.real() ? a.real() < b.real() : a.imag() < b.imag(); });
  return v;
}

void expect_eigenvalues(const std::vector<double>& a, int64_t n, std::vector<C> expected, double tol = 1e-10) {
  const std::vector<C> got = sorted(eigenvalues(a, n));
  expected = sorted(expected);
  ASSERT_EQ(got.size(), expected.size());
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_LT(std::abs(got[i] - expected[i]), tol) << i << ": " << got[i];
}

// Row-major n x n product.
std::vector<double> matmul(const std::vector<double>& a, const std::vector<double>& b, int64_t n) {
  std::vector<double> c(static_cast<std::size_t>(n * n), 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t k = 0; k < n; ++k)
      for (int64_t j = 0; j < n; ++j)
        c[static_cast<std::size_t>(i * n + j)] += a[static_cast<std::size_t>(i * n + k)] * b[static_cast<std::size_t>(k * n + j)];
  return c;
}

TEST(Eigenvalues, OfADiagonalMatrixAreItsDiagonal) {
  expect_eigenvalues({3, 0, 0, 0, -1, 0, 0, 0, 0.5}, 3, {3.0, -1.0, 0.5});
}

TEST(Eigenvalues, OfATriangularMatrixAreItsDiagonalWhateverIsAbove) {
  expect_eigenvalues({2, 7, -4, 0, 5, 9, 0, 0, -3}, 3, {2.0, 5.0, -3.0});
}

TEST(Eigenvalues, OfARotationAreAConjugatePairOnTheUnitCircle) {
  const double t = 0.7;
  expect_eigenvalues({std::cos(t), -std::sin(t), std::sin(t), std::cos(t)}, 2, {std::polar(1.0, t), std::polar(1.0, -t)});
}

TEST(Eigenvalues, OfACompanionMatrixAreThePolynomialsRoots) {
  // x^3 - 7x + 6 = (x - 1)(x - 2)(x + 3)
  expect_eigenvalues({0, 0, -6, 1, 0, 7, 0, 1, 0}, 3, {1.0, 2.0, -3.0});
}

TEST(Eigenvalues, SurviveASimilarityTransform) {
  // B = S D S^-1 with D block-diagonal: 2, a rotation-scaling block (eigenvalues
  // -1 +- 3i) and -0.5; S = I + strictly upper U, so S^-1 = I - U + U^2 - U^3.
  const int64_t n = 4;
  const std::vector<double> d = {2, 0, 0, 0, 0, -1, -3, 0, 0, 3, -1, 0, 0, 0, 0, -0.5};
  std::vector<double> u(16, 0.0), s(16, 0.0), si(16, 0.0);
  Generator gen(5);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = i + 1; j < n; ++j) u[static_cast<std::size_t>(i * n + j)] = gen.normal();
  const auto u2 = matmul(u, u, n), u3 = matmul(u2, u, n);
  for (std::size_t i = 0; i < 16; ++i) {
    const double eye = i % 5 == 0 ? 1.0 : 0.0;
    s[i] = eye + u[i];
    si[i] = eye - u[i] + u2[i] - u3[i];
  }
  expect_eigenvalues(matmul(matmul(s, d, n), si, n), n, {2.0, C(-1, 3), C(-1, -3), -0.5}, 1e-9);
}

TEST(Eigenvalues, OfARandomMatrixSumToTheTraceAndComeInConjugatePairs) {
  const int64_t n = 12;
  Generator gen(11);
  std::vector<double> a(static_cast<std::size_t>(n * n));
  for (double& v : a) v = gen.normal();
  const std::vector<C> ev = eigenvalues(a, n);
  C sum = 0, sum_sq = 0;
  for (C e : ev) {
    sum += e;
    sum_sq += e * e;
  }
  double trace = 0;
  for (int64_t i = 0; i < n; ++i) trace += a[static_cast<std::size_t>(i * n + i)];
  const auto a2 = matmul(a, a, n);
  double trace2 = 0;
  for (int64_t i = 0; i < n; ++i) trace2 += a2[static_cast<std::size_t>(i * n + i)];
  EXPECT_NEAR(sum.real(), trace, 1e-9);
  EXPECT_NEAR(sum.imag(), 0.0, 1e-9);
  EXPECT_NEAR(sum_sq.real(), trace2, 1e-8);  // tr(A^2) = sum of squared eigenvalues
  int complex_count = 0;
  for (C e : ev) {
    if (e.imag() == 0) continue;
    ++complex_count;
    EXPECT_TRUE(std::any_of(ev.begin(), ev.end(), [&](C f) { return std::abs(f - std::conj(e)) < 1e-12; }));
  }
  EXPECT_GT(complex_count, 0) << "a 12 x 12 Gaussian matrix almost surely has complex eigenvalues";
}

TEST(Eigenvalues, RejectsAWrongSizeOrANonFiniteValue) {
  EXPECT_THROW(eigenvalues({1, 2, 3}, 2), std::invalid_argument);
  EXPECT_THROW(eigenvalues({1, NAN, 0, 1}, 2), std::invalid_argument);
  EXPECT_TRUE(eigenvalues({}, 0).empty());
}

}  // namespace
}  // namespace headlab::core
