// View ops: the output aliases the input's storage with new shape and strides.
#include <algorithm>
#include <numeric>

#include "baton/ops.h"
#include "ops/common.h"
#include "ops/sym_dims.h"

namespace baton::ops {
namespace {

// Resolves one -1 in `shape` from numel; throws when the sizes cannot match. Symbolic
// sizes work too: [batch,28,28] viewed as {-1, 784} gives [batch,784] (numel / known).
Shape resolve_shape(const Shape& requested, int64_t numel, const CallContext& c) {
  Shape shape = requested;
  int64_t known = 1, infer_at = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      if (infer_at >= 0) c.fail("only one dimension can be -1 in ", requested);
      infer_at = int64_t(i);
    } else if (shape[i] < 0 && !sym::is_valid_dim(shape[i])) {
      c.fail("invalid size ", shape[i], " in ", requested);
    } else {
      known = dim_mul(known, shape[i]);
    }
  }
  auto invalid = [&] {
    c.fail("shape ", requested, " is invalid for ", sym::to_string(numel), " elements");
  };
  if (infer_at >= 0) {
    std::optional<int64_t> rest;
    if (numel >= 0 && known > 0) rest = numel % known == 0 ? std::optional(numel / known) : std::nullopt;
    else if (known != 0) rest = sym::div_exact(numel, known);  // batch*784 / 784 = batch
    if (!rest) invalid();
    shape[size_t(infer_at)] = *rest;
  } else if (known != numel) {
    invalid();
  }
  return shape;
}

Tensor reshape_back(const GradContext& c) { return reshape(c.grad_output(), c.input(0).shape()); }

// The view rules' parameters (OpDef::params), from the attributes and the input's shape;
// each rule then makes the view from the input's strides.
Shape view_shape(const CallContext& c) { return resolve_shape(Shape(c.attrs.ints("shape")), c.input(0).numel(), c); }

// expand's shape, its -1 entries the input's sizes.
Shape expand_shape(const CallContext& c) {
  const Shape& in = c.input(0).shape();
  Shape shape(c.attrs.ints("shape"));
  if (shape.size() < in.size()) c.fail("cannot expand to ", shape, ": fewer dims than the input");
  const size_t lead = shape.size() - in.size();
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] < 0 && shape[d] != -1 && !sym::is_valid_dim(shape[d]))
      c.fail("invalid size ", shape[d], " in ", Shape(c.attrs.ints("shape")));
    if (d < lead) {  // a new dim: any size, a symbol included, but no -1
      if (shape[d] == -1) c.fail("-1 is not allowed for a new leading dim in ", shape);
      continue;
    }
    const int64_t have = in[d - lead];
    if (shape[d] == -1) shape[d] = have;
    if (have != shape[d] && have != 1)
      c.fail("cannot expand size ", sym::to_string(have), " to ", sym::to_string(shape[d]), " at dim ", d);
  }
  return shape;
}

// permute's dims, normalised, each once.
Shape permutation(const CallContext& c) {
  const auto& dims = c.attrs.ints("dims");
  const int64_t rank = c.input(0).dim();
  if (int64_t(dims.size()) != rank) c.fail("permutation ", Shape(dims), " does not match rank ", rank);
  Shape order(dims.size());
  std::vector<bool> seen(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) {
    const int64_t d = normalize_dim(dims[i], rank, c);
    if (seen[size_t(d)]) c.fail("permutation ", Shape(dims), " repeats dim ", d);
    seen[size_t(d)] = true;
    order[i] = d;
  }
  return order;
}

// The dim squeeze removes, or -1 when its size is not 1 (or the input is 0-d).
int64_t squeezed_dim(const CallContext& c) {
  const Tensor& x = c.input(0);
  const int64_t d = normalize_dim(c.attrs.i("dim"), x.dim(), c);
  const Shape& shape = x.shape();
  // A symbol may be 1 in one run and not in another: the output rank would change.
  if (x.dim() > 0 && shape[size_t(d)] < 0)
    fail_symbolic_dim(c, shape, size_t(d), "the squeezed dim", "whether it is removed depends on its size being 1");
  return x.dim() > 0 && shape[size_t(d)] == 1 ? d : -1;
}

int64_t unsqueezed_dim(const CallContext& c) { return normalize_dim(c.attrs.i("dim"), c.input(0).dim() + 1, c); }

}  // namespace

BATON_OP(view_op, "view")
    .inputs(1)
    .ints_attr("shape")
    .fusion(Fusion::Injective)
    .params(view_shape)
    .view([](const CallContext& c) {
      const Tensor& x = c.input(0);
      const Shape& shape = c.params<Shape>();
      if (!x.is_contiguous() && x.numel() != 0)  // no elements: any strides will do
        c.fail("view needs a contiguous input (strides ", x.strides(), "); use reshape()");
      return make_view(x, shape, contiguous_strides(shape), x.offset());
    })
    .grad([](const GradContext& c) { return Grads{reshape_back(c)}; })
    .onnx("Reshape");

BATON_OP(expand_op, "expand")
    .inputs(1)
    .ints_attr("shape")
    .fusion(Fusion::Broadcast)
    .params(expand_shape)
    .view([](const CallContext& c) {
      const Tensor& x = c.input(0);
      const Shape& shape = c.params<Shape>();
      Shape strides(shape.size(), 0);  // 0 along new and broadcast dims
      const size_t lead = shape.size() - size_t(x.dim());
      for (size_t d = lead; d < shape.size(); ++d)
        if (x.shape()[d - lead] == shape[d]) strides[d] = x.strides()[d - lead];
      return make_view(x, shape, strides, x.offset());
    })
    .grad([](const GradContext& c) { return Grads{sum_to_size(c.grad_output(), c.input(0).shape())}; })
    .onnx("Expand");

BATON_OP(permute_op, "permute")
    .inputs(1)
    .ints_attr("dims")
    .fusion(Fusion::Injective)
    .params(permutation)
    .column_major({0})  // a view: a transposed column-major matrix is a row-major one
    .view([](const CallContext& c) {
      const Tensor& x = c.input(0);
      const Shape& order = c.params<Shape>();
      Shape shape(order.size()), strides(order.size());
      for (size_t i = 0; i < order.size(); ++i) {
        shape[i] = x.shape()[size_t(order[i])];
        strides[i] = x.strides()[size_t(order[i])];
      }
      return make_view(x, shape, strides, x.offset());
    })
    .grad([](const GradContext& c) {
      const auto& dims = c.attrs.ints("dims");
      Shape inverse(dims.size());
      for (size_t i = 0; i < dims.size(); ++i) {
        int64_t d = dims[i] < 0 ? dims[i] + int64_t(dims.size()) : dims[i];
        inverse[size_t(d)] = int64_t(i);
      }
      return Grads{permute(c.grad_output(), inverse)};
    })
    .onnx("Transpose");

// squeeze/unsqueeze are views for any strides (reshape would copy a strided input).
BATON_OP(squeeze_op, "squeeze")
    .inputs(1)
    .int_attr("dim")
    .fusion(Fusion::Injective)
    .params(squeezed_dim)
    .view([](const CallContext& c) {
      const Tensor& x = c.input(0);
      const int64_t d = c.params<int64_t>();
      Shape shape = x.shape(), strides = x.strides();
      if (d >= 0) {
        shape.erase(size_t(d));
        strides.erase(size_t(d));
      }
      return make_view(x, shape, strides, x.offset());
    })
    .grad([](const GradContext& c) { return Grads{reshape_back(c)}; })
    .onnx("Squeeze");

BATON_OP(unsqueeze_op, "unsqueeze")
    .inputs(1)
    .int_attr("dim")
    .fusion(Fusion::Injective)
    .params(unsqueezed_dim)
    .view([](const CallContext& c) {
      const Tensor& x = c.input(0);
      const size_t d = size_t(c.params<int64_t>());
      Shape shape = x.shape(), strides = x.strides();
      int64_t stride = d < shape.size() ? dim_mul(shape[d], strides[d]) : 1;
      shape.insert(d, 1);
      strides.insert(d, stride);
      return make_view(x, shape, strides, x.offset());
    })
    .grad([](const GradContext& c) { return Grads{reshape_back(c)}; })
    .onnx("Unsqueeze");

}  // namespace baton::ops

namespace baton {

Tensor view(const Tensor& x, const Shape& shape, SourceLoc loc) {
  return ops::call(ops::view_op, {x}, {{"shape", shape.vec()}}, loc);
}

Tensor reshape(const Tensor& x, const Shape& shape, SourceLoc loc) {
  return view(x.is_contiguous() || x.numel() == 0 ? x : contiguous(x, loc), shape, loc);
}

Tensor expand(const Tensor& x, const Shape& shape, SourceLoc loc) {
  if (x.shape() == shape) return x;
  return ops::call(ops::expand_op, {x}, {{"shape", shape.vec()}}, loc);
}

Tensor permute(const Tensor& x, const Shape& dims, SourceLoc loc) {
  return ops::call(ops::permute_op, {x}, {{"dims", dims.vec()}}, loc);
}

Tensor transpose(const Tensor& x, int64_t d0, int64_t d1, SourceLoc loc) {
  const int64_t rank = x.dim();
  ops::Attrs none;
  ops::CallContext c{ops::composite_op("transpose"), {&x, 1}, none, loc};
  int64_t a = ops::normalize_dim(d0, rank, c), b = ops::normalize_dim(d1, rank, c);
  Shape dims(static_cast<size_t>(rank));
  std::iota(dims.begin(), dims.end(), 0);
  std::swap(dims[size_t(a)], dims[size_t(b)]);
  return permute(x, dims, loc);
}

Tensor squeeze(const Tensor& x, int64_t dim, SourceLoc loc) {
  return ops::call(ops::squeeze_op, {x}, {{"dim", dim}}, loc);
}

Tensor unsqueeze(const Tensor& x, int64_t dim, SourceLoc loc) {
  return ops::call(ops::unsqueeze_op, {x}, {{"dim", dim}}, loc);
}

Tensor flatten(const Tensor& x, int64_t start, int64_t end, SourceLoc loc) {
  if (x.dim() == 0) return reshape(x, {1}, loc);
  ops::Attrs none;
  ops::CallContext c{ops::composite_op("flatten"), {&x, 1}, none, loc};
  int64_t s = ops::normalize_dim(start, x.dim(), c), e = ops::normalize_dim(end, x.dim(), c);
  if (s > e) c.fail<ValueError>("flatten start dim ", start, " is after end dim ", end);
  Shape shape;
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (d <= s || d > e) shape.push_back(x.shape()[size_t(d)]);
    else shape.back() = ops::dim_mul(shape.back(), x.shape()[size_t(d)]);
  }
  return reshape(x, shape, loc);
}

Tensor Tensor::reshape(const Shape& s, SourceLoc loc) const { return baton::reshape(*this, s, loc); }
Tensor Tensor::view(const Shape& s, SourceLoc loc) const { return baton::view(*this, s, loc); }
Tensor Tensor::transpose(int64_t a, int64_t b, SourceLoc loc) const { return baton::transpose(*this, a, b, loc); }
Tensor Tensor::permute(const Shape& d, SourceLoc loc) const { return baton::permute(*this, d, loc); }
Tensor Tensor::t(SourceLoc loc) const {
  if (dim() != 2) throw ShapeError("t", str("expects a matrix, got shape ", shape()), loc);
  return baton::transpose(*this, 0, 1, loc);
}
Tensor Tensor::squeeze(int64_t d, SourceLoc loc) const { return baton::squeeze(*this, d, loc); }
Tensor Tensor::unsqueeze(int64_t d, SourceLoc loc) const { return baton::unsqueeze(*this, d, loc); }
Tensor Tensor::expand(const Shape& s, SourceLoc loc) const { return baton::expand(*this, s, loc); }
Tensor Tensor::flatten(int64_t s, int64_t e, SourceLoc loc) const { return baton::flatten(*this, s, e, loc); }

}  // namespace baton
