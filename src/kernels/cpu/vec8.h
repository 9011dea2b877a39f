// Eight 32-bit lanes as GCC / clang vector extensions (one AVX2 register; two SSE ones on
// older targets). For loops too short or too irregular for GCC's vectorizer, such as one
// channel block (8 channels of nChw8c) per pixel, which it leaves scalar.
#pragma once
#include <cstdint>
#include <cstring>
#if defined(__AVX2__)
#include <immintrin.h>
#endif

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

// v's 8 lanes at p, `lane` elements apart (1: one vector store).
template <class T, class V>
void store_lanes(T* p, int64_t lane, V v) {
  if (lane == 1) return store8(p, v);
  for (int64_t l = 0; l < kVec8; ++l) p[l * lane] = v[l];
}

// The 8 lanes at p, `lane` elements apart (1: one vector load).
template <class V, class T>
V load_lanes(const T* p, int64_t lane) {
  if (lane == 1) return load8<V>(p);
  V v;
  for (int64_t l = 0; l < kVec8; ++l) v[l] = p[l * lane];
  return v;
}

// The low byte of each of v's lanes, stored as 8 bytes at p; and 8 bytes at p as lanes.
inline void store_bytes(uint8_t* p, I32x8 v) {
#if defined(__AVX2__)
  const __m256i w = __m256i(v);
  const __m128i half = _mm_packs_epi32(_mm256_castsi256_si128(w), _mm256_extracti128_si256(w, 1));
  _mm_storel_epi64(reinterpret_cast<__m128i*>(p), _mm_packus_epi16(half, half));
#else
  for (int64_t l = 0; l < kVec8; ++l) p[l] = uint8_t(v[l]);
#endif
}
inline I32x8 load_bytes(const uint8_t* p) {
#if defined(__AVX2__)
  return I32x8(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
#else
  I32x8 v;
  for (int64_t l = 0; l < kVec8; ++l) v[l] = p[l];
  return v;
#endif
}

// v in every lane: one broadcast (F32x8{} + v would add a zero first: -0 + 0 is +0).
inline F32x8 splat(float v) { return F32x8{v, v, v, v, v, v, v, v}; }

// Whether some lane is set (a comparison's mask, say).
inline bool any_lane(I32x8 v) {
  for (int64_t l = 0; l < kVec8; ++l)
    if (v[l]) return true;
  return false;
}

}  // namespace baton::kernels
