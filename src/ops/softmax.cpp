// softmax and log_softmax over one dim, numerically stable (the row max is subtracted
// before exp). The last-dim case runs row by row on contiguous data; other dims process
// all the columns of a [n, inner] block together so the loops still run along memory.
#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "kernels/cpu/copy.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/reduce.h"
#include "kernels/cpu/vec16.h"
#include "ops/reduce.h"

namespace baton::ops {
namespace {

template <class T>
T max_of(T a, T b) { return b > a ? b : a; }

// exp(x) for x <= 0 (softmax shifts by the max first), branch-free so loops over it
// vectorize, unlike std::exp. x = k ln2 + r with |r| <= ln2/2; e^r by its Taylor series
// to r^7 (truncation < 6e-9, below float precision); 2^k built in the exponent bits.
// Below -87 (where e^x is a float denormal) it returns 0; NaN stays NaN.
[[gnu::always_inline]] inline float exp_nonpositive(float x) {
  const float magic = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  const float xc = std::max(x, -87.0f);  // NaN stays NaN
  const float t = xc * 1.44269504088896341f + magic;
  const float k = t - magic;
  const int32_t ki = std::bit_cast<int32_t>(t) - std::bit_cast<int32_t>(magic);
  const float r = (xc - k * 0.693359375f) + k * 2.12194440e-4f;  // ln2 split in two parts
  float p = 1.0f / 5040;
  p = p * r + 1.0f / 720;
  p = p * r + 1.0f / 120;
  p = p * r + 1.0f / 24;
  p = p * r + 1.0f / 6;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const float scale = std::bit_cast<float>((ki + 127) << 23);
  return p * scale * float(x >= -87.0f);  // a mask, not a branch (NaN * 0 is NaN)
}
inline double exp_nonpositive(double x) { return std::exp(x); }

// y[i] = exp(x[i] - m), compiled for AVX-512: 16 floats a vector where the library's
// baseline (x86-64-v3) gives 8, the same operations on each (the same bits).
__attribute__((target("avx512f"))) void exp_shifted_wide(const float* x, float* y, int64_t n, float m) {
  for (int64_t i = 0; i < n; ++i) y[i] = exp_nonpositive(x[i] - m);
}

template <class T>
void exp_shifted(const T* x, T* y, int64_t n, T m) {
  if constexpr (std::is_same_v<T, float>)
    if (kernels::kHasAvx512) return exp_shifted_wide(x, y, n, m);
  for (int64_t i = 0; i < n; ++i) y[i] = exp_nonpositive(x[i] - m);
}

template <class T, bool kLog>
void softmax_row(const T* x, T* y, int64_t n) {
  const T m = kernels::fold_row<T>(x, n, -std::numeric_limits<T>::infinity(), max_of<T>);
  exp_shifted(x, y, n, m);
  const T s = kernels::sum_row<T>(y, n);
  if constexpr (kLog) {
    const T log_s = std::log(s);  // (x - m) first: exact for nearby values, unlike x - (m + log s)
    for (int64_t i = 0; i < n; ++i) y[i] = (x[i] - m) - log_s;
  } else {
    const T inv = T(1) / s;
    for (int64_t i = 0; i < n; ++i) y[i] *= inv;
  }
}

// One [n, inner] block: softmax down each of the inner columns.
template <class T, bool kLog>
void softmax_columns(const T* x, T* y, int64_t n, int64_t inner, std::vector<T>& m,
                     std::vector<T>& s) {
  m.assign(size_t(inner), -std::numeric_limits<T>::infinity());
  s.assign(size_t(inner), T(0));
  for (int64_t r = 0; r < n; ++r)
    for (int64_t j = 0; j < inner; ++j) m[j] = max_of(m[j], x[r * inner + j]);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t j = 0; j < inner; ++j) {
      T e = exp_nonpositive(x[r * inner + j] - m[j]);
      y[r * inner + j] = e;
      s[j] += e;
    }
  for (int64_t j = 0; j < inner; ++j) s[j] = kLog ? std::log(s[j]) : T(1) / s[j];
  for (int64_t r = 0; r < n; ++r)
    for (int64_t j = 0; j < inner; ++j) {
      T& v = y[r * inner + j];
      v = kLog ? (x[r * inner + j] - m[j]) - s[j] : v * s[j];
    }
}

template <bool kLog>
void softmax_kernel(const KernelContext& c) {
  kernels::visit_float(c.output().dtype(), c.op_name().c_str(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    Tensor x = kernels::dense(c.input(0));
    const kernels::Strip& s = c.params<kernels::Strip>();
    const T* in = x.data<T>();
    T* out = c.output().data<T>();
    const int64_t block = s.n * s.inner;
    const int64_t grain = kernels::grain_for(block);
    kernels::parallel_range(
        s.outer,
        [&](int64_t b, int64_t e) {
          std::vector<T> m, sums;
          for (int64_t o = b; o < e; ++o) {
            if (s.inner == 1) softmax_row<T, kLog>(in + o * block, out + o * block, s.n);
            else softmax_columns<T, kLog>(in + o * block, out + o * block, s.n, s.inner, m, sums);
          }
        },
        grain);
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

}  // namespace

BATON_OP(softmax_op, "softmax")
    .inputs(1)
    .int_attr("dim")
    .fusion(Fusion::Reduction)
    .infer(softmax_infer)
    .params(softmax_strip)
    .cpu(softmax_kernel<false>)
    .grad([](const GradContext& c) {
      const Tensor &y = c.output(), &g = c.grad_output();
      return Grads{y * (g - sum(g * y, dim_of(c), /*keepdim=*/true))};
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
      const Tensor &y = c.output(), &g = c.grad_output();
      return Grads{g - exp(y) * sum(g, dim_of(c), /*keepdim=*/true)};
    })
    .cost(softmax_cost)
    .onnx("LogSoftmax");

}  // namespace baton::ops

namespace baton {

Tensor softmax(const Tensor& x, int64_t dim, SourceLoc loc) {
  return ops::call(ops::softmax_op, {ops::float_input(x, loc)}, {{"dim", dim}}, loc);
}

Tensor log_softmax(const Tensor& x, int64_t dim, SourceLoc loc) {
  return ops::call(ops::log_softmax_op, {ops::float_input(x, loc)}, {{"dim", dim}}, loc);
}

}  // namespace baton
