// Threads: one OpenMP pool shared with oneDNN, and flush-to-zero in every worker.
#include "baton/runtime.h"

#include <omp.h>
#include <xmmintrin.h>
#include <pmmintrin.h>

namespace baton {
namespace {

// Subnormal floats make SIMD loops many times slower (momentum buffers drift there
// during training); flush them to zero on every thread of the pool.
void set_flush_to_zero_everywhere() {
#pragma omp parallel
  {
    _MM_SET_FLUSH_ZERO_MODE(_MM_FLUSH_ZERO_ON);
    _MM_SET_DENORMALS_ZERO_MODE(_MM_DENORMALS_ZERO_ON);
  }
  _MM_SET_FLUSH_ZERO_MODE(_MM_FLUSH_ZERO_ON);
  _MM_SET_DENORMALS_ZERO_MODE(_MM_DENORMALS_ZERO_ON);
}

}  // namespace

namespace detail {
// Called once when the first op is registered, so it runs in every program that uses ops.
void init_runtime() {
  static const bool done = [] {
    set_flush_to_zero_everywhere();
    return true;
  }();
  (void)done;
}
}  // namespace detail

void set_num_threads(int n) {
  omp_set_num_threads(n < 1 ? 1 : n);
  set_flush_to_zero_everywhere();
}

int get_num_threads() { return omp_get_max_threads(); }

}  // namespace baton
