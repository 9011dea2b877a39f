// Stores that bypass the caches (non-temporal stores) for in-place updates.
//
// A parameter that two products read before its update, each splitting it among threads
// in its own way (a layer's forward product and the product for its input's gradient),
// ends up cached by both cores. A plain store must first take each line from the other
// core. On the two-vCPU machines of docs/PERF.md, while the two cores share no cache, that
// cost ~17 ns a line: the update of a 512 KiB weight took 60-75 us instead of 11-17, and
// 20-25 us with non-temporal stores, which write whole lines without reading them. While
// the cores share a cache, plain stores took 15 us and streaming ones 25, so plans measure
// which way to take (kernels/cpu/measured_choice.h).
#pragma once
#include <emmintrin.h>  // SSE2, which every x86-64 has

#include <algorithm>
#include <cstdint>

namespace baton::kernels {

constexpr int64_t kCacheLine = 64;

// Writes p[i] = next(i) for i in [b, e). With `stream`, p's whole cache lines in the range
// are computed into a small aligned block and written with non-temporal stores; the
// partial lines at either end are stored plainly. next(i) may read p[i] (it runs before
// p[i] is written) and write other arrays at i. The values are the same either way.
template <class T, class Next>
void write_each(T* p, int64_t b, int64_t e, bool stream, const Next& next) {
  int64_t i = b;
  if (stream) {
    constexpr int64_t kLine = kCacheLine / int64_t(sizeof(T));
    constexpr int64_t kBlock = 32 * kLine;  // 2 KiB: in L1 between computing and storing it
    alignas(kCacheLine) T block[kBlock];
    for (; i < e && reinterpret_cast<uintptr_t>(p + i) % kCacheLine != 0; ++i) p[i] = next(i);
    while (e - i >= kLine) {
      const int64_t n = std::min(kBlock, (e - i) / kLine * kLine);
      for (int64_t k = 0; k < n; ++k) block[k] = next(i + k);
      auto* to = reinterpret_cast<__m128i*>(p + i);
      const auto* from = reinterpret_cast<const __m128i*>(block);
      for (int64_t v = 0; v < n * int64_t(sizeof(T)) / 16; ++v) _mm_stream_si128(to + v, _mm_load_si128(from + v));
      i += n;
    }
  }
  for (; i < e; ++i) p[i] = next(i);
  // Non-temporal stores are not ordered with later ones: fence them before the thread
  // reports its part done.
  if (stream) _mm_sfence();
}

}  // namespace baton::kernels
