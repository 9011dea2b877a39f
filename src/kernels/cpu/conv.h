// 2-D convolution kernels (forward, backward-input, backward-weight) for NCHW tensors.
#pragma once
#include <memory>
#include <string>

#include "baton/tensor.h"
#include "kernels/cpu/epilogue.h"
#include "kernels/cpu/prepared.h"

namespace baton::kernels {

// The geometry of one convolution, validated by the op (ops/conv.h).
struct ConvGeom {
  int64_t n, c, h, w;         // input
  int64_t o, kh, kw;          // weight [o, c / groups, kh, kw]
  int64_t oh, ow;             // output
  int64_t groups, sh, sw, ph, pw, dh, dw;
  int64_t cg() const { return c / groups; }  // input channels per group
  int64_t og() const { return o / groups; }  // output channels per group
  Shape input_shape() const { return {n, c, h, w}; }
  Shape weight_shape() const { return {o, c / groups, kh, kw}; }
  Shape output_shape() const { return {n, o, oh, ow}; }
};

// What a forward convolution does to its result before storing it, fused into the
// convolution (oneDNN post-ops): out = act(conv(x, w) + bias + residual).
struct ConvEpilogue {
  const Tensor* residual = nullptr;  // of out's shape (may be out itself)
  Activation act;  // oneDNN's eltwise post-op where it computes baton's function (conv_onednn.cpp)
  // The weights are a constant of a plan: their copy in the primitive's layout is kept and
  // reused while the weight tensor's storage and version stay the same.
  bool cache_weights = false;
};

// Channels per block of a plan's channel-blocked activations (0: as their strides say).
struct ActivationBlocks {
  int64_t src = 0, dst = 0, residual = 0;
  bool any() const { return src || dst || residual; }
};

// A forward convolution's oneDNN primitive and reorders, made once for a plan step.
struct ConvForwardPlan;
// Made from metadata: x and out (and epilogue.residual) need shapes and strides, no data.
// `prepared` gets oneDNN's name for the kernel that will run and its scratchpad size.
// constant_weights: the weights' value when the plan owns it as a constant; with
// epilogue.cache_weights they are packed now, and the runs then read only that copy (the
// weight operand they are handed may be metadata: prepared.adopted).
std::shared_ptr<const ConvForwardPlan> prepare_conv_forward_f32(const ConvGeom& g, const Tensor& x,
                                                                const Tensor& out, bool bias, bool training,
                                                                const ConvEpilogue& epilogue,
                                                                PreparedKernel& prepared,
                                                                ActivationBlocks blocks = {},
                                                                const Tensor* constant_weights = nullptr);

// Whether a plan step runs baton's Winograd (conv_winograd.h) where its operands are finite.
bool runs_own_winograd(const ConvForwardPlan& plan);

// A 2x2, stride-2 max pooling that takes a convolution's result at once (conv_winograd.h).
struct WinogradPooling;
// For a plan step whose convolution result a 2x2, stride-2 max pooling takes at once
// (conv2d_max_pool2d), its plan prepared for that result's layout: where the plan chose
// baton's Winograd and the operands are finite, it pools in its output transform, and this
// returns true. Else nothing is written, and the caller convolves and pools apart.
bool conv_forward_pooled_f32(const ConvGeom& g, const Tensor& x, const Tensor& w, const Tensor* bias,
                             const ConvEpilogue& e, const ConvForwardPlan& plan, const WinogradPooling& pool);

// f32 on oneDNN. bias may be null. Inputs of any strides; out and the residual plain or
// channels-last, or channel-blocked as the plan was prepared for (plan required then).
// With a plan made for these layouts, no primitive is looked up.
void conv_forward_f32(const ConvGeom& g, const Tensor& x, const Tensor& w, const Tensor* bias,
                      const Tensor& out, bool training, const ConvEpilogue& epilogue = {},
                      const ConvForwardPlan* plan = nullptr);

// The backward convolutions' kernels, chosen once for a plan step from metadata (gy, and
// gx or x: shapes and strides, plain or channels-last, no data). The weight gradient of a
// first layer (few input channels) runs oneDNN's primitive or im2col + GEMM, whichever
// measured faster on this machine (once per geometry and layouts, eagerly too).
struct ConvBackwardPlan;
// A block > 0: the plan stores that operand channel-blocked (its runs must pass the plan).
std::shared_ptr<const ConvBackwardPlan> prepare_conv_backward_input_f32(const ConvGeom& g, const Tensor& gy,
                                                                        const Tensor& gx, PreparedKernel& prepared,
                                                                        int64_t gy_block = 0, int64_t gx_block = 0);
std::shared_ptr<const ConvBackwardPlan> prepare_conv_backward_weight_f32(const ConvGeom& g, const Tensor& gy,
                                                                         const Tensor& x, bool bias,
                                                                         PreparedKernel& prepared,
                                                                         int64_t gy_block = 0, int64_t x_block = 0);
// Where an input gradient's plan chose baton's Winograd in its transposed form (over the
// output's tiles) and a weight gradient's plan of the same convolution baton's Winograd:
// the input gradient's blocks (conv_winograd.h), for one pass that computes both
// (conv2d_backward_pooled); else 0.
int64_t shared_winograd_block(const ConvBackwardPlan& input, const ConvBackwardPlan& weight);
// gy, x and gx plain or channels-last (other strides are copied plain), or channel-blocked
// as the plan was prepared for; gw plain. With gb ([o], contiguous), the weight gradient
// also writes the bias gradient (gy summed over n, h, w), oneDNN's primitive in the same
// pass.
void conv_backward_input_f32(const ConvGeom& g, const Tensor& gy, const Tensor& w, const Tensor& gx,
                             const ConvBackwardPlan* plan = nullptr);
void conv_backward_weight_f32(const ConvGeom& g, const Tensor& gy, const Tensor& x, const Tensor& gw,
                              const ConvBackwardPlan* plan = nullptr, const Tensor* gb = nullptr);
// Few input channels (a first layer): the weight gradient as im2col + GEMM per image
// (conv_first_layer.cpp), a candidate conv_backward_weight_f32 measures against oneDNN.
bool conv_weight_grad_by_gemm(const ConvGeom& g);
// gy_block > 0: gy's bytes are channel-blocked (nChw8c or nChw16c) where its strides say
// plain. With gb ([o], contiguous), also the bias gradient, in the same GEMMs.
void conv_backward_weight_gemm_f32(const ConvGeom& g, const Tensor& gy, const Tensor& x, const Tensor& gw,
                                   int64_t gy_block = 0, const Tensor* gb = nullptr);

// f64 direct loops (used by gradient checks).
void conv_forward_f64(const ConvGeom& g, const Tensor& x, const Tensor& w, const Tensor* bias,
                      const Tensor& out);
void conv_backward_input_f64(const ConvGeom& g, const Tensor& gy, const Tensor& w, const Tensor& gx);
void conv_backward_weight_f64(const ConvGeom& g, const Tensor& gy, const Tensor& x, const Tensor& gw);

}  // namespace baton::kernels
