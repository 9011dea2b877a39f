// The one loop behind every element-wise kernel (STYLE.md "one-line elementwise kernels").
//
// map_elements(out, f, a, b) computes out[i] = f(a[i], b[i]) for a freshly allocated `out`
// (contiguous, or channels-last where a plan chose that layout), with numpy broadcasting
// of the inputs. Three paths:
//   - all inputs of out's shape and layout: one flat loop the compiler vectorizes (f32 to
//     f32 on AVX-512 machines: in 16 lanes, map_floats_wide);
//   - two inputs, one of a single element: that element held in a register;
//   - anything else (broadcast, transposed, sliced): dims are coalesced and the innermost
//     row runs with per-operand strides.
// Large tensors split their rows over OpenMP threads; small ones stay on the caller's
// thread (a fork costs more than adding a few thousand numbers).
#pragma once
#include <array>
#include <cstdint>
#include <tuple>
#include <type_traits>
#include <utility>

#include "baton/tensor.h"
#include "core/tensor_impl.h"
#include "kernels/cpu/copy.h"
#include "kernels/cpu/vec16.h"

namespace baton::kernels {

inline constexpr int64_t kParallelGrain = 32768;  // elements per thread, at least

// Thin wrappers so this header needs no <omp.h>.
int omp_threads();
int omp_thread();
// Threads a parallel region would start (omp_get_max_threads), callable outside one.
int max_threads();

// Strides of `t` seen through out_shape (numpy broadcasting; 0 on broadcast dims).
Shape broadcast_strides(const Tensor& t, const Shape& out_shape);

// Shape and per-operand strides with size-1 dims dropped and mergeable dims merged.
template <size_t N>
struct StridedLayout {
  Shape shape;
  std::array<Shape, N> strides;
};
template <size_t N>
StridedLayout<N> coalesce(const Shape& shape, const std::array<Shape, N>& strides);

// Calls row(offsets, count, inner_strides) for every innermost row of the layout, with
// offsets in elements for each operand. Rows may run on several threads.
template <size_t N, class Row>
void for_each_row(const StridedLayout<N>& layout, Row&& row) {
  const Shape& shape = layout.shape;
  const size_t rank = shape.size();
  if (rank == 0) {
    std::array<int64_t, N> zero{}, ones{};
    row(zero, int64_t(1), ones);
    return;
  }
  const int64_t inner = shape[rank - 1];
  std::array<int64_t, N> inner_strides;
  for (size_t k = 0; k < N; ++k) inner_strides[k] = layout.strides[k][rank - 1];
  int64_t rows = 1;
  for (size_t d = 0; d + 1 < rank; ++d) rows *= shape[d];

  auto run_rows = [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      std::array<int64_t, N> offsets{};
      int64_t rem = r;
      for (size_t d = rank - 1; d-- > 0;) {
        int64_t idx = rem % shape[d];
        rem /= shape[d];
        for (size_t k = 0; k < N; ++k) offsets[k] += idx * layout.strides[k][d];
      }
      row(offsets, inner, inner_strides);
    }
  };
  const int64_t total = rows * inner;
  if (total < 2 * kParallelGrain || rows < 2) {
    run_rows(0, rows);
    return;
  }
#pragma omp parallel
  {
    int nt = omp_threads(), t = omp_thread();
    int64_t chunk = (rows + nt - 1) / nt;
    int64_t b = std::min<int64_t>(rows, t * chunk), e = std::min<int64_t>(rows, b + chunk);
    run_rows(b, e);
  }
}

// The grain of a parallel_range over items of `work_per_item` elements each: enough items
// that a thread gets kParallelGrain elements, at least one.
inline int64_t grain_for(int64_t work_per_item) {
  return std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(work_per_item, 1));
}

// Splits [0, n) into per-thread ranges when n is large, else runs body(0, n) here.
template <class Body>
void parallel_range(int64_t n, Body&& body, int64_t grain = kParallelGrain) {
  if (n < 2 * grain) {
    body(int64_t(0), n);
    return;
  }
#pragma omp parallel
  {
    int nt = omp_threads(), t = omp_thread();
    int64_t chunk = (n + nt - 1) / nt;
    int64_t b = std::min<int64_t>(n, t * chunk), e = std::min<int64_t>(n, b + chunk);
    if (b < e) body(b, e);
  }
}

namespace detail {

// Element pointer of t as T*, read from its impl: these loops run once per small plan
// step, where the out-of-line Tensor accessors took a fifth of the step's time
// (docs/PERF.md, plan_step_overhead_us).
template <class T>
T* elements(const Tensor& t) {
  const TensorImpl& impl = *t.impl();
  return static_cast<T*>(impl.storage->data()) + impl.offset;
}

// What a loop loads for an element of type T: a bool is loaded as its byte (0 or 1), which
// as_element compares with 0. GCC leaves loops that load bool scalar (a where over 1M
// floats took 420 us against an add's 100); byte loads vectorize.
template <class T>
using Loaded = std::conditional_t<std::is_same_v<T, bool>, uint8_t, T>;
// The element a loaded value stands for.
template <class T>
[[gnu::always_inline]] inline decltype(auto) as_element(const Loaded<T>& v) {
  if constexpr (std::is_same_v<T, bool>) return v != 0;
  else return (v);  // the element itself, by reference
}

// What a flat loop over out's memory needs to know of it, found once per call.
struct FlatTarget {
  explicit FlatTarget(const Tensor& t)
      : out(t), meta(*t.impl()), contiguous(t.is_contiguous()), dense(contiguous || is_dense(t)) {}
  // Whether a flat loop visits t and out element by element alike: out is stored densely
  // (contiguous, channels-last) and t has its shape and layout.
  bool visits_alike(const Tensor& t) const {
    const TensorImpl& in = *t.impl();
    if (!dense || !(in.shape == meta.shape)) return false;
    if (in.strides == meta.strides) return true;
    return contiguous && t.is_contiguous();  // the stride of a size-1 dim may be anything
  }
  const Tensor& out;
  const TensorImpl& meta;
  bool contiguous, dense;
};

// out = f(a, b) where one operand holds a single value (x * 2, x > 0, or an expanded
// scalar: a mean's gradient): the value is held in a register and the other operand runs
// a flat, vectorizable loop.
template <class Out, class A, class B, class F>
bool map_with_scalar(const FlatTarget& target, F& f, const Tensor& a, const Tensor& b) {
  Out* o = elements<Out>(target.out);
  const int64_t n = target.meta.shape.numel();
  if (holds_one_value(b) && target.visits_alike(a)) {
    const B v = *elements<const B>(b);
    const Loaded<A>* pa = elements<const Loaded<A>>(a);
    parallel_range(n, [&](int64_t s, int64_t e) {
      for (int64_t i = s; i < e; ++i) o[i] = f(as_element<A>(pa[i]), v);
    });
    return true;
  }
  if (holds_one_value(a) && target.visits_alike(b)) {
    const A v = *elements<const A>(a);
    const Loaded<B>* pb = elements<const Loaded<B>>(b);
    parallel_range(n, [&](int64_t s, int64_t e) {
      for (int64_t i = s; i < e; ++i) o[i] = f(v, as_element<B>(pb[i]));
    });
    return true;
  }
  return false;
}

// One row of a binary map whose output and one operand run along memory while the other
// operand stays on one element (x - mean(x, -1, keepdim), x / its row's norm): that element
// in a register and a loop that vectorizes, instead of the strided loop. False for other
// rows.
template <class Out, class A, class B, class F, size_t M>
bool map_row_with_scalar(F& f, Out* o, const std::array<const void*, 2>& ptrs, const std::array<int64_t, M>& off,
                         const std::array<int64_t, M>& st, int64_t count) {
  if (st[0] != 1 || !((st[1] == 1 && st[2] == 0) || (st[1] == 0 && st[2] == 1))) return false;
  const Loaded<A>* pa = static_cast<const Loaded<A>*>(ptrs[0]) + off[1];
  const Loaded<B>* pb = static_cast<const Loaded<B>*>(ptrs[1]) + off[2];
  if (st[2] == 0) {
    const B v = as_element<B>(pb[0]);
    for (int64_t i = 0; i < count; ++i) o[i] = f(as_element<A>(pa[i]), v);
  } else {
    const A v = as_element<A>(pa[0]);
    for (int64_t i = 0; i < count; ++i) o[i] = f(v, as_element<B>(pb[i]));
  }
  return true;
}

}  // namespace detail

// out[i] = f(a[i]) over n floats, compiled for AVX-512: f inlines here, so the loop
// vectorizes 16 floats at a time where the library's baseline (x86-64-v3) gives 8. Each
// element goes through the same operations (the same bits); transcendental functions run
// about twice as fast.
template <class F>
__attribute__((target("avx512f"))) void map_floats_wide(const float* a, float* o, int64_t n, F& f) {
  for (int64_t i = 0; i < n; ++i) o[i] = f(a[i]);
}

// f.block(d, a, n) (an element function's form over n contiguous elements), compiled for
// AVX-512 on machines that have it, as map_floats_wide.
template <class F>
__attribute__((target("avx512f"))) void block_floats_wide(const F& f, float* d, const float* a, int64_t n) {
  f.block(d, a, n);
}
template <class T, class F>
void map_block(const F& f, T* d, const T* a, int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    if (kHasAvx512) return block_floats_wide(f, d, a, n);
  }
  f.block(d, a, n);
}

// out[i] = f(in[i]...) with broadcasting; In are the inputs' C++ types, Out out's.
template <class Out, class... In, class F, class... Tensors>
void map_elements(const Tensor& out, F f, const Tensors&... in) {
  static_assert(sizeof...(In) == sizeof...(Tensors));
  constexpr size_t N = sizeof...(In);
  const int64_t n = out.impl()->shape.numel();
  if (n == 0) return;
  Out* o = detail::elements<Out>(out);
  std::array<const void*, N> ptrs{static_cast<const void*>(detail::elements<const In>(in))...};
  const detail::FlatTarget target(out);
  const bool flat = (target.visits_alike(in) && ...);
  if (flat) {
    if constexpr (std::is_same_v<std::tuple<Out, In...>, std::tuple<float, float>>) {
      if (kHasAvx512) {
        const float* a = static_cast<const float*>(ptrs[0]);
        parallel_range(n, [&](int64_t b, int64_t e) { map_floats_wide(a + b, o + b, e - b, f); });
        return;
      }
    }
    parallel_range(n, [&](int64_t b, int64_t e) {
      [&]<size_t... I>(std::index_sequence<I...>) {
        auto p = std::make_tuple(static_cast<const detail::Loaded<In>*>(ptrs[I])...);
        for (int64_t i = b; i < e; ++i) o[i] = f(detail::as_element<In>(std::get<I>(p)[i])...);
      }(std::index_sequence_for<In...>{});
    });
    return;
  }
  if constexpr (N == 2) {
    using A = std::tuple_element_t<0, std::tuple<In...>>;
    using B = std::tuple_element_t<1, std::tuple<In...>>;
    if (detail::map_with_scalar<Out, A, B>(target, f, in...)) return;
  }
  std::array<Shape, N + 1> strides{out.strides(),
                                   broadcast_strides(in, out.shape())...};
  auto layout = coalesce<N + 1>(out.shape(), strides);
  for_each_row(layout, [&](const std::array<int64_t, N + 1>& off, int64_t count,
                           const std::array<int64_t, N + 1>& st) {
    if constexpr (N == 2) {
      if (detail::map_row_with_scalar<Out, In...>(f, o + off[0], ptrs, off, st, count)) return;
    }
    [&]<size_t... I>(std::index_sequence<I...>) {
      Out* po = o + off[0];
      auto p = std::make_tuple((static_cast<const detail::Loaded<In>*>(ptrs[I]) + off[I + 1])...);
      if (((st[I + 1] == 1) && ...) && st[0] == 1) {
        for (int64_t i = 0; i < count; ++i) po[i] = f(detail::as_element<In>(std::get<I>(p)[i])...);
      } else {
        for (int64_t i = 0; i < count; ++i)
          po[i * st[0]] = f(detail::as_element<In>(std::get<I>(p)[i * st[I + 1]])...);
      }
    }(std::index_sequence_for<In...>{});
  });
}

}  // namespace baton::kernels
