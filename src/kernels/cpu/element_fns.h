// The element functions of the element-wise ops, one definition each. Every op's own kernel
// (src/ops/unary.cpp, activation.cpp, binary.cpp) and fused_elementwise's instructions
// (fused_elementwise.cpp) apply these same functors, so a fused chain computes each element
// bit for bit as the separate ops do (tests/ops/fused_elementwise_test.cpp checks it).
//
// Each call operator is always inlined: one that is not is a call per element, and the
// loop around it stays scalar (GCC leaves the vm:: polynomials out of line otherwise).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numbers>
#include <type_traits>

#include "kernels/cpu/vmath.h"

#define BATON_ELEMENT_FN __attribute__((always_inline))

namespace baton::kernels::ew {

// Unary, any numeric type.
struct Neg {
  template <class T> BATON_ELEMENT_FN T operator()(T x) const { return -x; }
};
struct Abs {
  template <class T> BATON_ELEMENT_FN T operator()(T x) const {
    if constexpr (std::is_floating_point_v<T>) return std::abs(x);  // abs(-0.0) = 0.0
    else return x < 0 ? T(-x) : x;
  }
};
// x < 0 rather than x > 0 so that NaN propagates, as in PyTorch.
struct Relu {
  template <class T> BATON_ELEMENT_FN T operator()(T x) const { return x < 0 ? T(0) : x; }
};

// Rounding, any numeric type (integers are already whole). Round is ONNX's and numpy's:
// halves go to the even neighbour (nearbyint under the default rounding mode).
struct Floor {
  template <class T> BATON_ELEMENT_FN T operator()(T x) const {
    if constexpr (std::is_floating_point_v<T>) return std::floor(x);
    else return x;
  }
};
struct Ceil {
  template <class T> BATON_ELEMENT_FN T operator()(T x) const {
    if constexpr (std::is_floating_point_v<T>) return std::ceil(x);
    else return x;
  }
};
struct Round {
  template <class T> BATON_ELEMENT_FN T operator()(T x) const {
    if constexpr (std::is_floating_point_v<T>) return std::nearbyint(x);
    else return x;
  }
};

// Unary, floating point.
struct Exp {
  template <class T> BATON_ELEMENT_FN T operator()(T x) const { return vm::exp(x); }
};
struct Log {
  template <class T> BATON_ELEMENT_FN T operator()(T x) const { return vm::log(x); }
};
struct Sqrt {
  template <class T> BATON_ELEMENT_FN T operator()(T x) const { return std::sqrt(x); }
};
struct Rsqrt {
  template <class T> BATON_ELEMENT_FN T operator()(T x) const { return T(1) / std::sqrt(x); }
};
// f's values over n contiguous floats, where `moderate` gives them wherever
// vm::is_moderate(x) (sin_moderate for sin): that cheaper loop first; a chunk of 256 with
// an element outside (none in most tensors) is then computed again by f, all of it, which
// keeps that loop vectorized too. Through a buffer, so d may be a.
template <class Moderate, class Full>
BATON_ELEMENT_FN inline void map_moderate_first(float* d, const float* a, int64_t n, Moderate moderate, Full f) {
  constexpr int64_t kChunk = 256;
  float buf[kChunk];
  for (int64_t b = 0; b < n; b += kChunk) {
    const int64_t m = std::min(kChunk, n - b);
    const float* x = a + b;
    int outside = 0;
    for (int64_t i = 0; i < m; ++i) {
      buf[i] = moderate(x[i]);
      outside |= int(!vm::is_moderate(x[i]));
    }
    if (outside) {
      for (int64_t i = 0; i < m; ++i) buf[i] = f(x[i]);
    }
    std::memcpy(d + b, buf, size_t(m) * sizeof(float));
  }
}

// Element functions whose f32 values `moderate` gives wherever vm::is_moderate(x) (sin,
// cos): block(d, a, n), the same values over n contiguous elements, faster
// (map_moderate_first); other types element by element.
template <class Self, float (*moderate)(float)>
struct ModerateFirst {
  template <class T> BATON_ELEMENT_FN void block(T* d, const T* a, int64_t n) const {
    const Self& f = static_cast<const Self&>(*this);
    if constexpr (std::is_same_v<T, float>) {
      map_moderate_first(d, a, n, [](float x) BATON_ELEMENT_FN { return moderate(x); }, f);
    } else {
      for (int64_t i = 0; i < n; ++i) d[i] = f(a[i]);
    }
  }
};
struct Sin : ModerateFirst<Sin, vm::sin_moderate> {
  template <class T> BATON_ELEMENT_FN T operator()(T x) const { return vm::sin(x); }
};
struct Cos : ModerateFirst<Cos, vm::cos_moderate> {
  template <class T> BATON_ELEMENT_FN T operator()(T x) const { return vm::cos(x); }
};
struct Tan {
  template <class T> BATON_ELEMENT_FN T operator()(T x) const { return std::tan(x); }
};
struct Asin {
  template <class T> BATON_ELEMENT_FN T operator()(T x) const { return std::asin(x); }
};
struct Acos {
  template <class T> BATON_ELEMENT_FN T operator()(T x) const { return std::acos(x); }
};
struct Atan {
  template <class T> BATON_ELEMENT_FN T operator()(T x) const { return std::atan(x); }
};
struct Sinh {
  template <class T> BATON_ELEMENT_FN T operator()(T x) const { return std::sinh(x); }
};
struct Cosh {
  template <class T> BATON_ELEMENT_FN T operator()(T x) const { return std::cosh(x); }
};
struct Asinh {
  template <class T> BATON_ELEMENT_FN T operator()(T x) const { return std::asinh(x); }
};
struct Acosh {
  template <class T> BATON_ELEMENT_FN T operator()(T x) const { return std::acosh(x); }
};
struct Atanh {
  template <class T> BATON_ELEMENT_FN T operator()(T x) const { return std::atanh(x); }
};
struct Tanh {
  template <class T> BATON_ELEMENT_FN T operator()(T x) const { return vm::tanh(x); }
};
struct Erf {
  template <class T> BATON_ELEMENT_FN T operator()(T x) const { return vm::erf(x); }
};
struct Sigmoid {
  template <class T> BATON_ELEMENT_FN T operator()(T x) const { return vm::sigmoid(x); }
};
// The exact form x * Phi(x) (PyTorch's default approximate="none").
struct Gelu {
  template <class T> BATON_ELEMENT_FN T operator()(T x) const {
    return x * (T(0.5) * (T(1) + vm::erf(x * T(std::numbers::sqrt2 / 2))));
  }
};
// The tanh form 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))) (PyTorch's
// approximate="tanh", GPT-2's and BERT's).
struct GeluTanh {
  template <class T> BATON_ELEMENT_FN T operator()(T x) const {
    const T u = T(0.7978845608028654) * (x + T(0.044715) * x * x * x);  // sqrt(2 / pi) = 0.79788...
    return T(0.5) * x * (T(1) + vm::tanh(u));
  }
};
struct Silu {
  template <class T> BATON_ELEMENT_FN T operator()(T x) const { return x * vm::sigmoid(x); }
};
// log(1 + e^x) written as max(x, 0) + log1p(e^-|x|) so it neither overflows nor loses
// precision; PyTorch's threshold (x > 20 -> x) agrees to within e^-20.
struct Softplus {
  template <class T> BATON_ELEMENT_FN T operator()(T x) const {
    return (x > T(0) ? x : T(0)) + vm::log1p_unit(vm::exp(-std::abs(x)));
  }
};

// Unary with parameters, of the element type T.
template <class T>
struct LeakyRelu {
  T slope;
  BATON_ELEMENT_FN T operator()(T x) const { return vm::select(x > T(0), x, x * slope); }
};
template <class T>
struct Elu {
  T alpha;
  BATON_ELEMENT_FN T operator()(T x) const { return vm::select(x > T(0), x, alpha * (vm::exp(x) - T(1))); }
};
// NaN stays NaN: both comparisons are false for it.
template <class T>
struct Clamp {
  T lo, hi;
  BATON_ELEMENT_FN T operator()(T x) const { return x < lo ? lo : (x > hi ? hi : x); }
};

// Binary. NaN propagates from either side of maximum and minimum, as in PyTorch (x != x
// only for NaN).
struct Maximum {
  template <class T> BATON_ELEMENT_FN T operator()(T a, T b) const { return (a > b || a != a) ? a : b; }
};
struct Minimum {
  template <class T> BATON_ELEMENT_FN T operator()(T a, T b) const { return (a < b || a != a) ? a : b; }
};

// The gradient of relu, given relu's result: g where the result is positive.
struct ReluBackward {
  template <class T> BATON_ELEMENT_FN T operator()(T g, T y) const { return y > T(0) ? g : T(0); }
};

// The gradients of the smooth activations, each the output gradient g times the
// derivative, at the input x or from the result y (whichever the derivative needs less of).
struct SigmoidBackward {  // (g, y): g y (1 - y)
  template <class T> BATON_ELEMENT_FN T operator()(T g, T y) const { return g * (y * (T(1) - y)); }
};
struct TanhBackward {  // (g, y): g (1 - y^2)
  template <class T> BATON_ELEMENT_FN T operator()(T g, T y) const { return g * (T(1) - y * y); }
};
struct GeluBackward {  // (g, x): g (Phi(x) + x phi(x)); Phi's erf and phi share e^(-x^2 / 2)
  template <class T> BATON_ELEMENT_FN T operator()(T g, T x) const {
    const T z = x * T(std::numbers::sqrt2 / 2);
    const T e = vm::exp(-z * z);
    const T cdf = T(0.5) * (T(1) + vm::erf_given(z, e));
    const T pdf = e * T(std::numbers::inv_sqrtpi / std::numbers::sqrt2);
    return g * (cdf + x * pdf);
  }
};
struct GeluTanhBackward {  // (g, x): g (0.5 (1 + t) + 0.5 x (1 - t^2) u'(x)), t = tanh(u(x))
  template <class T> BATON_ELEMENT_FN T operator()(T g, T x) const {
    const T x2 = x * x;
    const T t = vm::tanh(T(0.7978845608028654) * (x + T(0.044715) * x2 * x));
    const T du = T(0.7978845608028654) * (T(1) + T(3 * 0.044715) * x2);
    return g * (T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * du);
  }
};
struct SiluBackward {  // (g, x): g s (1 + x (1 - s)), s = sigmoid(x)
  template <class T> BATON_ELEMENT_FN T operator()(T g, T x) const {
    const T s = vm::sigmoid(x);
    return g * (s * (T(1) + x * (T(1) - s)));
  }
};

}  // namespace baton::kernels::ew
