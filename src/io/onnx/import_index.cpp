// ONNX ops that build or move data by index, composed from baton's public ops: OneHot,
// EyeLike, DepthToSpace, SpaceToDepth, Compress, GatherND, ScatterND, ReverseSequence,
// ScatterElements and Scatter.
#include <algorithm>
#include <map>
#include <set>

#include "baton/ops.h"
#include "io/onnx/importer.h"

namespace baton::onnx::detail {
namespace {

// The values of input i (integers or bools), needed while the model loads.
std::vector<int64_t> known_values(const NodeContext& c, size_t i, const std::string& what) {
  const Tensor& t = c.known_input(i);
  if (is_floating(t.dtype())) c.fail(str(what, " must hold integers or bools, not ", t.dtype()));
  return cast(t, DType::i64).contiguous().to_vector<int64_t>();
}


// Row-major linear positions into dims [first, first + m) of `shape` from the last axis of
// `index` (size m); negative indices count from the end. Returns index.shape()[:-1].
Tensor linear_index(const NodeContext& c, const Tensor& data, const Tensor& index, int64_t first, int64_t m,
                    int64_t* count) {
  const int64_t q = index.dim();
  Tensor lin;
  int64_t stride = 1;
  for (int64_t k = m - 1; k >= 0; --k) {
    const int64_t dim = c.static_dim(data, first + k, "the indexed dims");
    Tensor ik = squeeze(slice(index, q - 1, k, k + 1), q - 1);
    ik = where(ik < int64_t(0), ik + dim, ik);
    Tensor term = ik * stride;
    lin = lin.defined() ? lin + term : term;
    stride *= dim;
  }
  *count = stride;
  return lin;
}

// Checks an index tensor's last dim m (static, 1..limit).
int64_t index_depth(const NodeContext& c, const Tensor& index, int64_t limit) {
  if (index.dim() < 1) c.fail("indices must have at least one dim");
  const int64_t m = index.shape()[size_t(index.dim() - 1)];
  if (sym::is_symbol(m)) c.fail(str("the last dim of the indices ", index.shape(), " must be static"));
  if (m < 1 || m > limit) c.fail(str("the last dim of the indices is ", m, "; it must be in [1, ", limit, "]"));
  return m;
}

// A tensor of the shape of base with -0.0 everywhere (floats; 0 for integers): adding a
// value to it gives that value exactly, -0.0 included.
Tensor negative_zeros_like(const Tensor& base) {
  return full_like(base, is_floating(base.dtype()) ? -0.0 : 0.0, base.dtype());
}

}  // namespace

// OneHot: the depth known while loading, or (computed from the model's inputs) a tensor
// read when it runs, its positions then range_of's.
BATON_ONNX_IMPORTER("OneHot", [](NodeContext& c) -> Outputs {
  const Tensor& indices = c.input(0);
  const Tensor& values = c.input(2);
  if (!(values.dim() == 1 && values.shape()[0] == 2)) c.fail(str("values must be [off, on], not ", values.shape()));
  const int64_t rank = indices.dim() + 1;
  const int64_t axis = axis_attr(c, "axis", -1, rank);
  Tensor depth, positions;
  if (c.computed_from_input_values(1)) {
    if (c.input(1).numel() != 1) c.fail(str("depth must hold one value, not ", c.input(1).shape()));
    depth = cast(reshape(c.input(1), Shape{}), DType::i64);  // a float depth truncates, as ONNX casts it
    positions = range_of(scalar_tensor<int64_t>(0), depth, scalar_tensor<int64_t>(1));
  } else {
    const double depth_value = c.scalar_input(1);
    if (depth_value < 1) c.fail(str("depth must be at least 1, got ", depth_value));
    depth = scalar_tensor<int64_t>(int64_t(depth_value));
    positions = arange(int64_t(depth_value));
  }
  Tensor index = cast(indices, DType::i64);
  index = where(index < int64_t(0), index + depth, index);
  Shape range_shape(size_t(rank), 1);
  range_shape[size_t(axis)] = -1;
  Tensor hot = unsqueeze(index, axis) == reshape(positions, range_shape);
  const Tensor off = reshape(slice(values, 0, 0, 1), Shape{}), on = reshape(slice(values, 0, 1, 2), Shape{});
  return {where(hot, on, off)};
});

BATON_ONNX_IMPORTER("EyeLike", [](NodeContext& c) -> Outputs {
  const Tensor& x = c.input(0);
  if (x.dim() != 2) c.fail(str("needs a 2-D input, not ", x.shape()));
  const int64_t rows = c.static_dim(x, 0, "the input"), cols = c.static_dim(x, 1, "the input");
  DType dtype = x.dtype();
  if (c.has_attr("dtype")) {
    std::optional<DType> t = to_dtype(int32_t(c.attr_int("dtype")));
    if (!t) c.fail(str("baton has no ", onnx_type_name(int32_t(c.attr_int("dtype"))), " tensors"));
    dtype = *t;
  }
  const int64_t k = c.attr_int("k", 0);
  Tensor diagonal = (reshape(arange(cols), Shape{1, cols}) - reshape(arange(rows), Shape{rows, 1})) == k;
  return {cast(diagonal, dtype)};
});

// DepthToSpace: [N, C, H, W] -> [N, C/b^2, H*b, W*b]; DCR reads depth as (b, b, C'),
// CRD as (C', b, b).
BATON_ONNX_IMPORTER("DepthToSpace", [](NodeContext& c) -> Outputs {
  const Tensor& x = c.input(0);
  if (x.dim() != 4) c.fail(str("needs a 4-D input, not ", x.shape()));
  const int64_t b = c.attr_int("blocksize");
  if (b < 1) c.fail(str("blocksize must be positive, got ", b));
  const Shape& s = x.shape();
  const int64_t channels = c.static_dim(x, 1, "the input");
  if (channels % (b * b) != 0) c.fail(str("channels (", channels, ") must be a multiple of blocksize^2 (", b * b, ")"));
  const int64_t depth = channels / (b * b);
  const std::string mode = c.attr_string("mode", "DCR");
  Tensor y;
  if (mode == "DCR") y = permute(reshape(x, Shape{s[0], b, b, depth, s[2], s[3]}), Shape{0, 3, 4, 1, 5, 2});
  else if (mode == "CRD") y = permute(reshape(x, Shape{s[0], depth, b, b, s[2], s[3]}), Shape{0, 1, 4, 2, 5, 3});
  else c.fail(str("mode '", mode, "' is not DCR or CRD"));
  return {reshape(y, Shape{s[0], depth, sym::mul(s[2], b), sym::mul(s[3], b)})};
});

// SpaceToDepth: [N, C, H, W] -> [N, C*b^2, H/b, W/b], depth ordered (b, b, C).
BATON_ONNX_IMPORTER("SpaceToDepth", [](NodeContext& c) -> Outputs {
  const Tensor& x = c.input(0);
  if (x.dim() != 4) c.fail(str("needs a 4-D input, not ", x.shape()));
  const int64_t b = c.attr_int("blocksize");
  if (b < 1) c.fail(str("blocksize must be positive, got ", b));
  const Shape& s = x.shape();
  const int64_t h = c.static_dim(x, 2, "the input"), w = c.static_dim(x, 3, "the input");
  if (h % b != 0 || w % b != 0) c.fail(str("height and width (", h, ", ", w, ") must be multiples of blocksize ", b));
  Tensor y = permute(reshape(x, Shape{s[0], s[1], h / b, b, w / b, b}), Shape{0, 3, 5, 1, 2, 4});
  return {reshape(y, Shape{s[0], sym::mul(s[1], b * b), h / b, w / b})};
});

// Compress: the slices along axis (of the flattened input without one) whose condition
// is true. A condition computed from the model's inputs is read when it runs (nonzero).
BATON_ONNX_IMPORTER("Compress", [](NodeContext& c) -> Outputs {
  Tensor x = c.input(0);
  int64_t axis = 0;
  if (c.has_attr("axis")) axis = axis_attr(c, "axis", 0, x.dim());
  else x = reshape(x, Shape{-1});
  if (c.computed_from_input_values(1)) {
    if (c.input(1).dim() != 1) c.fail(str("the condition must be 1-D, not of shape ", c.input(1).shape()));
    return {index_select(x, axis, reshape(nonzero(c.input(1)), Shape{-1}))};
  }
  const std::vector<int64_t> condition = known_values(c, 1, "the condition");
  const int64_t n = x.shape()[size_t(axis)];
  std::vector<int64_t> picked;
  for (size_t i = 0; i < condition.size(); ++i) {
    if (condition[i] == 0) continue;
    if (!sym::is_symbol(n) && int64_t(i) >= n)
      c.fail(str("the condition selects index ", i, " of a dim of size ", n));
    picked.push_back(int64_t(i));
  }
  return {index_select(x, axis, tensor(picked, Shape{int64_t(picked.size())}))};
});

// GatherND: each index row picks a slice of data; batch_dims leading dims are shared.
// data is viewed as [batch * indexed, rest...] and gathered by linear position.
BATON_ONNX_IMPORTER("GatherND", [](NodeContext& c) -> Outputs {
  const Tensor& data = c.input(0);
  const Tensor index = cast(c.input(1), DType::i64);
  const int64_t b = c.attr_int("batch_dims", 0), r = data.dim(), q = index.dim();
  if (b < 0 || b >= std::min(r, q)) c.fail(str("batch_dims ", b, " must be less than both ranks (", r, ", ", q, ")"));
  const int64_t m = index_depth(c, index, r - b);
  int64_t batch = 1;
  for (int64_t d = 0; d < b; ++d) batch *= c.static_dim(data, d, "the batch dims");
  int64_t count = 1;
  Tensor lin = linear_index(c, data, index, b, m, &count);
  if (b > 0) {
    Shape batch_shape(size_t(q - 1), 1);
    for (int64_t d = 0; d < b; ++d) batch_shape[size_t(d)] = data.shape()[size_t(d)];
    lin = lin + reshape(arange(batch), batch_shape) * count;
  }
  Shape flat{batch * count}, out;
  for (int64_t d = b + m; d < r; ++d) flat.push_back(data.shape()[size_t(d)]);
  for (int64_t d = 0; d < q - 1; ++d) out.push_back(index.shape()[size_t(d)]);
  for (int64_t d = b + m; d < r; ++d) out.push_back(data.shape()[size_t(d)]);
  return {reshape(index_select(reshape(data, flat), 0, reshape(lin, Shape{-1})), out)};
});

// Rounds of scatter_rows_in_rounds: a position repeated more often is refused.
static constexpr int64_t kMaxScatterRounds = 4096;

// Scatters src's rows into base's rows at known positions lin, for the reductions 'none',
// 'mul', 'max' and 'min'. ONNX applies updates in order, so the k-th occurrence of every
// position is applied in round k: each round places its rows (distinct positions) with
// index_add into -0.0s (which keeps every value exact) and combines them with the result
// so far where its mask is set. 'none' allows no repeated position.
static Tensor scatter_rows_in_rounds(const NodeContext& c, const Tensor& base, const Tensor& lin, const Tensor& src,
                                     int64_t count, const std::string& reduction) {
  const std::vector<int64_t> positions = lin.contiguous().to_vector<int64_t>();
  std::vector<int64_t> seen(size_t(count), 0);
  std::vector<std::vector<int64_t>> rounds;  // the update rows of each round
  for (size_t j = 0; j < positions.size(); ++j) {
    const int64_t p = positions[j];
    if (p < 0 || p >= count) c.fail(str("an index is out of range (position ", p, " of ", count, ")"));
    const int64_t round = seen[size_t(p)]++;
    if (round > 0 && reduction == "none") c.fail("repeats an index, which ONNX leaves undefined without a reduction");
    if (round >= kMaxScatterRounds)
      c.fail(str("repeats position ", p, " more than ", kMaxScatterRounds, " times (one masked step each)"));
    if (size_t(round) == rounds.size()) rounds.emplace_back();
    rounds[size_t(round)].push_back(int64_t(j));
  }
  Tensor out = base;
  Shape mask_shape(size_t(base.dim()), 1);
  mask_shape[0] = count;
  for (const std::vector<int64_t>& rows : rounds) {
    std::vector<int64_t> at, hit(size_t(count), 0);
    for (int64_t j : rows) at.push_back(positions[size_t(j)]), hit[size_t(positions[size_t(j)])] = 1;
    const int64_t n = int64_t(rows.size());
    const Tensor placed = index_add(negative_zeros_like(base), 0, tensor(at, Shape{n}),
                                    index_select(src, 0, tensor(rows, Shape{n})));
    const Tensor mask = reshape(tensor(hit, Shape{count}), mask_shape) != int64_t(0);
    Tensor combined = placed;
    if (reduction == "mul") combined = out * placed;
    else if (reduction == "max") combined = maximum(out, placed);
    else if (reduction == "min") combined = minimum(out, placed);
    out = where(mask, combined, out);
  }
  return out;
}

// ScatterND: reduction 'add' (any indices), or 'none', 'mul', 'max', 'min' with indices
// known at load time ('none' with distinct ones).
BATON_ONNX_IMPORTER("ScatterND", [](NodeContext& c) -> Outputs {
  const Tensor& data = c.input(0);
  const Tensor index = cast(c.input(1), DType::i64);
  const Tensor& updates = c.input(2);
  const std::string reduction = c.attr_string("reduction", "none");
  if (reduction != "none" && reduction != "add" && reduction != "mul" && reduction != "max" && reduction != "min")
    c.fail(str("reduction '", reduction, "' is not one of none, add, mul, max, min"));
  const int64_t r = data.dim(), q = index.dim();
  const int64_t m = index_depth(c, index, r);
  int64_t count = 1;
  Tensor lin = reshape(linear_index(c, data, index, 0, m, &count), Shape{-1});
  Shape flat{count}, rows{-1};
  for (int64_t d = m; d < r; ++d) flat.push_back(data.shape()[size_t(d)]), rows.push_back(data.shape()[size_t(d)]);
  if (updates.dim() != q - 1 + r - m) c.fail(str("updates ", updates.shape(), " do not match the indices and data"));
  const Tensor base = reshape(data, flat), src = reshape(updates, rows);
  if (reduction == "add") return {reshape(index_add(base, 0, lin, src), data.shape())};
  (void)known_values(c, 1, str("the indices of a ScatterND with reduction '", reduction, "'"));
  return {reshape(scatter_rows_in_rounds(c, base, lin, src, count, reduction), data.shape())};
});

// ReverseSequence: x [batch, time, ...] or [time, batch, ...] (time_axis, batch_axis are
// 0 and 1), each batch entry's first sequence_lens[b] steps reversed.
BATON_ONNX_IMPORTER("ReverseSequence", [](NodeContext& c) -> Outputs {
  const Tensor& x = c.input(0);
  const int64_t batch_axis = c.attr_int("batch_axis", 1), time_axis = c.attr_int("time_axis", 0);
  if (x.dim() < 2) c.fail(str("needs an input of at least 2 dims, not ", x.shape()));
  if (batch_axis < 0 || batch_axis > 1 || time_axis < 0 || time_axis > 1 || batch_axis == time_axis)
    c.fail(str("batch_axis and time_axis must be 0 and 1 in some order, got ", batch_axis, " and ", time_axis));
  return {reverse_sequence(x, cast(c.input(1), DType::i64), batch_axis, time_axis)};
});

// ScatterElements (and Scatter, its name before opset 11): reduction 'add', or 'none'
// with indices known at load time that hit each place once.
static const ImportFn scatter_elements = [](NodeContext& c) -> Outputs {
  const Tensor& data = c.input(0);
  Tensor index = cast(c.input(1), DType::i64);
  const Tensor& updates = c.input(2);
  const std::string reduction = c.attr_string("reduction", "none");
  if (reduction != "none" && reduction != "add")
    c.fail(str("reduction '", reduction, "' is not supported (only 'none' and 'add')"));
  const int64_t axis = axis_attr(c, "axis", 0, data.dim());
  if (index.dim() != data.dim()) c.fail(str("indices ", index.shape(), " and data ", data.shape(), " differ in rank"));
  const int64_t n = c.static_dim(data, axis, "the scattered axis");
  index = where(index < int64_t(0), index + n, index);
  if (reduction == "add") return {scatter_add(data, axis, index, updates)};
  std::vector<int64_t> values = known_values(c, 1, "the indices of a ScatterElements without reduction");
  const Shape& s = c.input(1).shape();
  std::set<std::vector<int64_t>> places;
  std::vector<int64_t> at(s.size(), 0);
  for (int64_t v : values) {
    std::vector<int64_t> place = at;
    place[size_t(axis)] = v < 0 ? v + n : v;
    if (place[size_t(axis)] < 0 || place[size_t(axis)] >= n) c.fail(str("index ", v, " is out of range for size ", n));
    if (!places.insert(place).second) c.fail("repeats an index, which ONNX leaves undefined without a reduction");
    for (size_t d = s.size(); d-- > 0;) {  // next position, row-major
      if (++at[d] < s[d]) break;
      at[d] = 0;
    }
  }
  const Tensor mask = scatter_add(full_like(data, 0, DType::i64), axis, index, full_like(index, 1, DType::i64));
  const Tensor placed = scatter_add(negative_zeros_like(data), axis, index, updates);
  return {where(mask != int64_t(0), placed, data)};
};
BATON_ONNX_IMPORTER("ScatterElements", scatter_elements);
BATON_ONNX_IMPORTER("Scatter", scatter_elements);

}  // namespace baton::onnx::detail
