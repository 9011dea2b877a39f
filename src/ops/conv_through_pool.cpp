// conv2d_backward_weight_bias_pooled: a convolution's weight and bias gradients taken
// through the max pooling that read its output (src/passes/fuse_pool_gradient.cpp makes it
// from max_pool2d_window_backward and conv2d_backward_weight_bias, with i32 window offsets
// and the maxima or with u8 window codes; kernel:
// kernels/cpu/conv_through_pool.h). No gradient rule: plans make it after differentiation.
#include "kernels/cpu/conv_through_pool.h"
#include "ops/common.h"
#include "ops/conv.h"

namespace baton::ops {
namespace {

// Inputs (the pooling's output gradient, its window offsets, the convolution's input[, the
// pooling's maxima]), checked against each other.
ConvPoolGeoms geoms(const CallContext& c) {
  return pooled_gradient_geoms(c, c.input(2).shape(), Shape(c.attrs.ints("weight_shape")), 3, true);
}

}  // namespace

BATON_OP(conv2d_backward_weight_bias_pooled_op, "conv2d_backward_weight_bias_pooled")
    .inputs(3, 4)
    .storage_dtypes()  // window codes (u8)
    .outputs(2)
    .ints_attr("stride", 2)
    .ints_attr("padding", 2)
    .ints_attr("dilation", 2)
    .int_attr("groups")
    .ints_attr("weight_shape", 4)
    .ints_attr("pool_kernel", 2)
    .ints_attr("pool_stride", 2)
    .reads_channels_last({0, 1, 2, 3})
    .channel_blocked({0, 1, 2, 3}, {})
    .infer([](const InferContext& c) {
      const ConvGeom g = geoms(c).conv;
      return std::vector<TensorMeta>{{c.input(0).dtype(), g.weight_shape()}, {c.input(0).dtype(), {g.o}}};
    })
    .params(geoms)
    .cpu([](const KernelContext& c) {
      const auto& [g, p] = c.params<ConvPoolGeoms>();
      const auto* blocks = static_cast<const kernels::ThroughPoolBlocks*>(c.prepared);
      kernels::conv_backward_weight_through_pool(g, p, c.input(0), c.input(1),
                                                 c.inputs.size() == 4 ? &c.input(3) : nullptr, c.input(2),
                                                 c.output(0), c.output(1),
                                                 blocks ? *blocks : kernels::ThroughPoolBlocks{});
    })
    .prepared_by([](const CallContext& c, std::span<const Tensor>) {  // the channel blocks a plan chose
      Prepared p;
      p.state = std::make_shared<kernels::ThroughPoolBlocks>(kernels::ThroughPoolBlocks{
          c.input_block(0), c.input_block(1), c.inputs.size() == 4 ? c.input_block(3) : 0, c.input_block(2)});
      p.implementation = "loops";
      return p;
    })
    .cost([](const CallContext& c, std::span<const TensorMeta>) {
      const auto [g, p] = geoms(c);  // one window position of each pooled gradient counts
      const double pooled = double(g.n) * double(g.o) * double(p.oh) * double(p.ow);
      const double taps = double(g.c) * double(g.kh) * double(g.kw);
      return Cost{2 * pooled * taps, 4.0 * (3 * pooled + double(g.n) * double(g.c) * double(g.h) * double(g.w))};
    });

}  // namespace baton::ops
