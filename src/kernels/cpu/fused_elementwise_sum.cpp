// fused_elementwise_sum's kernel: a program's elements summed as they are computed, in
// blocks of 4 KiB of f32 that stay in L1, in the order sum_into sums a contiguous tensor.
#include <algorithm>

#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/ewise_eval.h"
#include "kernels/cpu/fused_elementwise.h"
#include "kernels/cpu/reduce.h"
#include "kernels/cpu/step_scratch.h"

namespace baton::kernels {
namespace {

// Elements per evaluation: reduce_columns reads at most this many of a row at a time, and
// it is a multiple of 8 as sum_row_by needs.
constexpr int64_t kPiece = kMaxColumnChunk;

// Hands out the program's elements [begin, begin + n) from a per-thread scratch block.
template <class T>
struct Reader {
  const ewise::Evaluator<T>* eval;
  typename ewise::Evaluator<T>::Scratch scratch;
  const T* operator()(int64_t begin, int64_t n) { return eval->eval(begin, n, nullptr, scratch); }
};

// Rows [first, end) of n elements each, one output per row; short rows are evaluated
// several at a time and each summed by sum_row itself.
template <class T, class Acc>
void sum_rows(Reader<T>& read, int64_t first, int64_t end, int64_t n, T* out) {
  if (n > kPiece) {
    for (int64_t r = first; r < end; ++r) out[r] = T(sum_row_by<Acc>(read, r * n, n, kPiece));
    return;
  }
  const int64_t per_read = kPiece / n;
  for (int64_t r = first; r < end; r += per_read) {
    const int64_t rows = std::min(per_read, end - r);
    const T* p = read(r * n, rows * n);
    for (int64_t k = 0; k < rows; ++k) out[r + k] = T(sum_row<Acc>(p + k * n, n));
  }
}

// The program's elements summed, each thread evaluating into its scratch blocks: in
// `lent` (`threads` slices) or its own.
template <class T>
void run(const EwProgram& program, const ewise::EvalLayout& layout, std::span<const Tensor> inputs, const Strip& s,
         T* out, T* lent, int threads) {
  using Acc = SumAcc<T>;
  const ewise::Evaluator<T> eval(program, layout, inputs);
  auto make_reader = [&] { return Reader<T>{&eval, eval.scratch(lent, threads)}; };
  auto plus = [](Acc a, Acc b) { return Acc(a + b); };
  if (s.inner > 1) return reduce_columns_by<Acc, T>(make_reader, s, out, Acc(0), plus);
  if (s.outer == 1) {
    *out = T(fold_long_range(s.n, Acc(0), plus, [&](int64_t begin, int64_t n) {
      Reader<T> read = make_reader();
      return sum_row_by<Acc>(read, begin, n, kPiece);
    }));
    return;
  }
  parallel_range(
      s.outer,
      [&](int64_t b, int64_t e) {
        Reader<T> read = make_reader();
        sum_rows<T, Acc>(read, b, e, s.n, out);
      },
      grain_for(s.n));
}

ewise::EvalLayout layout_of(const EwProgram& program, std::span<const Tensor> inputs, const Shape& shape) {
  return ewise::EvalLayout(program, inputs, shape, kPiece, /*into_dst=*/false);
}

}  // namespace

class FusedElementwiseSumPlan {
 public:
  FusedElementwiseSumPlan(const EwProgram& program, std::span<const Tensor> inputs, const Shape& shape,
                          const Tensor& out)
      : tensors_(inputs, out), shape_(shape), dtype_(out.dtype()), threads_(max_threads()),
        layout_(layout_of(program, inputs, shape)) {}

  bool fits(std::span<const Tensor> inputs, const Shape& shape, const Tensor& out) const {
    return shape == shape_ && tensors_.fits(inputs, out);
  }
  const ewise::EvalLayout& layout() const { return layout_; }
  int threads() const { return threads_; }
  size_t scratch_bytes() const { return size_t(layout_.scratch_elements() * threads_) * dtype_size(dtype_); }

 private:
  ewise::TensorsMeta tensors_;
  Shape shape_;
  DType dtype_;
  int threads_;
  ewise::EvalLayout layout_;
};

std::shared_ptr<const FusedElementwiseSumPlan> plan_fused_elementwise_sum(const EwProgram& program,
                                                                         std::span<const Tensor> inputs,
                                                                         const Shape& shape, const Tensor& out) {
  if (program.code.empty()) return nullptr;
  return std::make_shared<const FusedElementwiseSumPlan>(program, inputs, shape, out);
}

size_t plan_scratch_bytes(const FusedElementwiseSumPlan& plan) { return plan.scratch_bytes(); }

void fused_elementwise_sum(const EwProgram& program, std::span<const Tensor> inputs, const Shape& shape,
                           const std::vector<int64_t>& dims, const Tensor& out, const FusedElementwiseSumPlan* plan) {
  if (out.numel() == 0 || program.code.empty()) return;
  const Strip s = *strip_of(shape, dims);  // the op checked that the dims are adjacent
  visit_float(out.dtype(), "fused_elementwise_sum", [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* result = static_cast<T*>(out.raw_data());
    if (s.outer * s.n * s.inner == 0) {  // sums of nothing
      std::fill_n(result, s.outer * s.inner, T(0));
      return;
    }
    if (plan && plan->fits(inputs, shape, out)) {
      T* lent = static_cast<T*>(lent_scratch(plan->scratch_bytes()));
      return run<T>(program, plan->layout(), inputs, s, result, lent, plan->threads());
    }
    run<T>(program, layout_of(program, inputs, shape), inputs, s, result, nullptr, 0);
  });
}

}  // namespace baton::kernels
