// conv2d_backward_pooled: a convolution's input, weight and bias gradients taken through
// the max pooling that read its output (src/passes/fuse_pool_gradient.cpp makes it from
// max_pool2d_window_backward, conv2d_backward_input and conv2d_backward_weight_bias;
// kernel: kernels/cpu/conv_backward_pooled.h). No gradient rule: plans make it after
// differentiation.
#include "kernels/cpu/conv_backward_pooled.h"
#include "ops/common.h"
#include "ops/conv.h"

namespace baton::ops {
namespace {

// Inputs (the pooling's output gradient, its window offsets, the weights, the
// convolution's input[, the pooling's maxima]), checked against each other.
ConvPoolGeoms geoms(const CallContext& c) {
  return pooled_gradient_geoms(c, c.input(3).shape(), c.input(2).shape(), 4);
}

}  // namespace

BATON_OP(conv2d_backward_pooled_op, "conv2d_backward_pooled")
    .inputs(4, 5)
    .outputs(3)
    .ints_attr("stride", 2)
    .ints_attr("padding", 2)
    .ints_attr("dilation", 2)
    .int_attr("groups")
    .ints_attr("pool_kernel", 2)
    .ints_attr("pool_stride", 2)
    .channels_last({0, 1, 3, 4})
    .channel_blocked({0, 1, 3, 4}, {0})
    .infer([](const InferContext& c) {
      const ConvGeom g = geoms(c).conv;
      const DType t = c.input(0).dtype();
      return std::vector<TensorMeta>{{t, g.input_shape()}, {t, g.weight_shape()}, {t, {g.o}}};
    })
    .params(geoms)
    .cpu([](const KernelContext& c) {
      const auto& [g, p] = c.params<ConvPoolGeoms>();
      if (c.input(0).numel() == 0 || c.output(0).numel() == 0) {  // no gradient reaches the weights
        for (size_t i : {1, 2}) c.output(i).fill_(0);
        return;
      }
      kernels::conv_backward_pooled(g, p, c.input(0), c.input(1), c.inputs.size() == 5 ? &c.input(4) : nullptr,
                                    c.input(2), c.input(3), c.output(0), c.output(1), c.output(2),
                                    static_cast<const kernels::ConvBackwardPooledPlan*>(c.prepared));
    })
    .prepared_by([](const CallContext& c, std::span<const Tensor> outputs) {
      Prepared p;
      if (c.input(0).dtype() == f32 && c.input(0).numel() > 0 && outputs[0].numel() > 0)
        p.state = kernels::prepare_conv_backward_pooled_f32(
            c.params<ConvPoolGeoms>().conv, c.params<ConvPoolGeoms>().pool, c.input(3), outputs[0],
            {c.input_block(0), c.input_block(1), c.inputs.size() == 5 ? c.input_block(4) : 0, c.input_block(3),
             c.output_block(0)},
            p);
      return p;
    })
    .cost([](const CallContext& c, std::span<const TensorMeta>) {
      const auto [g, p] = geoms(c);  // the two backward convolutions over the whole output
      const double macs = double(g.n) * double(g.o) * double(g.oh) * double(g.ow) * double(g.c) * double(g.kh * g.kw);
      const double pooled = double(g.n) * double(g.o) * double(p.oh) * double(p.ow);
      const double input = double(g.n) * double(g.c) * double(g.h) * double(g.w);
      return Cost{4 * macs, 4.0 * (3 * pooled + 2 * input + double(g.o * g.c * g.kh * g.kw))};
    });

}  // namespace baton::ops
