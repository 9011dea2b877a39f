// The kernel of fused_elementwise: a program of element-wise instructions
// (kernels/cpu/ewise_program.h) evaluated in one pass over memory.
#pragma once
#include <span>

#include "baton/tensor.h"
#include "kernels/cpu/ewise_program.h"

namespace baton::kernels {

// out = program(inputs) for every element of `out` (f32 or f64, contiguous), each input
// of out's dtype and broadcastable to its shape; pow's exponent inputs hold one element.
// `out` may share storage with an input of its shape at the same positions (a plan writes
// in place over an input that dies here): each block reads its inputs before its output
// is written.
void fused_elementwise(const EwProgram& program, std::span<const Tensor> inputs, const Tensor& out);

}  // namespace baton::kernels
