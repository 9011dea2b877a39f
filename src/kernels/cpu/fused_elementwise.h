// The kernel of fused_elementwise: a program of element-wise instructions
// (kernels/cpu/ewise_program.h) evaluated in one pass over memory.
#pragma once
#include <span>

#include "baton/tensor.h"
#include "kernels/cpu/ewise_program.h"

namespace baton::kernels {

// out = program(inputs) for every element of `out` (f32 or f64; contiguous, or dense in
// another order: channels-last, column-major), each input of out's dtype and broadcastable
// to its shape; pow's exponent inputs hold one element.
// `out` may share storage with an input of its shape at the same positions (a plan writes
// in place over an input that dies here): each block reads its inputs before its output
// is written.
void fused_elementwise(const EwProgram& program, std::span<const Tensor> inputs, const Tensor& out);

}  // namespace baton::kernels

namespace baton::kernels {

// out = the sum over `dims` (sorted, normalised, adjacent: the last dims, the first, or a
// run between) of program(inputs) on the elements of `shape`, computed block by block and
// summed as they are made: the elements are never written. The summation order is
// sum_into's for a contiguous tensor of `shape` (the same 8 chains per row, the same
// blocks of 64 rows per column, the same split over threads), so the result is bit for
// bit a fused_elementwise's result summed by `sum`. `out` is contiguous, of the inputs'
// dtype.
void fused_elementwise_sum(const EwProgram& program, std::span<const Tensor> inputs, const Shape& shape,
                           const std::vector<int64_t>& dims, const Tensor& out);

}  // namespace baton::kernels
