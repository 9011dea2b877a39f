// Bytes of a plan's arena lent to the kernel of the step running on this thread: oneDNN
// primitives' scratchpads and the scratch blocks of baton's own kernels come from there
// instead of the allocator when they fit.
#pragma once
#include <cstddef>

namespace baton::kernels {

// Lends `bytes` at `data` for the scope's life (the executor sets one around a step's
// kernel). A step's primitives run one after another, so each may use all of it. Scopes
// nest (a control-flow step runs its subplan's steps).
class StepScratch {
 public:
  StepScratch(void* data, size_t bytes);
  ~StepScratch();
  StepScratch(const StepScratch&) = delete;
  StepScratch& operator=(const StepScratch&) = delete;

 private:
  void* previous_data_;
  size_t previous_bytes_;
};

// The bytes lent on this thread when they hold `bytes`, else null. (Only the thread that
// runs the step sees them: a kernel hands slices to its OpenMP threads itself.)
void* lent_scratch(size_t bytes);

}  // namespace baton::kernels
