// Calls a generic lambda with the C++ type of a dtype:
//   visit_dtype(t.dtype(), [&](auto tag) { using T = typename decltype(tag)::type; ... });
#pragma once
#include "baton/error.h"
#include "baton/tensor.h"

namespace baton::kernels {

template <class T> struct TypeTag { using type = T; };

template <class F>
decltype(auto) visit_dtype(DType t, F&& f) {
  switch (t) {
    case DType::f32: return f(TypeTag<float>{});
    case DType::f64: return f(TypeTag<double>{});
    case DType::i32: return f(TypeTag<int32_t>{});
    case DType::i64: return f(TypeTag<int64_t>{});
    case DType::b8: return f(TypeTag<bool>{});
  }
  throw DTypeError("visit_dtype", "unknown dtype", SourceLoc::current());
}

// Floating types only; other dtypes are a DTypeError naming `op`.
template <class F>
decltype(auto) visit_float(DType t, const char* op, F&& f) {
  switch (t) {
    case DType::f32: return f(TypeTag<float>{});
    case DType::f64: return f(TypeTag<double>{});
    default:
      throw DTypeError(op, str("expects a floating-point tensor, got ", t), SourceLoc::current());
  }
}

// Numeric types (no bool).
template <class F>
decltype(auto) visit_numeric(DType t, const char* op, F&& f) {
  switch (t) {
    case DType::f32: return f(TypeTag<float>{});
    case DType::f64: return f(TypeTag<double>{});
    case DType::i32: return f(TypeTag<int32_t>{});
    case DType::i64: return f(TypeTag<int64_t>{});
    default:
      throw DTypeError(op, str("expects a numeric tensor, got ", t), SourceLoc::current());
  }
}

}  // namespace baton::kernels
