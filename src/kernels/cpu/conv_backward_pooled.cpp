#include "kernels/cpu/conv_backward_pooled.h"

#include <algorithm>
#include <optional>
#include <vector>

#include "kernels/cpu/conv_winograd.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/finite.h"
#include "kernels/cpu/loops.h"
#include "kernels/cpu/onednn.h"
#include "kernels/cpu/reduce.h"
#include "kernels/cpu/step_buffers.h"

namespace baton::kernels {
namespace {

// The pooled operands as Winograd's tile loads read them: any strides, or blocks of 8.
std::optional<WinogradPooledGradient> pooled_gradient(const PoolGeom& p, const Tensor& gy, const Tensor& offsets,
                                                      const Tensor* maxima, const ConvBackwardPooledBlocks& blocks) {
  const auto g = lane_vectors(gy, blocks.gy), o = lane_vectors(offsets, blocks.offsets);
  const auto m = maxima ? lane_vectors(*maxima, blocks.maxima) : g;
  if (!g || !o || !m) return std::nullopt;
  return WinogradPooledGradient{gy.data<float>(), g->first, g->second, offsets.data<int32_t>(), o->first, o->second,
                                maxima ? maxima->data<float>() : nullptr, m->first, m->second, p.oh, p.ow};
}

IndexError offset_outside_window(const PoolGeom& p) {
  return IndexError("conv2d_backward_pooled", str("a window offset lies outside its ", p.kh, "x", p.kw, " window"),
                    SourceLoc::current());
}

// dy: the pooling's input gradient (the convolution's output gradient), in blocks of
// dy_block.
void pooling_gradient(const PoolGeom& p, const Tensor& gy, const Tensor& offsets, const Tensor* maxima,
                      const Tensor& dy, const ConvBackwardPooledBlocks& blocks, int64_t dy_block) {
  std::vector<int64_t> operands{blocks.gy, blocks.offsets};
  if (maxima) operands.push_back(blocks.maxima);
  operands.push_back(dy_block);
  const WindowPoolPlan plan = window_pool_plan(operands);
  try {
    max_pool_window_backward(p, gy, offsets, dy, maxima, &plan);
  } catch (const IndexError&) {  // named for this step's op
    throw offset_outside_window(p);
  }
}

// The one Winograd pass, where the plan chose it and the operands allow: false where it
// cannot run (layouts it does not take, operands that are not finite, whose infinities
// the transforms would spread where direct convolution keeps them).
bool by_winograd(const ConvGeom& g, const PoolGeom& p, const Tensor& gy, const Tensor& offsets, const Tensor* maxima,
                 const Tensor& w, const Tensor& x, const Tensor& gx, const Tensor& gw, const Tensor& gb,
                 const ConvBackwardPooledPlan& plan) {
  const auto xv = lane_vectors(x, plan.blocks.x), gxv = lane_vectors(gx, plan.blocks.gx);
  const std::optional<WinogradPooledGradient> pooled = pooled_gradient(p, gy, offsets, maxima, plan.blocks);
  if (!xv || !gxv || !pooled || xv->second != 1 || gxv->second != 1 || !gw.is_contiguous() || !gb.is_contiguous())
    return false;
  if (plan.threads != max_threads() || has_non_finite(gy) || has_non_finite(w) || has_non_finite(x)) return false;
  const Tensor packed = winograd_pack_transposed_weights(g, w);
  auto* scratch =
      static_cast<float*>(onednn::lent_scratch(winograd_backward_pooled_scratch_bytes(g, plan.winograd_block)));
  if (!conv_winograd_backward_pooled_f32(g, *pooled, packed.data<float>(),
                                         x.data<float>(), xv->first, gx.data<float>(), gxv->first, gw.data<float>(),
                                         gb.data<float>(), scratch, plan.winograd_block))
    throw offset_outside_window(p);
  return true;
}

// As the steps ran apart: the convolution's output gradient made (the pooling's backward),
// in the plan's lent scratch past the convolutions' own, then both gradients of it.
void apart(const ConvGeom& g, const PoolGeom& p, const Tensor& gy, const Tensor& offsets, const Tensor* maxima,
           const Tensor& w, const Tensor& x, const Tensor& gx, const Tensor& gw, const Tensor& gb,
           const ConvBackwardPooledPlan* plan) {
  const size_t convs = plan ? plan->convs_scratch : 0;
  const size_t dy_bytes = cache_aligned(size_t(g.output_shape().numel()) * sizeof(float));
  char* lent = plan ? static_cast<char*>(onednn::lent_scratch(convs + dy_bytes)) : nullptr;
  const int64_t dy_block = plan ? plan->dy_block : 0;
  const Tensor dy = activation_over(g.output_shape(), dy_block, lent ? lent + convs : nullptr);
  pooling_gradient(p, gy, offsets, maxima, dy, plan ? plan->blocks : ConvBackwardPooledBlocks{}, dy_block);
  std::optional<onednn::StepScratch> own;  // the convolutions' part of the lent bytes alone
  if (lent) own.emplace(lent, convs);
  conv_backward_input_f32(g, dy, w, gx, plan ? plan->input.get() : nullptr);
  conv_backward_weight_f32(g, dy, x, gw, plan ? plan->weight.get() : nullptr, &gb);
}

void apart_f64(const ConvGeom& g, const PoolGeom& p, const Tensor& gy, const Tensor& offsets, const Tensor* maxima,
               const Tensor& w, const Tensor& x, const Tensor& gx, const Tensor& gw, const Tensor& gb) {
  const Tensor dy = empty(g.output_shape(), f64);
  pooling_gradient(p, gy, offsets, maxima, dy, {}, 0);
  conv_backward_input_f64(g, dy, w, gx);
  conv_backward_weight_f64(g, dy, x, gw);
  sum_into<double>(dy, {0, 2, 3}, gb.data<double>());
}

}  // namespace

std::shared_ptr<const ConvBackwardPooledPlan> prepare_conv_backward_pooled_f32(const ConvGeom& g, const PoolGeom& p,
                                                                              const Tensor& x, const Tensor& gx,
                                                                              const ConvBackwardPooledBlocks& blocks,
                                                                              PreparedKernel& prepared) {
  auto plan = std::make_shared<ConvBackwardPooledPlan>();
  plan->blocks = blocks;
  plan->threads = max_threads();
  // A plan has one block size (any operand's); the output gradient takes it where its
  // channels fill whole blocks, as the plan would have stored it.
  const int64_t block = std::max({blocks.gy, blocks.offsets, blocks.maxima, blocks.x, blocks.gx});
  plan->dy_block = block && g.o % block == 0 ? block : 0;
  const Tensor dy = activation_metadata(g.output_shape(), plan->dy_block);
  PreparedKernel input, weight;
  plan->input = prepare_conv_backward_input_f32(g, dy, gx, input, plan->dy_block, blocks.gx);
  plan->weight = prepare_conv_backward_weight_f32(g, dy, x, true, weight, plan->dy_block, blocks.x);
  plan->convs_scratch = cache_aligned(std::max(input.scratch_bytes, weight.scratch_bytes));
  const auto xv = lane_vectors(x, blocks.x), gxv = lane_vectors(gx, blocks.gx);
  // The tile loads read the pooled operands in any strides or blocks of 8 (lane_vectors).
  const bool pooled_vectors = blocks.gy != 16 && blocks.offsets != 16 && blocks.maxima != 16;
  const bool vectors = xv && gxv && xv->second == 1 && gxv->second == 1 && pooled_vectors;
  if (winograd_backward_pooled_fits(g) && two_by_two_windows(p) && vectors)
    plan->winograd_block = shared_winograd_block(*plan->input, *plan->weight);
  if (plan->winograd_block) {  // (operands that are not finite go apart in allocated memory)
    prepared.implementation = str("baton winograd F(4x4,3x3), both gradients in one pass from the pooled gradient (",
                                  "input gradient ", input.implementation, "; weight gradient ",
                                  weight.implementation, ")");
    prepared.scratch_bytes = winograd_backward_pooled_scratch_bytes(g, plan->winograd_block);
  } else {
    prepared.implementation = str("the pooling's gradient, then the input gradient by ", input.implementation,
                                  " and the weight gradient by ", weight.implementation);
    prepared.scratch_bytes = plan->convs_scratch + cache_aligned(size_t(g.output_shape().numel()) * sizeof(float));
  }
  return plan;
}

void conv_backward_pooled(const ConvGeom& g, const PoolGeom& p, const Tensor& gy, const Tensor& offsets,
                          const Tensor* maxima, const Tensor& w, const Tensor& x, const Tensor& gx, const Tensor& gw,
                          const Tensor& gb, const ConvBackwardPooledPlan* plan) {
  if (gx.dtype() == f64) return apart_f64(g, p, gy, offsets, maxima, w, x, gx, gw, gb);
  if (plan && plan->winograd_block && by_winograd(g, p, gy, offsets, maxima, w, x, gx, gw, gb, *plan)) return;
  apart(g, p, gy, offsets, maxima, w, x, gx, gw, gb, plan);
}

}  // namespace baton::kernels
