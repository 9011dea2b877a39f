// Element types and the promotion rules between them (docs/dtypes.md).
#pragma once
#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <string>
#include <string_view>

namespace baton {

// Compute dtypes (b8 .. f64) are what kernels work on. Storage dtypes (u8 .. bf16) are
// what models and files hold besides: a tensor may hold them and cast converts to and
// from them, while arithmetic happens on their compute dtype (compute_dtype), so that the
// kernels do not multiply by the number of types (docs/dtypes.md, "Storage dtypes").
// string holds text (a std::string per element, as ONNX and TensorFlow have them): views,
// cast to and from numbers, and the text ops take it; it has no compute dtype.
enum class DType : uint8_t {
  b8, i32, i64, f32, f64,                 // compute
  u8, i8, i16, u16, u32, u64, f16, bf16,  // storage
  string,
};
inline constexpr DType kLastDType = DType::string;

inline constexpr DType f32 = DType::f32;
inline constexpr DType f64 = DType::f64;
inline constexpr DType i32 = DType::i32;
inline constexpr DType i64 = DType::i64;
inline constexpr DType b8 = DType::b8;  // bool
inline constexpr DType boolean = DType::b8;
inline constexpr DType u8 = DType::u8;
inline constexpr DType i8 = DType::i8;
inline constexpr DType i16 = DType::i16;
inline constexpr DType u16 = DType::u16;
inline constexpr DType u32 = DType::u32;
inline constexpr DType u64 = DType::u64;
inline constexpr DType f16 = DType::f16;
inline constexpr DType bf16 = DType::bf16;

std::string_view dtype_name(DType t);
size_t dtype_size(DType t);
std::ostream& operator<<(std::ostream& os, DType t);

inline constexpr bool is_storage_only(DType t) { return t > DType::f64; }
// The dtype arithmetic on t happens in: i32 for the 8- and 16-bit integers, i64 for u32
// and u64 (whose values must stay below 2^63), f32 for f16 and bf16; t itself otherwise
// (string, which no arithmetic takes, included).
DType compute_dtype(DType t);

// Of the compute dtypes (f16 and bf16 are floating storage: compute_dtype says f32).
inline constexpr bool is_floating(DType t) { return t == DType::f32 || t == DType::f64; }
inline constexpr bool is_integral(DType t) { return t == DType::i32 || t == DType::i64; }

// The smallest type that holds both: b8 < i32 < i64 < f32 < f64; storage dtypes promote
// as their compute dtypes; string promotes with nothing but itself (a DTypeError).
DType promote_types(DType a, DType b);

// IEEE half precision and bfloat16 (the top half of a float), kept as their bits;
// to_float reads them exactly, the constructors round to nearest, ties to even.
struct Half {
  uint16_t bits = 0;
  Half() = default;
  explicit Half(double v);
  float to_float() const;
};
struct BFloat16 {
  uint16_t bits = 0;
  BFloat16() = default;
  explicit BFloat16(double v);
  float to_float() const;
};

// The C++ type of each dtype and back.
template <class T> struct dtype_of;
template <> struct dtype_of<bool> { static constexpr DType value = DType::b8; };
template <> struct dtype_of<int32_t> { static constexpr DType value = DType::i32; };
template <> struct dtype_of<int64_t> { static constexpr DType value = DType::i64; };
template <> struct dtype_of<float> { static constexpr DType value = DType::f32; };
template <> struct dtype_of<double> { static constexpr DType value = DType::f64; };
template <> struct dtype_of<uint8_t> { static constexpr DType value = DType::u8; };
template <> struct dtype_of<int8_t> { static constexpr DType value = DType::i8; };
template <> struct dtype_of<int16_t> { static constexpr DType value = DType::i16; };
template <> struct dtype_of<uint16_t> { static constexpr DType value = DType::u16; };
template <> struct dtype_of<uint32_t> { static constexpr DType value = DType::u32; };
template <> struct dtype_of<uint64_t> { static constexpr DType value = DType::u64; };
template <> struct dtype_of<Half> { static constexpr DType value = DType::f16; };
template <> struct dtype_of<BFloat16> { static constexpr DType value = DType::bf16; };
template <> struct dtype_of<std::string> { static constexpr DType value = DType::string; };
template <class T> inline constexpr DType dtype_v = dtype_of<T>::value;

}  // namespace baton
