#include "kernels/cpu/threads.h"

#include <omp.h>

#include "core/runtime_internal.h"

namespace baton::kernels {

// omp_get_max_threads() is this thread's setting, so set_num_threads() in between is seen.
void use_threads_here(int n) {
  if (omp_get_max_threads() == n) return;
  omp_set_num_threads(n);
  detail::flush_to_zero_in_team(n);
}

ThreadsScope::ThreadsScope(int n) {
  if (n <= 0 || omp_get_max_threads() == n) return;
  previous_ = omp_get_max_threads();
  use_threads_here(n);
}

ThreadsScope::~ThreadsScope() {
  if (previous_ > 0) use_threads_here(previous_);
}

}  // namespace baton::kernels
