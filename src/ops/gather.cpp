// Indexing ops and their scatter counterparts, each the other's gradient:
//   gather(x, dim, index)          <-> scatter_add(base, dim, index, src)
//   index_select(x, dim, index)    <-> index_add(base, dim, index, src)
//   embedding(weight, indices)     -> index_add into the weight's shape
// Indices are i64 (the public functions cast i32); every index is range-checked before
// any work, so a bad one is an IndexError naming the op, the value and the caller's line.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <string>

#include "baton/ops.h"
#include "kernels/cpu/copy.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/loops.h"
#include "ops/common.h"

namespace baton::ops {
namespace {

using kernels::dense;

void require_index(const CallContext& c, size_t i) {
  if (c.input(i).dtype() != i64)
    c.fail<DTypeError>("indices must be i64, got ", c.input(i).dtype());
}

// The indices as a dense i64 tensor, each checked to lie in [0, limit): one vectorizable
// pass over threads, and only where it finds a bad one a second for the first of them.
Tensor checked_indices(const CallContext& c, const Tensor& index, int64_t limit, const char* what) {
  Tensor dense_index = dense(index);
  const int64_t* v = dense_index.data<int64_t>();
  const int64_t n = dense_index.numel();
  std::atomic<bool> bad = false;
  kernels::parallel_range(n, [&](int64_t begin, int64_t end) {
    int64_t signs = 0;  // the sign bit set by a negative index or one past limit - 1
    for (int64_t i = begin; i < end; ++i) signs |= v[i] | (limit - 1 - v[i]);
    if (signs < 0) bad = true;
  });
  if (bad)
    for (int64_t i = 0; i < n; ++i)
      if (v[i] < 0 || v[i] >= limit)
        c.fail<IndexError>("index ", v[i], " is out of range for ", what, " of size ", limit);
  return dense_index;
}

// Calls row(first, base, n) for every innermost row of `shape` (row-major): `first` is the
// flat index of the row's first element, `base` the offset, in a tensor of `strides`, of
// that element with dim's coordinate taken as 0. Rows run over threads where `parallel`.
template <class Row>
void for_each_row_at(const Shape& shape, const Shape& strides, size_t dim, bool parallel, Row row) {
  const int64_t total = shape.numel();
  if (total == 0) return;
  if (shape.empty()) return row(int64_t(0), int64_t(0), int64_t(1));
  const size_t rank = shape.size();
  const int64_t inner = shape[rank - 1];
  auto rows = [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      int64_t rest = r, base = 0;
      for (size_t d = rank - 1; d-- > 0;) {
        if (d != dim) base += rest % shape[d] * strides[d];
        rest /= shape[d];
      }
      row(r * inner, base, inner);
    }
  };
  if (parallel) kernels::parallel_range(total / inner, rows, kernels::grain_for(inner));
  else rows(0, total / inner);
}

// How a row of for_each_row_at moves through a tensor of `strides` indexed at dim: by the
// last stride per element (not at all where dim is the last), and by `at` per index unit.
struct IndexedSteps {
  int64_t step = 0, at = 0;
};
IndexedSteps indexed_steps(const Shape& strides, size_t dim) {
  if (strides.empty()) return {};
  const size_t last = strides.size() - 1;
  return {dim == last ? 0 : strides[last], strides[dim]};
}

// gather/scatter_add: index has x's rank and is no larger than x outside dim (checked
// where both sizes are static; the kernel's rule checks the others when a graph runs).
int64_t check_gather_shapes(const CallContext& c, const Tensor& x, const Tensor& index) {
  const int64_t dim = normalize_dim(c.attrs.i("dim"), x.dim(), c);
  if (index.dim() != x.dim()) c.fail("index must have the input's rank ", x.dim());
  for (size_t d = 0; d < size_t(x.dim()); ++d)
    if (int64_t(d) != dim && x.shape()[d] >= 0 && index.shape()[d] > x.shape()[d])
      c.fail("index size ", index.shape()[d], " exceeds the input's ", x.shape()[d], " at dim ", d);
  return dim;
}

// index_select/index_add: sizes as [outer, size at dim, inner] of a contiguous tensor.
struct Rows {
  int64_t outer = 1, inner = 1;
};
Rows rows_around(const Shape& shape, int64_t dim) {
  Rows r;
  for (int64_t d = 0; d < int64_t(shape.size()); ++d) {
    if (d < dim) r.outer *= shape[size_t(d)];
    if (d > dim) r.inner *= shape[size_t(d)];
  }
  return r;
}

// select_rows for strings: whole std::string elements assigned, not bytes.
void select_string_rows(const Tensor& x, const Tensor& out, const Rows& r, int64_t size, const int64_t* idx,
                        int64_t n) {
  const std::string* src = x.data<std::string>();
  std::string* dst = out.data<std::string>();
  for (int64_t k = 0; k < r.outer * n; ++k) {
    const int64_t o = k / n, j = k % n;
    std::copy_n(src + (o * size + idx[j]) * r.inner, r.inner, dst + k * r.inner);
  }
}

// select_rows where each row is one element of E's size (index_select along the last dim):
// element by element, not a memcpy call each.
template <class E>
void select_elements(const void* x, void* out, int64_t outer, int64_t size, const int64_t* idx, int64_t n) {
  const E* src = static_cast<const E*>(x);
  E* dst = static_cast<E*>(out);
  kernels::parallel_range(outer, [&](int64_t b, int64_t e) {
    for (int64_t o = b; o < e; ++o)
      for (int64_t j = 0; j < n; ++j) dst[o * n + j] = src[o * size + idx[j]];
  }, kernels::grain_for(n));
}

// out[o, j, :] = x[o, idx[j], :] for contiguous x and out, any dtype; idx: a dense index.
void select_rows(const Tensor& x, const Tensor& out, int64_t dim, const Tensor& index) {
  Rows r = rows_around(x.shape(), dim);
  const int64_t size = x.shape()[size_t(dim)], n = index.numel();
  const int64_t* idx = index.data<int64_t>();
  if (x.dtype() == DType::string) return select_string_rows(x, out, r, size, idx, n);
  const size_t row_bytes = size_t(r.inner) * dtype_size(x.dtype());
  switch (r.inner == 1 ? row_bytes : 0) {
    case 1: return select_elements<uint8_t>(x.raw_data(), out.raw_data(), r.outer, size, idx, n);
    case 2: return select_elements<uint16_t>(x.raw_data(), out.raw_data(), r.outer, size, idx, n);
    case 4: return select_elements<uint32_t>(x.raw_data(), out.raw_data(), r.outer, size, idx, n);
    case 8: return select_elements<uint64_t>(x.raw_data(), out.raw_data(), r.outer, size, idx, n);
    default: break;
  }
  const char* src = static_cast<const char*>(x.raw_data());
  char* dst = static_cast<char*>(out.raw_data());
  kernels::parallel_range(r.outer * n, [&](int64_t b, int64_t e) {
    for (int64_t k = b; k < e; ++k) {
      int64_t o = k / n, j = k % n;
      std::memcpy(dst + size_t(k) * row_bytes, src + size_t(o * size + idx[j]) * row_bytes, row_bytes);
    }
  }, kernels::grain_for(r.inner));
}

}  // namespace

BATON_OP(gather_op, "gather")
    .inputs(2)
    .int_attr("dim")
    .fusion(Fusion::Injective)
    .infer([](const InferContext& c) {
      require_index(c, 1);
      check_gather_shapes(c, c.input(0), c.input(1));
      return TensorMeta{c.input(0).dtype(), c.input(1).shape()};
    })
    .params(input_dim_param)
    .cpu([](const KernelContext& c) {
      const Tensor &x = c.input(0), &out = c.output();
      const int64_t dim = c.params<int64_t>();
      Tensor index = checked_indices(c, c.input(1), x.shape()[size_t(dim)], "the gathered dim");
      const int64_t* idx = index.data<int64_t>();
      const auto [step, at] = indexed_steps(x.strides(), size_t(dim));
      kernels::visit_dtype(x.dtype(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        const T* px = static_cast<const T*>(x.raw_data());
        T* po = out.data<T>();
        for_each_row_at(out.shape(), x.strides(), size_t(dim), true, [&](int64_t first, int64_t base, int64_t n) {
          for (int64_t k = 0; k < n; ++k) po[first + k] = px[base + k * step + idx[first + k] * at];
        });
      });
    })
    .grad([](const GradContext& c) {
      const int64_t dim = c.attrs.i("dim");
      return Grads{scatter_add(scatter_base(c.input(0), c.loc), dim, c.input(1), c.grad_output(), c.loc), {}};
    })
    .onnx("GatherElements");

// Inputs: base, index, src (src has index's shape).
BATON_OP(scatter_add_op, "scatter_add")
    .inputs(3)
    .int_attr("dim")
    .fusion(Fusion::Opaque)
    .infer([](const InferContext& c) {
      require_index(c, 1);
      if (c.input(2).dtype() != c.input(0).dtype()) c.fail<DTypeError>("src must have base's dtype");
      check_gather_shapes(c, c.input(0), c.input(1));
      if (!(c.input(2).shape() == c.input(1).shape())) c.fail("src must have the index's shape");
      return same_as_input(c);
    })
    .params(input_dim_param)
    .cpu([](const KernelContext& c) {
      const Tensor &out = c.output(), &index = c.input(1);
      const int64_t dim = c.params<int64_t>();
      Tensor checked = checked_indices(c, index, out.shape()[size_t(dim)], "the scattered dim");
      const int64_t* idx = checked.data<int64_t>();
      kernels::copy_into(out, c.input(0));
      Tensor src = dense(c.input(2));
      const auto [step, at] = indexed_steps(out.strides(), size_t(dim));
      // Each output element takes its additions from one thread, in index order: where dim
      // is the last, rows go over threads (each adds into a row of its own); elsewhere
      // ranges of the last dim's columns do (a column adds into a column of its own).
      const bool by_rows = dim == out.dim() - 1;
      const int64_t columns = by_rows || index.dim() == 0 ? 1 : index.shape().back();
      kernels::visit_numeric(out.dtype(), "scatter_add", [&](auto tag) {
        using T = typename decltype(tag)::type;
        T* po = out.data<T>();
        const T* ps = src.data<T>();
        kernels::parallel_range(columns, [&](int64_t c0, int64_t c1) {
          for_each_row_at(index.shape(), out.strides(), size_t(dim), by_rows, [&](int64_t first, int64_t base, int64_t n) {
            const int64_t k0 = by_rows ? 0 : c0, k1 = by_rows ? n : c1;
            for (int64_t k = k0; k < k1; ++k) po[base + k * step + idx[first + k] * at] += ps[first + k];
          });
        }, kernels::grain_for(index.numel() / std::max<int64_t>(columns, 1)));
      });
    })
    .grad([](const GradContext& c) {
      const Tensor& g = c.grad_output();
      return Grads{g, {}, c.needs_grad(2) ? gather(g, c.attrs.i("dim"), c.input(1), c.loc) : Tensor{}};
    })
    .onnx("ScatterElements");

BATON_OP(index_select_op, "index_select")
    .inputs(2)
    .int_attr("dim")
    .fusion(Fusion::Injective)
    .strings()
    .infer([](const InferContext& c) {
      require_index(c, 1);
      if (c.input(0).dim() == 0) c.fail("cannot index a 0-d tensor");
      const int64_t dim = normalize_dim(c.attrs.i("dim"), c.input(0).dim(), c);
      if (c.input(1).dim() > 1) c.fail("index must be 1-D");
      Shape out = c.input(0).shape();
      out[size_t(dim)] = c.input(1).numel();
      return TensorMeta{c.input(0).dtype(), out};
    })
    .params(input_dim_param)
    .cpu([](const KernelContext& c) {
      Tensor x = dense(c.input(0));
      const int64_t dim = c.params<int64_t>();
      select_rows(x, c.output(), dim, checked_indices(c, c.input(1), x.shape()[size_t(dim)], "the selected dim"));
    })
    .grad([](const GradContext& c) {
      return Grads{index_add(scatter_base(c.input(0), c.loc), c.attrs.i("dim"), c.input(1), c.grad_output(),
                             c.loc), {}};
    })
    .onnx("Gather");

// Inputs: base, index (1-D), src (base's shape with index.numel() at dim).
BATON_OP(index_add_op, "index_add")
    .inputs(3)
    .int_attr("dim")
    .fusion(Fusion::Opaque)
    .infer([](const InferContext& c) {
      require_index(c, 1);
      if (c.input(2).dtype() != c.input(0).dtype()) c.fail<DTypeError>("src must have base's dtype");
      if (c.input(0).dim() == 0) c.fail("cannot index a 0-d tensor");
      const int64_t dim = normalize_dim(c.attrs.i("dim"), c.input(0).dim(), c);
      if (c.input(1).dim() > 1) c.fail("index must be 1-D");
      Shape expected = c.input(0).shape();
      expected[size_t(dim)] = c.input(1).numel();
      if (!(c.input(2).shape() == expected)) c.fail("src must have shape ", expected);
      return same_as_input(c);
    })
    .params(input_dim_param)
    .cpu([](const KernelContext& c) {
      const Tensor& out = c.output();
      kernels::copy_into(out, c.input(0));
      const int64_t dim = c.params<int64_t>();
      const int64_t size = out.shape()[size_t(dim)];
      Tensor index = checked_indices(c, c.input(1), size, "the indexed dim");
      const int64_t* idx = index.data<int64_t>();
      Rows r = rows_around(out.shape(), dim);
      Tensor src = dense(c.input(2));
      const int64_t n = index.numel();
      kernels::visit_numeric(out.dtype(), "index_add", [&](auto tag) {
        using T = typename decltype(tag)::type;
        T* po = out.data<T>();
        const T* ps = src.data<T>();
        if (r.inner == 0) return;  // nothing to add into (and no row to divide by)
        // Threads take ranges of the (outer, inner) positions: each output element adds its
        // rows in index order, on one thread.
        kernels::parallel_range(r.outer * r.inner, [&](int64_t begin, int64_t end) {
          for (int64_t o = begin / r.inner; o * r.inner < end; ++o) {
            const int64_t k0 = std::max(begin - o * r.inner, int64_t(0)), k1 = std::min(end - o * r.inner, r.inner);
            for (int64_t j = 0; j < n; ++j) {
              T* d = po + (o * size + idx[j]) * r.inner;
              const T* s = ps + (o * n + j) * r.inner;
              for (int64_t k = k0; k < k1; ++k) d[k] += s[k];
            }
          }
        }, kernels::grain_for(n));
      });
    })
    .grad([](const GradContext& c) {
      const Tensor& g = c.grad_output();
      return Grads{g, {}, c.needs_grad(2) ? index_select(g, c.attrs.i("dim"), c.input(1), c.loc) : Tensor{}};
    });

// Inputs: weight [num, dim...], indices (any shape) -> indices.shape + weight.shape[1:].
BATON_OP(embedding_op, "embedding")
    .inputs(2)
    .fusion(Fusion::Injective)
    .infer([](const InferContext& c) {
      require_index(c, 1);
      if (c.input(0).dim() < 1) c.fail("weight must have at least one dim");
      Shape out = c.input(1).shape();
      for (size_t d = 1; d < size_t(c.input(0).dim()); ++d) out.push_back(c.input(0).shape()[d]);
      return TensorMeta{c.input(0).dtype(), out};
    })
    .cpu([](const KernelContext& c) {
      Tensor w = dense(c.input(0));
      select_rows(w, c.output(), 0, checked_indices(c, c.input(1), w.shape()[0], "the embedding rows"));
    })
    .grad([](const GradContext& c) {
      const Tensor& w = c.input(0);
      Shape rows = w.shape();
      rows[0] = c.input(1).numel();
      Tensor flat = reshape(c.input(1), {c.input(1).numel()}, c.loc);
      return Grads{index_add(scatter_base(w, c.loc), 0, flat, reshape(c.grad_output(), rows, c.loc), c.loc), {}};
    })
    .onnx("Gather");

}  // namespace baton::ops

namespace baton {

static Tensor as_index(const Tensor& index, SourceLoc loc) {
  return index.defined() && index.dtype() == i32 ? cast(index, i64, loc) : index;
}

Tensor gather(const Tensor& x, int64_t dim, const Tensor& index, SourceLoc loc) {
  return ops::call(ops::gather_op, {x, as_index(index, loc)}, {{"dim", dim}}, loc);
}

Tensor scatter_add(const Tensor& base, int64_t dim, const Tensor& index, const Tensor& src,
                   SourceLoc loc) {
  auto [b, s] = ops::promote(base, src, loc);
  return ops::call(ops::scatter_add_op, {b, as_index(index, loc), s}, {{"dim", dim}}, loc);
}

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index, SourceLoc loc) {
  return ops::call(ops::index_select_op, {x, as_index(index, loc)}, {{"dim", dim}}, loc);
}

Tensor index_add(const Tensor& base, int64_t dim, const Tensor& index, const Tensor& src,
                 SourceLoc loc) {
  auto [b, s] = ops::promote(base, src, loc);
  return ops::call(ops::index_add_op, {b, as_index(index, loc), s}, {{"dim", dim}}, loc);
}

Tensor embedding(const Tensor& weight, const Tensor& indices, SourceLoc loc) {
  return ops::call(ops::embedding_op, {weight, as_index(indices, loc)}, {}, loc);
}

}  // namespace baton
