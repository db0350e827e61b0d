#include "core/eigenvalues.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

// LAPACK's general eigensolver, exported by libopenblas (Fortran calling
// convention: every argument by pointer, column-major storage).
extern "C" void dgeev_(const char* jobvl, const char* jobvr, const int* n, double* a, const int* lda, double* wr,
                       double* wi, double* vl, const int* ldvl, double* vr, const int* ldvr, double* work,
                       const int* lwork, int* info);

namespace headlab::core {

std::vector<std::complex<double>> eigenvalues(const std::vector<double>& a, int64_t n) {
  if (n < 0 || static_cast<int64_t>(a.size()) != n * n)
    throw std::invalid_argument("eigenvalues: " + std::to_string(a.size()) + " values for a " + std::to_string(n) +
                                " x " + std::to_string(n) + " matrix");
  for (double v : a)
    if (!std::isfinite(v)) throw std::invalid_argument("eigenvalues: the matrix holds a non-finite value");
  if (n == 0) return {};
  // A column-major read of row-major `a` is its transpose, which has the same eigenvalues.
  std::vector<double> m = a, wr(static_cast<std::size_t>(n)), wi(static_cast<std::size_t>(n));
  const int dim = static_cast<int>(n), one = 1;
  const char no = 'N';
  double dummy = 0;
  int info = 0;
  // A workspace query first, then the call.
  int lwork = -1;
  double best = 0;
  dgeev_(&no, &no, &dim, m.data(), &dim, wr.data(), wi.data(), &dummy, &one, &dummy, &one, &best, &lwork, &info);
  lwork = std::max(static_cast<int>(best), 4 * dim);
  std::vector<double> work(static_cast<std::size_t>(lwork));
  dgeev_(&no, &no, &dim, m.data(), &dim, wr.data(), wi.data(), &dummy, &one, &dummy, &one, work.data(), &lwork,
         &info);
  if (info != 0)
    throw std::runtime_error("eigenvalues: LAPACK dgeev failed (info " + std::to_string(info) + ")");
  std::vector<std::complex<double>> out;
  out.reserve(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < wr.size(); ++i) out.emplace_back(wr[i], wi[i]);
  return out;
}

}  // namespace headlab::core
