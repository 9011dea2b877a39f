// conv2d and its two backward ops (each its own op, so graphs and higher-order
// gradients see them). f32 runs on oneDNN, f64 on direct loops.
#include "baton/autograd.h"
#include "baton/ops.h"
#include "kernels/cpu/copy.h"
#include "kernels/cpu/reduce.h"
#include "ops/common.h"
#include "ops/conv.h"
#include "ops/epilogue.h"
#include "ops/sym_dims.h"

namespace baton::ops {

namespace {

// The output size is computed from the spatial and kernel sizes, so they must be static
// (the batch and, with groups == 1, the channels may be symbolic).
void require_static_sizes(const CallContext& c, const Shape& in, const Shape& wt, int64_t groups) {
  const char* why = "the output size is computed from it";
  require_static_dim(c, in, 2, "the input height", why);
  require_static_dim(c, in, 3, "the input width", why);
  require_static_dim(c, wt, 2, "the kernel height", why);
  require_static_dim(c, wt, 3, "the kernel width", why);
  if (groups == 1) return;
  const char* grouped = "channels are split into groups";
  require_static_dim(c, in, 1, "the input channel count", grouped);
  require_static_dim(c, wt, 0, "the output channel count", grouped);
  require_static_dim(c, wt, 1, "the weight's channel count", grouped);
}

}  // namespace

ConvGeom conv_geom(const CallContext& c, const Shape& in, const Shape& wt) {
  if (in.size() != 4) c.fail("input must be [N, C, H, W], got ", in);
  if (wt.size() != 4) c.fail("weight must be [out_channels, in_channels / groups, kh, kw], got ", wt);
  const auto &stride = c.attrs.ints("stride"), &pad = c.attrs.ints("padding"),
             &dil = c.attrs.ints("dilation");
  const int64_t groups = c.attrs.i("groups");
  if (groups < 1 || stride[0] < 1 || stride[1] < 1 || dil[0] < 1 || dil[1] < 1 || pad[0] < 0 ||
      pad[1] < 0)
    c.template fail<ValueError>("invalid options: stride ", Shape(stride), ", padding ", Shape(pad),
                                ", dilation ", Shape(dil), ", groups ", groups);
  require_static_sizes(c, in, wt, groups);
  // A symbolic channel count is trusted here (no size derives from it); the rule checks
  // the real one when the graph runs.
  const bool channels_known = in[1] >= 0 && wt[1] >= 0;
  if (channels_known && (in[1] != wt[1] * groups || wt[0] % groups != 0))
    c.fail("channel mismatch: input has ", in[1], " channels, weight ", wt, " with groups ",
           groups, " expects ", wt[1] * groups);
  ConvGeom g{in[0], in[1], in[2], in[3], wt[0], wt[2], wt[3], 0, 0, groups,
             stride[0], stride[1], pad[0], pad[1], dil[0], dil[1]};
  // The window a dilated kernel spans, saturated (both sizes come from options).
  auto span = [](int64_t k, int64_t dilation) {
    int64_t s = 0;
    if (__builtin_mul_overflow(dilation, k - 1, &s) || __builtin_add_overflow(s, 1, &s)) return INT64_MAX;
    return s;
  };
  g.oh = window_positions(c, "kernel height", g.h, g.ph, span(g.kh, g.dh), g.sh);
  g.ow = window_positions(c, "kernel width", g.w, g.pw, span(g.kw, g.dw), g.sw);
  return g;
}

ConvPoolGeoms conv_pool_geoms(const CallContext& c, const Shape& input, const Shape& weight, bool disjoint) {
  const ConvGeom g = conv_geom(c, input, weight);
  if (g.groups != 1) c.fail("groups must be 1, got ", g.groups);
  const auto &k = c.attrs.ints("pool_kernel"), &s = c.attrs.ints("pool_stride");
  for (size_t d = 0; d < 2; ++d) {
    if (k[d] < 1 || s[d] < 1)
      c.template fail<ValueError>("invalid pooling: kernel ", Shape(k), ", stride ", Shape(s));
    if (disjoint && s[d] < k[d])
      c.template fail<ValueError>("the pooling's windows must not overlap: kernel ", Shape(k), ", stride ", Shape(s));
  }
  if (g.oh < k[0] || g.ow < k[1])
    c.fail("the convolution's output ", g.output_shape(), " is smaller than the pooling's window ", Shape(k));
  return {g, {g.n, g.o, g.oh, g.ow, k[0], k[1], s[0], s[1], 0, 0, (g.oh - k[0]) / s[0] + 1, (g.ow - k[1]) / s[1] + 1}};
}

void require_window_codes_fit(const CallContext& c, const kernels::PoolGeom& p) {
  if (p.kh * p.kw > kernels::kWindowCodePositions)
    c.fail<ValueError>("window codes hold windows of at most ", kernels::kWindowCodePositions, " positions");
}

ConvPoolGeoms pooled_gradient_geoms(const CallContext& c, const Shape& input, const Shape& weight, size_t maxima,
                                    bool window_codes) {
  require_float(c);
  const auto [g, p] = conv_pool_geoms(c, input, weight, true);
  const Shape pooled{g.n, g.o, p.oh, p.ow};
  if (!(c.input(0).shape() == pooled)) c.fail("the pooling's output gradient must be ", pooled);
  const bool codes = window_codes && c.input(1).dtype() == u8;
  if ((c.input(1).dtype() != i32 && !codes) || !(c.input(1).shape() == pooled))
    c.fail("window offsets must be i32", window_codes ? " (or u8 window codes)" : "", " with the output gradient's shape");
  if (codes && c.inputs.size() > maxima) c.fail("window codes hold the maxima's signs: no maxima input with them");
  if (codes) require_window_codes_fit(c, p);
  for (size_t i = 2; i < std::min(maxima, c.inputs.size()); ++i)
    if (c.input(i).dtype() != c.input(0).dtype()) c.fail("the convolution's operands must have the gradient's dtype");
  const bool maxima_fit =
      c.inputs.size() <= maxima || (c.input(maxima).dtype() == c.input(0).dtype() && c.input(maxima).shape() == pooled);
  if (!maxima_fit) c.fail("the window maxima must have the output gradient's dtype and shape");
  return {g, p};
}

namespace {

bool training(const CallContext& c) {
  if (!GradMode::enabled()) return false;
  for (const Tensor& t : c.inputs)
    if (t.requires_grad()) return true;
  return false;
}

Attrs with_shape(const Attrs& a, const char* name, const Shape& s) {
  Attrs out = a;
  out.set(name, s.vec());
  return out;
}

// A geometry from a backward op's inputs: the gradient gy must have the output's shape.
ConvGeom backward_geom(const CallContext& c, const Shape& in, const Shape& wt) {
  require_same_dtype(c);
  require_float(c);
  ConvGeom g = conv_geom(c, in, wt);
  if (!(c.input(0).shape() == g.output_shape()))
    c.fail("output gradient must be ", g.output_shape());
  return g;
}

ConvGeom bwd_input_geom(const CallContext& c) {
  return backward_geom(c, Shape(c.attrs.ints("input_shape")), c.input(1).shape());
}
ConvGeom bwd_weight_geom(const CallContext& c) {
  return backward_geom(c, c.input(1).shape(), Shape(c.attrs.ints("weight_shape")));
}

Tensor conv_call(const Tensor& x, const Tensor& w, const Attrs& a, SourceLoc loc);
Tensor bwd_input_call(const Tensor& gy, const Tensor& w, const Attrs& a, const Shape& in, SourceLoc loc);
Tensor bwd_weight_call(const Tensor& gy, const Tensor& x, const Attrs& a, const Shape& wt, SourceLoc loc);

// The f64 loops: the convolution into out, then out = act(out + residual). A plan may
// hand the residual's own buffer as out (output_overwrites), so then it is copied first.
void conv_fused_f64(const ConvGeom& g, const KernelContext& c, const kernels::ConvEpilogue& e) {
  const Tensor& out = c.output();
  Tensor residual;
  if (e.residual && e.residual->shares_storage_with(out)) {
    residual = empty(out.shape(), out.dtype());
    kernels::copy_into(residual, *e.residual);
  } else if (e.residual) {
    residual = kernels::dense(*e.residual);
  }
  kernels::conv_forward_f64(g, c.input(0), c.input(1), &c.input(2), out);
  double* o = out.data<double>();
  const double* r = e.residual ? residual.data<double>() : nullptr;
  if (r)
    for (int64_t i = 0; i < out.numel(); ++i) o[i] += r[i];
  kernels::apply_activation(e.act, out);
}

const Tensor* residual_of(const CallContext& c) { return c.inputs.size() == 4 ? &c.input(3) : nullptr; }

// What the forward convolutions' kernels read of their attributes (OpDef::params): the
// geometry and, for conv2d_fused, the epilogue's activation and whether to cache weights.
struct ConvParams {
  ConvGeom geom;
  kernels::Activation act;
  bool cache_weights = false;
};
ConvParams conv_params(const CallContext& c) { return {conv_geom(c, c.input(0).shape(), c.input(1).shape())}; }
ConvParams fused_conv_params(const CallContext& c) {
  return {conv_geom(c, c.input(0).shape(), c.input(1).shape()), activation_of(c),
          c.attrs.has("cache_weights") && c.attrs.i("cache_weights") != 0};
}

const ConvGeom& forward_geom(const CallContext& c) { return c.params<ConvParams>().geom; }

kernels::ConvEpilogue forward_epilogue(const CallContext& c) {
  const ConvParams& p = c.params<ConvParams>();
  return {.residual = residual_of(c), .act = p.act, .cache_weights = p.cache_weights};
}

// A plan step's f32 convolution: its oneDNN primitive, made once for the layouts the plan
// chose.
Prepared prepare_conv(const CallContext& c, std::span<const Tensor> outputs, const kernels::ConvEpilogue& e) {
  if (c.input(0).dtype() != f32 || outputs[0].numel() == 0) return {};
  const ConvGeom& g = forward_geom(c);
  Prepared p;
  const kernels::ActivationBlocks blocks{c.input_block(0), c.output_block(0), c.input_block(3)};
  p.state = kernels::prepare_conv_forward_f32(g, c.input(0), outputs[0], c.inputs.size() >= 3, training(c), e,
                                              p, blocks, c.constant_input(1));
  return p;
}

const kernels::ConvForwardPlan* conv_plan(const KernelContext& c) {
  return static_cast<const kernels::ConvForwardPlan*>(c.prepared);
}

const kernels::ConvBackwardPlan* backward_plan(const KernelContext& c) {
  return static_cast<const kernels::ConvBackwardPlan*>(c.prepared);
}

// The weight gradient's kernel (oneDNN's, or im2col + GEMM where that measured faster),
// chosen once for a plan step; with two outputs it also sums the bias gradient.
Prepared prepare_weight_gradient(const CallContext& c, std::span<const Tensor> outputs) {
  Prepared p;
  if (c.input(0).dtype() == f32 && outputs[0].numel() > 0)
    p.state = kernels::prepare_conv_backward_weight_f32(c.params<ConvGeom>(), c.input(0), c.input(1),
                                                        outputs.size() == 2, p, c.input_block(0), c.input_block(1));
  return p;
}

// In double from the first factor: the products of sizes may pass int64's range.
Cost conv_cost(const ConvGeom& g) {
  const double outputs = double(g.n) * double(g.o) * double(g.oh) * double(g.ow);
  const double taps = double(g.cg()) * double(g.kh) * double(g.kw);
  const double inputs = double(g.n) * double(g.c) * double(g.h) * double(g.w);
  return {2 * outputs * taps, 4.0 * (inputs + outputs + double(g.o) * taps)};
}

}  // namespace

BATON_OP(conv2d_op, "conv2d")
    .inputs(2, 3)
    .ints_attr("stride", 2)
    .ints_attr("padding", 2)
    .ints_attr("dilation", 2)
    .int_attr("groups")
    .channels_last({0})
    .channel_blocked({0})
    .infer([](const InferContext& c) {
      require_same_dtype(c);
      require_float(c);
      ConvGeom g = conv_geom(c, c.input(0).shape(), c.input(1).shape());
      if (c.inputs.size() == 3 && !(c.input(2).dim() == 1 && c.input(2).size(0) == g.o))
        c.fail("bias must be [", sym::to_string(g.o), "]");
      return TensorMeta{c.input(0).dtype(), g.output_shape()};
    })
    .params(conv_params)
    .cpu([](const KernelContext& c) {
      const ConvGeom& g = forward_geom(c);
      const Tensor* bias = c.inputs.size() == 3 ? &c.input(2) : nullptr;
      if (c.output().numel() == 0) return;
      if (c.output().dtype() == f32)
        kernels::conv_forward_f32(g, c.input(0), c.input(1), bias, c.output(), training(c), {}, conv_plan(c));
      else
        kernels::conv_forward_f64(g, c.input(0), c.input(1), bias, c.output());
    })
    .prepared_by([](const CallContext& c, std::span<const Tensor> outputs) { return prepare_conv(c, outputs, {}); })
    .grad([](const GradContext& c) {
      const Tensor &x = c.input(0), &w = c.input(1), &g = c.grad_output();
      Grads grads(c.inputs.size());
      if (c.needs_grad(0)) grads[0] = bwd_input_call(g, w, c.attrs, x.shape(), c.loc);
      if (c.needs_grad(1)) grads[1] = bwd_weight_call(g, x, c.attrs, w.shape(), c.loc);
      if (c.inputs.size() == 3 && c.needs_grad(2)) grads[2] = sum(g, {0, 2, 3});
      return grads;
    })
    .cost([](const CallContext& c, std::span<const TensorMeta>) {
      return conv_cost(conv_geom(c, c.input(0).shape(), c.input(1).shape()));
    })
    .onnx("Conv");

// conv2d with its epilogue fused: act(conv2d(x, w) + bias + residual). Made by the
// epilogue-fusion pass (src/passes/fuse_epilogue.cpp), never by user code; inference and
// forward passes only (no gradient rule).
BATON_OP(conv2d_fused_op, "conv2d_fused")
    .inputs(3, 4)  // x, weight, bias, residual
    .ints_attr("stride", 2)
    .ints_attr("padding", 2)
    .ints_attr("dilation", 2)
    .int_attr("groups")
    .string_attr("activation")  // ops/epilogue.h: "none", "relu", "sigmoid", ...
    .float_attr("negative_slope", OpDef::optional)
    .float_attr("alpha", OpDef::optional)
    .float_attr("min", OpDef::optional)
    .float_attr("max", OpDef::optional)
    .int_attr("cache_weights", OpDef::optional)
    .channels_last({0, 3})
    .channel_blocked({0, 3})
    .output_overwrites(3)  // the sum post-op accumulates into the residual's buffer
    .infer([](const InferContext& c) {
      require_same_dtype(c);
      require_float(c);
      ConvGeom g = conv_geom(c, c.input(0).shape(), c.input(1).shape());
      if (!(c.input(2).dim() == 1 && c.input(2).size(0) == g.o)) c.fail("bias must be [", sym::to_string(g.o), "]");
      if (c.inputs.size() == 4 && !(c.input(3).shape() == g.output_shape()))
        c.fail("the residual must have the output's shape ", g.output_shape());
      activation_of(c);  // validates the activation's name and parameters
      return TensorMeta{c.input(0).dtype(), g.output_shape()};
    })
    .params(fused_conv_params)
    .cpu([](const KernelContext& c) {
      const ConvGeom& g = forward_geom(c);
      if (c.output().numel() == 0) return;
      const kernels::ConvEpilogue e = forward_epilogue(c);
      if (c.output().dtype() == f32)
        return kernels::conv_forward_f32(g, c.input(0), c.input(1), &c.input(2), c.output(), false, e, conv_plan(c));
      conv_fused_f64(g, c, e);
    })
    .prepared_by([](const CallContext& c, std::span<const Tensor> outputs) {
      return prepare_conv(c, outputs, forward_epilogue(c));
    })
    .cost([](const CallContext& c, std::span<const TensorMeta>) {
      return conv_cost(conv_geom(c, c.input(0).shape(), c.input(1).shape()));
    });

// d(loss)/d(input) of conv2d: inputs (grad_output, weight), attr input_shape.
BATON_OP(conv2d_backward_input_op, "conv2d_backward_input")
    .inputs(2)
    .ints_attr("stride", 2)
    .ints_attr("padding", 2)
    .ints_attr("dilation", 2)
    .int_attr("groups")
    .ints_attr("input_shape", 4)
    .channels_last({0})
    .channel_blocked({0})
    .infer([](const InferContext& c) {
      return TensorMeta{c.input(0).dtype(), bwd_input_geom(c).input_shape()};
    })
    .params(bwd_input_geom)
    .cpu([](const KernelContext& c) {
      const kernels::ConvBackwardPlan* plan = backward_plan(c);
      const ConvGeom& g = c.params<ConvGeom>();
      if (c.output().numel() == 0) return;
      if (c.output().dtype() == f32)
        kernels::conv_backward_input_f32(g, c.input(0), c.input(1), c.output(), plan);
      else kernels::conv_backward_input_f64(g, c.input(0), c.input(1), c.output());
    })
    .prepared_by([](const CallContext& c, std::span<const Tensor> outputs) {
      Prepared p;
      if (c.input(0).dtype() == f32 && outputs[0].numel() > 0)
        p.state = kernels::prepare_conv_backward_input_f32(c.params<ConvGeom>(), c.input(0), outputs[0], p,
                                                           c.input_block(0), c.output_block(0));
      return p;
    })
    .grad([](const GradContext& c) {  // linear in both inputs: <gi, bwd_in(gy, w)> = <gy, conv(gi, w)>
      const Tensor &gy = c.input(0), &w = c.input(1), &gi = c.grad_output();
      return Grads{c.needs_grad(0) ? conv_call(gi, w, c.attrs, c.loc) : Tensor{},
                   c.needs_grad(1) ? bwd_weight_call(gy, gi, c.attrs, w.shape(), c.loc) : Tensor{}};
    })
    .cost([](const CallContext& c, std::span<const TensorMeta>) { return conv_cost(bwd_input_geom(c)); });

// d(loss)/d(weight) of conv2d: inputs (grad_output, input), attr weight_shape.
BATON_OP(conv2d_backward_weight_op, "conv2d_backward_weight")
    .inputs(2)
    .ints_attr("stride", 2)
    .ints_attr("padding", 2)
    .ints_attr("dilation", 2)
    .int_attr("groups")
    .ints_attr("weight_shape", 4)
    .reads_channels_last({0, 1})
    .channel_blocked({0, 1}, {})
    .infer([](const InferContext& c) {
      return TensorMeta{c.input(0).dtype(), bwd_weight_geom(c).weight_shape()};
    })
    .params(bwd_weight_geom)
    .cpu([](const KernelContext& c) {
      const kernels::ConvBackwardPlan* plan = backward_plan(c);
      const ConvGeom& g = c.params<ConvGeom>();
      if (c.output().numel() == 0) return;
      if (c.output().dtype() == f32)
        kernels::conv_backward_weight_f32(g, c.input(0), c.input(1), c.output(), plan);
      else kernels::conv_backward_weight_f64(g, c.input(0), c.input(1), c.output());
    })
    .prepared_by(prepare_weight_gradient)
    .grad([](const GradContext& c) {  // <gw, bwd_w(gy, x)> = <gy, conv(x, gw)>
      const Tensor &gy = c.input(0), &x = c.input(1), &gw = c.grad_output();
      return Grads{c.needs_grad(0) ? conv_call(x, gw, c.attrs, c.loc) : Tensor{},
                   c.needs_grad(1) ? bwd_input_call(gy, gw, c.attrs, x.shape(), c.loc) : Tensor{}};
    })
    .cost([](const CallContext& c, std::span<const TensorMeta>) { return conv_cost(bwd_weight_geom(c)); });

// conv2d_backward_weight and the bias gradient (gy summed over n, h and w) together, as a
// plan runs them (src/passes/fuse_epilogue.cpp): oneDNN's weight-gradient primitive sums
// the bias gradient in the same pass over gy. Outputs (grad_weight, grad_bias). No gradient
// rule: plans make it after differentiation.
BATON_OP(conv2d_backward_weight_bias_op, "conv2d_backward_weight_bias")
    .inputs(2)
    .outputs(2)
    .ints_attr("stride", 2)
    .ints_attr("padding", 2)
    .ints_attr("dilation", 2)
    .int_attr("groups")
    .ints_attr("weight_shape", 4)
    .reads_channels_last({0, 1})
    .channel_blocked({0, 1}, {})
    .infer([](const InferContext& c) {
      const ConvGeom g = bwd_weight_geom(c);
      return std::vector<TensorMeta>{{c.input(0).dtype(), g.weight_shape()}, {c.input(0).dtype(), {g.o}}};
    })
    .params(bwd_weight_geom)
    .cpu([](const KernelContext& c) {
      const kernels::ConvBackwardPlan* plan = backward_plan(c);
      const ConvGeom& g = c.params<ConvGeom>();
      if (c.output(0).dtype() == f32)
        return kernels::conv_backward_weight_f32(g, c.input(0), c.input(1), c.output(0), plan, &c.output(1));
      kernels::conv_backward_weight_f64(g, c.input(0), c.input(1), c.output(0));
      kernels::sum_into<double>(c.input(0), {0, 2, 3}, c.output(1).data<double>());
    })
    .prepared_by(prepare_weight_gradient)
    .cost([](const CallContext& c, std::span<const TensorMeta>) { return conv_cost(bwd_weight_geom(c)); });

namespace {

Attrs conv_only(const Attrs& a) {
  return {{"stride", a.ints("stride")}, {"padding", a.ints("padding")},
          {"dilation", a.ints("dilation")}, {"groups", a.i("groups")}};
}
Tensor conv_call(const Tensor& x, const Tensor& w, const Attrs& a, SourceLoc loc) {
  return call(conv2d_op, {x, w}, conv_only(a), loc);
}
Tensor bwd_input_call(const Tensor& gy, const Tensor& w, const Attrs& a, const Shape& in, SourceLoc loc) {
  return call(conv2d_backward_input_op, {gy, w}, with_shape(conv_only(a), "input_shape", in), loc);
}
Tensor bwd_weight_call(const Tensor& gy, const Tensor& x, const Attrs& a, const Shape& wt, SourceLoc loc) {
  return call(conv2d_backward_weight_op, {gy, x}, with_shape(conv_only(a), "weight_shape", wt), loc);
}

}  // namespace
}  // namespace baton::ops

namespace baton {

Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias,
              const Conv2dOptions& o, SourceLoc loc) {
  ops::Attrs a{{"stride", std::vector<int64_t>{o.stride[0], o.stride[1]}},
               {"padding", std::vector<int64_t>{o.padding[0], o.padding[1]}},
               {"dilation", std::vector<int64_t>{o.dilation[0], o.dilation[1]}},
               {"groups", o.groups}};
  if (bias.defined()) return ops::call(ops::conv2d_op, {x, weight, bias}, a, loc);
  return ops::call(ops::conv2d_op, {x, weight}, a, loc);
}

}  // namespace baton
