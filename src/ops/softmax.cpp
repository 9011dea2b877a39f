// softmax and log_softmax over one dim, numerically stable (the row max is subtracted
// before exp), and their gradients (softmax_backward, log_softmax_backward: one pass each
// where the formulas written with ops take four or five). The last-dim case runs row by
// row on contiguous data; other dims process the columns of an [n, inner] block together
// so the loops still run along memory.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu/copy.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/exp_shifted.h"
#include "kernels/cpu/reduce.h"
#include "ops/reduce.h"

namespace baton::ops {
namespace {

template <class T, bool kLog>
void softmax_row(const T* x, T* y, int64_t n) {
  const T m = kernels::row_max(x, n);
  kernels::exp_shifted(x, y, n, m);
  const T s = kernels::sum_row<T>(y, n);
  if constexpr (kLog) {
    const T log_s = std::log(s);  // (x - m) first: exact for nearby values, unlike x - (m + log s)
    for (int64_t i = 0; i < n; ++i) y[i] = (x[i] - m) - log_s;
  } else {
    const T inv = T(1) / s;
    for (int64_t i = 0; i < n; ++i) y[i] *= inv;
  }
}

// `width` columns of an [n, stride] block (x and y point at the first): softmax down each.
template <class T, bool kLog>
void softmax_columns(const T* x, T* y, int64_t n, int64_t width, int64_t stride, std::vector<T>& m,
                     std::vector<T>& s) {
  m.assign(size_t(width), -std::numeric_limits<T>::infinity());
  s.assign(size_t(width), T(0));
  for (int64_t r = 0; r < n; ++r)
    for (int64_t j = 0; j < width; ++j) m[j] = kernels::max_of(m[j], x[r * stride + j]);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t j = 0; j < width; ++j) {
      T e = kernels::exp_nonpositive(x[r * stride + j] - m[j]);
      y[r * stride + j] = e;
      s[j] += e;
    }
  for (int64_t j = 0; j < width; ++j) s[j] = kLog ? std::log(s[j]) : T(1) / s[j];
  for (int64_t r = 0; r < n; ++r)
    for (int64_t j = 0; j < width; ++j) {
      T& v = y[r * stride + j];
      v = kLog ? (x[r * stride + j] - m[j]) - s[j] : v * s[j];
    }
}

// Columns a work item takes at most: a [1024, 1024] softmax over dim 0 is one block,
// which would otherwise run on one thread.
constexpr int64_t kColumnChunk = 256;

// Calls chunk(at, width, scratch) for the work items of the strip s ([outer, n, inner]
// around the dim), items over threads: each outer block's columns in chunks of up to
// kColumnChunk (`at`: the offset of the chunk's first element; width 1 where inner is 1,
// a row). Each thread has its own Scratch. At least one chunk per block, so a block of no
// columns is one item of width 0.
template <class Scratch, class Chunk>
void for_each_column_chunk(const kernels::Strip& s, Chunk chunk) {
  const int64_t block = s.n * s.inner, chunks = std::max<int64_t>(1, (s.inner + kColumnChunk - 1) / kColumnChunk);
  kernels::parallel_range(
      s.outer * chunks,
      [&](int64_t b, int64_t e) {
        Scratch scratch;
        for (int64_t item = b; item < e; ++item) {
          const int64_t j0 = item % chunks * kColumnChunk;
          chunk(item / chunks * block + j0, std::min(kColumnChunk, s.inner - j0), scratch);
        }
      },
      kernels::grain_for(block / chunks));
}

template <bool kLog>
void softmax_kernel(const KernelContext& c) {
  kernels::visit_float(c.output().dtype(), c.op_name().c_str(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    Tensor x = kernels::dense(c.input(0));
    const kernels::Strip& s = c.params<kernels::Strip>();
    const T* in = x.data<T>();
    T* out = c.output().data<T>();
    struct Scratch {
      std::vector<T> m, sums;
    };
    for_each_column_chunk<Scratch>(s, [&](int64_t at, int64_t width, Scratch& scratch) {
      if (s.inner == 1) softmax_row<T, kLog>(in + at, out + at, s.n);
      else softmax_columns<T, kLog>(in + at, out + at, s.n, width, s.inner, scratch.m, scratch.sums);
    });
  });
}

// The kernel's parameters: the input as [outer, n, inner] around the softmax's dim.
kernels::Strip softmax_strip(const CallContext& c) {
  return kernels::strip_around(c.input(0).shape(), normalize_dim(c.attrs.i("dim"), c.input(0).dim(), c));
}

TensorMeta softmax_infer(const InferContext& c) {
  require_float(c);
  normalize_dim(c.attrs.i("dim"), c.input(0).dim(), c);
  return same_as_input(c);
}

Cost softmax_cost(const CallContext& c, std::span<const TensorMeta>) {
  double n = double(c.input(0).numel());
  return {4 * n, 2 * n * double(dtype_size(c.input(0).dtype()))};
}

Dims dim_of(const GradContext& c) { return {c.attrs.i("dim")}; }

// The gradients, given the output gradient g and the output y (their sum s in double):
//   softmax:     dx = y * (g - s), s = sum(g * y);
//   log_softmax: dx = g - exp(y) * s, s = sum(g) (y <= 0, so exp(y) never overflows).
template <class T, bool kLog>
T backward_term(T g, T y) {
  return kLog ? g : g * y;
}
template <class T, bool kLog>
T backward_of(T g, T y, T s) {
  return kLog ? g - kernels::exp_nonpositive(y) * s : y * (g - s);
}

template <class T, bool kLog>
void softmax_backward_row(const T* g, const T* y, T* dx, int64_t n) {
  const T s = T(kernels::sum_terms<double>(n, [&](int64_t i) { return double(backward_term<T, kLog>(g[i], y[i])); }));
  for (int64_t j = 0; j < n; ++j) dx[j] = backward_of<T, kLog>(g[j], y[j], s);
}

// `width` columns of an [n, stride] block (g, y and dx point at the first).
template <class T, bool kLog>
void softmax_backward_columns(const T* g, const T* y, T* dx, int64_t n, int64_t width, int64_t stride,
                              std::vector<double>& sums) {
  sums.assign(size_t(width), 0.0);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t j = 0; j < width; ++j) sums[j] += double(backward_term<T, kLog>(g[r * stride + j], y[r * stride + j]));
  for (int64_t r = 0; r < n; ++r)
    for (int64_t j = 0; j < width; ++j)
      dx[r * stride + j] = backward_of<T, kLog>(g[r * stride + j], y[r * stride + j], T(sums[j]));
}

template <bool kLog>
void softmax_backward_kernel(const KernelContext& c) {
  kernels::visit_float(c.output().dtype(), c.op_name().c_str(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    Tensor g = kernels::dense(c.input(0)), y = kernels::dense(c.input(1));
    const kernels::Strip& s = c.params<kernels::Strip>();
    const T *pg = g.data<T>(), *py = y.data<T>();
    T* out = c.output().data<T>();
    for_each_column_chunk<std::vector<double>>(s, [&](int64_t at, int64_t width, std::vector<double>& sums) {
      if (s.inner == 1) softmax_backward_row<T, kLog>(pg + at, py + at, out + at, s.n);
      else softmax_backward_columns<T, kLog>(pg + at, py + at, out + at, s.n, width, s.inner, sums);
    });
  });
}

TensorMeta softmax_backward_infer(const InferContext& c) {
  require_float(c);
  require_same_dtype(c);
  if (!(c.input(0).shape() == c.input(1).shape()))
    c.fail("the gradient ", c.input(0).shape(), " and the output ", c.input(1).shape(), " must have one shape");
  normalize_dim(c.attrs.i("dim"), c.input(0).dim(), c);
  return same_as_input(c);
}

}  // namespace

BATON_OP(softmax_op, "softmax")
    .inputs(1)
    .int_attr("dim")
    .fusion(Fusion::Reduction)
    .infer(softmax_infer)
    .params(softmax_strip)
    .cpu(softmax_kernel<false>)
    .grad([](const GradContext& c) {
      return Grads{softmax_backward(c.grad_output(), c.output(), c.attrs.i("dim"), c.loc)};
    })
    .cost(softmax_cost)
    .onnx("Softmax");

BATON_OP(log_softmax_op, "log_softmax")
    .inputs(1)
    .int_attr("dim")
    .fusion(Fusion::Reduction)
    .infer(softmax_infer)
    .params(softmax_strip)
    .cpu(softmax_kernel<true>)
    .grad([](const GradContext& c) {
      return Grads{log_softmax_backward(c.grad_output(), c.output(), c.attrs.i("dim"), c.loc)};
    })
    .cost(softmax_cost)
    .onnx("LogSoftmax");

// Inputs: the output gradient g and softmax's output y. With s = sum(g * y) and the
// incoming gradient h: d/dg = softmax_backward(h, y); d/dy = h * (g - s) - g * sum(h * y).
BATON_OP(softmax_backward_op, "softmax_backward")
    .inputs(2)
    .int_attr("dim")
    .fusion(Fusion::Opaque)
    .infer(softmax_backward_infer)
    .params(softmax_strip)
    .cpu(softmax_backward_kernel<false>)
    .grad([](const GradContext& c) {
      const Tensor &g = c.input(0), &y = c.input(1), &h = c.grad_output();
      const Dims dims = dim_of(c);
      return Grads{softmax_backward(h, y, c.attrs.i("dim"), c.loc),
                   h * (g - sum(g * y, dims, true)) - g * sum(h * y, dims, true)};
    })
    .cost(softmax_cost)
    .onnx("");  // exported through its forward's gradient, never on its own

// Inputs: the output gradient g and log_softmax's output y. With s = sum(g) and the
// incoming gradient h: d/dg = h - sum(h * exp(y)); d/dy = -h * exp(y) * s.
BATON_OP(log_softmax_backward_op, "log_softmax_backward")
    .inputs(2)
    .int_attr("dim")
    .fusion(Fusion::Opaque)
    .infer(softmax_backward_infer)
    .params(softmax_strip)
    .cpu(softmax_backward_kernel<true>)
    .grad([](const GradContext& c) {
      const Tensor &g = c.input(0), &y = c.input(1), &h = c.grad_output();
      const Dims dims = dim_of(c);
      Tensor e = exp(y);
      return Grads{h - sum(h * e, dims, true), -(h * e * sum(g, dims, true))};
    })
    .cost(softmax_cost)
    .onnx("");

Tensor softmax_backward(const Tensor& g, const Tensor& y, int64_t dim, SourceLoc loc) {
  return call(softmax_backward_op, {g, y}, {{"dim", dim}}, loc);
}

Tensor log_softmax_backward(const Tensor& g, const Tensor& y, int64_t dim, SourceLoc loc) {
  return call(log_softmax_backward_op, {g, y}, {{"dim", dim}}, loc);
}

}  // namespace baton::ops

namespace baton {

Tensor softmax(const Tensor& x, int64_t dim, SourceLoc loc) {
  return ops::call(ops::softmax_op, {ops::float_input(x, loc)}, {{"dim", dim}}, loc);
}

Tensor log_softmax(const Tensor& x, int64_t dim, SourceLoc loc) {
  return ops::call(ops::log_softmax_op, {ops::float_input(x, loc)}, {{"dim", dim}}, loc);
}

}  // namespace baton
