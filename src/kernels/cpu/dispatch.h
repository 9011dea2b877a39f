// Calls a generic lambda with the C++ type of a dtype:
//   visit_dtype(t.dtype(), [&](auto tag) { using T = typename decltype(tag)::type; ... });
#pragma once
#include "baton/error.h"
#include "baton/tensor.h"

namespace baton::kernels {

template <class T> struct TypeTag { using type = T; };

// "u8 tensors are storage only: ...": why a kernel refuses a storage dtype.
std::string storage_only_message(DType t);

template <class F>
decltype(auto) visit_dtype(DType t, F&& f) {
  switch (t) {
    case DType::f32: return f(TypeTag<float>{});
    case DType::f64: return f(TypeTag<double>{});
    case DType::i32: return f(TypeTag<int32_t>{});
    case DType::i64: return f(TypeTag<int64_t>{});
    case DType::b8: return f(TypeTag<bool>{});
    default: break;
  }
  throw DTypeError("visit_dtype", storage_only_message(t), SourceLoc::current());
}

// Every dtype, storage dtypes included: for the few kernels that move or convert them
// (copy_into, cast), never for arithmetic.
template <class F>
decltype(auto) visit_any_dtype(DType t, F&& f) {
  switch (t) {
    case DType::u8: return f(TypeTag<uint8_t>{});
    case DType::i8: return f(TypeTag<int8_t>{});
    case DType::i16: return f(TypeTag<int16_t>{});
    case DType::u16: return f(TypeTag<uint16_t>{});
    case DType::u32: return f(TypeTag<uint32_t>{});
    case DType::u64: return f(TypeTag<uint64_t>{});
    case DType::f16: return f(TypeTag<Half>{});
    case DType::bf16: return f(TypeTag<BFloat16>{});
    default: return visit_dtype(t, std::forward<F>(f));
  }
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
