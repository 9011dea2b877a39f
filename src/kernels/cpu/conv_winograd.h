// Winograd F(4x4, 3x3) convolution on 8-channel vectors: baton's own, for the machines
// where oneDNN 2.6 has no Winograd kernel (AVX2 ones). A 3x3, stride-1 convolution costs
// 36 multiplications per 4x4 output tile and channel pair instead of 144.
#pragma once
#include <cstdint>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

#include "baton/tensor.h"
#include "kernels/cpu/conv.h"
#include "kernels/cpu/forced_choice.h"

namespace baton::kernels {

// Where an activation's groups of 8 channels lie: element (n, c, y, x) is at
// n * image + (c / 8) * block + y * row + x * pixel + c % 8 (floats). Channel-blocked
// (nChw8c) and channels-last tensors both have this form.
struct VectorLayout {
  int64_t image, block, row, pixel;
};
VectorLayout blocked8_vectors(const Shape& nchw);
VectorLayout channels_last_vectors(const Shape& nchw);
// Where t's groups of 8 channels lie and how far apart the 8 lanes of one are: a plan's
// blocks of 8 (lanes side by side), or t's strides (channels-last: side by side; plain: a
// plane apart); none for other blocks.
std::optional<std::pair<VectorLayout, int64_t>> lane_vectors(const Tensor& t, int64_t block);

// The geometries this kernel runs: 3x3, stride 1, no dilation or groups, padding of at
// most 2, input channels a multiple of 8 and output channels of 16.
bool winograd_fits(const ConvGeom& g);

// The weights ([o, c, 3, 3], f32, any strides) in the kernel's order, [o / 16][c][9][16]
// (the kernel transforms them as it runs, G w G^T, rather than keep 4x the bytes), and
// back (the same values: only the order changes).
Tensor winograd_pack_weights(const ConvGeom& g, const Tensor& w);
Tensor winograd_unpack_weights(const ConvGeom& g, const Tensor& packed);

// An input gradient (conv2d_backward_input of g) as the forward convolution this kernel
// runs: over gy's channels into x's, the weights transposed and flipped, padding 2 - p.
// Fits where g has stride 1 and the result fits winograd_fits.
ConvGeom winograd_input_gradient_geom(const ConvGeom& g);
// g's weights ([o, c, 3, 3]) transposed and flipped, in the kernel's order for that geometry.
Tensor winograd_pack_input_gradient_weights(const ConvGeom& g, const Tensor& w);

// Bytes of the transformed inputs and products (V and M) of blocks of tiles, block_bytes
// in all: each thread goes over its own run of the tiles a block at a time (the weight
// gradient: the threads share each block).
// No one size is fastest everywhere: on a 2-core Zen 5 ResNet-18's 64- and 128-channel
// layers at bs8 ran in 3.5 and 2.6 ms with 8 MiB blocks (in L3) against 4.0 and 3.1 with
// 4 MiB ones, while on a 2-core Zen 4 the CNN step was faster with 2 MiB blocks (in the
// cores' L2), whose speed also suffered less when the shared L3 was busy. Plans time both.
constexpr int64_t kWinogradSmallBlock = int64_t(2) << 20, kWinogradLargeBlock = int64_t(8) << 20;
// Large blocks hold 4x the scratch of small ones, and plans lend it from their arena. Where
// that scratch outweighs the step's own input and output, it may set the plan's peak: in
// the CNN training step conv 2's forward (4.8 MB in and out) in 8 MiB blocks raised the
// activation peak from 0.32 to 0.59 of eager's, for a layer 7% faster (0.54 against 0.58
// ms). There a plan takes large blocks only where they beat small ones by this much.
// ResNet-18's 64-channel layers at bs8 (12.8 MB in and out) keep them at 5-9%.
constexpr double kLargeBlockWin = 0.9;
// Leaves out (ms = infinity) a timed large-block way for g that does not beat its
// small-block sibling by kLargeBlockWin where its scratch outweighs g's input and output,
// before the fastest way is chosen.
inline void keep_large_blocks_only_where_clearly_faster(std::vector<double>& ms, size_t small, size_t large,
                                                        const ConvGeom& g) {
  const int64_t step_bytes = (g.input_shape().numel() + g.output_shape().numel()) * int64_t(sizeof(float));
  if (kWinogradLargeBlock > step_bytes && ms[large] > kLargeBlockWin * ms[small])
    ms[large] = std::numeric_limits<double>::infinity();
}

// A 2x2, stride-2 max pooling the output goes through instead of being stored: a 4x4
// output tile holds whole windows, so the output transform keeps each window's maximum
// (a NaN wins, ties keep the first) and, with `offsets`, its position ky * 2 + kx. Their
// 8 channels of a group lie `lane` elements apart (1: one vector store).
struct WinogradPooling {
  float* maxima;
  VectorLayout maxima_layout;
  int64_t maxima_lane;
  int32_t* offsets;  // or null
  VectorLayout offsets_layout;
  int64_t offsets_lane;
  int64_t oh, ow;  // the pooled size
};

struct WinogradOperands {
  const float* x;
  VectorLayout x_layout;
  const float* packed_weights;  // winograd_pack_weights
  const float* bias;            // [o], or null
  const float* residual;        // of the output's shape, or null; may be out itself
  VectorLayout residual_layout;
  bool relu;  // max(v, 0) keeping NaN, as the relu op does
  float* out;  // unused with `pool`
  VectorLayout out_layout;
  const WinogradPooling* pool = nullptr;
  float* scratch = nullptr;  // winograd_scratch_bytes(g, block_bytes), or null: allocated
  int64_t block_bytes = kWinogradLargeBlock;
};

// The 4x4 output tiles the kernel computes for g.
int64_t winograd_tiles(const ConvGeom& g);

// The transformed inputs and products of one block of tiles.
size_t winograd_scratch_bytes(const ConvGeom& g, int64_t block_bytes);

// out = act(conv(x, w) + bias + residual) for finite operands (the transforms subtract:
// an infinity would become NaN where direct convolution keeps it; callers check).
// Rounding differs from direct convolution's: the transforms scale values by up to 8
// and 1/24, so errors are ~1e-6 of the result's magnitude rather than a few ulps.
void conv_winograd_f32(const ConvGeom& g, const WinogradOperands& operands);

// The weight gradient of g (winograd_fits(g)) in the transformed domain: gw ([o, c, 3, 3],
// contiguous) = G^T (sum over output tiles of (B^T x B) * (A dy A^T)) G, x and dy in
// 8-channel vector layouts, finite (an infinity would spread over whole tiles). The bias
// gradient is the caller's. scratch: winograd_weight_grad_scratch_bytes(g, block_bytes), or
// null (allocated).
size_t winograd_weight_grad_scratch_bytes(const ConvGeom& g, int64_t block_bytes);
void conv_winograd_weight_grad_f32(const ConvGeom& g, const float* x, const VectorLayout& x_layout, const float* dy,
                                   const VectorLayout& dy_layout, float* gw, float* scratch = nullptr,
                                   int64_t block_bytes = kWinogradLargeBlock);

// The input gradient (conv2d_backward_input of g) as the adjoint of the forward's
// transforms: dx = B (sum over o of U[o][c] * (A dy A^T)) B^T over the forward's tiles,
// windows overlapping by two pixels summed. It fits where winograd_fits holds for g with
// its channels swapped. The weights go in the order winograd_pack_transposed_weights
// gives: g's [o, c, 3, 3] seen as [c, o, 3, 3].
bool winograd_input_gradient_fits(const ConvGeom& g);
Tensor winograd_pack_transposed_weights(const ConvGeom& g, const Tensor& w);
size_t winograd_input_grad_scratch_bytes(const ConvGeom& g, int64_t block_bytes);
void conv_winograd_input_grad_f32(const ConvGeom& g, const float* dy, const VectorLayout& dy_layout,
                                  const float* packed_weights, float* dx, const VectorLayout& dx_layout,
                                  float* scratch = nullptr, int64_t block_bytes = kWinogradLargeBlock);

// A 2x2, stride-2 max pooling's output gradient standing in for the output gradient dy of
// the convolution whose result it pooled: a 4x4 output tile holds whole windows, and each
// output's dy is the pooled gradient where its window's offset (ky * 2 + kx) names it and,
// with maxima, the window's maximum is > 0 (the relu before the pooling); else 0. The 8
// channels of a group lie `lane` elements apart in each operand (1: one vector load).
struct WinogradPooledGradient {
  const float* gy;
  VectorLayout gy_layout;
  int64_t gy_lane;
  const int32_t* offsets;
  VectorLayout offsets_layout;
  int64_t offsets_lane;
  const float* maxima;  // or null
  VectorLayout maxima_layout;
  int64_t maxima_lane;
  int64_t oh, ow;  // the pooled size
};

// Both gradients of g (and the bias gradient gb) from a pooled output gradient in one pass
// over the output's tiles:
// each tile's A dy A^T serves the input gradient (as conv_winograd_input_grad_f32, its
// transposed form) and the weight gradient (as conv_winograd_weight_grad_f32, a dU per
// thread), and dy is never stored. Fits where both kernels fit and dU is small enough to
// have one per thread. Operands finite; packed_weights: winograd_pack_transposed_weights.
// Returns false where a window offset lies outside its window (dx and gw then hold
// nothing meaningful). scratch: winograd_backward_pooled_scratch_bytes, or null.
bool winograd_backward_pooled_fits(const ConvGeom& g);
size_t winograd_backward_pooled_scratch_bytes(const ConvGeom& g, int64_t block_bytes);
bool conv_winograd_backward_pooled_f32(const ConvGeom& g, const WinogradPooledGradient& gy,
                                       const float* packed_weights, const float* x, const VectorLayout& x_layout,
                                       float* dx, const VectorLayout& dx_layout, float* gw, float* gb,
                                       float* scratch, int64_t block_bytes);

// Whether plans take this kernel where it fits and oneDNN has no Winograd: measured
// against oneDNN's direct kernel per geometry (nullopt), unless a WinogradOverride lives.
std::optional<bool> winograd_forced();
// While one lives, plans made take this kernel wherever it fits (true) or never (false):
// tests of either way on any machine.
class WinogradOverride : ForcedChoice::Scope {
 public:
  explicit WinogradOverride(bool use);
};

}  // namespace baton::kernels
