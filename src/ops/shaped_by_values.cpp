// reshape_to and expand_to: reshape and expand to a shape that a tensor holds, read when
// the op runs (TensorFlow's reshape(x, shape_tensor); ONNX's Reshape and Expand whose shape
// is computed from a model's inputs). range_of: arange with its bounds in tensors (ONNX's
// Range, TensorFlow's range).
//
// Where the shape is known when the graph is built, reshape and expand with a Shape are the
// ops to use. Here only the values say the sizes (OpDef::sized_by_values), so a graph node
// holds a fresh symbol for each output dim it cannot know,
//   %2 = reshape_to(%x, %s) {dims=[reshape_to_1, reshape_to_2]} : f32[reshape_to_1, reshape_to_2]
// which a plan binds when the step has run (runtime/plan.h, "Stages"). The output is a
// buffer of its own, never a view of x: a plan hands it on to later stages as it is.
#include <algorithm>
#include <cmath>
#include <optional>

#include "baton/ops.h"
#include "ops/common.h"

namespace baton::ops {
namespace {

// The sizes the 1-D integer tensor `shape` holds.
std::vector<int64_t> shape_values(const CallContext& c) {
  const Tensor& shape = c.input(1);
  if (!is_integral(shape.dtype()) || shape.dim() != 1)
    c.fail<DTypeError>("the shape must be a 1-D tensor of integers, got ", shape.dtype(), shape.shape());
  return cast(shape, DType::i64).contiguous().to_vector<int64_t>();
}

// The `dims` attribute of a graph node: one size or symbol per output dim. The shape input
// is 1-D, of a length known when the graph is built; `rank` gives the output rank from it.
Shape dims_attr(const CallContext& c, int64_t (*rank)(const CallContext&, int64_t length)) {
  if (!c.attrs.has("dims"))
    c.fail<ValueError>("its output sizes are the values of its shape input: a graph node of it needs `dims` symbols");
  const Shape dims(c.attrs.ints("dims"));
  const Shape& shape = c.input(1).shape();
  if (shape.size() != 1 || sym::is_symbol(shape[0]) || rank(c, shape[0]) != int64_t(dims.size()))
    c.fail<ShapeError>("the shape input must be a 1-D tensor of a known length giving ", dims.size(), " dims, got ",
                       shape);
  for (int64_t d : dims)
    if (!sym::is_valid_dim(d)) c.fail<ValueError>("dims must be sizes or symbols, got ", dims);
  return dims;
}

// reshape_to's target: a -1 is inferred from x's element count; with copy_zeros (ONNX's
// Reshape without allowzero), a 0 copies x's size at that position.
Shape reshape_target(const CallContext& c) {
  const Tensor& x = c.input(0);
  std::vector<int64_t> target = shape_values(c);
  const bool copy_zeros = c.attrs.i("copy_zeros") != 0;
  int64_t known = 1, infer_at = -1;
  for (size_t i = 0; i < target.size(); ++i) {
    if (target[i] == 0 && copy_zeros) {
      if (int64_t(i) >= x.dim()) c.fail("shape ", Shape(target), " copies dim ", i, " of a rank-", x.dim(), " input");
      target[i] = x.shape()[i];
    }
    if (target[i] == -1 && infer_at < 0) {
      infer_at = int64_t(i);
    } else if (target[i] < 0) {
      c.fail("shape ", Shape(target), " holds ", target[i], " (only one -1 may be inferred)");
    } else if (__builtin_mul_overflow(known, target[i], &known)) {
      c.fail("shape ", Shape(target), " passes int64's range");
    }
  }
  if (infer_at >= 0 && known != 0 && x.numel() % known == 0) target[size_t(infer_at)] = x.numel() / known;
  else if (infer_at >= 0 || known != x.numel())
    c.fail("cannot reshape ", x.shape(), " (", x.numel(), " elements) to ", Shape(target));
  return Shape(target);
}

// expand_to's output: numpy's two-way broadcast of x's shape and the values, so a 1 in the
// values keeps x's size (ONNX's Expand).
Shape expand_target(const CallContext& c) {
  const Shape& x = c.input(0).shape();
  const std::vector<int64_t> values = shape_values(c);
  const size_t rank = std::max(x.size(), values.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    const int64_t a = i + x.size() >= rank ? x[i + x.size() - rank] : 1;
    const int64_t b = i + values.size() >= rank ? values[i + values.size() - rank] : 1;
    if (b < 0 || (a != b && a != 1 && b != 1))
      c.fail("cannot expand ", x, " to the sizes ", Shape(values), " (dim ", i, ": ", a, " vs ", b, ")");
    out[i] = a == 1 ? b : a;
  }
  return out;
}

TensorMeta infer_reshape_to(const InferContext& c) {
  return {c.input(0).dtype(), dims_attr(c, [](const CallContext&, int64_t length) { return length; })};
}

TensorMeta infer_expand_to(const InferContext& c) {
  auto rank = [](const CallContext& c, int64_t length) { return std::max(length, c.input(0).dim()); };
  return {c.input(0).dtype(), dims_attr(c, rank)};
}

// The gradient of reshape_to is the output gradient shaped back as x. Between a shape of
// symbols only the values relate and x's, only a run knows the sizes: the shape is then
// x's sizes read at run time.
Tensor reshape_to_back(const GradContext& c) {
  const Tensor &g = c.grad_output(), &x = c.input(0);
  if (sym::is_static(g.shape()) && sym::is_static(x.shape())) return reshape(g, x.shape());
  return reshape_to(g, sizes_of(x));
}

// The gradient of expand_to sums over the dims it added or broadcast: sum_to_size, which
// chooses them when the graph runs where x's size is a symbol that may be 1.
Tensor expand_to_back(const GradContext& c) { return sum_to_size(c.grad_output(), c.input(0)); }

// range_of's bounds: three 0-d tensors of one dtype.
std::vector<double> range_bounds(const CallContext& c) {
  std::vector<double> bounds;
  for (size_t i = 0; i < 3; ++i) {
    const Tensor& t = c.input(i);
    if (t.dim() != 0 || t.dtype() != c.input(0).dtype() || !(is_integral(t.dtype()) || is_floating(t.dtype())))
      c.fail<DTypeError>("start, limit and delta must be 0-d numbers of one dtype, got ", c.input(0).dtype(),
                         c.input(0).shape(), ", ", c.input(1).dtype(), c.input(1).shape(), ", ", c.input(2).dtype(),
                         c.input(2).shape());
    bounds.push_back(cast(t, DType::f64).item<double>());
  }
  return bounds;
}

// start, start + delta, ... while short of limit: max(ceil((limit - start) / delta), 0) values.
Tensor make_range(const CallContext& c) {
  const std::vector<double> b = range_bounds(c);
  const double start = b[0], limit = b[1], delta = b[2], count = std::ceil((limit - start) / delta);
  if (delta == 0 || !std::isfinite(count) || count > double(int64_t(1) << 40))
    c.fail<ValueError>("start ", start, ", limit ", limit, " and delta ", delta, " give no finite range");
  std::vector<double> values(size_t(std::max(count, 0.0)));
  for (size_t i = 0; i < values.size(); ++i) values[i] = start + double(i) * delta;
  return cast(tensor(values, Shape{int64_t(values.size())}), c.input(0).dtype());
}

}  // namespace

Cost copy_cost(const CallContext& c, std::span<const TensorMeta>) {
  const double bytes = double(c.input(0).numel()) * double(dtype_size(c.input(0).dtype()));
  return Cost{0, 2 * bytes};
}

Tensor sizes_of(const Tensor& x) {
  if (sym::is_static(x.shape())) return tensor(x.shape().vec(), Shape{x.dim()});
  std::vector<Tensor> sizes;
  for (int64_t d = 0; d < x.dim(); ++d) sizes.push_back(reshape(element_count(x, {d}, DType::i64), {1}));
  return cat(sizes, 0);
}

BATON_OP(reshape_to_op, "reshape_to")
    .inputs(2)
    .int_attr("copy_zeros")
    .ints_attr("dims", -1, OpDef::optional)
    .value_sized([](const CallContext& c) { return std::vector<Tensor>{reshape(c.input(0), reshape_target(c)).clone()}; })
    .infer(infer_reshape_to)
    .grad([](const GradContext& c) { return Grads{reshape_to_back(c), Tensor()}; })
    .cost(copy_cost);

BATON_OP(expand_to_op, "expand_to")
    .inputs(2)
    .ints_attr("dims", -1, OpDef::optional)
    .value_sized([](const CallContext& c) { return std::vector<Tensor>{expand(c.input(0), expand_target(c)).clone()}; })
    .infer(infer_expand_to)
    .grad([](const GradContext& c) { return Grads{expand_to_back(c), Tensor()}; })
    .cost(copy_cost);

BATON_OP(range_of_op, "range_of")
    .inputs(3)
    .int_attr("count", OpDef::optional)
    .value_sized([](const CallContext& c) { return std::vector<Tensor>{make_range(c)}; })
    .infer([](const InferContext& c) { return TensorMeta{c.input(0).dtype(), Shape{count_attr(c)}}; });

}  // namespace baton::ops

namespace baton {
namespace {

// How many values the 1-D shape tensor holds: known when a graph is built, or an error.
int64_t shape_length(const Tensor& shape, const char* op, SourceLoc loc) {
  if (shape.dim() != 1 || sym::is_symbol(shape.shape()[0]))
    throw ShapeError(op, str("the shape must be a 1-D tensor of a known length, got ", shape.shape()), loc);
  return shape.shape()[0];
}

// The values of a shape tensor that is a constant where a graph is built (read directly: an
// op would record a node in a trace); none where they are computed, or not i32 or i64.
std::optional<std::vector<int64_t>> values_now(const Tensor& shape) {
  if (shape.is_symbolic() || !(shape.dtype() == DType::i64 || shape.dtype() == DType::i32)) return std::nullopt;
  return ops::integer_values(shape);
}

// reshape_to's output dims as far as a graph knows them (-1: a fresh symbol).
std::vector<int64_t> reshape_dims_now(const Tensor& x, const Tensor& shape, bool copy_zeros, int64_t length) {
  std::vector<int64_t> known(size_t(length), -1);
  const std::optional<std::vector<int64_t>> values = values_now(shape);
  if (!values) return known;
  int64_t product = 1, infer_at = -1;
  for (size_t i = 0; i < known.size(); ++i) {
    const int64_t v = (*values)[i];
    if (v == 0 && copy_zeros) known[i] = int64_t(i) < x.dim() ? x.shape()[i] : -1;
    else if (v >= 0) known[i] = v;
    else if (v == -1 && infer_at < 0) infer_at = int64_t(i);
    if (sym::is_valid_dim(known[i]) && !sym::is_symbol(known[i])) product *= known[i];
    else if (int64_t(i) != infer_at) product = 0;  // a symbol, or a value the op will refuse
  }
  // A -1 is inferred now where the other sizes and x's are all known.
  if (infer_at >= 0 && product > 0 && sym::is_static(x.shape()) && x.numel() % product == 0)
    known[size_t(infer_at)] = x.numel() / product;
  return known;
}

// expand_to's output dims as far as a graph knows them (-1: a fresh symbol). A size of x
// that is static and not 1 stays whatever the values say (anything else fails when it runs).
std::vector<int64_t> expand_dims_now(const Tensor& x, const Tensor& shape, int64_t length) {
  const int64_t rank = std::max(length, x.dim());
  std::vector<int64_t> known(size_t(rank), -1);
  const std::optional<std::vector<int64_t>> values = values_now(shape);
  for (int64_t d = 0; d < rank; ++d) {
    const int64_t a = d - (rank - x.dim()) >= 0 ? x.shape()[size_t(d - (rank - x.dim()))] : 1;
    const int64_t b = values && d - (rank - length) >= 0 ? (*values)[size_t(d - (rank - length))] : (values ? 1 : -1);
    if (a >= 0 && a != 1) known[size_t(d)] = a;
    else if (a == 1 && b >= 0) known[size_t(d)] = b;
    else if (b == 1 || (b > 1 && sym::is_symbol(a))) known[size_t(d)] = b == 1 ? a : b;
  }
  return known;
}

}  // namespace

Tensor reshape_to(const Tensor& x, const Tensor& shape, bool copy_zeros, SourceLoc loc) {
  const Tensor inputs[] = {x, shape};
  const std::vector<int64_t> known = reshape_dims_now(x, shape, copy_zeros, shape_length(shape, "reshape_to", loc));
  const ops::Attrs attrs{{"copy_zeros", int64_t(copy_zeros)}};
  return ops::call_many(ops::reshape_to_op, inputs, ops::with_dim_symbols(attrs, inputs, "reshape_to", known), loc)[0];
}

Tensor expand_to(const Tensor& x, const Tensor& shape, SourceLoc loc) {
  const Tensor inputs[] = {x, shape};
  const std::vector<int64_t> known = expand_dims_now(x, shape, shape_length(shape, "expand_to", loc));
  return ops::call_many(ops::expand_to_op, inputs, ops::with_dim_symbols({}, inputs, "expand_to", known), loc)[0];
}

Tensor range_of(const Tensor& start, const Tensor& limit, const Tensor& delta, SourceLoc loc) {
  const Tensor inputs[] = {start, limit, delta};
  return ops::call_many(ops::range_of_op, inputs, ops::with_count_symbol({}, inputs, "range_of"), loc)[0];
}

}  // namespace baton
