// fused_elementwise's kernel. The output is cut into blocks of 4 KiB; per block, every
// instruction is one tight loop from block buffers into a block buffer, so intermediates
// never leave L1 and memory is read and written once. Blocks are split over OpenMP threads.
#include "kernels/cpu/fused_elementwise.h"

#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/ewise_eval.h"

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

}  // namespace

void fused_elementwise(const EwProgram& program, std::span<const Tensor> inputs, const Tensor& out) {
  if (out.numel() == 0 || program.code.empty()) return;
  visit_float(out.dtype(), "fused_elementwise", [&](auto tag) {
    run<typename decltype(tag)::type>(program, inputs, out);
  });
}

}  // namespace baton::kernels
