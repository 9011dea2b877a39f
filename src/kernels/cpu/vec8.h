// Eight 32-bit lanes as GCC / clang vector extensions (one AVX2 register; two SSE ones on
// older targets). For loops too short or too irregular for GCC's vectorizer, such as one
// channel block (8 channels of nChw8c) per pixel, which it leaves scalar.
#pragma once
#include <cstdint>
#include <cstring>

namespace baton::kernels {

using F32x8 = float __attribute__((vector_size(32)));
using I32x8 = int32_t __attribute__((vector_size(32)));
constexpr int64_t kVec8 = 8;

template <class V, class T>
V load8(const T* p) {
  V v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <class T, class V>
void store8(T* p, V v) { std::memcpy(p, &v, sizeof v); }

}  // namespace baton::kernels
