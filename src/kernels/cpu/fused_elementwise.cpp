// fused_elementwise's kernel. The output is cut into blocks of 4 KiB; per block, every
// instruction is one tight loop from block buffers into a block buffer, so intermediates
// never leave L1 and memory is read and written once. Blocks are split over OpenMP threads.
#include "kernels/cpu/fused_elementwise.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <vector>

#include "core/tensor_impl.h"
#include "kernels/cpu/copy.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/ewise_eval.h"
#include "kernels/cpu/loops.h"

namespace baton::kernels {
namespace {

constexpr int64_t kBlockBytes = 4096;

template <class T>
void run(const EwProgram& program, std::span<const Tensor> inputs, const Tensor& out) {
  const int64_t n = out.numel(), block = std::min(kBlockBytes / int64_t(sizeof(T)), n);
  // An input sharing out's bytes is read by the last instruction, whose loop must not
  // write what it reads: then the result goes to a scratch block first.
  bool aliased = false;
  for (const Tensor& t : inputs) aliased |= ewise::overlaps(t, out);
  const ewise::Evaluator<T> eval(program, inputs, out.shape(), block, !aliased);
  T* data = static_cast<T*>(out.raw_data());
  const int64_t blocks = (n + block - 1) / block;
  auto run_blocks = [&](int64_t first, int64_t end) {
    auto scratch = eval.scratch();  // a small tensor needs small blocks
    for (int64_t b = first; b < end; ++b) {
      const int64_t begin = b * block, len = std::min(block, n - begin);
      const T* result = eval.eval(begin, len, data + begin, scratch);
      if (result != data + begin) std::copy_n(result, len, data + begin);
    }
  };
  parallel_range(blocks, run_blocks, std::max<int64_t>(1, kParallelGrain / block));
}

// The dims of t from the largest stride to the smallest: the order its elements lie in
// memory when t is dense. (Size-1 dims go anywhere: they move no pointer.)
Shape memory_order(const Tensor& t) {
  Shape order(size_t(t.dim()));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return t.strides()[size_t(a)] > t.strides()[size_t(b)]; });
  return order;
}

}  // namespace

void fused_elementwise(const EwProgram& program, std::span<const Tensor> inputs, const Tensor& out) {
  if (out.numel() == 0 || program.code.empty()) return;
  if (!out.is_contiguous()) {
    // Stored densely in another order (channels-last, column-major), as a plan may keep
    // the layout of the inputs (OpDef::keeps_layout): the program runs over the dims in
    // memory order, where out is contiguous, and the inputs, broadcast to out's shape,
    // are read in the same order (in place where they share out's layout).
    if (!is_dense(out)) throw std::logic_error("fused_elementwise: the output must be stored densely");
    const Shape order = memory_order(out);
    const Tensor permuted_out = permuted(out, order);
    const Tensor in_memory_order = make_view(out, permuted_out.shape(), contiguous_strides(permuted_out.shape()),
                                             out.offset());
    std::vector<Tensor> permuted_inputs;
    for (const Tensor& t : inputs)
      permuted_inputs.push_back(
          permuted(make_view(t, out.shape(), broadcast_strides(t, out.shape()), t.offset()), order));
    return fused_elementwise(program, permuted_inputs, in_memory_order);
  }
  visit_float(out.dtype(), "fused_elementwise", [&](auto tag) {
    run<typename decltype(tag)::type>(program, inputs, out);
  });
}

}  // namespace baton::kernels
