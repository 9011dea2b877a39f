// cat (joins tensors along a dim), and stack and split built on cat and slice.
#include "baton/ops.h"
#include "kernels/cpu/copy.h"
#include "ops/common.h"
#include "ops/sym_dims.h"

namespace baton::ops {
namespace {

// Two sizes that may be equal. Like broadcasting, an unknown size (a symbol) is trusted
// to match: the rule checks the real sizes again when the graph runs. Keeps the static one.
bool same_size(int64_t& have, int64_t other) {
  if (have == other) return true;
  if (!sym::is_symbol(have) && !sym::is_symbol(other)) return false;
  if (sym::is_symbol(have) && !sym::is_symbol(other)) have = other;
  return true;
}

TensorMeta cat_infer(const InferContext& c) {
  if (c.inputs.empty()) c.fail<ValueError>("needs at least one tensor");
  require_same_dtype(c);
  const Tensor& first = c.input(0);
  if (first.dim() == 0) c.fail("cannot concatenate 0-d tensors; unsqueeze them or use stack()");
  const int64_t dim = normalize_dim(c.attrs.i("dim"), first.dim(), c);
  Shape out = first.shape();
  for (size_t i = 1; i < c.inputs.size(); ++i) {
    const Shape& s = c.input(i).shape();
    bool ok = s.size() == out.size();
    for (size_t d = 0; ok && d < s.size(); ++d) ok = int64_t(d) == dim || same_size(out[d], s[d]);
    if (!ok) c.fail("tensor ", i, " has shape ", s, ", which differs from ", first.shape(),
                    " outside dim ", dim);
    out[size_t(dim)] = dim_add(out[size_t(dim)], s[size_t(dim)], c);
  }
  return {first.dtype(), out};
}

}  // namespace

BATON_OP(cat_op, "cat")
    .inputs(1, OpDef::kAnyNumber)
    .int_attr("dim")
    .fusion(Fusion::Injective)
    .strings()
    .infer(cat_infer)
    .params(input_dim_param)
    .cpu([](const KernelContext& c) {
      const int64_t dim = c.params<int64_t>();
      const Tensor& out = c.output();
      int64_t at = 0;
      for (const Tensor& x : c.inputs) {
        int64_t n = x.shape()[size_t(dim)];
        Shape shape = out.shape();
        shape[size_t(dim)] = n;
        if (n > 0)
          kernels::copy_into(make_view(out, shape, out.strides(), out.offset() + at * out.strides()[size_t(dim)]), x);
        at += n;
      }
    })
    .grad([](const GradContext& c) {
      const int64_t dim = normalize_dim(c.attrs.i("dim"), c.input(0).dim(), c);
      Grads grads;
      int64_t at = 0;
      for (size_t i = 0; i < c.inputs.size(); ++i) {
        const int64_t end = dim_add(at, c.input(i).shape()[size_t(dim)], c);
        grads.push_back(c.needs_grad(i) ? slice(c.grad_output(), dim, at, end, 1, c.loc) : Tensor{});
        at = end;
      }
      return grads;
    })
    .onnx("Concat");

}  // namespace baton::ops

namespace baton {

Tensor cat(const std::vector<Tensor>& xs, int64_t dim, SourceLoc loc) {
  // Mixed dtypes promote to the widest, as in arithmetic.
  std::vector<Tensor> inputs = xs;
  DType t = inputs.empty() || !inputs[0].defined() ? f32 : inputs[0].dtype();
  for (const Tensor& x : inputs)
    if (x.defined()) t = promote_types(t, x.dtype());
  for (Tensor& x : inputs)
    if (x.defined() && x.dtype() != t) x = cast(x, t, loc);
  Tensor out;
  ops::call(ops::cat_op, inputs, {{"dim", dim}}, {&out, 1}, loc);
  return out;
}

Tensor stack(const std::vector<Tensor>& xs, int64_t dim, SourceLoc loc) {
  if (xs.empty()) throw ValueError("stack", "needs at least one tensor", loc);
  for (size_t i = 1; i < xs.size(); ++i)
    if (xs[i].defined() && xs[0].defined() && !(xs[i].shape() == xs[0].shape()))
      throw ShapeError("stack", str("tensor ", i, " has shape ", xs[i].shape(), ", tensor 0 has ",
                                    xs[0].shape(), "; stack needs equal shapes"), loc);
  std::vector<Tensor> parts;
  for (const Tensor& x : xs) parts.push_back(x.defined() ? unsqueeze(x, dim, loc) : x);
  return cat(parts, dim, loc);
}

std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim, SourceLoc loc) {
  if (split_size <= 0)
    throw ValueError("split", str("split_size must be positive, got ", split_size), loc);
  const int64_t rank = x.dim();
  if (dim < -rank || dim >= rank)
    throw IndexError("split", str("dim ", dim, " is out of range for shape ", x.shape()), loc);
  const int64_t n = x.shape()[size_t(dim < 0 ? dim + rank : dim)];
  if (n < 0)
    throw ShapeError("split", str("dim ", dim, " of ", x.shape(), " is symbolic (", sym::to_string(n),
                                  ") but must be static: the number of pieces depends on it"), loc);
  std::vector<Tensor> parts;
  for (int64_t at = 0; at < n || (n == 0 && parts.empty()); at += split_size)
    parts.push_back(slice(x, dim, at, std::min(at + split_size, n), 1, loc));
  return parts;
}

}  // namespace baton
