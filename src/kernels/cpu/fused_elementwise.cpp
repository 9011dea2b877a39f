// fused_elementwise's kernel. The output is cut into blocks of 4 KiB; per block, every
// instruction is one tight loop from block buffers into a block buffer, so intermediates
// never leave L1 and memory is read and written once. Blocks are split over OpenMP threads.
// An output of another dtype than the program's gets each block converted as it is stored.
#include "kernels/cpu/fused_elementwise.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <vector>

#include "kernels/cpu/convert.h"
#include "kernels/cpu/copy.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/ewise_eval.h"
#include "kernels/cpu/loops.h"
#include "kernels/cpu/step_scratch.h"

namespace baton::kernels {
namespace {

constexpr int64_t kBlockBytes = 4096;

int64_t block_elements(DType type, const Tensor& out) {
  return std::min(kBlockBytes / int64_t(dtype_size(type)), out.numel());
}

// Every block of out's elements (of dtype O; in memory order, where out is dense), the
// program computing in T, each thread with its scratch blocks in `lent` (`threads`
// slices) or its own.
template <class T, class O>
void run(const EwProgram& program, const ewise::EvalLayout& layout, std::span<const Tensor> inputs, const Tensor& out,
         T* lent, int threads) {
  const ewise::Evaluator<T> eval(program, layout, inputs);
  O* data = detail::elements<O>(out);
  const int64_t n = out.numel(), block = layout.block, blocks = (n + block - 1) / block;
  auto run_blocks = [&](int64_t first, int64_t end) {
    auto scratch = eval.scratch(lent, threads);
    for (int64_t b = first; b < end; ++b) {
      const int64_t begin = b * block, len = std::min(block, n - begin);
      if constexpr (std::is_same_v<T, O>) {
        const T* result = eval.eval(begin, len, data + begin, scratch);
        if (result != data + begin) std::copy_n(result, len, data + begin);
      } else {
        const T* __restrict result = eval.eval(begin, len, nullptr, scratch);  // a scratch block: no dst written
        O* __restrict converted = data + begin;
        for (int64_t i = 0; i < len; ++i) converted[i] = convert<O>(result[i]);
      }
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

EvalLayout output_layout(const EwProgram& p, std::span<const Tensor> inputs, const Tensor& out, DType type,
                         int64_t block, bool into_dst) {
  const Operands o = in_memory_order(inputs, out);
  return EvalLayout(p, o.inputs, o.out.shape(), type, block, into_dst);
}

}  // namespace ewise

class FusedElementwisePlan : public ewise::OutputPlan {
 public:
  FusedElementwisePlan(const EwProgram& program, DType type, std::span<const Tensor> inputs, const Tensor& out)
      : OutputPlan(program, type, inputs, out, block_elements(type, out)) {}
};

std::shared_ptr<const FusedElementwisePlan> plan_fused_elementwise(const EwProgram& program, DType type,
                                                                   std::span<const Tensor> inputs, const Tensor& out) {
  if (out.numel() == 0 || program.code.empty()) return nullptr;
  return std::make_shared<const FusedElementwisePlan>(program, type, inputs, out);
}

size_t plan_scratch_bytes(const FusedElementwisePlan& plan) { return plan.scratch_bytes(); }

void fused_elementwise(const EwProgram& program, DType type, std::span<const Tensor> inputs, const Tensor& out,
                       const FusedElementwisePlan* plan) {
  if (out.numel() == 0 || program.code.empty()) return;
  const bool via_scratch = out.dtype() != type || ewise::any_overlaps(inputs, out);
  visit_float(type, "fused_elementwise", [&](auto tag) {
    using T = typename decltype(tag)::type;
    visit_any_dtype(out.dtype(), [&](auto out_tag) {
      using O = typename decltype(out_tag)::type;
      if (plan && plan->fits(inputs, out)) {
        T* lent = static_cast<T*>(lent_scratch(plan->scratch_bytes()));
        return run<T, O>(program, plan->layout(via_scratch), inputs, out, lent, plan->threads());
      }
      const ewise::EvalLayout layout =
          ewise::output_layout(program, inputs, out, type, block_elements(type, out), !via_scratch);
      run<T, O>(program, layout, inputs, out, nullptr, 0);
    });
  });
}

}  // namespace baton::kernels
