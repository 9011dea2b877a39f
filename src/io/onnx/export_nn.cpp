// baton's network ops written as ONNX (opset 17): the losses (SoftmaxCrossEntropyLoss,
// NegativeLogLikelihoodLoss), the gradients of a convolution (ConvTranspose; a Conv over
// the batch; through a max pooling, the pooling's gradient first), batch norm in training
// mode (BatchNormalization's training mode) and its gradient (reductions), layer norm's
// mean and rstd outputs (reductions); and the ops that have no ONNX form, which fail
// saying why.
#include "io/onnx/export_compose.h"

namespace baton::onnx::detail {
namespace {

void loss_export(ExportContext& c, const char* op_type) {
  c.add(op_type, {c.input(0), c.input(1)}, {c.output()}).attr("reduction", c.attrs().s("reduction"));
}

void conv_backward_input_export(ExportContext& c) {
  const ops::Attrs& a = c.attrs();
  const std::vector<int64_t> w = c.static_dims(c.input_type(1).shape, "the weight");
  transposed_conv(c, {c.input(0), c.input(1)}, {.kernel = {w[2], w[3]}, .stride = a.ints("stride"), .padding = a.ints("padding"),
                                                 .dilation = a.ints("dilation"), .groups = a.i("groups")},
                  a.ints("input_shape"));
}

// The grouped weight gradient from the full one gw [C_out, C_in, kh, kw]: each output
// channel keeps the input channels of its group.
void keep_own_group(ExportContext& c, const std::string& gw, const std::vector<int64_t>& w, int64_t groups,
                    const std::string& out) {
  const int64_t outs_per_group = w[0] / groups;
  std::vector<int64_t> channel(size_t(w[0] * w[1] * w[2] * w[3]));
  for (size_t k = 0; k < channel.size(); ++k) {
    const int64_t o = int64_t(k) / (w[1] * w[2] * w[3]), i = int64_t(k) / (w[2] * w[3]) % w[1];
    channel[k] = o / outs_per_group * w[1] + i;
  }
  c.add("GatherElements", {gw, c.constant(tensor(channel, Shape(w)), "channels")}, {out}).attr("axis", int64_t(1));
}

// conv2d_backward_weight(gy, x) into `out`, weights of shape w: with the batch as the
// channels, the weight's gradient is a convolution of x by gy (strides and dilations
// swapped), cut to the kernel's size.
void conv_weight_gradient(ExportContext& c, const std::string& gradient, const std::vector<int64_t>& gy,
                          const std::string& x, const std::vector<int64_t>& w, const std::string& out) {
  const ops::Attrs& a = c.attrs();
  const std::vector<int64_t> pad = a.ints("padding"), swap{1, 0, 2, 3};
  Step xt = step(c, "Transpose", {x}), gyt = step(c, "Transpose", {gradient});
  xt.node.attr("perm", swap);
  gyt.node.attr("perm", swap);
  Step full = step(c, "Conv", {xt.out, gyt.out});  // [C_in, C_out, >= kh, >= kw]
  full.node.attr("kernel_shape", std::vector<int64_t>{gy[2], gy[3]})
      .attr("strides", a.ints("dilation"))
      .attr("dilations", a.ints("stride"))
      .attr("pads", std::vector<int64_t>{pad[0], pad[1], pad[0], pad[1]});
  const std::string cut = step(c, "Slice", {full.out, c.ints({0, 0}, "starts"), c.ints({w[2], w[3]}, "ends"),
                                            c.ints({2, 3}, "axes")}).out;
  const int64_t groups = a.i("groups");
  const std::string gw = groups == 1 ? out : c.fresh("full_gw");
  c.add("Transpose", {cut}, {gw}).attr("perm", swap);
  if (groups != 1) keep_own_group(c, gw, w, groups, out);
}

// batch_norm_backward(gy, x, w, mean, var) {training, eps} -> (gx, gw, gb), per channel c
// with xhat = (x - mean) * invstd, invstd = 1 / sqrt(var + eps), sums over all but dim 1:
// gb = sum(gy), gw = sum(gy * xhat), gx = w * invstd * (gy - [gb + xhat * gw] / count),
// the bracket only in training (the batch statistics depend on x).
void batch_norm_backward_export(ExportContext& c) {
  const std::vector<int64_t> x = c.static_dims(c.input_type(1).shape, "the input");
  std::vector<int64_t> per_channel(x.size(), 1), axes{0};
  per_channel[1] = x[1];
  for (size_t d = 2; d < x.size(); ++d) axes.push_back(int64_t(d));
  const std::string shape = c.ints(per_channel, "per_channel");
  auto broadcast = [&](size_t input) { return step(c, "Reshape", {c.input(input), shape}).out; };
  auto channel_sum = [&](const std::string& v) {
    return step(c, "ReduceSum", {v, c.ints(axes, "axes")}).out;  // keepdims: [1, C, 1, ...]
  };
  const DType t = c.input_type(0).dtype;
  const std::string shifted = step(c, "Add", {broadcast(4), scalar(c, c.attrs().f("eps"), t)}).out;
  const std::string invstd = step(c, "Reciprocal", {step(c, "Sqrt", {shifted}).out}).out;
  const std::string xhat = step(c, "Mul", {step(c, "Sub", {c.input(1), broadcast(3)}).out, invstd}).out;
  const std::string gb = channel_sum(c.input(0)), gw = channel_sum(step(c, "Mul", {c.input(0), xhat}).out);
  std::string g = c.input(0);
  if (c.attrs().i("training") != 0) {
    int64_t count = 1;
    for (int64_t a : axes) count *= x[size_t(a)];
    const std::string batch_part = step(c, "Add", {gb, step(c, "Mul", {xhat, gw}).out}).out;
    g = step(c, "Sub", {g, step(c, "Div", {batch_part, scalar(c, double(count), t)}).out}).out;
  }
  c.add("Mul", {step(c, "Mul", {broadcast(2), invstd}).out, g}, {c.output(0)});
  c.add("Reshape", {gw, c.ints({x[1]}, "channels")}, {c.output(1)});
  c.add("Reshape", {gb, c.ints({x[1]}, "channels")}, {c.output(2)});
}

// A step that cannot be an ONNX node: it fails with the reason.
ExportFn refuse(const char* reason) {
  return [reason](ExportContext& c) { c.fail(reason); };
}

// conv2d_backward_weight(gy, x)[, the bias gradient: gy summed over all but the channels].
// The weight gradient into output `first` and, with `bias`, the bias gradient into the next.
void weight_gradient_export(ExportContext& c, const std::string& gy, const std::vector<int64_t>& gy_dims,
                            const std::string& x, const std::vector<int64_t>& w, bool bias, size_t first = 0) {
  conv_weight_gradient(c, gy, gy_dims, x, w, c.output(first));
  if (bias) c.add("ReduceSum", {gy, c.ints({0, 2, 3}, "axes")}, {c.output(first + 1)}).attr("keepdims", int64_t(0));
}

// The convolution's output gradient made again from the pooling's (src/passes/
// fuse_pool_gradient.cpp fused them): inputs gy and offsets (i32, or u8 window codes),
// maxima at input `maxima` (when given); x: the convolution's input dims, w: its weight's.
// Returns its name and dims.
std::pair<std::string, std::vector<int64_t>> pooled_output_gradient(ExportContext& c, size_t maxima,
                                                                    const std::vector<int64_t>& x,
                                                                    const std::vector<int64_t>& w) {
  const ops::Attrs& a = c.attrs();
  const std::vector<int64_t> pooled = c.static_dims(c.input_type(0).shape, "the gradient");
  const std::vector<int64_t> &s = a.ints("stride"), &p = a.ints("padding"), &d = a.ints("dilation");
  std::vector<int64_t> conv_out{x[0], w[0], 0, 0};
  for (size_t i = 0; i < 2; ++i) conv_out[2 + i] = (x[2 + i] + 2 * p[i] - d[i] * (w[2 + i] - 1) - 1) / s[i] + 1;
  std::string offsets = c.input(1), counts = c.node.num_inputs() > maxima ? c.input(maxima) : "";
  if (c.input_type(1).dtype == DType::u8) {  // window codes: offset = code % 4, counted where code >= 4
    const std::string codes = cast_to(c, c.input(1), DType::u8, DType::i32);
    const std::string four = c.constant(scalar_tensor<int32_t>(4), "four");
    offsets = step(c, "Mod", {codes, four}).out;
    counts = cast_to(c, step(c, "Div", {codes, four}).out, DType::i32, c.input_type(0).dtype);
  }
  const std::string gy = c.fresh("conv_gradient");
  export_window_gradient(c,
                         {.gy = c.input(0),
                          .offsets = offsets,
                          .maxima = counts,
                          .kernel = a.ints("pool_kernel"),
                          .stride = a.ints("pool_stride"),
                          .input_shape = conv_out,
                          .output_shape = pooled},
                         gy);
  return {gy, conv_out};
}

// conv2d_backward_weight_bias_pooled(gy, offsets, x[, maxima]): the weight and bias
// gradients of the output gradient made again.
void pooled_weight_gradient_export(ExportContext& c) {
  const std::vector<int64_t> x = c.static_dims(c.input_type(2).shape, "the input"), w = c.attrs().ints("weight_shape");
  const auto [gy, conv_out] = pooled_output_gradient(c, 3, x, w);
  weight_gradient_export(c, gy, conv_out, c.input(2), w, true);
}

// conv2d_backward_pooled(gy, offsets, w, x[, maxima]): the input gradient (ConvTranspose),
// then the weight and bias gradients, of the output gradient made again.
void pooled_gradients_export(ExportContext& c) {
  const ops::Attrs& a = c.attrs();
  const std::vector<int64_t> w = c.static_dims(c.input_type(2).shape, "the weight");
  const std::vector<int64_t> x = c.static_dims(c.input_type(3).shape, "the input");
  const auto [gy, conv_out] = pooled_output_gradient(c, 4, x, w);
  transposed_conv(c, {gy, c.input(2)},
                  {.kernel = {w[2], w[3]}, .stride = a.ints("stride"), .padding = a.ints("padding"),
                   .dilation = a.ints("dilation"), .groups = a.i("groups")},
                  x, conv_out);
  weight_gradient_export(c, gy, conv_out, c.input(3), w, true, 1);
}

}  // namespace

// ConvTranspose to the size `input_shape` of the convolution it reverses: output_padding
// adds the rows and columns a strided convolution never reached.
void transposed_conv(ExportContext& c, const Names& inputs, const ConvGeometry& g,
                     const std::vector<int64_t>& input_shape, std::optional<std::vector<int64_t>> gradient_shape) {
  const std::vector<int64_t> gy =
      gradient_shape ? *gradient_shape : c.static_dims(c.input_type(0).shape, "the gradient");
  std::vector<int64_t> extra(2);
  for (size_t d = 0; d < 2; ++d)
    extra[d] = input_shape[d + 2] - (g.stride[d] * (gy[d + 2] - 1) + g.dilation[d] * (g.kernel[d] - 1) + 1 - 2 * g.padding[d]);
  c.add("ConvTranspose", inputs, {c.output()})
      .attr("kernel_shape", g.kernel)
      .attr("strides", g.stride)
      .attr("pads", std::vector<int64_t>{g.padding[0], g.padding[1], g.padding[0], g.padding[1]})
      .attr("dilations", g.dilation)
      .attr("group", g.groups)
      .attr("output_padding", extra);
}

// Training mode normalizes with the batch's mean and biased variance; with momentum 0 the
// "running" statistics ONNX returns are exactly those (the running inputs, which training
// does not read, are zeros and ones).
void export_batch_norm_training(ExportContext& c) {
  const std::vector<int64_t> x = c.static_dims(c.input_type(0).shape, "the input");
  const DType t = c.input_type(0).dtype;
  const Shape channels{x.at(1)};
  Names outs{c.output(0)};
  for (size_t i = 1; i < 3; ++i) outs.push_back(c.output_used(i) ? c.output(i) : c.fresh("unused"));
  c.add("BatchNormalization", {c.input(0), c.input(1), c.input(2), c.constant(zeros(channels, t), "mean"),
                               c.constant(ones(channels, t), "var")},
        outs)
      .attr("epsilon", c.attrs().f("eps"))
      .attr("momentum", 0.0)
      .attr("training_mode", int64_t(1));
}

// y by LayerNormalization; mean and rstd (kept dims) by reductions in the input's dtype,
// since ONNX's own Mean and InvStdDev outputs are f32 or bf16 only.
void export_layer_norm_stats(ExportContext& c) {
  const int64_t axes = c.attrs().i("axes"), rank = int64_t(c.input_type(0).shape.rank());
  std::vector<int64_t> dims;
  for (int64_t d = rank - axes; d < rank; ++d) dims.push_back(d);
  auto mean_of = [&](const std::string& v, const std::string& out) {
    c.add("ReduceMean", {v}, {out}).attr("axes", dims).attr("keepdims", int64_t(1));
  };
  const std::string mean = c.output_used(1) ? c.output(1) : c.fresh("mean"), var = c.fresh("var");
  mean_of(c.input(0), mean);
  const std::string centered = step(c, "Sub", {c.input(0), mean}).out;
  mean_of(step(c, "Mul", {centered, centered}).out, var);
  const std::string shifted = step(c, "Add", {var, scalar(c, c.attrs().f("eps"), c.input_type(0).dtype)}).out;
  if (c.output_used(2)) c.add("Reciprocal", {step(c, "Sqrt", {shifted}).out}, {c.output(2)});
}

BATON_ONNX_EXPORTER("cross_entropy", [](ExportContext& c) { loss_export(c, "SoftmaxCrossEntropyLoss"); });
BATON_ONNX_EXPORTER("nll_loss", [](ExportContext& c) { loss_export(c, "NegativeLogLikelihoodLoss"); });
BATON_ONNX_EXPORTER("conv2d_backward_input", conv_backward_input_export);
BATON_ONNX_EXPORTER("batch_norm_backward", batch_norm_backward_export);
BATON_ONNX_EXPORTER("conv2d_backward_weight", [](ExportContext& c) {
  weight_gradient_export(c, c.input(0), c.static_dims(c.input_type(0).shape, "the gradient"), c.input(1),
                         c.attrs().ints("weight_shape"), false);
});
BATON_ONNX_EXPORTER("conv2d_backward_weight_bias", [](ExportContext& c) {
  weight_gradient_export(c, c.input(0), c.static_dims(c.input_type(0).shape, "the gradient"), c.input(1),
                         c.attrs().ints("weight_shape"), true);
});
BATON_ONNX_EXPORTER("conv2d_backward_weight_bias_pooled", pooled_weight_gradient_export);
BATON_ONNX_EXPORTER("conv2d_backward_pooled", pooled_gradients_export);

BATON_ONNX_EXPORTER("dropout", refuse("draws a random mask (training mode), which another runtime draws differently; "
                                      "export the model in eval mode"));
BATON_ONNX_EXPORTER("sgd_update", refuse("updates parameters in place; an ONNX graph is a pure function"));
BATON_ONNX_EXPORTER("adam_update", refuse("updates parameters in place; an ONNX graph is a pure function"));
BATON_ONNX_EXPORTER("assign", refuse("writes a variable in place; an ONNX graph is a pure function"));

}  // namespace baton::onnx::detail
