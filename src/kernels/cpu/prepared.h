// What preparing a plan step's kernel tells the plan besides its state.
#pragma once
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "baton/tensor.h"

namespace baton::kernels {

struct PreparedKernel {
  std::string implementation;  // oneDNN's name for what will run ("brgconv:avx512_core")
  // Scratchpad bytes the step's primitives need while it runs: the plan lends them bytes of
  // its arena (onednn::StepScratch), so a run allocates none.
  size_t scratch_bytes = 0;
  // Constant inputs (CallContext::constant_input) whose values the state now holds in a form
  // of its own, such as a convolution's weights packed in oneDNN's layout: the step's runs
  // never read those inputs' data, so a plan may let their values go and bind metadata.
  // `value` gives the plain value back from the state's copy (for preparing other steps).
  struct Adopted {
    int input;
    std::function<Tensor()> value;
  };
  std::vector<Adopted> adopted;
  // Bytes (in the allocator's size classes) of the copies of constant inputs the state
  // keeps between runs, adopted or not: a plan's memory report counts them as its own.
  size_t constant_copy_bytes = 0;
};

}  // namespace baton::kernels
