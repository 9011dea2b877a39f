// How many OpenMP threads the kernels on the calling thread use. Each std::thread has an
// OpenMP setting (and a team) of its own: the plan's executor, its helper threads and
// small products each set theirs.
#pragma once

namespace baton::kernels {

// Kernels on the calling thread use `n` OpenMP threads (n >= 1) from now on, each of
// them flushing subnormals to zero as the main pool's threads do (results must not depend
// on which thread ran a kernel; detail::flush_to_zero_in_team).
void use_threads_here(int n);

// While it lives, kernels on the calling thread use `n` OpenMP threads (n <= 0: no
// change); the thread's setting before comes back after.
class ThreadsScope {
 public:
  explicit ThreadsScope(int n);
  ~ThreadsScope();
  ThreadsScope(const ThreadsScope&) = delete;
  ThreadsScope& operator=(const ThreadsScope&) = delete;

 private:
  int previous_ = 0;  // 0: left alone
};

}  // namespace baton::kernels
