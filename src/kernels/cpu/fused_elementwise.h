// The kernel of fused_elementwise: a program of element-wise instructions
// (kernels/cpu/ewise_program.h) evaluated in one pass over memory.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "baton/tensor.h"
#include "kernels/cpu/ewise_program.h"

namespace baton::kernels {

// out = program(inputs) for every element of `out` (contiguous, or dense in another order:
// channels-last, column-major), the program computing in `type` (f32 or f64), each input
// broadcastable to out's shape and read converted to `type` where it is of another dtype
// (any but strings), each result converted to out's dtype where that is another; pow's
// exponent inputs hold one element.
// `out` may share storage with an input of its shape at the same positions (a plan writes
// in place over an input that dies here): each block reads its inputs before its output
// is written.
// `plan`, when given, was made for tensors of these dtypes, shapes and strides (a call
// whose tensors differ runs as without it).
class FusedElementwisePlan;
void fused_elementwise(const EwProgram& program, DType type, std::span<const Tensor> inputs, const Tensor& out,
                       const FusedElementwisePlan* plan = nullptr);

// What a plan step makes once for fused_elementwise (its prepared state), from the
// inputs' and output's metadata: the register schedule and how each input's blocks are
// read, for both cases of an input sharing the output's bytes. A run then only binds the
// data, and its scratch blocks come from the bytes the plan lends the step
// (kernels/cpu/step_scratch.h) when there are at least plan_scratch_bytes of them.
std::shared_ptr<const FusedElementwisePlan> plan_fused_elementwise(const EwProgram& program, DType type,
                                                                   std::span<const Tensor> inputs, const Tensor& out);
size_t plan_scratch_bytes(const FusedElementwisePlan& plan);

}  // namespace baton::kernels

namespace baton::kernels {

// out = the sum over `dims` (sorted, normalised: the last dims, the first, a run between,
// or several runs) of program(inputs) on the elements of `shape`, computed block by block
// and summed as they are made: the elements are never written. The summation order is
// sum_into's for a contiguous tensor of `shape` (the same 8 chains per row, the same
// blocks of 64 rows per column, the same split over threads; dims in several runs: the
// innermost run summed into partial sums in double for floats, those summed over the
// rest), so the result is bit for bit a fused_elementwise's result summed by `sum`. `out` is contiguous, of the dtype the
// program computes in (inputs of others are read converted).
// `plan`, when given, as for fused_elementwise.
// With `reduce` Max, Min or Prod, the same for `max`, `min` and `prod`: the elements
// folded in the order `fold` folds a contiguous tensor (fold_row's 8 chains, in T), which
// decides between -0 and +0 and between NaNs, and a product's rounding, so that too is
// bit for bit.
class FusedElementwiseSumPlan;
enum class EwReduce : uint8_t { Sum, Max, Min, Prod };
void fused_elementwise_sum(const EwProgram& program, std::span<const Tensor> inputs, const Shape& shape,
                           const std::vector<int64_t>& dims, const Tensor& out,
                           const FusedElementwiseSumPlan* plan = nullptr, EwReduce reduce = EwReduce::Sum);

// fused_elementwise_sum's prepared state, as fused_elementwise's: the evaluation's layout
// over the elements of `shape`, and its threads' scratch blocks, lent by the plan.
std::shared_ptr<const FusedElementwiseSumPlan> plan_fused_elementwise_sum(const EwProgram& program,
                                                                         std::span<const Tensor> inputs,
                                                                         const Shape& shape, const Tensor& out);
size_t plan_scratch_bytes(const FusedElementwiseSumPlan& plan);

// fused_elementwise and fused_elementwise_sum in one pass, for elements other steps read
// too: `elements` = program(inputs) (any dense layout, as fused_elementwise's out, and it
// may take an input's bytes the same way) and `out` = their sum over `dims` (sorted,
// normalised), each block written and then summed while in L1. Where the summed dims lie
// in one run of the elements' memory order (a column-major or channels-last gradient
// summed over the batch, any contiguous run), or the elements are row-major (dims in
// several runs: the innermost run summed into partial sums, those summed over the rest),
// the sum is `sum`'s of `elements` bit for bit; elsewhere it runs as the two kernels one
// after the other. With `reduce` Max, Min or Prod, the same for `max`, `min` and `prod`
// (fold's order there).
class FusedElementwiseAndSumPlan;
void fused_elementwise_and_sum(const EwProgram& program, std::span<const Tensor> inputs,
                               const std::vector<int64_t>& dims, const Tensor& elements, const Tensor& out,
                               const FusedElementwiseAndSumPlan* plan = nullptr, EwReduce reduce = EwReduce::Sum);

// Its prepared state, as fused_elementwise's; nullptr where the sum would run apart.
std::shared_ptr<const FusedElementwiseAndSumPlan> plan_fused_elementwise_and_sum(const EwProgram& program,
                                                                               std::span<const Tensor> inputs,
                                                                               const std::vector<int64_t>& dims,
                                                                               const Tensor& elements);
size_t plan_scratch_bytes(const FusedElementwiseAndSumPlan& plan);

}  // namespace baton::kernels
