// Losses over class scores: cross_entropy (fused log_softmax + pick) and nll_loss, both
// with logits/log-probs [N, C], target i64 [N] and reduction "mean" | "sum" | "none";
// mse_loss is composite.
#include <cmath>

#include "kernels/cpu/copy.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/reduce.h"
#include "ops/reduce.h"

namespace baton::ops {
namespace {

void require_reduction(std::string_view op, const std::string& r, SourceLoc loc) {
  if (r != "mean" && r != "sum" && r != "none")
    throw ValueError(op, str("reduction must be \"mean\", \"sum\" or \"none\", got \"", r, "\""), loc);
}

enum class Reduction : uint8_t { none, sum, mean };

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

// Runs loss(row, class) for each of the N rows and writes the per-row losses, their sum
// or their mean. A target outside [0, C) is an IndexError naming the op and the value.
template <class T, class RowLoss>
void class_loss_kernel(const KernelContext& c, RowLoss loss) {
  Tensor x = kernels::dense(c.input(0)), t = kernels::dense(c.input(1));
  const int64_t n = x.shape()[0], classes = x.shape()[1];
  const T* xp = x.data<T>();
  const int64_t* tp = t.data<int64_t>();
  for (int64_t i = 0; i < n; ++i)
    if (tp[i] < 0 || tp[i] >= classes)
      c.fail<IndexError>("target ", tp[i], " (row ", i, ") is out of range [0, ", classes, ")");
  const Reduction reduction = c.params<Reduction>();
  T* out = c.output().data<T>();
  if (reduction == Reduction::none) {
    kernels::parallel_range(n, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) out[i] = T(loss(xp + i * classes, classes, tp[i]));
    }, kernels::grain_for(classes));
    return;
  }
  double total = 0;
  for (int64_t i = 0; i < n; ++i) total += loss(xp + i * classes, classes, tp[i]);
  out[0] = T(reduction == Reduction::mean ? total / double(n) : total);
}

// -log softmax(row)[target] = logsumexp(row) - row[target].
template <class T>
double cross_entropy_row(const T* row, int64_t classes, int64_t target) {
  T m = row[0];
  for (int64_t j = 1; j < classes; ++j) m = row[j] > m ? row[j] : m;
  double s = 0;
  for (int64_t j = 0; j < classes; ++j) s += std::exp(double(row[j] - m));
  return double(m) + std::log(s) - double(row[target]);
}

template <class T>
double nll_row(const T* row, int64_t, int64_t target) { return -double(row[target]); }

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
        class_loss_kernel<T>(c, cross_entropy_row<T>);
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
        class_loss_kernel<T>(c, nll_row<T>);
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
