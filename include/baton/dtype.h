// Element types and the promotion rules between them (docs/dtypes.md).
#pragma once
#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <string_view>

namespace baton {

enum class DType : uint8_t { b8, i32, i64, f32, f64 };

inline constexpr DType f32 = DType::f32;
inline constexpr DType f64 = DType::f64;
inline constexpr DType i32 = DType::i32;
inline constexpr DType i64 = DType::i64;
inline constexpr DType b8 = DType::b8;  // bool
inline constexpr DType boolean = DType::b8;

std::string_view dtype_name(DType t);
size_t dtype_size(DType t);
std::ostream& operator<<(std::ostream& os, DType t);

inline constexpr bool is_floating(DType t) { return t == DType::f32 || t == DType::f64; }
inline constexpr bool is_integral(DType t) { return t == DType::i32 || t == DType::i64; }

// The smallest type that holds both: b8 < i32 < i64 < f32 < f64.
inline constexpr DType promote_types(DType a, DType b) { return a > b ? a : b; }

// The C++ type of each dtype and back.
template <class T> struct dtype_of;
template <> struct dtype_of<bool> { static constexpr DType value = DType::b8; };
template <> struct dtype_of<int32_t> { static constexpr DType value = DType::i32; };
template <> struct dtype_of<int64_t> { static constexpr DType value = DType::i64; };
template <> struct dtype_of<float> { static constexpr DType value = DType::f32; };
template <> struct dtype_of<double> { static constexpr DType value = DType::f64; };
template <class T> inline constexpr DType dtype_v = dtype_of<T>::value;

}  // namespace baton
