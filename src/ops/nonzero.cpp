// nonzero: the coordinates of x's nonzero elements (NaN counts as nonzero), in row-major
// order, as int64 [count, rank] (PyTorch's nonzero; ONNX's NonZero is its transpose).
//
// The count depends on the values (OpDef::sized_by_values): the op counts, then fills its
// output (make_outputs); in a graph the node holds a fresh symbol for it,
//   %1 = nonzero(%x) {count=nonzero_1}     -> i64[nonzero_1, 2]
// which a plan binds when the step has run, before it specializes the steps after it.
// Integer output: no gradient.
#include <algorithm>
#include <numeric>
#include <vector>

#include "baton/ops.h"
#include "kernels/cpu/copy.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/loops.h"
#include "ops/common.h"

namespace baton::ops {
namespace {

// The flat index range in pieces of at least kMinPiece elements: each piece is counted on
// its own (side by side), then writes its rows from where the pieces before it end.
constexpr int64_t kMinPiece = int64_t(1) << 16;
constexpr int64_t kMaxPieces = 256;

struct Pieces {
  int64_t size = 1, count = 0;
  explicit Pieces(int64_t n) {
    count = std::clamp<int64_t>((n + kMinPiece - 1) / kMinPiece, n > 0 ? 1 : 0, kMaxPieces);
    if (count > 0) size = (n + count - 1) / count;
  }
  int64_t begin(int64_t p, int64_t n) const { return std::min(n, p * size); }
  int64_t end(int64_t p, int64_t n) const { return std::min(n, (p + 1) * size); }
};

// Nonzero elements per piece of a dense x.
std::vector<int64_t> piece_counts(const Tensor& x, const Pieces& pieces) {
  std::vector<int64_t> counts(size_t(pieces.count), 0);
  const int64_t n = x.numel();
  kernels::visit_dtype(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* px = x.data<T>();
    kernels::parallel_range(pieces.count, [&](int64_t b, int64_t e) {
      for (int64_t p = b; p < e; ++p) {
        int64_t c = 0;
        for (int64_t i = pieces.begin(p, n); i < pieces.end(p, n); ++i) c += px[i] != T(0);
        counts[size_t(p)] = c;
      }
    }, 1);
  });
  return counts;
}

TensorMeta infer(const InferContext& c) { return {DType::i64, Shape{count_attr(c), c.input(0).dim()}}; }

// Row r of the output holds the coordinates of the r-th nonzero element. Each piece walks
// its elements with their coordinates kept as it goes (no division per element).
std::vector<Tensor> find_nonzero(const CallContext& c) {
  const Tensor x = kernels::dense(c.input(0));
  const int64_t n = x.numel(), rank = x.dim();
  const Pieces pieces(n);
  const std::vector<int64_t> counts = piece_counts(x, pieces);
  std::vector<int64_t> first_row(counts.size() + 1, 0);
  std::partial_sum(counts.begin(), counts.end(), first_row.begin() + 1);
  Tensor result = empty(Shape{first_row.back(), rank}, DType::i64);
  int64_t* out = result.data<int64_t>();
  const Shape& shape = x.shape();
  kernels::visit_dtype(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* px = x.data<T>();
    kernels::parallel_range(pieces.count, [&](int64_t b, int64_t e) {
      std::vector<int64_t> at(static_cast<size_t>(rank));
      for (int64_t p = b; p < e; ++p) {
        int64_t i = pieces.begin(p, n), row = first_row[size_t(p)];
        for (int64_t d = rank, rest = i; d-- > 0; rest /= shape[size_t(d)]) at[size_t(d)] = rest % shape[size_t(d)];
        for (const int64_t end = pieces.end(p, n); i < end; ++i) {
          if (px[i] != T(0)) std::copy(at.begin(), at.end(), out + rank * row++);
          for (int64_t d = rank; d-- > 0;) {  // the next element's coordinates
            if (++at[size_t(d)] < shape[size_t(d)]) break;
            at[size_t(d)] = 0;
          }
        }
      }
    }, 1);
  });
  return {result};
}

}  // namespace

BATON_OP(nonzero_op, "nonzero")
    .inputs(1)
    .int_attr("count", OpDef::optional)
    .value_sized(find_nonzero)
    .infer(infer)
    .cost([](const CallContext& c, std::span<const TensorMeta>) {
      const double n = double(c.input(0).shape().numel());
      return Cost{n, n * double(dtype_size(c.input(0).dtype()))};
    });

}  // namespace baton::ops

namespace baton {

Tensor nonzero(const Tensor& x, SourceLoc loc) {
  return ops::call(ops::nonzero_op, {x}, ops::with_count_symbol({}, {&x, 1}, "nonzero"), loc);
}

}  // namespace baton
