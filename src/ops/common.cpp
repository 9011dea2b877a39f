#include "ops/common.h"

#include <algorithm>
#include <cmath>

#include "baton/ops.h"
#include "dispatch/hooks.h"
#include "kernels/cpu/copy.h"

namespace baton::ops {

Tensor float_input(const Tensor& x, SourceLoc loc) {
  return x.defined() && !is_floating(x.dtype()) && x.dtype() != DType::string ? cast(x, f32, loc) : x;
}

std::pair<Tensor, Tensor> promote(const Tensor& a, const Tensor& b, SourceLoc loc) {
  if (!a.defined() || !b.defined() || a.dtype() == b.dtype()) return {a, b};
  DType t = promote_types(a.dtype(), b.dtype());
  return {a.dtype() == t ? a : cast(a, t, loc), b.dtype() == t ? b : cast(b, t, loc)};
}

std::optional<int64_t> symbolic_size(Scalar s) {
  const double v = s.value();
  if (s.is_bool() || v >= 0 || v != std::trunc(v) || v < -kLargestExactCount) return std::nullopt;
  const auto d = int64_t(v);
  if (!sym::is_symbol(d) || !sym::is_valid_dim(d)) return std::nullopt;
  return d;
}

namespace {

// A 0-d tensor holding the size of `symbol` in each run. element_count reads sizes when the
// graph runs; it needs a tensor with the symbol as its dim: `other`'s own, or a 0-d count
// of `other` (which puts the nodes in other's graph) expanded to [symbol].
Tensor size_of_symbol(int64_t symbol, const Tensor& other, DType dtype, SourceLoc loc) {
  if (!other.is_symbolic() && !dispatch::capturing())
    throw GraphError("scalar", str("the number ", sym::to_string(symbol), " is a size of a symbolic tensor, ",
                                   "known only when the graph runs, and the other operand (", other.dtype(),
                                   other.shape(), ") is not in a graph; use element_count() of that tensor"),
                     loc);
  for (int64_t d = 0; d < other.dim(); ++d)
    if (other.shape()[size_t(d)] == symbol) return element_count(other, {d}, dtype, loc);
  const Tensor anchor = element_count(other, {}, dtype, loc);
  return element_count(expand(anchor, Shape{symbol}, loc), {}, dtype, loc);
}

}  // namespace

Tensor scalar_operand(Scalar s, const Tensor& other, SourceLoc loc) {
  DType t = other.dtype();
  if (!s.is_integral() && !is_floating(t)) t = f32;
  else if (s.is_integral() && !s.is_bool() && t == b8) t = i64;
  if (std::optional<int64_t> symbol = symbolic_size(s)) return size_of_symbol(*symbol, other, t, loc);
  return scalar_tensor(s, t);
}

void require_same_dtype(const CallContext& c) {
  for (size_t i = 1; i < c.inputs.size(); ++i)
    if (c.input(i).dtype() != c.input(0).dtype())
      c.fail<DTypeError>("inputs must share one dtype");
}

void require_float(const CallContext& c, size_t i) {
  if (!is_floating(c.input(i).dtype()))
    c.fail<DTypeError>("input ", i, " must be f32 or f64, got ", c.input(i).dtype());
}

std::vector<int64_t> integer_values(const Tensor& t) {
  const Tensor d = kernels::dense(t);
  std::vector<int64_t> values(size_t(d.numel()));
  for (size_t i = 0; i < values.size(); ++i)
    values[i] = d.dtype() == DType::i64 ? d.data<int64_t>()[i] : int64_t(d.data<int32_t>()[i]);
  return values;
}

int64_t input_dim_param(const CallContext& c) { return normalize_dim(c.attrs.i("dim"), c.input(0).dim(), c); }

int64_t count_attr(const CallContext& c) {
  if (!c.attrs.has("count"))
    c.fail<ValueError>("its output size depends on its inputs' values: a graph node of it needs a `count` symbol");
  const int64_t count = c.attrs.i("count");
  if (!sym::is_valid_dim(count)) c.fail<ValueError>("count must be a size or a symbol, got ", count);
  return count;
}

namespace {

// Whether a call builds a graph node: a trace in progress, or a symbolic input.
bool builds_node(std::span<const Tensor> inputs) {
  return dispatch::capturing() ||
         std::any_of(inputs.begin(), inputs.end(), [](const Tensor& t) { return t.defined() && t.is_symbolic(); });
}

}  // namespace

Attrs with_count_symbol(Attrs attrs, std::span<const Tensor> inputs, std::string_view stem) {
  if (builds_node(inputs)) attrs.set("count", sym::fresh(stem));
  return attrs;
}

Attrs with_dim_symbols(Attrs attrs, std::span<const Tensor> inputs, std::string_view stem,
                       const std::vector<int64_t>& known) {
  if (!builds_node(inputs)) return attrs;
  std::vector<int64_t> dims;
  for (int64_t k : known) dims.push_back(sym::is_valid_dim(k) ? k : sym::fresh(stem));
  attrs.set("dims", dims);
  return attrs;
}

std::vector<int64_t> reduction_dims(const std::vector<int64_t>& dims, int64_t rank,
                                    const CallContext& c) {
  std::vector<int64_t> out;
  if (dims.empty()) {
    for (int64_t d = 0; d < rank; ++d) out.push_back(d);
    return out;
  }
  for (int64_t d : dims) out.push_back(normalize_dim(d, rank, c));
  std::sort(out.begin(), out.end());
  if (std::adjacent_find(out.begin(), out.end()) != out.end())
    c.fail<ValueError>("dim ", Shape(dims), " lists a dim twice");
  return out;
}

// Sizes and paddings from options may pass int64's range when added: 128-bit arithmetic
// (a GNU extension, marked so for -Wpedantic).
__extension__ typedef __int128 WideInt;

int64_t window_positions(const CallContext& c, const char* what, int64_t size, int64_t pad, int64_t span,
                         int64_t stride) {
  const WideInt padded = WideInt(size) + 2 * WideInt(pad);
  if (padded < span)
    c.fail("the ", what, " window of ", span, " is larger than the padded input ", size, " + 2*", pad);
  const WideInt count = (padded - span) / stride + 1;
  if (count > INT64_MAX) c.fail("the ", what, " output size does not fit in an int64");
  return int64_t(count);
}

Shape reduced_shape(const Shape& shape, const std::vector<int64_t>& dims, bool keepdim) {
  Shape out;
  for (size_t d = 0; d < shape.size(); ++d) {
    bool reduced = std::find(dims.begin(), dims.end(), int64_t(d)) != dims.end();
    if (!reduced) out.push_back(shape[d]);
    else if (keepdim) out.push_back(1);
  }
  return out;
}

SizeCount size_count(const Tensor& x, const std::vector<int64_t>& dims, DType dtype, SourceLoc loc) {
  const int64_t rank = x.dim();
  const size_t n = dims.empty() ? size_t(rank) : dims.size();  // empty: every dim
  int64_t count = 1;
  for (size_t i = 0; i < n; ++i) {
    const int64_t d = dims.empty() ? int64_t(i) : dims[i];
    if (d >= rank) continue;  // dim 0 of a 0-d tensor, as reductions allow
    const int64_t size = x.shape()[size_t(d)];
    if (sym::is_symbol(size)) return SizeCount(element_count(x, dims, dtype, loc));
    count *= size;
  }
  return SizeCount(double(count));
}

Tensor at_least(const Tensor& v, double lo, SourceLoc loc) { return maximum(v, Scalar(lo), loc); }

Tensor scatter_base(const Tensor& t, SourceLoc loc) {
  return t.is_symbolic() ? zeros_like(t) : expand(scalar_tensor(0.0, t.dtype()), t.shape(), loc);
}

}  // namespace baton::ops
