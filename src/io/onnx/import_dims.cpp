// Shape arithmetic on symbolic dims while loading. Exporters write a size that depends on
// the input's shape as Shape -> Gather -> Mul -> Concat -> Reshape (baton's own export does
// for `batch`-sized slices and reshapes). Run at load time that would need the dims' sizes;
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
  if (op == "Unsqueeze" || op == "Squeeze" || op == "Reshape" || op == "Identity" || op == "Cast") return values_of(c, 0);
  return std::nullopt;
}

}  // namespace baton::onnx::detail
