// What preparing a plan step's kernel tells the plan besides its state.
#pragma once
#include <cstddef>
#include <string>

namespace baton::kernels {

struct PreparedKernel {
  std::string implementation;  // oneDNN's name for what will run ("brgconv:avx512_core")
  // Scratchpad bytes the step's primitives need while it runs: the plan lends them bytes of
  // its arena (onednn::StepScratch), so a run allocates none.
  size_t scratch_bytes = 0;
};

}  // namespace baton::kernels
