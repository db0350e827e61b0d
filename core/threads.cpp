#include "core/threads.h"

#include <cblas.h>
#include <omp.h>

#include <thread>

namespace headlab::core {

int hardware_threads() {
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

void set_num_threads(int n) {
  if (n <= 0) n = hardware_threads();
  omp_set_num_threads(n);
  openblas_set_num_threads(n);
}

int num_threads() { return omp_get_max_threads(); }

}  // namespace headlab::core
