// The bytes lent to a step's kernel (kernels/cpu/step_scratch.h).
#include "kernels/cpu/step_scratch.h"

namespace baton::kernels {
namespace {

struct LentScratch {
  void* data = nullptr;
  size_t bytes = 0;
};
thread_local LentScratch lent;

}  // namespace

StepScratch::StepScratch(void* data, size_t bytes) : previous_data_(lent.data), previous_bytes_(lent.bytes) {
  lent = {data, bytes};
}

StepScratch::~StepScratch() { lent = {previous_data_, previous_bytes_}; }

void* lent_scratch(size_t bytes) { return bytes <= lent.bytes ? lent.data : nullptr; }

}  // namespace baton::kernels
