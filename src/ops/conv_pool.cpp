// conv2d_max_pool2d: a convolution (and its relu) with the max pooling that alone read its
// output, as one step: max_pool2d_window(act(conv2d(x, w) + b)), whose outputs (maxima,
// i32 window offsets, or with window_codes u8 codes of offset and sign) it returns;
// conv2d_max_pool2d_values: the maxima alone, as max_pool2d_values (inference).
// src/passes/fuse_conv_pool.cpp makes them from conv2d_fused and the pooling; kernel:
// kernels/cpu/conv_pool.h. No gradient rule: plans make them after differentiation, and
// the offsets carry the gradient.
#include "kernels/cpu/conv_pool.h"
#include "ops/common.h"
#include "ops/conv.h"

namespace baton::ops {
namespace {

// Whether output 1 holds window codes (pool.h's window_code) rather than i32 offsets:
// src/passes/fuse_pool_gradient.cpp asks for them where only a weight gradient taken
// through the pooling reads the offsets and the maxima's signs.
bool window_codes(const CallContext& c) { return c.attrs.has("window_codes") && c.attrs.i("window_codes") != 0; }

// Inputs (x, weight, bias), checked against each other and the attributes.
ConvPoolGeoms geoms(const CallContext& c) {
  require_same_dtype(c);
  require_float(c);
  const ConvPoolGeoms geoms = conv_pool_geoms(c, c.input(0).shape(), c.input(1).shape(), false);
  if (!(c.input(2).dim() == 1 && c.input(2).size(0) == geoms.conv.o))
    c.fail("bias must be [", geoms.conv.o, "]");
  const std::string& act = c.attrs.s("activation");
  if (act != "none" && act != "relu") c.fail<ValueError>("unknown activation '", act, "'");
  if (window_codes(c)) require_window_codes_fit(c, geoms.pool);
  return geoms;
}

// What the kernel and the prepare hook read of the attributes (OpDef::params).
struct ConvPoolParams {
  ConvPoolGeoms geoms;
  bool relu = false, window_codes = false;
};
ConvPoolParams params_of(const CallContext& c) {
  return {geoms(c), c.attrs.s("activation") == "relu", window_codes(c)};
}

// The two ops, with window offsets (output 1) or without.
OpDef& conv_pool_op(OpDef& def, bool offsets) {
  return def.inputs(3)  // x, weight, bias
      .outputs(offsets ? 2 : 1)
      .ints_attr("stride", 2)
      .ints_attr("padding", 2)
      .ints_attr("dilation", 2)
      .int_attr("groups")
      .string_attr("activation")  // "none" or "relu"
      .ints_attr("pool_kernel", 2)
      .ints_attr("pool_stride", 2)
      .channels_last({0})
      .channel_blocked({}, offsets ? std::vector<int>{0, 1} : std::vector<int>{0})
      .infer([offsets](const InferContext& c) {
        const auto [g, p] = geoms(c);
        const Shape pooled{g.n, g.o, p.oh, p.ow};
        std::vector<TensorMeta> out{{c.input(0).dtype(), pooled}};
        if (offsets) out.push_back({window_codes(c) ? u8 : i32, pooled});
        return out;
      })
      .params(params_of)
      .cpu([offsets](const KernelContext& c) {
        const ConvPoolParams& params = c.params<ConvPoolParams>();
        const auto& [g, p] = params.geoms;
        if (c.output(0).numel() == 0) return;
        const auto* plan = static_cast<const kernels::ConvPoolPlan*>(c.prepared);
        const bool relu = params.relu;
        const Tensor* indices = offsets ? &c.output(1) : nullptr;
        if (plan && plan->conv)
          return kernels::conv_max_pool_by_plan(g, p, relu, c.input(0), c.input(1), c.input(2), c.output(0), indices,
                                                *plan);
        kernels::conv_max_pool_forward(g, p, relu, c.input(0), c.input(1), c.input(2), c.output(0), indices,
                                       plan ? plan->blocks : kernels::ConvPoolBlocks{});
      })
      // the channel blocks a plan chose
      .prepared_by([offsets](const CallContext& c, std::span<const Tensor> outputs) {
        const ConvPoolParams& params = c.params<ConvPoolParams>();
        const auto& [g, p] = params.geoms;
        const kernels::ConvPoolBlocks blocks{c.output_block(0), offsets ? c.output_block(1) : 0};
        Prepared prepared;
        // (Window codes are written by the direct kernel alone.)
        const bool by_plan = g.c > kernels::kConvPoolDirectChannels && !params.window_codes;
        if (by_plan && kernels::conv_max_pool_by_plan_fits(g, p, c.input(0).dtype())) {
          prepared.state = kernels::prepare_conv_max_pool_f32(g, p, params.relu, c.input(0),
                                                              c.input_block(0), blocks, c.constant_input(1), prepared);
          return prepared;
        }
        prepared.state = std::make_shared<kernels::ConvPoolPlan>(kernels::ConvPoolPlan{.blocks = blocks});
        const int lanes = kernels::conv_max_pool_vector_lanes(g, p, c.input(0).dtype(), outputs[0],
                                                              offsets ? &outputs[1] : nullptr, blocks);
        prepared.implementation = lanes ? str("baton conv + max pool, ", lanes, "-lane vectors") : "loops";
        return prepared;
      })
      .cost([offsets](const CallContext& c, std::span<const TensorMeta>) {
        const auto [g, p] = geoms(c);  // every convolution output under a window, once per window
        const double pooled = double(g.n) * double(g.o) * double(p.oh) * double(p.ow);
        const double taps = double(g.c) * double(g.kh) * double(g.kw);
        const double inputs = double(g.n) * double(g.c) * double(g.h) * double(g.w);
        return Cost{2 * pooled * double(p.kh * p.kw) * taps,
                    4.0 * (inputs + (offsets ? 2 : 1) * pooled + double(g.o) * taps)};
      });
}

}  // namespace

[[maybe_unused]] static OpDef& conv2d_max_pool2d_op =
    conv_pool_op(define_op("conv2d_max_pool2d"), true).int_attr("window_codes", OpDef::optional).storage_dtypes();
[[maybe_unused]] static OpDef& conv2d_max_pool2d_values_op = conv_pool_op(define_op("conv2d_max_pool2d_values"), false);

}  // namespace baton::ops
