// fused_elementwise_sum's kernel: a program's elements summed (or their max, min or
// product taken) as they are computed, in blocks of 4 KiB of f32 that stay in L1, in the
// order sum_into sums (fold folds) a contiguous tensor; and fused_elementwise_and_sum's
// (_and_max's, ...), which also writes each block to the elements' tensor and folds it
// from there.
#include <algorithm>
#include <limits>
#include <optional>
#include <utility>

#include "kernels/cpu/copy.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/ewise_eval.h"
#include "kernels/cpu/fused_elementwise.h"
#include "kernels/cpu/reduce.h"
#include "kernels/cpu/step_scratch.h"

namespace baton::kernels {
namespace {

// Elements per evaluation: reduce_columns reads at most this many of a row at a time, and
// it is a multiple of 8 as fold_row_by needs.
constexpr int64_t kPiece = kMaxColumnChunk;

// Hands out the program's elements [begin, begin + n) from a per-thread scratch block, or,
// given `elements` (the elements' memory, contiguous in the evaluation's order), after
// writing them there.
template <class T>
struct Reader {
  const ewise::Evaluator<T>* eval;
  typename ewise::Evaluator<T>::Scratch scratch;
  T* elements = nullptr;
  const T* operator()(int64_t begin, int64_t n) {
    if (!elements) return eval->eval(begin, n, nullptr, scratch);
    T* dst = elements + begin;
    const T* values = eval->eval(begin, n, dst, scratch);
    if (values != dst) std::copy_n(values, n, dst);
    return dst;
  }
};

// How the elements fold, as the unfused reductions fold a contiguous tensor: f from init
// in Acc, a row in fold_row's 8 chains (sum_row's order when f adds: sum_into's sum in
// SumAcc; fold's max and min in T).
template <class T, class Acc_, class F>
struct RowFold {
  using Acc = Acc_;
  Acc init;
  F f;
  Acc operator()(Acc a, Acc b) const { return f(a, b); }
  Acc row(const T* p, int64_t n) const { return fold_row<Acc>(p, n, init, f); }
  Acc row_by(Reader<T>& read, int64_t begin, int64_t n) const {
    return fold_row_by<Acc>(read, begin, n, kPiece, init, f);
  }
};
struct Plus {
  template <class A> A operator()(A a, A b) const { return A(a + b); }
};
template <class T>
using SumFold = RowFold<T, SumAcc<T>, Plus>;

// Rows [first, end) of n elements each, one output per row; short rows are evaluated
// several at a time and each folded by the fold's own row loop.
template <class T, class Out, class Fold>
void fold_rows(Reader<T>& read, int64_t first, int64_t end, int64_t n, Out* out, const Fold& fold) {
  if (n > kPiece) {
    for (int64_t r = first; r < end; ++r) out[r] = Out(fold.row_by(read, r * n, n));
    return;
  }
  const int64_t per_read = kPiece / n;
  for (int64_t r = first; r < end; r += per_read) {
    const int64_t rows = std::min(per_read, end - r);
    const T* p = read(r * n, rows * n);
    for (int64_t k = 0; k < rows; ++k) out[r + k] = Out(fold.row(p + k * n, n));
  }
}

// The program's elements folded (and written to `elements` when given), each thread
// evaluating into its scratch blocks: in `lent` (`threads` slices) or its own. The
// results are of the elements' type T, or of the fold's Acc (partial results).
template <class T, class Out, class Fold>
void run(const EwProgram& program, const ewise::EvalLayout& layout, std::span<const Tensor> inputs, const Strip& s,
         Out* out, T* lent, int threads, const Fold& fold, T* elements = nullptr) {
  using Acc = typename Fold::Acc;
  const ewise::Evaluator<T> eval(program, layout, inputs);
  auto make_reader = [&] { return Reader<T>{&eval, eval.scratch(lent, threads), elements}; };
  if (s.inner > 1) return reduce_columns_by<Acc, T>(make_reader, s, out, fold.init, fold);
  if (s.outer == 1) {
    *out = Out(fold_long_range(s.n, fold.init, fold, [&](int64_t begin, int64_t n) {
      Reader<T> read = make_reader();
      return fold.row_by(read, begin, n);
    }));
    return;
  }
  parallel_range(
      s.outer,
      [&](int64_t b, int64_t e) {
        Reader<T> read = make_reader();
        fold_rows(read, b, e, s.n, out, fold);
      },
      grain_for(s.n));
}

// The unfused reduction `reduce` of x (of type In): sum_into's sum, fold's max, min or
// product.
template <class In, class Out>
void reduce_apart(EwReduce reduce, const Tensor& x, const std::vector<int64_t>& dims, Out* out) {
  constexpr Out inf = std::numeric_limits<Out>::infinity();
  switch (reduce) {
    case EwReduce::Sum: return sum_into<In>(x, dims, out);
    case EwReduce::Max: return fold<Out, In>(x, dims, out, -inf, MaxFn{});
    case EwReduce::Min: return fold<Out, In>(x, dims, out, inf, MinFn{});
    case EwReduce::Prod: return fold<Out, In>(x, dims, out, Out(1), MulFn{});
  }
}

// How the kernel reads the elements of a shape reduced over some dims: one strip, or,
// where the dims lie in several runs (a [N, C, H, W] summed over N, H and W), the
// innermost run's strip and the rest, as sum_into and fold reduce a contiguous tensor.
struct Reduction {
  Strip strip;
  std::optional<RunSplit> runs;
};
Reduction reduction_of(const Shape& shape, const std::vector<int64_t>& dims) {
  return {evaluated_strip(shape, dims), split_runs(shape, dims)};
}

// The fold run over r's strip; for dims in several runs, its results (partial, in the
// fold's Acc: a float sum's double) then reduced over the rest by the unfused kernel.
template <class T, class Fold>
void run_reduction(EwReduce reduce, const EwProgram& program, const ewise::EvalLayout& layout,
                   std::span<const Tensor> inputs, const Reduction& r, T* out, T* lent, int threads, const Fold& fold,
                   T* elements) {
  using Acc = typename Fold::Acc;
  if (!r.runs) return run<T>(program, layout, inputs, r.strip, out, lent, threads, fold, elements);
  Tensor partial = empty(r.runs->partial_shape, dtype_v<Acc>);
  run<T>(program, layout, inputs, r.strip, partial.data<Acc>(), lent, threads, fold, elements);
  reduce_apart<Acc>(reduce, partial, r.runs->rest, out);
}

// run_reduction() with the fold `reduce` names.
template <class T>
void run_reduce(EwReduce reduce, const EwProgram& program, const ewise::EvalLayout& layout,
                std::span<const Tensor> inputs, const Reduction& r, T* out, T* lent, int threads,
                T* elements = nullptr) {
  auto with = [&](const auto& fold) {
    run_reduction<T>(reduce, program, layout, inputs, r, out, lent, threads, fold, elements);
  };
  constexpr T inf = std::numeric_limits<T>::infinity();
  switch (reduce) {
    case EwReduce::Sum: return with(SumFold<T>{0, {}});
    case EwReduce::Max: return with(RowFold<T, T, MaxFn>{-inf, {}});
    case EwReduce::Min: return with(RowFold<T, T, MinFn>{inf, {}});
    case EwReduce::Prod: return with(RowFold<T, T, MulFn>{1, {}});
  }
}

ewise::EvalLayout layout_of(const EwProgram& program, std::span<const Tensor> inputs, const Shape& shape,
                            DType type) {
  return ewise::EvalLayout(program, inputs, shape, type, kPiece, /*into_dst=*/false);
}

}  // namespace

class FusedElementwiseSumPlan {
 public:
  FusedElementwiseSumPlan(const EwProgram& program, std::span<const Tensor> inputs, const Shape& shape,
                          const Tensor& out)
      : tensors_(inputs, out), shape_(shape), dtype_(out.dtype()), threads_(max_threads()),
        layout_(layout_of(program, inputs, shape, out.dtype())) {}

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
                           const std::vector<int64_t>& dims, const Tensor& out, const FusedElementwiseSumPlan* plan,
                           EwReduce reduce) {
  if (out.numel() == 0 || program.code.empty()) return;
  visit_float(out.dtype(), "fused_elementwise_sum", [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* result = static_cast<T*>(out.raw_data());
    if (shape.numel() == 0) {  // sums (products) of nothing; the ops refuse a max or min of nothing
      std::fill_n(result, out.numel(), T(reduce == EwReduce::Prod ? 1 : 0));
      return;
    }
    const Reduction r = reduction_of(shape, dims);
    if (plan && plan->fits(inputs, shape, out)) {
      T* lent = static_cast<T*>(lent_scratch(plan->scratch_bytes()));
      return run_reduce<T>(reduce, program, plan->layout(), inputs, r, result, lent, plan->threads());
    }
    run_reduce<T>(reduce, program, layout_of(program, inputs, shape, out.dtype()), inputs, r, result, nullptr, 0);
  });
}

// --- fused_elementwise_and_sum -----------------------------------------------------------

namespace {

// Where the summed dims lie in the elements' memory order: one run there, with the kept
// dims in their own order (so the sums come out in the output's order), seen as a strip of
// the memory-order shape; nullopt otherwise. A column-major gradient summed over the batch
// is rows of it; a channels-last one summed over N, H, W, columns.
std::optional<Strip> memory_strip(const Tensor& elements, const std::vector<int64_t>& dims) {
  if (!is_dense(elements)) return std::nullopt;
  const Shape order = ewise::memory_order(elements);
  Shape shape;
  std::vector<int64_t> summed;
  int64_t last_kept = -1;
  for (size_t k = 0; k < order.size(); ++k) {
    const int64_t d = order[k];
    shape.push_back(elements.shape()[size_t(d)]);
    if (std::binary_search(dims.begin(), dims.end(), d)) summed.push_back(int64_t(k));
    else if (d < std::exchange(last_kept, d)) return std::nullopt;
  }
  if (summed.empty()) return std::nullopt;
  return strip_of(shape, summed);
}

// How the kept elements are reduced as they are written: over one run of their memory
// (memory_strip), or, for row-major elements whose dims lie in several runs, over the
// innermost run into partial results reduced over the rest; nullopt otherwise (the two
// kernels then run one after the other).
std::optional<Reduction> kept_reduction(const Tensor& elements, const std::vector<int64_t>& dims) {
  if (std::optional<Strip> s = memory_strip(elements, dims)) return Reduction{*s, std::nullopt};
  if (!elements.is_contiguous() || !split_runs(elements.shape(), dims)) return std::nullopt;
  return reduction_of(elements.shape(), dims);
}

}  // namespace

class FusedElementwiseAndSumPlan : public ewise::OutputPlan {
 public:
  FusedElementwiseAndSumPlan(const EwProgram& program, std::span<const Tensor> inputs, const Tensor& elements,
                             Reduction reduction)
      : OutputPlan(program, elements.dtype(), inputs, elements, kPiece), reduction_(std::move(reduction)) {}
  const Reduction& reduction() const { return reduction_; }

 private:
  Reduction reduction_;
};

std::shared_ptr<const FusedElementwiseAndSumPlan> plan_fused_elementwise_and_sum(const EwProgram& program,
                                                                               std::span<const Tensor> inputs,
                                                                               const std::vector<int64_t>& dims,
                                                                               const Tensor& elements) {
  std::optional<Reduction> reduction = kept_reduction(elements, dims);
  if (program.code.empty() || elements.numel() == 0 || !reduction) return nullptr;
  return std::make_shared<const FusedElementwiseAndSumPlan>(program, inputs, elements, std::move(*reduction));
}

size_t plan_scratch_bytes(const FusedElementwiseAndSumPlan& plan) { return plan.scratch_bytes(); }

void fused_elementwise_and_sum(const EwProgram& program, std::span<const Tensor> inputs,
                               const std::vector<int64_t>& dims, const Tensor& elements, const Tensor& out,
                               const FusedElementwiseAndSumPlan* plan, EwReduce reduce) {
  if (program.code.empty()) return;
  const bool alias = ewise::any_overlaps(inputs, elements);
  visit_float(out.dtype(), "fused_elementwise_and_sum", [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* result = static_cast<T*>(out.raw_data());
    T* values = detail::elements<T>(elements);
    if (plan && plan->fits(inputs, elements)) {
      T* lent = static_cast<T*>(lent_scratch(plan->scratch_bytes()));
      return run_reduce<T>(reduce, program, plan->layout(alias), inputs, plan->reduction(), result, lent,
                           plan->threads(), values);
    }
    const std::optional<Reduction> reduction = kept_reduction(elements, dims);
    if (!reduction || elements.numel() == 0) {  // elements laid out otherwise (or none): two passes
      fused_elementwise(program, elements.dtype(), inputs, elements);
      return reduce_apart<T>(reduce, elements, dims, result);
    }
    const ewise::EvalLayout layout = ewise::output_layout(program, inputs, elements, elements.dtype(), kPiece, !alias);
    run_reduce<T>(reduce, program, layout, inputs, *reduction, result, nullptr, 0, values);
  });
}

}  // namespace baton::kernels
