// Losses over class scores: cross_entropy (fused log_softmax + pick) and nll_loss, both
// with logits/log-probs [N, C], target i64 [N] and reduction "mean" | "sum" | "none";
// mse_loss is composite.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/copy.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/exp_shifted.h"
#include "kernels/cpu/reduce.h"
#include "ops/reduce.h"

namespace baton::ops {
namespace {

void require_reduction(std::string_view op, const std::string& r, SourceLoc loc) {
  if (r != "mean" && r != "sum" && r != "none")
    throw ValueError(op, str("reduction must be \"mean\", \"sum\" or \"none\", got \"", r, "\""), loc);
}

enum class Reduction : uint8_t { none, sum, mean };

// Rows a loss kernel takes at a time: about this many elements.
constexpr int64_t kBlockElements = 4096;

// The kernel's parameters: the reduction (checked by the infer rule).
Reduction reduction_of(const CallContext& c) {
  const std::string& r = c.attrs.s("reduction");
  require_reduction(c.op_name(), r, c.loc);
  return r == "none" ? Reduction::none : r == "sum" ? Reduction::sum : Reduction::mean;
}

TensorMeta class_loss_infer(const InferContext& c) {
  const Tensor &x = c.input(0), &t = c.input(1);
  require_float(c, 0);
  if (t.dtype() != i64) c.fail<DTypeError>("target must hold i64 class indices, got ", t.dtype());
  if (x.dim() != 2) c.fail<ShapeError>("input must be [N, C], got ", x.shape());
  if (t.dim() != 1 || t.shape()[0] != x.shape()[0])
    c.fail<ShapeError>("target must be [", x.shape()[0], "], got ", t.shape());
  require_reduction(c.op_name(), c.attrs.s("reduction"), c.loc);
  Shape out = c.attrs.s("reduction") == "none" ? Shape{x.shape()[0]} : Shape{};
  return {x.dtype(), out};
}

// Runs row_losses(x, targets, rows, classes, losses) over the N rows, a block of rows at a
// time, and writes the per-row losses, their sum or their mean. A target outside [0, C) is
// an IndexError naming the op and the value.
template <class T, class RowLosses>
void class_loss_kernel(const KernelContext& c, RowLosses row_losses) {
  Tensor x = kernels::dense(c.input(0)), t = kernels::dense(c.input(1));
  const int64_t n = x.shape()[0], classes = x.shape()[1];
  const T* xp = x.data<T>();
  const int64_t* tp = t.data<int64_t>();
  for (int64_t i = 0; i < n; ++i)
    if (tp[i] < 0 || tp[i] >= classes)
      c.fail<IndexError>("target ", tp[i], " (row ", i, ") is out of range [0, ", classes, ")");
  const Reduction reduction = c.params<Reduction>();
  T* out = c.output().data<T>();
  const int64_t block = std::max<int64_t>(1, kBlockElements / std::max<int64_t>(classes, 1));
  auto blocks = [&](int64_t begin, int64_t end, auto&& take) {
    std::vector<double> losses(size_t(std::min(block, end - begin)));
    for (int64_t b = begin; b < end; b += block) {
      const int64_t rows = std::min(block, end - b);
      row_losses(xp + b * classes, tp + b, rows, classes, losses.data());
      for (int64_t i = 0; i < rows; ++i) take(b + i, losses[size_t(i)]);
    }
  };
  if (reduction == Reduction::none) {
    kernels::parallel_range(n, [&](int64_t b, int64_t e) {
      blocks(b, e, [&](int64_t i, double loss) { out[i] = T(loss); });
    }, kernels::grain_for(classes));
    return;
  }
  // The rows' losses over threads, then added in row order (the same bits on any threads).
  std::vector<double> losses(static_cast<size_t>(n));
  kernels::parallel_range(n, [&](int64_t b, int64_t e) {
    blocks(b, e, [&](int64_t i, double loss) { losses[size_t(i)] = loss; });
  }, kernels::grain_for(classes));
  double total = 0;
  for (double loss : losses) total += loss;
  out[0] = T(reduction == Reduction::mean ? total / double(n) : total);
}

// -log softmax(row)[target] = logsumexp(row) - row[target] for each row: the row max, the
// exponentials of the whole block shifted by its rows' maxes in one pass (vectorized over
// the block: a row of ten classes is too short to fill a vector), the sums in f64.
template <class T>
void cross_entropy_rows(const T* x, const int64_t* targets, int64_t rows, int64_t classes, double* losses) {
  thread_local std::vector<T> shifted;
  shifted.resize(size_t(rows * classes));
  for (int64_t r = 0; r < rows; ++r) {
    const T* row = x + r * classes;
    const T m = kernels::row_max(row, classes);
    losses[r] = double(m) - double(row[targets[r]]);
    for (int64_t j = 0; j < classes; ++j) shifted[size_t(r * classes + j)] = row[j] - m;
  }
  kernels::exp_shifted(shifted.data(), shifted.data(), rows * classes, T(0));
  for (int64_t r = 0; r < rows; ++r)
    losses[r] += std::log(kernels::sum_row<double>(shifted.data() + r * classes, classes));
}

template <class T>
void nll_rows(const T* x, const int64_t* targets, int64_t rows, int64_t classes, double* losses) {
  for (int64_t r = 0; r < rows; ++r) losses[r] = -double(x[r * classes + targets[r]]);
}

// The output gradient as a weight for the rows of the [N, C] input: [N, 1] for "none",
// else 0-d (divided by N for "mean"), broadcast over the rows.
Tensor row_weights(const GradContext& c) {
  const Tensor& g = c.grad_output();
  const std::string& reduction = c.attrs.s("reduction");
  if (reduction == "none") return unsqueeze(g, 1);
  if (reduction == "sum") return g;
  return size_count(c.input(0), {0}, g.dtype(), c.loc).apply([&](auto rows) { return g / rows; });
}

// [N, C] of 0 and 1: 1 where the column is the row's target.
Tensor one_hot(const Tensor& target, int64_t classes, DType dtype) {
  Tensor columns = reshape(arange(classes, i64), {1, classes});
  return cast(eq(unsqueeze(target, 1), columns), dtype);
}

}  // namespace

BATON_OP(cross_entropy_op, "cross_entropy")
    .inputs(2)
    .string_attr("reduction")
    .fusion(Fusion::Opaque)
    .infer(class_loss_infer)
    .params(reduction_of)
    .cpu([](const KernelContext& c) {
      kernels::visit_float(c.input(0).dtype(), c.op_name().c_str(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        class_loss_kernel<T>(c, cross_entropy_rows<T>);
      });
    })
    .grad([](const GradContext& c) {
      const Tensor &x = c.input(0), &t = c.input(1);
      Tensor p = softmax(x, 1) - one_hot(t, x.shape()[1], x.dtype());
      return Grads{p * row_weights(c), Tensor{}};
    })
    .cost(reduce_cost)
    .onnx("SoftmaxCrossEntropyLoss");

BATON_OP(nll_loss_op, "nll_loss")
    .inputs(2)
    .string_attr("reduction")
    .fusion(Fusion::Opaque)
    .infer(class_loss_infer)
    .params(reduction_of)
    .cpu([](const KernelContext& c) {
      kernels::visit_float(c.input(0).dtype(), c.op_name().c_str(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        class_loss_kernel<T>(c, nll_rows<T>);
      });
    })
    .grad([](const GradContext& c) {
      const Tensor &x = c.input(0), &t = c.input(1);
      Tensor picked = one_hot(t, x.shape()[1], x.dtype());
      return Grads{-(picked * row_weights(c)), Tensor{}};
    })
    .cost(reduce_cost)
    .onnx("NegativeLogLikelihoodLoss");

}  // namespace baton::ops

namespace baton {

// i32 class indices are accepted and widened; other dtypes fail in the op's shape rule.
static Tensor class_indices(const Tensor& t, SourceLoc loc) {
  return t.defined() && t.dtype() == i32 ? cast(t, i64, loc) : t;
}

Tensor cross_entropy(const Tensor& logits, const Tensor& target, const std::string& reduction,
                     SourceLoc loc) {
  return ops::call(ops::cross_entropy_op, {logits, class_indices(target, loc)},
                   {{"reduction", reduction}}, loc);
}

Tensor nll_loss(const Tensor& log_probs, const Tensor& target, const std::string& reduction,
                SourceLoc loc) {
  return ops::call(ops::nll_loss_op, {log_probs, class_indices(target, loc)},
                   {{"reduction", reduction}}, loc);
}

Tensor mse_loss(const Tensor& input, const Tensor& target, const std::string& reduction,
                SourceLoc loc) {
  ops::require_reduction("mse_loss", reduction, loc);
  if (!(input.shape() == target.shape()))
    throw ShapeError("mse_loss",
                     str("input ", input.shape(), " and target ", target.shape(), " must have one shape"),
                     loc);
  Tensor d = sub(input, target, loc);
  Tensor squares = mul(d, d, loc);
  if (reduction == "none") return squares;
  return reduction == "sum" ? sum(squares, {}, false, loc) : mean(squares, {}, false, loc);
}

}  // namespace baton
