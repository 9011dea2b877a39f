// Winograd F(4x4, 3x3): Lavin and Gray's minimal filtering, over the points 0, 1, -1, 1/2,
// -2 and infinity rather than their 0, +-1, +-2: in f32 its error is 2-3x smaller
// (simulated on 6x6 tiles of 256 channels: 1.7e-6 of the result's scale on average and
// 4.6e-6 at worst, against 3.2e-6 and 1.4e-5; Barabasz et al. study the choice of points).
// Each thread takes its own run of the output tiles, a block at a time, through three
// phases (with few tiles, every tile and its share of the output channels; the weight
// gradient, which sums over all tiles, shares its blocks instead):
//   1. input transform: each 6x6 input tile d becomes V = B^T d B, 36 points of 8
//      channels at a time (one vector per pixel of a channel group);
//   2. 36 independent products M[t] = V[t] * U[t] over the channels by a register-blocked
//      kernel (6 tiles x 16 channels in 8-lane vectors, or 12 tiles x 16 channels in
//      16-lane ones on AVX-512), U = G w G^T made in L1 as they go from the weights, which
//      stay at their own size (packed once in the kernel's order);
//   3. output transform: Y = A^T M A, 4x4 outputs a tile, with the bias, the residual
//      and the relu applied before the one store.
// The block of tiles is sized so that V and M stay in the caches between the phases.
#include "kernels/cpu/conv_winograd.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <utility>

#include "kernels/cpu/copy.h"
#include "kernels/cpu/loops.h"
#include "kernels/cpu/pool.h"
#include "kernels/cpu/vec16.h"
#include "kernels/cpu/vec8.h"

namespace baton::kernels {
namespace {

constexpr int kIn = 6;               // input tile side
constexpr int kOut = 4;              // output tile side
constexpr int kPoints = kIn * kIn;   // transformed points per tile
constexpr int64_t kPanel = 16;       // output channels per product kernel call
constexpr int kRows = 6;             // tiles per call of the 8-lane product kernel
constexpr int64_t kTaps = 9;         // of a 3x3 filter
constexpr int64_t kChunk = 128;      // input channels whose weights are transformed at once

using Tile = std::array<std::array<F32x8, kIn>, kIn>;

// B^T applied along one axis: r = B^T d for 6 values. (Inlined, as the other 1-D
// transforms: an AVX-512 kernel's 16-lane instance then compiles as its caller does.)
template <class Get, class Put>
[[gnu::always_inline]] inline void input_1d(Get d, Put r) {
  r(0, d(0) - d(1) * 1.5f - d(2) * 2.f + d(3) * 1.5f + d(4));
  r(1, d(2) * 0.5f - d(1) + d(3) * 2.5f + d(4));
  r(2, d(1) - d(2) * 2.5f + d(3) * 0.5f + d(4));
  r(3, (d(3) - d(1)) * 2.f - d(2) + d(4));
  r(4, (d(1) - d(3)) * 0.5f - d(2) + d(4));
  r(5, d(1) - d(2) * 1.5f - d(3) * 2.f + d(4) * 1.5f + d(5));
}

// A^T applied along one axis: 4 outputs of 6 values (the points' powers 0 to 3).
template <class Get, class Put>
[[gnu::always_inline]] inline void output_1d(Get m, Put r) {
  const auto s12 = m(1) + m(2), d12 = m(1) - m(2);
  r(0, m(0) + s12 + m(3) + m(4));
  r(1, d12 + m(3) * 0.5f - m(4) * 2.f);
  r(2, s12 + m(3) * 0.25f + m(4) * 4.f);
  r(3, d12 + m(3) * 0.125f - m(4) * 8.f + m(5));
}

// B applied along one axis: q = B m, input_1d's adjoint, how a point's product of the
// input gradient returns to the 6 pixels of its tile.
template <class Get, class Put>
[[gnu::always_inline]] inline void input_adjoint_1d(Get m, Put q) {
  q(0, m(0));
  q(1, m(2) - m(1) - m(0) * 1.5f - m(3) * 2.f + m(4) * 0.5f + m(5));
  q(2, m(1) * 0.5f - m(0) * 2.f - m(2) * 2.5f - m(3) - m(4) - m(5) * 1.5f);
  q(3, m(0) * 1.5f + m(1) * 2.5f + m(2) * 0.5f + m(3) * 2.f - m(4) * 0.5f - m(5) * 2.f);
  q(4, m(0) + m(1) + m(2) + m(3) + m(4) + m(5) * 1.5f);
  q(5, m(5));
}

// A applied along one axis: 6 values of 4 (A^T's columns), how a tile's output gradient
// enters the transformed domain.
template <class Get, class Put>
[[gnu::always_inline]] inline void gradient_1d(Get g, Put r) {
  const auto s02 = g(0) + g(2), s13 = g(1) + g(3);
  r(0, g(0));
  r(1, s02 + s13);
  r(2, s02 - s13);
  r(3, g(0) + g(1) * 0.5f + g(2) * 0.25f + g(3) * 0.125f);
  r(4, g(0) - g(1) * 2.f + g(2) * 4.f - g(3) * 8.f);
  r(5, g(3));
}

// G's rows: the 6 points' weights of a 3x3 filter's 3 taps along one axis.
constexpr float kG[kIn][3] = {{1, 0, 0},
                              {1.f / 3, 1.f / 3, 1.f / 3},
                              {-1.f / 3, 1.f / 3, -1.f / 3},
                              {-16.f / 15, -8.f / 15, -4.f / 15},
                              {1.f / 15, -2.f / 15, 4.f / 15},
                              {0, 0, 1}};

struct Tiling {
  int64_t per_row, per_image, count;  // tiles along the output's width, per image, in all
  explicit Tiling(const ConvGeom& g)
      : per_row((g.ow + kOut - 1) / kOut),
        per_image(per_row * ((g.oh + kOut - 1) / kOut)),
        count(g.n * per_image) {}
  // Where output tile `tile` lies: its image and its first row and column.
  struct At {
    int64_t image, y0, x0;
  };
  At at(int64_t tile) const {
    const int64_t in_image = tile % per_image;
    return {tile / per_image, in_image / per_row * kOut, in_image % per_row * kOut};
  }
};

// Floats from one point to the next in a block's transforms ([36][tiles][channels]: V,
// M, Mg, D): whole cache lines, an odd number of them. A stride of a multiple of 4 KiB
// (blocks of 48 or 96 tiles of 64 channels) put a tile's 36 points in one set of the L1
// cache, whose 12 ways cannot hold them: ResNet-18's 64-channel layers at bs1 took 470 us
// a convolution in blocks of 96 tiles against 320 in blocks of 98 (2-core Zen 5).
int64_t point_stride(int64_t tiles, int64_t channels) {
  constexpr int64_t kLine = 64 / sizeof(float);
  const int64_t lines = (tiles * channels + kLine - 1) / kLine;
  return (lines | 1) * kLine;
}

// Floats of one block's transforms of `channels` channels.
int64_t transform_floats(int64_t tiles, int64_t channels) { return kPoints * point_stride(tiles, channels); }

// One 6x6 tile of input channels [8 * group, 8 * group + 8), zero outside the image.
Tile load_tile(const ConvGeom& g, const float* x, const VectorLayout& l, int64_t image, int64_t group, int64_t y0,
               int64_t x0) {
  const float* base = x + image * l.image + group * l.block;
  Tile d;
  if (y0 >= 0 && x0 >= 0 && y0 + kIn <= g.h && x0 + kIn <= g.w) {
    for (int i = 0; i < kIn; ++i)
      for (int j = 0; j < kIn; ++j) d[i][j] = load8<F32x8>(base + (y0 + i) * l.row + (x0 + j) * l.pixel);
    return d;
  }
  for (int i = 0; i < kIn; ++i)
    for (int j = 0; j < kIn; ++j) {
      const int64_t y = y0 + i, xx = x0 + j;
      d[i][j] = y >= 0 && y < g.h && xx >= 0 && xx < g.w ? load8<F32x8>(base + y * l.row + xx * l.pixel) : F32x8{};
    }
  return d;
}

// The tiles [begin, end) of a block that one thread works on in every phase: V and M are
// then written and read on one core. (Split by phase, a thread's products read the other
// threads' V and its transforms their M: megabytes crossing between cores. On the 2-core
// EPYC of 2026-12-02 the CNN step's conv 2 input gradient took 1.5 ms this way against
// 2.3-2.4 split by phase, both at two threads.)
struct TileRange {
  int64_t begin, end;
};

// The output channels [begin, end) a thread computes: all of them, or its share where the
// threads split the outputs (split_outputs). Multiples of 16.
struct Channels {
  int64_t begin, end;
};

// item(b, group, where) for each tile b of `range` (where: Tiling::at) and group of 8
// channels of `channels`.
template <class Item>
void for_tile_groups(const Tiling& tiling, int64_t first, TileRange range, Channels channels, Item item) {
  for (int64_t b = range.begin; b < range.end; ++b) {
    const Tiling::At at = tiling.at(first + b);
    for (int64_t group = channels.begin / kVec8; group < channels.end / kVec8; ++group) item(b, group, at);
  }
}

// Whether 16 channels of a vector layout, from an even group of 8 on, lie `lane` elements
// apart throughout, as one 16-lane vector reads them: channels-last (lane 1), or planes
// (NCHW: the next group starts 8 lanes on).
bool wide_lanes(const VectorLayout& l, int64_t lane) { return l.block == kVec8 * lane; }

// Phase 1 on AVX-512 where x's channels lie 16 side by side (channels-last): 16 channels a
// vector, each value through the same operations as in the 8-lane loop below (the same
// bits where the compiler fuses the same multiply-adds in both).
__attribute__((target("avx512f"))) void transform_inputs_wide(const ConvGeom& g, const Tiling& tiling,
                                                              const WinogradOperands& op, int64_t first,
                                                              int64_t tiles, TileRange range, float* v) {
  const VectorLayout l = op.x_layout;
  const int64_t point = point_stride(tiles, g.c), h = g.h, w = g.w;
  for (int64_t b = range.begin; b < range.end; ++b) {
    const Tiling::At at = tiling.at(first + b);
    const int64_t y0 = at.y0 - g.ph, x0 = at.x0 - g.pw;
    const bool inside = y0 >= 0 && x0 >= 0 && y0 + kIn <= h && x0 + kIn <= w;
    for (int64_t pair = 0; pair < g.c / kVec16; ++pair) {
      const float* base = op.x + at.image * l.image + 2 * pair * l.block;
      F32x16 d[kIn][kIn], t[kIn][kIn];
      for (int i = 0; i < kIn; ++i)
        for (int j = 0; j < kIn; ++j) {
          const int64_t y = y0 + i, x = x0 + j;
          d[i][j] = inside || (y >= 0 && y < h && x >= 0 && x < w) ? load16(base + y * l.row + x * l.pixel)
                                                                   : F32x16{};
        }
      for (int j = 0; j < kIn; ++j)
        input_1d([&](int i) -> const F32x16& { return d[i][j]; }, [&](int i, const F32x16& r) { t[i][j] = r; });
      // (The lambdas compile for the default target and inline here: they call no AVX-512
      // helper, and take and return the vectors by reference.)
      float* to = v + b * g.c + pair * kVec16;
      for (int i = 0; i < kIn; ++i)
        input_1d([&](int j) -> const F32x16& { return t[i][j]; },
                 [&](int j, const F32x16& r) { std::memcpy(to + (i * kIn + j) * point, &r, sizeof r); });
    }
  }
}

// Phase 1: V[t][tile][c] for the block's tiles, one (tile, channel group) per item.
void transform_inputs(const ConvGeom& g, const Tiling& tiling, const WinogradOperands& op, int64_t first,
                      int64_t tiles, TileRange range, float* v) {
  if (kHasAvx512 && g.c % kVec16 == 0 && wide_lanes(op.x_layout, 1))
    return transform_inputs_wide(g, tiling, op, first, tiles, range, v);
  for_tile_groups(tiling, first, range, {0, g.c}, [&](int64_t b, int64_t group, Tiling::At at) {
    const Tile d = load_tile(g, op.x, op.x_layout, at.image, group, at.y0 - g.ph, at.x0 - g.pw);
    Tile t;
    for (int j = 0; j < kIn; ++j)
      input_1d([&](int i) { return d[i][j]; }, [&](int i, F32x8 r) { t[i][j] = r; });
    float* to = v + b * g.c + group * kVec8;
    const int64_t point = point_stride(tiles, g.c);  // read once: a store (memcpy) might write any object
    for (int i = 0; i < kIn; ++i)
      input_1d([&](int j) { return t[i][j]; }, [&](int j, F32x8 r) { store8(to + (i * kIn + j) * point, r); });
  });
}

// Row i of G w G^T (6 points) for `count` input channels of one panel of 16 outputs:
// u[j][c][16] from the packed weights w[c][tap][16]. Made for each run (a few percent of
// the products' work) so that a plan keeps the weights at their own size, not 4x.
void transform_weights(const float* w, int64_t count, int i, float* u) {
  for (int64_t c = 0; c < count; ++c)
    for (int64_t half = 0; half < kPanel; half += kVec8) {
      const float* f = w + c * kTaps * kPanel + half;
      F32x8 h[3];  // row i of G w
      for (int b = 0; b < 3; ++b)
        h[b] = load8<F32x8>(f + b * kPanel) * kG[i][0] + load8<F32x8>(f + (3 + b) * kPanel) * kG[i][1] +
               load8<F32x8>(f + (6 + b) * kPanel) * kG[i][2];
      for (int j = 0; j < kIn; ++j)
        store8(u + (j * count + c) * kPanel + half, h[0] * kG[j][0] + h[1] * kG[j][1] + h[2] * kG[j][2]);
    }
}

// Where a product's operands lie: element (r, k) of v at v[r * v_row + k * v_step], row k
// of u (16 outputs of a panel) at u[k * u_step] (the next panel's u_panel further), row r of m
// at m[r * m_row] (the next panel's 16 floats further).
struct Strides {
  int64_t v_row, v_step, u_step, m_row, u_panel = kPanel;
};

// m[r][16 outputs] (+)= sum over k < count of v(r, k) * u[k][16], for Rows rows.
template <int Rows>
void product_rows(const float* v, const float* u, float* m, int64_t count, const Strides& s, bool accumulate) {
  F32x8 lo[Rows], hi[Rows];
  const F32x8 u0 = load8<F32x8>(u), u1 = load8<F32x8>(u + kVec8);
  for (int r = 0; r < Rows; ++r) {  // the first k sets the sums: no zeroing
    lo[r] = splat(v[r * s.v_row]) * u0;
    hi[r] = splat(v[r * s.v_row]) * u1;
    if (accumulate) {
      lo[r] += load8<F32x8>(m + r * s.m_row);
      hi[r] += load8<F32x8>(m + r * s.m_row + kVec8);
    }
  }
  for (int64_t k = 1; k < count; ++k) {
    const F32x8 w0 = load8<F32x8>(u + k * s.u_step), w1 = load8<F32x8>(u + k * s.u_step + kVec8);
    for (int r = 0; r < Rows; ++r) {
      const F32x8 a = splat(v[r * s.v_row + k * s.v_step]);
      lo[r] += a * w0;
      hi[r] += a * w1;
    }
  }
  for (int r = 0; r < Rows; ++r) {
    store8(m + r * s.m_row, lo[r]);
    store8(m + r * s.m_row + kVec8, hi[r]);
  }
}

// The same products in 16-lane AVX-512 registers, for up to kWideRows rows of Panels panels
// of 16 outputs: on machines that have it, twice the work per instruction, and with two
// panels each broadcast of v feeds two FMAs (one load per FMA with one panel: ResNet-18's
// 64-channel layer ran its products at 65% of a core's peak). Each output sums the same
// products in the same order as the 8-lane kernel.
constexpr int kWideRows = 12, kWidePanels = 2;

template <int Rows, int Panels>
__attribute__((target("avx512f"))) void product_rows_wide(const float* v, const float* u, float* m, int64_t count,
                                                            const Strides& s, bool accumulate) {
  // (Loads and stores spelled out: a helper compiled for the default target could not
  // take or return these registers.)
  F32x16 sum[Rows][Panels], w[Panels];
  for (int p = 0; p < Panels; ++p) std::memcpy(&w[p], u + p * s.u_panel, sizeof w[p]);
  for (int r = 0; r < Rows; ++r)
    for (int p = 0; p < Panels; ++p) {
      sum[r][p] = v[r * s.v_row] * w[p];
      if (accumulate) {
        F32x16 before;
        std::memcpy(&before, m + r * s.m_row + p * kPanel, sizeof before);
        sum[r][p] += before;
      }
    }
  for (int64_t k = 1; k < count; ++k) {
    for (int p = 0; p < Panels; ++p) std::memcpy(&w[p], u + k * s.u_step + p * s.u_panel, sizeof w[p]);
    for (int r = 0; r < Rows; ++r) {
      const float a = v[r * s.v_row + k * s.v_step];
      for (int p = 0; p < Panels; ++p) sum[r][p] += a * w[p];
    }
  }
  for (int r = 0; r < Rows; ++r)
    for (int p = 0; p < Panels; ++p) std::memcpy(m + r * s.m_row + p * kPanel, &sum[r][p], sizeof sum[r][p]);
}

template <int... Rows>
void product_rows_wide(int rows, int panels, const float* v, const float* u, float* m, int64_t count,
                       const Strides& s, bool accumulate, std::integer_sequence<int, Rows...>) {
  using Kernel = void (*)(const float*, const float*, float*, int64_t, const Strides&, bool);
  static constexpr Kernel one[] = {product_rows_wide<Rows + 1, 1>...}, two[] = {product_rows_wide<Rows + 1, 2>...};
  (panels == 2 ? two : one)[rows - 1](v, u, m, count, s, accumulate);
}

// Rows and panels of products one call takes: what the widest kernel this machine runs
// holds in its registers.
int rows_per_call() { return kHasAvx512 ? kWideRows : kRows; }
int64_t panels_per_call() { return kHasAvx512 ? kWidePanels : 1; }

// m (+)= v * u for `rows` rows of `panels` (at most panels_per_call()) panels.
void product_rows(int rows, int64_t panels, const float* v, const float* u, float* m, int64_t count,
                  const Strides& s, bool accumulate) {
  if (kHasAvx512)
    return product_rows_wide(rows, int(panels), v, u, m, count, s, accumulate,
                             std::make_integer_sequence<int, kWideRows>{});
  switch (rows) {
    case 1: return product_rows<1>(v, u, m, count, s, accumulate);
    case 2: return product_rows<2>(v, u, m, count, s, accumulate);
    case 3: return product_rows<3>(v, u, m, count, s, accumulate);
    case 4: return product_rows<4>(v, u, m, count, s, accumulate);
    case 5: return product_rows<5>(v, u, m, count, s, accumulate);
    default: return product_rows<kRows>(v, u, m, count, s, accumulate);
  }
}

// Phase 2: M[t][tile][o] = V[t][tile][:] * U[t] for the tiles of `range` and the outputs
// of `channels` (whole groups of panels_per_call() panels, or up to g.o), per (group of
// panels of 16 outputs, row i of the points), over chunks of input channels whose U is made
// in the cache first (by each thread: a few percent of the products' work).
void multiply(const ConvGeom& g, const float* w, int64_t tiles, TileRange range, Channels channels, const float* v,
              float* m) {
  const int64_t panels = g.o / kPanel, v_point = point_stride(tiles, g.c), m_point = point_stride(tiles, g.o);
  const int64_t group_outputs = kPanel * panels_per_call(), first_group = channels.begin / group_outputs;
  const int64_t end_group = (channels.end + group_outputs - 1) / group_outputs;
  constexpr int64_t kPanelFloats = kIn * kChunk * kPanel;
  alignas(64) float u[kWidePanels * kPanelFloats];  // per thread: 96 KiB
  for (int64_t item = first_group * kIn; item < end_group * kIn; ++item) {
    const int64_t first = item / kIn * panels_per_call(), count_panels = std::min(panels_per_call(), panels - first);
    const int i = int(item % kIn);
    for (int64_t c0 = 0; c0 < g.c; c0 += kChunk) {
      const int64_t count = std::min(kChunk, g.c - c0);
      for (int64_t p = 0; p < count_panels; ++p)
        transform_weights(w + ((first + p) * g.c + c0) * kTaps * kPanel, count, i, u + p * kPanelFloats);
      for (int j = 0; j < kIn; ++j) {
        const int64_t t = i * kIn + j;
        const float* vt = v + t * v_point + c0;
        float* mt = m + t * m_point + first * kPanel;
        const Strides strides{.v_row = g.c, .v_step = 1, .u_step = kPanel, .m_row = g.o, .u_panel = kPanelFloats};
        for (int64_t r = range.begin; r < range.end; r += rows_per_call())
          product_rows(int(std::min<int64_t>(rows_per_call(), range.end - r)), count_panels, vt + r * g.c,
                       u + j * count * kPanel, mt + r * g.o, count, strides, c0 > 0);
      }
    }
  }
}

// relu that keeps NaN (max(NaN, 0) is NaN, as the op's).
F32x8 relu(F32x8 v) {
  const F32x8 zero{};
  return ((v > zero) | (v != v)) ? v : zero;
}

// A tile's outputs (after the epilogue; rows and columns past the output's edge unset)
// max-pooled by the 2x2 windows they hold, into pool's maxima and offsets.
void store_pooled(const WinogradPooling& pool, const F32x8 (&r)[kOut][kOut], int64_t image, int64_t group, int64_t y0,
                  int64_t x0) {
  const VectorLayout m = pool.maxima_layout, o = pool.offsets_layout;
  for (int a = 0; a < 2; ++a) {
    const int64_t py = y0 / 2 + a;
    if (py >= pool.oh) break;
    for (int b = 0; b < 2; ++b) {
      const int64_t px = x0 / 2 + b;
      if (px >= pool.ow) break;
      F32x8 best = r[2 * a][2 * b];
      I32x8 at{};
      for (int w = 1; w < 4; ++w) {
        const F32x8 v = r[2 * a + w / 2][2 * b + w % 2];
        const I32x8 take = replaces_maximum(v, best);
        best = take ? v : best;
        at = take ? I32x8{} + w : at;
      }
      const int64_t maximum = image * m.image + group * m.block + py * m.row + px * m.pixel;
      store_lanes(pool.maxima + maximum, pool.maxima_lane, best);
      const int64_t offset = image * o.image + group * o.block + py * o.row + px * o.pixel;
      if (pool.offsets) store_lanes(pool.offsets + offset, pool.offsets_lane, at);
    }
  }
}

// store_pooled for 16 channels from `group` (of 8) on, whose lanes lie one stride apart
// (pooled_wide_fits): the same comparisons on each value.
__attribute__((target("avx512f"))) void store_pooled_wide(const WinogradPooling& pool,
                                                          const F32x16 (&r)[kOut][kOut], int64_t image,
                                                          int64_t group, int64_t y0, int64_t x0) {
  const VectorLayout m = pool.maxima_layout, o = pool.offsets_layout;
  const int64_t maxima_lane = pool.maxima_lane, offsets_lane = pool.offsets_lane;
  for (int a = 0; a < 2; ++a) {
    const int64_t py = y0 / 2 + a;
    if (py >= pool.oh) break;
    for (int b = 0; b < 2; ++b) {
      const int64_t px = x0 / 2 + b;
      if (px >= pool.ow) break;
      F32x16 best = r[2 * a][2 * b];
      I32x16 at{};
      for (int w = 1; w < 4; ++w) {
        const F32x16 v = r[2 * a + w / 2][2 * b + w % 2];
        const I32x16 take = (v > best) | ((v != v) & (best == best));  // replaces_maximum
        best = take ? v : best;
        at = take ? I32x16{} + w : at;
      }
      store_lanes16(pool.maxima + image * m.image + group * m.block + py * m.row + px * m.pixel, maxima_lane, best);
      if (pool.offsets)
        store_lanes16(pool.offsets + image * o.image + group * o.block + py * o.row + px * o.pixel, offsets_lane, at);
    }
  }
}

// Whether the pooled outputs' 16 lanes from an even group of 8 lie one stride apart.
bool pooled_wide_fits(const WinogradPooling& pool) {
  return wide_lanes(pool.maxima_layout, pool.maxima_lane) &&
         (!pool.offsets || wide_lanes(pool.offsets_layout, pool.offsets_lane));
}

// Phase 3 on AVX-512 where the output's (and the residual's) channels lie 16 side by side,
// or the pooling's (pooled_wide_fits): 16 channels a vector, each value through the same
// operations as in the 8-lane loop below.
__attribute__((target("avx512f"))) void transform_outputs_wide(const ConvGeom& g, const Tiling& tiling,
                                                               const WinogradOperands& op, int64_t first,
                                                               int64_t tiles, TileRange range, Channels channels,
                                                               const float* m) {
  const int64_t point = point_stride(tiles, g.o), oh = g.oh, ow = g.ow;
  const VectorLayout out = op.out_layout, res = op.residual_layout;
  float* const out_data = op.out;
  const float* const residual = op.residual;
  const bool relu_on = op.relu;
  const WinogradPooling* const pool = op.pool;
  for (int64_t b = range.begin; b < range.end; ++b) {
    const Tiling::At at = tiling.at(first + b);
    const int64_t image = at.image, y0 = at.y0, x0 = at.x0;
    for (int64_t pair = channels.begin / kVec16; pair < channels.end / kVec16; ++pair) {
      const float* from = m + b * g.o + pair * kVec16;
      F32x16 points[kIn][kIn], t[kOut][kIn];
      for (int i = 0; i < kIn; ++i)
        for (int j = 0; j < kIn; ++j) points[i][j] = load16(from + (i * kIn + j) * point);
      for (int j = 0; j < kIn; ++j)
        output_1d([&](int i) -> const F32x16& { return points[i][j]; },
                  [&](int i, const F32x16& r) { t[i][j] = r; });
      const F32x16 bias = op.bias ? load16(op.bias + pair * kVec16) : F32x16{};
      F32x16 pooled[kOut][kOut];  // the tile's outputs, with op.pool
      for (int i = 0; i < kOut && y0 + i < oh; ++i) {
        F32x16 row[kOut];
        output_1d([&](int j) -> const F32x16& { return t[i][j]; }, [&](int j, const F32x16& r) { row[j] = r; });
        const int64_t y = y0 + i;
        for (int j = 0; j < kOut && x0 + j < ow; ++j) {  // the epilogue here, not in a lambda: AVX-512 code
          const int64_t x = x0 + j;
          F32x16 r = row[j] + bias;
          if (residual) r += load16(residual + image * res.image + 2 * pair * res.block + y * res.row + x * res.pixel);
          if (relu_on) r = ((r > 0.0f) | (r != r)) ? r : F32x16{};  // relu keeping NaN, as relu() below
          if (pool) pooled[i][j] = r;
          else
            std::memcpy(out_data + image * out.image + 2 * pair * out.block + y * out.row + x * out.pixel, &r,
                        sizeof r);
        }
      }
      if (pool) store_pooled_wide(*pool, pooled, image, 2 * pair, y0, x0);
    }
  }
}

// Phase 3: out = act(A^T M A + bias + residual) for the output channels `channels`, one
// (tile, group of 8 outputs) per item; or, with op.pool, the pooling of that.
void transform_outputs(const ConvGeom& g, const Tiling& tiling, const WinogradOperands& op, int64_t first,
                       int64_t tiles, TileRange range, Channels channels, const float* m) {
  if (kHasAvx512 && g.o % kVec16 == 0 && (op.pool ? pooled_wide_fits(*op.pool) : wide_lanes(op.out_layout, 1)) &&
      (!op.residual || wide_lanes(op.residual_layout, 1)))
    return transform_outputs_wide(g, tiling, op, first, tiles, range, channels, m);
  for_tile_groups(tiling, first, range, channels, [&](int64_t b, int64_t group, Tiling::At at) {
    const int64_t image = at.image, y0 = at.y0, x0 = at.x0;
    const float* from = m + b * g.o + group * kVec8;
    // Copies read once: a store (memcpy) might write any object, so fields read through
    // references would be read again after each.
    const int64_t point = point_stride(tiles, g.o), oh = g.oh, ow = g.ow;
    const VectorLayout out = op.out_layout, res = op.residual_layout;
    float* const out_data = op.out;
    const float* const residual = op.residual;
    const bool relu_on = op.relu;
    const WinogradPooling* const pool = op.pool;
    std::array<std::array<F32x8, kIn>, kOut> t;
    for (int j = 0; j < kIn; ++j)
      output_1d([&](int i) { return load8<F32x8>(from + (i * kIn + j) * point); },
                [&](int i, F32x8 r) { t[i][j] = r; });
    const F32x8 bias = op.bias ? load8<F32x8>(op.bias + group * kVec8) : F32x8{};
    F32x8 pooled[kOut][kOut];  // the tile's outputs, with op.pool
    for (int i = 0; i < kOut && y0 + i < oh; ++i)
      output_1d([&](int j) { return t[i][j]; }, [&](int j, F32x8 r) {
        const int64_t y = y0 + i, x = x0 + j;
        if (x >= ow) return;
        r += bias;
        if (residual) r += load8<F32x8>(residual + image * res.image + group * res.block + y * res.row + x * res.pixel);
        if (relu_on) r = relu(r);
        if (pool) pooled[i][j] = r;
        else store8(out_data + image * out.image + group * out.block + y * out.row + x * out.pixel, r);
      });
    if (pool) store_pooled(*pool, pooled, image, group, y0, x0);
  });
}

// The weight gradient's phase 1b: Mg[t][tile][o] = A dy A^T for the block's tiles, one
// (tile, group of 8 outputs) per item; load(group, at) gives the tile's 4x4 gradients.
template <class LoadTile>
void transform_gradient_tiles(const ConvGeom& g, const Tiling& tiling, int64_t first, int64_t tiles, TileRange range,
                              float* mg, LoadTile load) {
  for_tile_groups(tiling, first, range, {0, g.o}, [&](int64_t b, int64_t group, Tiling::At at) {
    const std::array<std::array<F32x8, kOut>, kOut> d = load(group, at);
    std::array<std::array<F32x8, kOut>, kIn> t;
    for (int j = 0; j < kOut; ++j)
      gradient_1d([&](int i) { return d[i][j]; }, [&](int i, F32x8 r) { t[i][j] = r; });
    float* to = mg + b * g.o + group * kVec8;
    const int64_t point = point_stride(tiles, g.o);  // read once: a store (memcpy) might write any object
    for (int i = 0; i < kIn; ++i)
      gradient_1d([&](int j) { return t[i][j]; }, [&](int j, F32x8 r) { store8(to + (i * kIn + j) * point, r); });
  });
}

// A tile's 4x4 output gradients of 16 channels into Mg (transform_gradient_tiles'
// arithmetic), from `to` on, the points `point` floats apart.
__attribute__((target("avx512f"))) void store_gradient_tile_wide(const F32x16 (&d)[kOut][kOut], float* to,
                                                                 int64_t point) {
  F32x16 t[kIn][kOut];
  for (int j = 0; j < kOut; ++j)
    gradient_1d([&](int i) -> const F32x16& { return d[i][j]; }, [&](int i, const F32x16& r) { t[i][j] = r; });
  for (int i = 0; i < kIn; ++i)
    gradient_1d([&](int j) -> const F32x16& { return t[i][j]; },
                [&](int j, const F32x16& r) { std::memcpy(to + (i * kIn + j) * point, &r, sizeof r); });
}

// transform_gradients (below) on AVX-512 for 16 output channels a vector, where dy's
// channels lie 16 side by side (channels-last): each value through the same operations.
__attribute__((target("avx512f"))) void transform_gradients_wide(const ConvGeom& g, const Tiling& tiling,
                                                                 const float* dy, const VectorLayout& l,
                                                                 int64_t first, int64_t tiles, TileRange range,
                                                                 float* mg) {
  const int64_t point = point_stride(tiles, g.o);
  for (int64_t b = range.begin; b < range.end; ++b) {
    const Tiling::At at = tiling.at(first + b);
    const int64_t rows = std::min<int64_t>(kOut, g.oh - at.y0), columns = std::min<int64_t>(kOut, g.ow - at.x0);
    for (int64_t pair = 0; pair < g.o / kVec16; ++pair) {
      const float* base = dy + at.image * l.image + 2 * pair * l.block;
      F32x16 d[kOut][kOut];
      for (int i = 0; i < kOut; ++i)
        for (int j = 0; j < kOut; ++j)
          d[i][j] = i < rows && j < columns ? load16(base + (at.y0 + i) * l.row + (at.x0 + j) * l.pixel) : F32x16{};
      store_gradient_tile_wide(d, mg + b * g.o + pair * kVec16, point);
    }
  }
}

// Phase 1b over a stored dy (zero past the output's edge).
void transform_gradients(const ConvGeom& g, const Tiling& tiling, const float* dy, const VectorLayout& l,
                         int64_t first, int64_t tiles, TileRange range, float* mg) {
  if (kHasAvx512 && g.o % kVec16 == 0 && wide_lanes(l, 1))
    return transform_gradients_wide(g, tiling, dy, l, first, tiles, range, mg);
  transform_gradient_tiles(g, tiling, first, tiles, range, mg, [&](int64_t group, Tiling::At at) {
    const int64_t y0 = at.y0, x0 = at.x0;
    const float* base = dy + at.image * l.image + group * l.block;
    std::array<std::array<F32x8, kOut>, kOut> d;
    const int rows = int(std::min<int64_t>(kOut, g.oh - y0)), columns = int(std::min<int64_t>(kOut, g.ow - x0));
    if (rows == kOut && columns == kOut) {  // a whole tile: no test per pixel
      for (int i = 0; i < kOut; ++i)
        for (int j = 0; j < kOut; ++j) d[i][j] = load8<F32x8>(base + (y0 + i) * l.row + (x0 + j) * l.pixel);
    } else {
      for (int i = 0; i < kOut; ++i)
        for (int j = 0; j < kOut; ++j)
          d[i][j] = i < rows && j < columns ? load8<F32x8>(base + (y0 + i) * l.row + (x0 + j) * l.pixel) : F32x8{};
    }
    return d;
  });
}

// transform_pooled_gradients (below) on AVX-512 for 16 output channels a vector, where the
// pooled operands' lanes allow (wide_lanes): each value through the same operations.
__attribute__((target("avx512f"))) void transform_pooled_gradients_wide(const ConvGeom& g, const Tiling& tiling,
                                                                        const WinogradPooledGradient& p,
                                                                        int64_t first, int64_t tiles, float* mg,
                                                                        I32x8& outside) {
  const int64_t point = point_stride(tiles, g.o);
  I32x16 outside_lanes{};
  for (int64_t b = 0; b < tiles; ++b) {
    const Tiling::At at = tiling.at(first + b);
    for (int64_t pair = 0; pair < g.o / kVec16; ++pair) {
      F32x16 d[kOut][kOut];
      for (int a = 0; a < 2; ++a)
        for (int c = 0; c < 2; ++c) {
          const int64_t py = at.y0 / 2 + a, px = at.x0 / 2 + c;
          F32x16 grad{};
          I32x16 position = I32x16{} - 1;  // no window: zeros
          if (py < p.oh && px < p.ow) {
            auto place = [&](const VectorLayout& l) {
              return at.image * l.image + 2 * pair * l.block + py * l.row + px * l.pixel;
            };
            grad = load_lanes16<F32x16>(p.gy + place(p.gy_layout), p.gy_lane);
            position = load_lanes16<I32x16>(p.offsets + place(p.offsets_layout), p.offsets_lane);
            if (p.maxima)
              grad = F32x16((I32x16)grad &
                            I32x16(load_lanes16<F32x16>(p.maxima + place(p.maxima_layout), p.maxima_lane) > 0.0f));
            outside_lanes |= (position < 0) | (position >= 4);
          }
          for (int w = 0; w < 4; ++w) d[2 * a + w / 2][2 * c + w % 2] = F32x16((I32x16)grad & (position == w));
        }
      store_gradient_tile_wide(d, mg + b * g.o + pair * kVec16, point);
    }
  }
  outside |= low_half(outside_lanes) | high_half(outside_lanes);
}

// Phase 1b over a pooled gradient: each of the tile's four 2x2 windows puts its pooled
// gradient where its offset says (where its maximum is > 0, with maxima), zeros elsewhere
// and past the pooled output's edge. Lanes whose offset lies outside the window are
// or'ed into `outside`.
void transform_pooled_gradients(const ConvGeom& g, const Tiling& tiling, const WinogradPooledGradient& p,
                                int64_t first, int64_t tiles, float* mg, I32x8& outside) {
  if (kHasAvx512 && g.o % kVec16 == 0 && wide_lanes(p.gy_layout, p.gy_lane) &&
      wide_lanes(p.offsets_layout, p.offsets_lane) && (!p.maxima || wide_lanes(p.maxima_layout, p.maxima_lane)))
    return transform_pooled_gradients_wide(g, tiling, p, first, tiles, mg, outside);
  transform_gradient_tiles(g, tiling, first, tiles, {0, tiles}, mg, [&](int64_t group, Tiling::At at) {
    std::array<std::array<F32x8, kOut>, kOut> d;
    for (int a = 0; a < 2; ++a)
      for (int b = 0; b < 2; ++b) {
        const int64_t py = at.y0 / 2 + a, px = at.x0 / 2 + b;
        F32x8 grad{};
        I32x8 position = I32x8{} - 1;  // no window: zeros
        if (py < p.oh && px < p.ow) {
          auto place = [&](const VectorLayout& l) {
            return at.image * l.image + group * l.block + py * l.row + px * l.pixel;
          };
          grad = load_lanes<F32x8>(p.gy + place(p.gy_layout), p.gy_lane);
          position = load_lanes<I32x8>(p.offsets + place(p.offsets_layout), p.offsets_lane);
          if (p.maxima) grad = F32x8((I32x8)grad & I32x8(load_lanes<F32x8>(p.maxima + place(p.maxima_layout),
                                                                          p.maxima_lane) > 0.0f));
          outside |= (position < 0) | (position >= 4);
        }
        for (int w = 0; w < 4; ++w) d[2 * a + w / 2][2 * b + w % 2] = F32x8((I32x8)grad & (position == w));
      }
    return d;
  });
}

// The two rows a thread's first tile row shares with the row above when another thread
// has that row (its run starts inside an image): they go to a strip of their own,
// channels-last, added to dx once every run is done (add_strip), so no two threads write
// one pixel.
struct Strip {
  float* values;   // [2][w][c], or null where the run starts an image
  int64_t image, y0;  // the tile row's image and first output row
  VectorLayout layout;
};

// The input gradient's phase 3 on AVX-512 where dx's channels lie 16 side by side
// (channels-last; the strips are): 16 channels a vector, each value through the same
// operations as in the 8-lane loop below.
__attribute__((target("avx512f"))) void transform_input_gradients_wide(const ConvGeom& g, const Tiling& tiling,
                                                                       const float* d, float* dx,
                                                                       const VectorLayout& l, int64_t first,
                                                                       int64_t tiles, TileRange range,
                                                                       const Strip& strip) {
  const int64_t point = point_stride(tiles, g.c), h = g.h, w = g.w, ph = g.ph, pw = g.pw;
  for (int64_t b = range.begin; b < range.end; ++b) {
    const Tiling::At at = tiling.at(first + b);
    const bool in_strip = strip.values && at.image == strip.image && at.y0 == strip.y0;
    for (int64_t pair = 0; pair < g.c / kVec16; ++pair) {
      const float* from = d + b * g.c + pair * kVec16;
      F32x16 points[kIn][kIn], t[kIn][kIn];
      for (int i = 0; i < kIn; ++i)
        for (int j = 0; j < kIn; ++j) points[i][j] = load16(from + (i * kIn + j) * point);
      for (int j = 0; j < kIn; ++j)
        input_adjoint_1d([&](int i) -> const F32x16& { return points[i][j]; },
                         [&](int i, const F32x16& r) { t[i][j] = r; });
      for (int i = 0; i < kIn; ++i) {
        const int64_t y = at.y0 - ph + i;
        if (y < 0 || y >= h) continue;
        const bool shared = i < kIn - kOut;  // with the tile row above
        const bool to_strip = in_strip && shared;
        float* row = to_strip ? strip.values + i * strip.layout.row + pair * kVec16
                              : dx + at.image * l.image + 2 * pair * l.block + y * l.row;
        const int64_t pixel = to_strip ? strip.layout.pixel : l.pixel;
        const bool row_seen = at.y0 > 0 && shared && !to_strip;  // by the tile row above
        F32x16 values[kIn];
        input_adjoint_1d([&](int j) -> const F32x16& { return t[i][j]; },
                         [&](int j, const F32x16& r) { values[j] = r; });
        for (int j = 0; j < kIn; ++j) {
          const int64_t x = at.x0 - pw + j;
          if (x < 0 || x >= w) continue;
          float* p = row + x * pixel;
          const bool seen = row_seen || (at.x0 > 0 && j < kIn - kOut);  // or by the tile to the left
          const F32x16 r = seen ? load16(p) + values[j] : values[j];
          std::memcpy(p, &r, sizeof r);
        }
      }
    }
  }
}

// The input gradient's phase 3: dx = B D B^T over each tile's 6x6 input window (phase 1's
// adjoint), one (tile, group of 8 input channels) per item. Windows overlap their
// neighbours' by two rows and columns: a pixel is stored by the first tile that covers it
// and added to by the later ones, so the tiles go in order, a tile row on one thread.
void transform_input_gradients(const ConvGeom& g, const Tiling& tiling, const float* d, float* dx,
                               const VectorLayout& l, int64_t first, int64_t tiles, TileRange range,
                               const Strip& strip) {
  if (kHasAvx512 && g.c % kVec16 == 0 && wide_lanes(l, 1))  // (the strips are channels-last)
    return transform_input_gradients_wide(g, tiling, d, dx, l, first, tiles, range, strip);
  for_tile_groups(tiling, first, range, {0, g.c}, [&](int64_t b, int64_t group, Tiling::At at) {
    const float* from = d + b * g.c + group * kVec8;
    const int64_t point = point_stride(tiles, g.c), h = g.h, w = g.w, ph = g.ph, pw = g.pw;  // read once, as above
    const VectorLayout dx_layout = l;
    Tile t;
    for (int j = 0; j < kIn; ++j)
      input_adjoint_1d([&](int i) { return load8<F32x8>(from + (i * kIn + j) * point); },
                       [&](int i, F32x8 r) { t[i][j] = r; });
    const bool in_strip = strip.values && at.image == strip.image && at.y0 == strip.y0;
    for (int i = 0; i < kIn; ++i) {
      const int64_t y = at.y0 - ph + i;
      if (y < 0 || y >= h) continue;
      const bool shared = i < kIn - kOut;  // with the tile row above
      const bool to_strip = in_strip && shared;
      float* row = to_strip ? strip.values + i * strip.layout.row + group * kVec8
                            : dx + at.image * dx_layout.image + group * dx_layout.block + y * dx_layout.row;
      const int64_t pixel = to_strip ? strip.layout.pixel : dx_layout.pixel;
      const bool row_seen = at.y0 > 0 && shared && !to_strip;  // by the tile row above
      input_adjoint_1d([&](int j) { return t[i][j]; }, [&](int j, F32x8 r) {
        const int64_t x = at.x0 - pw + j;
        if (x < 0 || x >= w) return;
        float* p = row + x * pixel;
        const bool seen = row_seen || (at.x0 > 0 && j < kIn - kOut);  // or by the tile to the left
        store8(p, seen ? load8<F32x8>(p) + r : r);
      });
    }
  });
}

// dx += the strip, once every thread's run is done.
void add_strip(const ConvGeom& g, const Strip& strip, float* dx, const VectorLayout& l) {
  if (!strip.values) return;
  for (int i = 0; i < kIn - kOut; ++i) {
    const int64_t y = strip.y0 - g.ph + i;
    if (y < 0 || y >= g.h) continue;
    for (int64_t x = 0; x < g.w; ++x)
      for (int64_t group = 0; group < g.c / kVec8; ++group) {
        float* p = dx + strip.image * l.image + group * l.block + y * l.row + x * l.pixel;
        store8(p, load8<F32x8>(p) + load8<F32x8>(strip.values + i * strip.layout.row + x * strip.layout.pixel +
                                                  group * kVec8));
      }
  }
}

// Groups of output panels that one product call covers.
int64_t panel_groups(const ConvGeom& g) { return (g.o / kPanel + panels_per_call() - 1) / panels_per_call(); }

// The weight gradient's phase 2: dU[t][c][o] (+)= sum over the block's tiles of
// V[t][tile][c] * Mg[t][tile][o], one (point, group of panels of 16 outputs) per item.
void accumulate_item(const ConvGeom& g, int64_t tiles, const float* v, const float* mg, float* du, bool first,
                     int64_t item) {
  const int64_t t = item / panel_groups(g), panel = item % panel_groups(g) * panels_per_call();
  const int64_t panels = std::min(panels_per_call(), g.o / kPanel - panel);
  for (int64_t c0 = 0; c0 < g.c; c0 += rows_per_call())
    product_rows(int(std::min<int64_t>(rows_per_call(), g.c - c0)), panels, v + t * point_stride(tiles, g.c) + c0,
                 mg + t * point_stride(tiles, g.o) + panel * kPanel, du + (t * g.c + c0) * g.o + panel * kPanel,
                 tiles, {.v_row = 1, .v_step = g.c, .u_step = g.o, .m_row = g.o}, !first);
}

// Over a block the threads share: the items split among them.
void accumulate_products(const ConvGeom& g, int64_t tiles, const float* v, const float* mg, float* du, bool first) {
#pragma omp for schedule(static)
  for (int64_t item = 0; item < kPoints * panel_groups(g); ++item) accumulate_item(g, tiles, v, mg, du, first, item);
}

// The weight gradient's phase 3: gw[o][c] = G^T dU[:, c, o] G, 8 outputs at a time.
void transform_weight_gradients(const ConvGeom& g, const float* du, float* gw) {
  const int64_t groups = g.o / kVec8;
  parallel_range(g.c * groups, [&](int64_t begin, int64_t end) {
    for (int64_t item = begin; item < end; ++item) {
      const int64_t c = item / groups, o0 = item % groups * kVec8;
      std::array<std::array<F32x8, 3>, kIn> z;  // dU G
      for (int i = 0; i < kIn; ++i)
        for (int b = 0; b < 3; ++b) {
          F32x8 sum{};
          for (int j = 0; j < kIn; ++j) sum += load8<F32x8>(du + ((i * kIn + j) * g.c + c) * g.o + o0) * kG[j][b];
          z[i][b] = sum;
        }
      for (int a = 0; a < 3; ++a)
        for (int b = 0; b < 3; ++b) {
          F32x8 w{};
          for (int i = 0; i < kIn; ++i) w += z[i][b] * kG[i][a];
          for (int64_t lane = 0; lane < kVec8; ++lane) gw[((o0 + lane) * g.c + c) * kTaps + a * 3 + b] = w[lane];
        }
    }
  }, grain_for(kPoints * kTaps * kVec8));
}

// This thread's own run of `count` items (tiles or tile rows), contiguous.
TileRange my_run(int64_t count) {
  const int64_t threads = omp_threads(), thread = omp_thread();
  return {count * thread / threads, count * (thread + 1) / threads};
}

// This thread's share of a block's `tiles` (the weight gradient's blocks, shared by the
// threads), in whole product calls.
TileRange my_tiles(int64_t tiles) {
  const int64_t threads = omp_threads(), calls = (tiles + rows_per_call() - 1) / rows_per_call();
  const int64_t per_thread = (calls + threads - 1) / threads * rows_per_call();
  return {std::min(tiles, omp_thread() * per_thread), std::min(tiles, (omp_thread() + 1) * per_thread)};
}

// Tiles per block: all of them where V and M fit block_bytes, else a multiple of kRows.
int64_t block_tiles(const ConvGeom& g, int64_t count, int64_t block_bytes) {
  const int64_t per_tile = kPoints * (g.c + g.o) * int64_t(sizeof(float));
  if (count * per_tile <= block_bytes) return count;
  return std::max<int64_t>(kRows, block_bytes / per_tile / kRows * kRows);
}

// A shared block of `block` tiles (of `count`) cut to a multiple of every thread's product
// calls, so that each thread gets as many (never more than the block_tiles its scratch
// holds). Uneven shares made one thread wait for the other at every block: the CNN's conv
// 2 spent ~15% of its time in the barrier with blocks of 150 tiles (84 and 66).
int64_t balanced(int64_t block, int64_t count) {
  const int64_t unit = rows_per_call() * max_threads();
  return block < count && block >= unit ? block / unit * unit : block;
}

// n tiles rounded down to whole product calls where there is one (each thread's share of a
// block: a partial call costs a whole one).
int64_t whole_calls(int64_t n) { return n >= rows_per_call() ? n / rows_per_call() * rows_per_call() : n; }

// The tiles of one thread's block in the forward: its share of the tiles whose
// transformed inputs and products fit block_bytes, in whole product calls, at least one;
// then evened out over the thread's run, so that no block is a short tail, which costs a
// whole transform of the weights (a run of 194 tiles in blocks of at most 96 went as 96,
// 96 and 2; now 72, 72 and 50).
int64_t thread_block_tiles(const ConvGeom& g, const Tiling& tiling, int64_t block_bytes) {
  const int64_t limit = std::max<int64_t>(1, whole_calls(block_tiles(g, tiling.count, block_bytes) / max_threads()));
  const int64_t run = (tiling.count + max_threads() - 1) / max_threads(), blocks = (run + limit - 1) / limit;
  const int64_t even = (run + blocks - 1) / blocks;
  return even >= rows_per_call() ? (even + rows_per_call() - 1) / rows_per_call() * rows_per_call() : even;
}

// Whether the forward's threads share the tiles and split the output channels instead:
// where each thread's own run of tiles would fill less than two product calls (ResNet-18's
// 256- and 512-channel layers at bs1: 8 and 2 tiles a thread). Each thread would make all
// of U = G w G^T for a few rows of products; split, each makes the U of its own outputs,
// and its product calls take every tile. Each thread transforms every tile's inputs (a
// few percent of the work). On a 2-core Zen 5 the 256-channel layer at bs1 went from 0.46
// to 0.33-0.36 ms, and the 512-channel one at bs8 (32 tiles) to 2.7 ms, now faster than
// oneDNN's 4.3.
bool split_outputs(const ConvGeom& g, const Tiling& tiling) {
  return max_threads() > 1 && panel_groups(g) >= max_threads() && tiling.count < 2 * rows_per_call() * max_threads();
}

// This thread's share of the output channels where the threads split them: whole groups of
// the product's panels.
Channels my_outputs(const ConvGeom& g) {
  const int64_t group_outputs = kPanel * panels_per_call(), groups = panel_groups(g);
  const int64_t threads = omp_threads(), thread = omp_thread();
  return {groups * thread / threads * group_outputs, std::min(g.o, groups * (thread + 1) / threads * group_outputs)};
}

// The forward's tiles per block of one thread: of its own run (thread_block_tiles), or of
// all the tiles where the threads split the outputs, in its share of block_bytes, evened
// over the tiles.
int64_t forward_block_tiles(const ConvGeom& g, const Tiling& tiling, int64_t block_bytes) {
  if (!split_outputs(g, tiling)) return thread_block_tiles(g, tiling, block_bytes);
  const int64_t limit = block_tiles(g, tiling.count, block_bytes / max_threads());
  const int64_t blocks = (tiling.count + limit - 1) / limit;
  return (tiling.count + blocks - 1) / blocks;
}

// Floats of one block's V and M (or Mg and D: c and o swapped).
int64_t block_floats(const ConvGeom& g, int64_t tiles) {
  return transform_floats(tiles, g.c) + transform_floats(tiles, g.o);
}

// The tile rows of one thread's block in the input gradient: its share of the rows whose
// transformed gradients and products fit block_bytes, at least one. `channels`: of the
// transforms a tile keeps (the input gradient's c + o).
int64_t thread_block_rows(const Tiling& tiling, int64_t block_bytes, int64_t channels) {
  const int64_t per_row = tiling.per_row * kPoints * channels * int64_t(sizeof(float));
  const int64_t rows = std::clamp<int64_t>(block_bytes / per_row, 1, tiling.count / tiling.per_row);
  return std::max<int64_t>(1, rows / max_threads());
}

// Floats of one thread's Strip.
int64_t strip_floats(const ConvGeom& g) { return (kIn - kOut) * g.w * g.c; }

// g with its input and output channels swapped: the input gradient's products run over
// the output channels into the input ones.
ConvGeom channels_swapped(ConvGeom g) {
  std::swap(g.c, g.o);
  return g;
}

ForcedChoice winograd_choice;

}  // namespace

std::optional<bool> winograd_forced() { return winograd_choice.forced(); }

WinogradOverride::WinogradOverride(bool use) : Scope(winograd_choice, use) {}

VectorLayout blocked8_vectors(const Shape& s) {
  return {.image = s[1] * s[2] * s[3], .block = s[2] * s[3] * kVec8, .row = s[3] * kVec8, .pixel = kVec8};
}

VectorLayout channels_last_vectors(const Shape& s) {
  return {.image = s[1] * s[2] * s[3], .block = kVec8, .row = s[3] * s[1], .pixel = s[1]};
}

std::optional<std::pair<VectorLayout, int64_t>> lane_vectors(const Tensor& t, int64_t block) {
  if (block == kVec8) return std::pair{blocked8_vectors(t.shape()), int64_t(1)};
  if (block) return std::nullopt;
  const Shape& s = t.strides();
  return std::pair{VectorLayout{.image = s[0], .block = kVec8 * s[1], .row = s[2], .pixel = s[3]}, s[1]};
}

bool winograd_fits(const ConvGeom& g) {
  return g.kh == 3 && g.kw == 3 && g.sh == 1 && g.sw == 1 && g.dh == 1 && g.dw == 1 && g.groups == 1 &&
         g.ph <= 2 && g.pw <= 2 && g.c % kVec8 == 0 && g.o % kPanel == 0;
}

namespace {

// Element (o, c, tap) of the weights in the packed order [o / 16][c][tap][16].
int64_t packed_index(const ConvGeom& g, int64_t o, int64_t c, int64_t tap) {
  return ((o / kPanel * g.c + c) * kTaps + tap) * kPanel + o % kPanel;
}

// The packed weights of geometry `packed` (winograd_pack_weights' order), element
// (o, c, tap) taken from w at from(o, c, tap).
template <class From>
Tensor pack(const ConvGeom& packed, const Tensor& w, From from) {
  const Tensor dense = kernels::dense(w);
  const float* values = dense.data<float>();
  Tensor out = empty({packed.o * packed.c * kTaps}, f32);
  float* to = out.data<float>();
  for (int64_t o = 0; o < packed.o; ++o)
    for (int64_t c = 0; c < packed.c; ++c)
      for (int64_t tap = 0; tap < kTaps; ++tap) to[packed_index(packed, o, c, tap)] = values[from(o, c, tap)];
  return out;
}

}  // namespace

Tensor winograd_pack_weights(const ConvGeom& g, const Tensor& w) {
  return pack(g, w, [&](int64_t o, int64_t c, int64_t tap) { return (o * g.c + c) * kTaps + tap; });
}

ConvGeom winograd_input_gradient_geom(const ConvGeom& g) {
  return {g.n, g.o, g.oh, g.ow, g.c, 3, 3, g.h, g.w, 1, 1, 1, 2 - g.ph, 2 - g.pw, 1, 1};
}

// Output c of the gradient reads input o of the forward through tap 8 - tap (both axes flipped).
Tensor winograd_pack_input_gradient_weights(const ConvGeom& g, const Tensor& w) {
  return pack(winograd_input_gradient_geom(g), w,
              [&](int64_t c, int64_t o, int64_t tap) { return (o * g.c + c) * kTaps + (kTaps - 1 - tap); });
}

bool winograd_input_gradient_fits(const ConvGeom& g) { return winograd_fits(channels_swapped(g)); }

// Input c of the products (input gradient) reads output o of the forward through the same tap.
Tensor winograd_pack_transposed_weights(const ConvGeom& g, const Tensor& w) {
  return pack(channels_swapped(g), w,
              [&](int64_t c, int64_t o, int64_t tap) { return (o * g.c + c) * kTaps + tap; });
}

Tensor winograd_unpack_weights(const ConvGeom& g, const Tensor& packed) {
  const float* from = packed.data<float>();
  Tensor w = empty(g.weight_shape(), f32);
  float* to = w.data<float>();
  for (int64_t o = 0; o < g.o; ++o)
    for (int64_t c = 0; c < g.c; ++c)
      for (int64_t tap = 0; tap < kTaps; ++tap) to[(o * g.c + c) * kTaps + tap] = from[packed_index(g, o, c, tap)];
  return w;
}

namespace {

// The scratch a plan lent, or else `bytes` allocated into `owner`.
float* lent_or_allocated(float* lent, size_t bytes, Tensor& owner) {
  if (lent) return lent;
  owner = empty({int64_t(bytes / sizeof(float))}, f32);
  return owner.data<float>();
}

}  // namespace

int64_t winograd_tiles(const ConvGeom& g) { return Tiling(g).count; }

size_t winograd_scratch_bytes(const ConvGeom& g, int64_t block_bytes) {
  // The weight gradient's blocks shared by the threads, or the forward's one per thread.
  const Tiling tiling(g);
  const int64_t shared = block_floats(g, block_tiles(g, tiling.count, block_bytes));
  return size_t(std::max(shared, max_threads() * block_floats(g, forward_block_tiles(g, tiling, block_bytes)))) *
         sizeof(float);
}

void conv_winograd_f32(const ConvGeom& g, const WinogradOperands& op) {
  const Tiling tiling(g);
  const bool split = split_outputs(g, tiling);
  const int64_t block = forward_block_tiles(g, tiling, op.block_bytes);
  Tensor allocated;
  float* scratch = lent_or_allocated(op.scratch, winograd_scratch_bytes(g, op.block_bytes), allocated);
  // Each thread its own run of the tiles, in blocks of its share of the scratch: no
  // barriers, and its tiles are the images' rows that the steps before and after, which
  // split the batch the same way, keep on its core. (Blocks shared by all threads, each
  // thread a slice of each, took the CNN's conv 2 forward 1.02 ms in a training step,
  // against 0.80-0.94.) With few tiles, every tile and its own share of the outputs
  // (split_outputs): still no barriers.
#pragma omp parallel
  {
    const TileRange run = split ? TileRange{0, tiling.count} : my_run(tiling.count);
    const Channels outputs = split ? my_outputs(g) : Channels{0, g.o};
    float* v = scratch + omp_thread() * block_floats(g, block);
    float* m = v + transform_floats(block, g.c);
    for (int64_t first = run.begin; first < run.end; first += block) {
      const int64_t tiles = std::min(block, run.end - first);
      transform_inputs(g, tiling, op, first, tiles, {0, tiles}, v);
      multiply(g, op.packed_weights, tiles, {0, tiles}, outputs, v, m);
      transform_outputs(g, tiling, op, first, tiles, {0, tiles}, outputs, m);
    }
  }
}

// Whether each thread sums the products of its own run of tiles into a dU of its own
// (added up after): where dU is small enough to have one per thread. Else the threads
// share each block, and each sums some points and panels over all its tiles.
bool own_sums(const ConvGeom& g) { return kPoints * g.c * g.o * int64_t(sizeof(float)) <= (int64_t(1) << 20); }

size_t winograd_weight_grad_scratch_bytes(const ConvGeom& g, int64_t block_bytes) {
  // V and Mg take the room of the forward's V and M, and dU is [36][c][o], one per thread
  // or one in all
  const int64_t sums = own_sums(g) ? max_threads() : 1;
  return winograd_scratch_bytes(g, block_bytes) + size_t(sums * kPoints * g.c * g.o) * sizeof(float);
}

namespace {

// The weight gradient with a dU per thread (own_sums): each thread its own run of the
// tiles, as the forward, then the threads' dU added up in thread order into the first.
void weight_grad_own_sums(const ConvGeom& g, const float* x, const VectorLayout& x_layout, const float* dy,
                          const VectorLayout& dy_layout, float* transforms, float* sums, int64_t block_bytes) {
  const Tiling tiling(g);
  const int64_t block = thread_block_tiles(g, tiling, block_bytes), du_floats = kPoints * g.c * g.o;
  const WinogradOperands input{.x = x, .x_layout = x_layout};
#pragma omp parallel
  {
    const TileRange run = my_run(tiling.count);
    float* v = transforms + omp_thread() * block_floats(g, block);
    float* mg = v + transform_floats(block, g.c);
    float* du = sums + omp_thread() * du_floats;
    if (run.begin == run.end) std::fill(du, du + du_floats, 0.0f);
    for (int64_t first = run.begin; first < run.end; first += block) {
      const int64_t tiles = std::min(block, run.end - first);
      transform_inputs(g, tiling, input, first, tiles, {0, tiles}, v);
      transform_gradients(g, tiling, dy, dy_layout, first, tiles, {0, tiles}, mg);
      for (int64_t item = 0; item < kPoints * panel_groups(g); ++item)
        accumulate_item(g, tiles, v, mg, du, first == run.begin, item);
    }
#pragma omp barrier
    const TileRange mine = my_run(du_floats);  // of the sums, added up
    for (int64_t other = 1; other < omp_threads(); ++other)
      for (int64_t i = mine.begin; i < mine.end; ++i) sums[i] += sums[other * du_floats + i];
  }
}

}  // namespace

void conv_winograd_weight_grad_f32(const ConvGeom& g, const float* x, const VectorLayout& x_layout, const float* dy,
                                   const VectorLayout& dy_layout, float* gw, float* scratch, int64_t block_bytes) {
  const Tiling tiling(g);
  Tensor allocated;
  float* v = lent_or_allocated(scratch, winograd_weight_grad_scratch_bytes(g, block_bytes), allocated);
  float* sums = v + winograd_scratch_bytes(g, block_bytes) / sizeof(float);
  if (own_sums(g)) {
    weight_grad_own_sums(g, x, x_layout, dy, dy_layout, v, sums, block_bytes);
    return transform_weight_gradients(g, sums, gw);
  }
  const int64_t block = balanced(block_tiles(g, tiling.count, block_bytes), tiling.count);
  float* mg = v + transform_floats(block, g.c);
  float* du = sums;
  const WinogradOperands input{.x = x, .x_layout = x_layout};
#pragma omp parallel
  for (int64_t first = 0; first < tiling.count; first += block) {
    const int64_t tiles = std::min(block, tiling.count - first);
    const TileRange mine = my_tiles(tiles);
    transform_inputs(g, tiling, input, first, tiles, mine, v);
    transform_gradients(g, tiling, dy, dy_layout, first, tiles, mine, mg);
#pragma omp barrier
    accumulate_products(g, tiles, v, mg, du, first == 0);  // sums over every thread's tiles
  }
  transform_weight_gradients(g, du, gw);
}

size_t winograd_input_grad_scratch_bytes(const ConvGeom& g, int64_t block_bytes) {
  const Tiling tiling(g);
  const int64_t room = thread_block_rows(tiling, block_bytes, g.c + g.o) * tiling.per_row;
  return size_t(max_threads() * (block_floats(g, room) + strip_floats(g))) * sizeof(float);
}

void conv_winograd_input_grad_f32(const ConvGeom& g, const float* dy, const VectorLayout& dy_layout,
                                  const float* packed_weights, float* dx, const VectorLayout& dx_layout,
                                  float* scratch, int64_t block_bytes) {
  const Tiling tiling(g);
  const int64_t block_rows = thread_block_rows(tiling, block_bytes, g.c + g.o), room = block_rows * tiling.per_row;
  Tensor allocated;
  float* transforms = lent_or_allocated(scratch, winograd_input_grad_scratch_bytes(g, block_bytes), allocated);
  float* strips = transforms + max_threads() * block_floats(g, room);
  const ConvGeom swapped = channels_swapped(g);
  const int64_t rows = tiling.count / tiling.per_row;
  // As the forward: each thread its own run of whole tile rows, in blocks of its share of
  // the scratch; one barrier, before the strips of the runs that start inside an image.
#pragma omp parallel
  {
    const TileRange run = my_run(rows);  // of tile rows
    float* mg = transforms + omp_thread() * block_floats(g, room);
    float* d = mg + transform_floats(room, g.o);
    const Tiling::At start = tiling.at(std::min(run.begin, rows - 1) * tiling.per_row);
    const bool shares_rows = run.begin < run.end && start.y0 > 0;
    const Strip strip{shares_rows ? strips + omp_thread() * strip_floats(g) : nullptr, start.image, start.y0,
                      {.image = 0, .block = kVec8, .row = g.w * g.c, .pixel = g.c}};
    for (int64_t row = run.begin; row < run.end; row += block_rows) {
      const int64_t first = row * tiling.per_row, tiles = std::min(block_rows, run.end - row) * tiling.per_row;
      transform_gradients(g, tiling, dy, dy_layout, first, tiles, {0, tiles}, mg);
      multiply(swapped, packed_weights, tiles, {0, tiles}, {0, swapped.o}, mg, d);
      transform_input_gradients(g, tiling, d, dx, dx_layout, first, tiles, {0, tiles}, strip);
    }
#pragma omp barrier
    add_strip(g, strip, dx, dx_layout);
  }
}

bool winograd_backward_pooled_fits(const ConvGeom& g) {
  return winograd_fits(g) && winograd_input_gradient_fits(g) && own_sums(g);
}

namespace {

// Per thread: a block of tile rows' Mg, D (the input gradient's products) and V (the
// input's transforms), then its strip, its dU and its bias sums.
int64_t backward_pooled_channels(const ConvGeom& g) { return g.o + 2 * g.c; }
int64_t backward_pooled_floats(const ConvGeom& g, int64_t room) {
  return transform_floats(room, g.o) + 2 * transform_floats(room, g.c);
}

}  // namespace

size_t winograd_backward_pooled_scratch_bytes(const ConvGeom& g, int64_t block_bytes) {
  const Tiling tiling(g);
  const int64_t room = thread_block_rows(tiling, block_bytes, backward_pooled_channels(g)) * tiling.per_row;
  const int64_t per_thread =
      backward_pooled_floats(g, room) + strip_floats(g) + kPoints * g.c * g.o + g.o;
  return size_t(max_threads() * per_thread) * sizeof(float);
}

bool conv_winograd_backward_pooled_f32(const ConvGeom& g, const WinogradPooledGradient& gy,
                                       const float* packed_weights, const float* x, const VectorLayout& x_layout,
                                       float* dx, const VectorLayout& dx_layout, float* gw, float* gb, float* scratch,
                                       int64_t block_bytes) {
  const Tiling tiling(g);
  const int64_t block_rows = thread_block_rows(tiling, block_bytes, backward_pooled_channels(g));
  const int64_t room = block_rows * tiling.per_row, rows = tiling.count / tiling.per_row;
  const int64_t du_floats = kPoints * g.c * g.o, transforms_per_thread = backward_pooled_floats(g, room);
  Tensor allocated;
  float* transforms = lent_or_allocated(scratch, winograd_backward_pooled_scratch_bytes(g, block_bytes), allocated);
  float* strips = transforms + max_threads() * transforms_per_thread;
  float* sums = strips + max_threads() * strip_floats(g);
  float* bias_sums = sums + max_threads() * du_floats;
  const ConvGeom swapped = channels_swapped(g);
  const WinogradOperands input{.x = x, .x_layout = x_layout};
  std::atomic<bool> outside{false};
  // The input gradient's runs of whole tile rows (conv_winograd_input_grad_f32), each
  // block's Mg also summed into the thread's dU with the input's transforms, as
  // weight_grad_own_sums does. Point (1, 1) of a tile's Mg = A dy A^T is the sum of its 16
  // gradients: summed over the tiles, the bias gradient.
#pragma omp parallel
  {
    const TileRange run = my_run(rows);
    float* mg = transforms + omp_thread() * transforms_per_thread;
    float* d = mg + transform_floats(room, g.o);
    float* v = d + transform_floats(room, g.c);
    float* du = sums + omp_thread() * du_floats;
    float* bias = bias_sums + omp_thread() * g.o;
    const Tiling::At start = tiling.at(std::min(run.begin, rows - 1) * tiling.per_row);
    const bool shares_rows = run.begin < run.end && start.y0 > 0;
    const Strip strip{shares_rows ? strips + omp_thread() * strip_floats(g) : nullptr, start.image, start.y0,
                      {.image = 0, .block = kVec8, .row = g.w * g.c, .pixel = g.c}};
    if (run.begin == run.end) std::fill(du, du + du_floats, 0.0f);
    std::fill(bias, bias + g.o, 0.0f);
    I32x8 outside_lanes{};
    for (int64_t row = run.begin; row < run.end; row += block_rows) {
      const int64_t first = row * tiling.per_row, tiles = std::min(block_rows, run.end - row) * tiling.per_row;
      transform_pooled_gradients(g, tiling, gy, first, tiles, mg, outside_lanes);
      const float* tile_sums = mg + (1 * kIn + 1) * point_stride(tiles, g.o);
      for (int64_t tile = 0; tile < tiles; ++tile)
        for (int64_t o = 0; o < g.o; ++o) bias[o] += tile_sums[tile * g.o + o];
      multiply(swapped, packed_weights, tiles, {0, tiles}, {0, swapped.o}, mg, d);
      transform_input_gradients(g, tiling, d, dx, dx_layout, first, tiles, {0, tiles}, strip);
      transform_inputs(g, tiling, input, first, tiles, {0, tiles}, v);
      for (int64_t item = 0; item < kPoints * panel_groups(g); ++item)
        accumulate_item(g, tiles, v, mg, du, row == run.begin, item);
    }
    if (any_lane(outside_lanes)) outside.store(true, std::memory_order_relaxed);
#pragma omp barrier
    add_strip(g, strip, dx, dx_layout);
    const TileRange mine = my_run(du_floats);  // of the sums, added up in thread order
    for (int64_t other = 1; other < omp_threads(); ++other)
      for (int64_t i = mine.begin; i < mine.end; ++i) sums[i] += sums[other * du_floats + i];
#pragma omp single
    for (int64_t o = 0; o < g.o; ++o) {
      float total = 0;
      for (int64_t t = 0; t < omp_threads(); ++t) total += bias_sums[t * g.o + o];
      gb[o] = total;
    }
  }
  transform_weight_gradients(g, sums, gw);
  return !outside.load();
}

}  // namespace baton::kernels
