// Sixteen 32-bit lanes (one AVX-512 register) as GCC / clang vector extensions, for kernels
// compiled with `__attribute__((target("avx512f")))` beside their 8-lane (vec8.h) forms and
// chosen when the library loads (kHasAvx512). Such a kernel spells its loads and stores
// out: a helper compiled for the default target could not take or return these vectors.
#pragma once
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "kernels/cpu/vec8.h"

namespace baton::kernels {

using F32x16 = float __attribute__((vector_size(64)));
using I32x16 = int32_t __attribute__((vector_size(64)));
using U8x16 = uint8_t __attribute__((vector_size(16)));
constexpr int64_t kVec16 = 16;

// Whether the AVX-512 kernels run: the machine has AVX-512 and the environment variable
// BATON_MAX_CPU_ISA is not `avx2`, which caps baton's kernels at their 8-lane forms as
// ONEDNN_MAX_CPU_ISA=AVX2 caps oneDNN's, so that an AVX-512 machine tests the paths an
// AVX2-only one takes. Read once while the library loads (__builtin_cpu_init first, as GCC
// asks of such early callers).
inline bool avx512_kernels_allowed() {
  __builtin_cpu_init();
  const char* cap = std::getenv("BATON_MAX_CPU_ISA");
  if (cap && (std::strcmp(cap, "avx2") == 0 || std::strcmp(cap, "AVX2") == 0)) return false;
  return __builtin_cpu_supports("avx512f");
}
inline const bool kHasAvx512 = avx512_kernels_allowed();

// Two 8-lane vectors as one, and back, in registers (two 32-byte stores read back as one
// 64-byte load would stall it). For AVX-512 kernels only: they inline into them.
#define BATON_AVX512 [[gnu::always_inline]] inline __attribute__((target("avx512f")))
BATON_AVX512 F32x16 joined(F32x8 lo, F32x8 hi) {
  return __builtin_shufflevector(lo, hi, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
}
BATON_AVX512 F32x8 low_half(F32x16 v) { return __builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7); }
BATON_AVX512 F32x8 high_half(F32x16 v) { return __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15); }
BATON_AVX512 I32x8 low_half(I32x16 v) { return __builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7); }
BATON_AVX512 I32x8 high_half(I32x16 v) { return __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15); }
BATON_AVX512 F32x16 load16(const float* p) {
  F32x16 v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}

// The 16 lanes at p, `lane` elements apart (1: one vector load or store), as vec8.h's
// load_lanes and store_lanes.
template <class V, class T>
BATON_AVX512 V load_lanes16(const T* p, int64_t lane) {
  V v;
  if (lane == 1) __builtin_memcpy(&v, p, sizeof v);
  else
    for (int64_t l = 0; l < kVec16; ++l) v[l] = p[l * lane];
  return v;
}
template <class V, class T>
BATON_AVX512 void store_lanes16(T* p, int64_t lane, V v) {
  if (lane == 1) __builtin_memcpy(p, &v, sizeof v);
  else
    for (int64_t l = 0; l < kVec16; ++l) p[l * lane] = v[l];
}
#undef BATON_AVX512

}  // namespace baton::kernels
