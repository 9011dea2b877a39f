// fused_elementwise's kernel. The output is cut into blocks of 4 KiB; per block, every
// instruction is one tight loop from block buffers into a block buffer, so intermediates
// never leave L1 and memory is read and written once. Blocks are split over OpenMP threads.
#include "kernels/cpu/fused_elementwise.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <vector>

#include "kernels/cpu/copy.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/ewise_eval.h"
#include "kernels/cpu/loops.h"
#include "kernels/cpu/step_scratch.h"

namespace baton::kernels {
namespace {

constexpr int64_t kBlockBytes = 4096;

int64_t block_elements(const Tensor& out) {
  return std::min(kBlockBytes / int64_t(dtype_size(out.dtype())), out.numel());
}

// Every block of out's elements (in memory order, where out is dense), each thread with
// its scratch blocks in `lent` (`threads` slices) or its own.
template <class T>
void run(const EwProgram& program, const ewise::EvalLayout& layout, std::span<const Tensor> inputs, const Tensor& out,
         T* lent, int threads) {
  const ewise::Evaluator<T> eval(program, layout, inputs);
  T* data = detail::elements<T>(out);
  const int64_t n = out.numel(), block = layout.block, blocks = (n + block - 1) / block;
  auto run_blocks = [&](int64_t first, int64_t end) {
    auto scratch = eval.scratch(lent, threads);
    for (int64_t b = first; b < end; ++b) {
      const int64_t begin = b * block, len = std::min(block, n - begin);
      const T* result = eval.eval(begin, len, data + begin, scratch);
      if (result != data + begin) std::copy_n(result, len, data + begin);
    }
  };
  parallel_range(blocks, run_blocks, std::max<int64_t>(1, kParallelGrain / block));
}

}  // namespace

namespace ewise {

bool any_overlaps(std::span<const Tensor> inputs, const Tensor& out) {
  return std::any_of(inputs.begin(), inputs.end(), [&](const Tensor& t) { return overlaps(t, out); });
}

Shape memory_order(const Tensor& t) {
  Shape order(size_t(t.dim()));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return t.strides()[size_t(a)] > t.strides()[size_t(b)]; });
  return order;
}

namespace {

// The operands as the program runs over them: out seen contiguous in its memory order,
// the inputs broadcast to its shape and permuted alike. The views look at the same bytes
// from the same offsets.
struct Operands {
  std::vector<Tensor> inputs;
  Tensor out;
};
Operands in_memory_order(std::span<const Tensor> inputs, const Tensor& out) {
  if (out.is_contiguous()) return {{inputs.begin(), inputs.end()}, out};
  if (!is_dense(out)) throw std::logic_error("fused_elementwise: the output must be stored densely");
  const Shape order = memory_order(out);
  const Tensor permuted_out = permuted(out, order);
  Operands o{{}, make_view(out, permuted_out.shape(), contiguous_strides(permuted_out.shape()), out.offset())};
  for (const Tensor& t : inputs)
    o.inputs.push_back(permuted(make_view(t, out.shape(), broadcast_strides(t, out.shape()), t.offset()), order));
  return o;
}

}  // namespace

EvalLayout output_layout(const EwProgram& p, std::span<const Tensor> inputs, const Tensor& out, int64_t block,
                         bool into_dst) {
  const Operands o = in_memory_order(inputs, out);
  return EvalLayout(p, o.inputs, o.out.shape(), out.dtype(), block, into_dst);
}

}  // namespace ewise

class FusedElementwisePlan : public ewise::OutputPlan {
 public:
  FusedElementwisePlan(const EwProgram& program, std::span<const Tensor> inputs, const Tensor& out)
      : OutputPlan(program, inputs, out, block_elements(out)) {}
};

std::shared_ptr<const FusedElementwisePlan> plan_fused_elementwise(const EwProgram& program,
                                                                   std::span<const Tensor> inputs, const Tensor& out) {
  if (out.numel() == 0 || program.code.empty()) return nullptr;
  return std::make_shared<const FusedElementwisePlan>(program, inputs, out);
}

size_t plan_scratch_bytes(const FusedElementwisePlan& plan) { return plan.scratch_bytes(); }

void fused_elementwise(const EwProgram& program, std::span<const Tensor> inputs, const Tensor& out,
                       const FusedElementwisePlan* plan) {
  if (out.numel() == 0 || program.code.empty()) return;
  const bool alias = ewise::any_overlaps(inputs, out);
  visit_float(out.dtype(), "fused_elementwise", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (plan && plan->fits(inputs, out)) {
      T* lent = static_cast<T*>(lent_scratch(plan->scratch_bytes()));
      return run<T>(program, plan->layout(alias), inputs, out, lent, plan->threads());
    }
    run<T>(program, ewise::output_layout(program, inputs, out, block_elements(out), !alias), inputs, out, nullptr, 0);
  });
}

}  // namespace baton::kernels
