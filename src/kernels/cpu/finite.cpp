#include "kernels/cpu/finite.h"

#include <atomic>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/copy.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/element_fns.h"
#include "kernels/cpu/loops.h"

namespace baton::kernels {
namespace {

// Elements filling [raw_data, raw_data + numel) in some order: t itself, or a dense copy.
Tensor filled(const Tensor& t) { return t.is_contiguous() || is_channels_last(t) ? t : dense(t); }

}  // namespace

// Whether some p[i], i in [0, n), has every exponent bit set (NaN or infinity): a test of
// bits, which vectorizes where std::isfinite compiles to scalar compares.
template <class T, class Bits>
bool any_non_finite(const T* p, int64_t n, Bits exponent) {
  std::atomic<bool> found{false};
  parallel_range(n, [&](int64_t b, int64_t e) {
    int64_t bad = 0;  // a count and no early exit: the loop vectorizes
    for (int64_t i = b; i < e; ++i) {
      Bits bits;
      std::memcpy(&bits, p + i, sizeof bits);
      bad += (bits & exponent) == exponent ? 1 : 0;
    }
    if (bad) found.store(true, std::memory_order_relaxed);
  });
  return found.load();
}

bool has_non_finite(const Tensor& t) {
  const Tensor d = filled(t);
  if (d.dtype() == f32) return any_non_finite(d.data<float>(), d.numel(), uint32_t(0x7f800000));
  if (d.dtype() == f64) return any_non_finite(d.data<double>(), d.numel(), uint64_t(0x7ff0000000000000));
  throw DTypeError(str("[has_non_finite] expects f32 or f64, got ", d.dtype()));
}

void relu_keeping_nan(const Tensor& out) {
  if (!out.is_contiguous() && !is_channels_last(out)) {
    Tensor d = dense(out);
    relu_keeping_nan(d);
    return copy_into(out, d);
  }
  visit_float(out.dtype(), "relu", [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = out.data<T>();
    parallel_range(out.numel(), [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) p[i] = ew::Relu{}(p[i]);
    });
  });
}

}  // namespace baton::kernels
