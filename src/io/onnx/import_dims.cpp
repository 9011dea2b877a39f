// Shape arithmetic on symbolic dims while loading. Exporters write a size that depends on
// the input's shape as Shape -> Gather (or Slice) -> Mul (or ReduceProd) -> Concat ->
// Reshape (PyTorch's flatten of x.shape[1:]; baton's own export for `batch`-sized slices
// and reshapes). Run at load time that would need the dims' sizes;
// instead, each such node's output is a real tensor computed when the model runs, and the
// importer also remembers its values as dims (symbols included). A Reshape or Slice that
// reads it (NodeContext::ints_input) gets `batch` back, and the graph stays symbolic.
#include <algorithm>

#include "baton/ops.h"
#include "io/onnx/importer.h"
#include "trace/builder.h"

namespace baton::onnx::detail {
namespace {

using Dims = std::vector<int64_t>;

// The values of input i known now: remembered dims, or a small constant's integers.
std::optional<Dims> values_of(const NodeContext& c, size_t i) {
  if (!c.has_input(i) || c.composite_input(i)) return std::nullopt;
  const Tensor& t = c.input(i);
  if (const Dims* d = c.importer.known_dims(t)) return *d;
  if (t.is_symbolic() || !is_integral(compute_dtype(t.dtype())) || t.numel() > 64) return std::nullopt;
  trace::NoTrace no_trace;
  return cast(t, DType::i64).contiguous().to_vector<int64_t>();
}

// a op b for dims; nullopt when the result is no dim (batch - 3, batch / 7).
std::optional<int64_t> combine(const std::string& op, int64_t a, int64_t b) {
  if (!sym::is_symbol(a) && !sym::is_symbol(b)) {
    if (op == "Mul") return a * b;
    if (op == "Add") return a + b;
    if (op == "Sub") return a - b;
    return b != 0 && a % b == 0 ? std::optional(a / b) : std::nullopt;
  }
  if (op == "Mul") return sym::mul(a, b);
  if (op == "Add") return sym::add(a, b);
  if (op == "Sub") return sym::sub(a, b);
  return sym::div_exact(a, b);
}

// Elementwise Mul, Add, Sub, Div of two lists of dims (one may have one entry).
std::optional<Dims> arithmetic(const NodeContext& c) {
  std::optional<Dims> a = values_of(c, 0), b = values_of(c, 1);
  if (!a || !b || (a->size() != b->size() && a->size() != 1 && b->size() != 1)) return std::nullopt;
  Dims out(std::max(a->size(), b->size()));
  for (size_t i = 0; i < out.size(); ++i) {
    std::optional<int64_t> d;
    try {
      d = combine(c.node.op_type(), (*a)[a->size() == 1 ? 0 : i], (*b)[b->size() == 1 ? 0 : i]);
    } catch (const ShapeError&) {
      return std::nullopt;  // a sum of different symbols
    }
    if (!d) return std::nullopt;
    out[i] = *d;
  }
  return out;
}

std::optional<Dims> gather(const NodeContext& c) {
  std::optional<Dims> data = values_of(c, 0), index = values_of(c, 1);
  if (!data || !index || c.input(0).dim() != 1) return std::nullopt;
  Dims out;
  for (int64_t i : *index) {
    if (i < 0) i += int64_t(data->size());
    if (i < 0 || i >= int64_t(data->size())) return std::nullopt;
    out.push_back((*data)[size_t(i)]);
  }
  return out;
}

std::optional<Dims> concat(const NodeContext& c) {
  Dims out;
  for (size_t i = 0; i < c.num_inputs(); ++i) {
    std::optional<Dims> part = values_of(c, i);
    if (!part) return std::nullopt;
    out.insert(out.end(), part->begin(), part->end());
  }
  return out;
}

// Slice of a list of dims (one axis, static bounds), as ONNX clamps them: `x.shape[1:3]`.
std::optional<Dims> slice(const NodeContext& c) {
  std::optional<Dims> data = values_of(c, 0);
  if (!data || c.input(0).dim() != 1) return std::nullopt;
  Dims starts, ends, axes{0}, steps{1};
  if (c.opset < 10) {
    starts = c.attr_ints("starts"), ends = c.attr_ints("ends"), axes = c.attr_ints("axes", {0});
  } else {
    std::optional<Dims> s = values_of(c, 1), e = values_of(c, 2);
    std::optional<Dims> a = c.has_input(3) ? values_of(c, 3) : Dims{0};
    std::optional<Dims> st = c.has_input(4) ? values_of(c, 4) : Dims{1};
    if (!s || !e || !a || !st) return std::nullopt;
    starts = *s, ends = *e, axes = *a, steps = *st;
  }
  const auto is_static = [](int64_t v) { return !sym::is_symbol(v); };
  if (starts.size() != 1 || ends.size() != 1 || axes.size() != 1 || steps.size() != 1 || (axes[0] != 0 && axes[0] != -1) ||
      steps[0] == 0 || !is_static(starts[0]) || !is_static(ends[0]))
    return std::nullopt;
  const int64_t n = int64_t(data->size()), step = steps[0];
  const auto bound = [n](int64_t v, int64_t lo, int64_t hi) { return std::clamp(v < 0 ? v + n : v, lo, hi); };
  Dims out;
  if (step > 0)
    for (int64_t i = bound(starts[0], 0, n), end = bound(ends[0], 0, n); i < end; i += step) out.push_back((*data)[size_t(i)]);
  else
    for (int64_t i = bound(starts[0], 0, n - 1), end = bound(ends[0], -1, n - 1); i > end; i += step)
      out.push_back((*data)[size_t(i)]);
  return out;
}

// ReduceProd of a list of dims (all of it: a 1-D list has one axis): how many elements.
std::optional<Dims> reduce_prod(const NodeContext& c) {
  std::optional<Dims> data = values_of(c, 0);
  if (!data || c.input(0).dim() != 1) return std::nullopt;
  const bool axes_given = c.opset < 18 ? c.has_attr("axes") : c.has_input(1);
  if (!axes_given && c.attr_int("noop_with_empty_axes", 0) != 0) return data;
  int64_t product = 1;
  try {
    for (int64_t d : *data) product = sym::mul(product, d);
  } catch (const ShapeError&) {
    return std::nullopt;
  }
  return Dims{product};
}

}  // namespace

std::optional<std::vector<int64_t>> known_dims_after(const NodeContext& c) {
  bool reads_dims = false;  // a node on constants only is folded already
  for (size_t i = 0; i < c.num_inputs(); ++i)
    reads_dims = reads_dims || (c.has_input(i) && !c.composite_input(i) && c.importer.known_dims(c.input(i)));
  if (!reads_dims) return std::nullopt;
  const std::string& op = c.node.op_type();
  if (op == "Mul" || op == "Add" || op == "Sub" || op == "Div") return arithmetic(c);
  if (op == "Gather") return gather(c);
  if (op == "Concat") return concat(c);
  if (op == "Slice") return slice(c);
  if (op == "ReduceProd") return reduce_prod(c);
  if (op == "Unsqueeze" || op == "Squeeze" || op == "Reshape" || op == "Identity" || op == "Cast") return values_of(c, 0);
  return std::nullopt;
}

}  // namespace baton::onnx::detail
