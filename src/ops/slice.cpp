// slice: a strided view along one dim, and slice_backward, which scatters a gradient
// back into zeros of the sliced tensor's shape (the two are each other's gradient).
#include <algorithm>
#include <limits>
#include <optional>
#include <string>

#include "baton/ops.h"
#include "kernels/cpu/copy.h"
#include "ops/common.h"
#include "ops/sym_dims.h"

namespace baton::ops {
namespace {

struct Range {
  int64_t dim, start, size, step;
};

// A slice bound along a dim of symbolic size n: a position counted from the start (a
// number or a symbol) or from the end (n + offset, offset <= 0).
struct Bound {
  bool from_end;
  int64_t at;
};
Bound classify(int64_t v, int64_t n) {
  constexpr int64_t kToEnd = std::numeric_limits<int64_t>::max();  // x[a:], as in Python
  if (v == n || v == kToEnd) return {true, 0};
  if (v < 0 && !sym::is_symbol(v)) return {true, v};
  return {false, v};
}

// The size of [start, end) with step along a dim of symbolic size n. Exact when the
// bounds are symbolic (the gradient of cat slices at batch, 2*batch) or n itself; static
// bounds are taken to lie inside the dim (x[:, :10] keeps 10, x[:, -3:-1] keeps 2), as
// the graph cannot clamp against a size it does not know yet.
int64_t symbolic_slice_size(int64_t n, int64_t start, int64_t end, int64_t step,
                            const CallContext& c) {
  auto text = [](int64_t v) {
    if (v == std::numeric_limits<int64_t>::max()) return std::string("end");
    return sym::is_symbol(v) ? sym::to_string(v) : std::to_string(v);
  };
  auto fail = [&] {
    c.fail("the slice [", text(start), ", ", text(end), ") of dim ", c.attrs.i("dim"), " (size ",
           sym::to_string(n), ") has a size no symbol can express; make that dim and the bounds static");
  };
  if (n >= 0) fail();  // symbolic bounds on a static dim: clamping needs their values
  const Bound lo = classify(start, n), hi = classify(end, n);
  std::optional<int64_t> size;
  if (lo.from_end && hi.from_end)
    size = std::max<int64_t>(hi.at - lo.at, 0);
  else if (!lo.from_end && !hi.from_end)
    size = lo.at >= 0 && hi.at >= 0 ? std::max<int64_t>(hi.at - lo.at, 0) : dim_sub(hi.at, lo.at);
  else if (!lo.from_end && hi.at == 0)
    size = dim_sub(n, lo.at);  // [start, n): n - start
  if (size && step > 1) size = *size >= 0 ? (*size + step - 1) / step : sym::div_exact(*size, step);
  if (!size) fail();
  return *size;
}

// Python slicing rules: negative start/end count from the end, both clamp to [0, n].
Range resolve(const Shape& shape, const CallContext& c) {
  const int64_t rank = int64_t(shape.size());
  if (rank == 0) c.fail("cannot slice a 0-d tensor");
  const int64_t dim = normalize_dim(c.attrs.i("dim"), rank, c);
  const int64_t step = c.attrs.i("step");
  if (step <= 0) c.fail<ValueError>("step must be positive, got ", step);
  const int64_t n = shape[size_t(dim)], start_attr = c.attrs.i("start"), end_attr = c.attrs.i("end");
  auto symbolic = [](int64_t v) { return v < 0 && sym::is_symbol(v); };  // no call when v >= 0
  if (n < 0 || symbolic(start_attr) || symbolic(end_attr)) [[unlikely]]
    return {dim, start_attr, symbolic_slice_size(n, start_attr, end_attr, step, c), step};
  auto clamp = [n](int64_t v) { return std::clamp(v < 0 ? v + n : v, int64_t(0), n); };
  int64_t start = clamp(start_attr), end = clamp(end_attr);
  int64_t size = end > start ? (end - start - 1) / step + 1 : 0;  // no overflow for a huge step
  return {dim, start, size, step};
}

// The region of `full` that a slice with these attrs selects. A symbolic tensor has no
// storage, so no offset either.
Tensor region(const Tensor& full, const Range& r) {
  Shape shape = full.shape(), strides = full.strides();
  const int64_t offset = full.is_symbolic() ? 0 : full.offset() + r.start * strides[size_t(r.dim)];
  shape[size_t(r.dim)] = r.size;
  strides[size_t(r.dim)] = dim_mul(strides[size_t(r.dim)], r.step);
  return make_view(full, shape, strides, offset);
}

// The parameters of the view rule and of slice_backward's kernel (OpDef::params): the
// range of the input (of the "shape" attribute) that the slice selects.
Range slice_range(const CallContext& c) { return resolve(c.input(0).shape(), c); }
Range slice_backward_range(const CallContext& c) { return resolve(Shape(c.attrs.ints("shape")), c); }

Attrs slice_attrs(const Attrs& a) {
  return {{"dim", a.i("dim")}, {"start", a.i("start")}, {"end", a.i("end")}, {"step", a.i("step")}};
}

}  // namespace

extern OpDef& slice_backward_op;

BATON_OP(slice_op, "slice")
    .inputs(1)
    .int_attr("dim")
    .int_attr("start")
    .int_attr("end")
    .int_attr("step")
    .fusion(Fusion::Injective)
    .params(slice_range)
    .view([](const CallContext& c) { return region(c.input(0), c.params<Range>()); })
    .grad([](const GradContext& c) {
      Attrs a = slice_attrs(c.attrs);
      a.set("shape", c.input(0).shape().vec());
      return Grads{call(slice_backward_op, {c.grad_output()}, a, c.loc)};
    })
    .cost([](const CallContext&, std::span<const TensorMeta>) { return Cost{}; })
    .onnx("Slice");

// Input: the gradient of a slice; attr "shape": the shape of the sliced tensor.
OpDef& slice_backward_op = define_op("slice_backward")
    .inputs(1)
    .int_attr("dim")
    .int_attr("start")
    .int_attr("end")
    .int_attr("step")
    .ints_attr("shape")
    .fusion(Fusion::Injective)
    .infer([](const InferContext& c) {
      Shape shape(c.attrs.ints("shape"));
      Range r = resolve(shape, c);
      Shape expected = shape;
      expected[size_t(r.dim)] = r.size;
      if (!(expected == c.input(0).shape()))
        c.fail("gradient shape does not match the slice ", expected, " of ", shape);
      return TensorMeta{c.input(0).dtype(), shape};
    })
    .params(slice_backward_range)
    .cpu([](const KernelContext& c) {
      Tensor& out = c.output();
      kernels::copy_into(out, scalar_tensor(0, out.dtype()));
      kernels::copy_into(region(out, c.params<Range>()), c.input(0));
    })
    .grad([](const GradContext& c) {
      return Grads{call(slice_op, {c.grad_output()}, slice_attrs(c.attrs), c.loc)};
    });

}  // namespace baton::ops

namespace baton {

Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end, int64_t step,
             SourceLoc loc) {
  return ops::call(ops::slice_op, {x},
                   {{"dim", dim}, {"start", start}, {"end", end}, {"step", step}}, loc);
}

}  // namespace baton
