// Eigenvalues of a small dense real matrix (not necessarily symmetric), by
// LAPACK's dgeev: Hessenberg reduction and shifted QR, as shipped inside
// OpenBLAS (already a dependency of core/). Used for the copying score of a
// head's OV circuit (analysis/circuits.h).
#pragma once

#include <complex>
#include <cstdint>
#include <vector>

namespace headlab::core {

// The n eigenvalues of the row-major n x n matrix `a` (complex ones come in
// conjugate pairs), in LAPACK's order. Throws std::invalid_argument if `a`
// does not hold n * n values or holds a non-finite one, std::runtime_error if
// the QR iteration fails to converge.
std::vector<std::complex<double>> eigenvalues(const std::vector<double>& a, int64_t n);

}  // namespace headlab::core
