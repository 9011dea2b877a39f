// ONNX neural-network ops: Conv, pooling, normalization, Gemm/MatMul, Dropout, losses.
// Images are NCHW; 1-D convolution and pooling run as 2-D over a height of 1.
#include <cmath>
#include <limits>

#include "baton/ops.h"
#include "dispatch/registry.h"
#include "io/onnx/importer.h"

namespace baton::onnx::detail {
namespace {

// The window of a 2-D convolution or pooling node over spatial sizes `in`: kernel,
// strides, dilations and the padding before and after each spatial dim (auto_pad
// resolved, and the extension ceil_mode needs added to pad_end).
struct Window {
  std::array<int64_t, 2> kernel{1, 1}, stride{1, 1}, dilation{1, 1}, pad_begin{0, 0}, pad_end{0, 0};
  // baton's conv2d and pooling take equal padding on both sides, at most half the kernel
  // (pooling); other padding is added with pad() first.
  bool plain_padding() const {
    return pad_begin == pad_end && pad_begin[0] <= kernel[0] / 2 && pad_begin[1] <= kernel[1] / 2;
  }
};

// Attribute values for the last `n` spatial dims, left-filled with `fill` to two dims.
std::array<int64_t, 2> two_dims(const NodeContext& c, const std::vector<int64_t>& v, size_t n, int64_t fill,
                                const char* what) {
  if (!v.empty() && v.size() != n) c.fail(str(what, " has ", v.size(), " values for ", n, " spatial dims"));
  std::array<int64_t, 2> out{fill, fill};
  for (size_t i = 0; i < v.size(); ++i) out[2 - n + i] = v[i];
  return out;
}

Window window_of(const NodeContext& c, const Shape& x, std::vector<int64_t> kernel, bool pooling) {
  const size_t n = x.size() - 2;
  Window w;
  w.kernel = two_dims(c, kernel, n, 1, "kernel_shape");
  w.stride = two_dims(c, c.attr_ints("strides"), n, 1, "strides");
  w.dilation = two_dims(c, c.attr_ints("dilations"), n, 1, "dilations");
  std::vector<int64_t> pads = c.attr_ints("pads");
  if (!pads.empty() && pads.size() != 2 * n) c.fail(str("pads has ", pads.size(), " values for ", n, " spatial dims"));
  if (!pads.empty()) {
    w.pad_begin = two_dims(c, {pads.begin(), pads.begin() + long(n)}, n, 0, "pads");
    w.pad_end = two_dims(c, {pads.begin() + long(n), pads.end()}, n, 0, "pads");
  }
  for (size_t d = 0; d < 2; ++d)
    if (w.stride[d] <= 0 || w.kernel[d] <= 0 || w.dilation[d] <= 0 || w.pad_begin[d] < 0 || w.pad_end[d] < 0)
      c.fail("kernel, strides and dilations must be positive and pads not negative");
  const std::string auto_pad = c.attr_string("auto_pad", "NOTSET");
  const bool ceil_mode = pooling && c.attr_int("ceil_mode", 0) != 0;
  for (size_t d = 0; d < 2; ++d) {
    const int64_t size = x[2 + d - (2 - n)];
    if (d < 2 - n) continue;  // the added height of 1
    if ((auto_pad != "NOTSET" || ceil_mode) && sym::is_symbol(size))
      c.fail(str("auto_pad and ceil_mode need static spatial sizes, got ", x));
    const int64_t span = (w.kernel[d] - 1) * w.dilation[d] + 1;
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      const int64_t out = (size + w.stride[d] - 1) / w.stride[d];
      const int64_t total = std::max<int64_t>(0, (out - 1) * w.stride[d] + span - size);
      w.pad_begin[d] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      w.pad_end[d] = total - w.pad_begin[d];
    } else if (auto_pad == "VALID") {
      w.pad_begin[d] = w.pad_end[d] = 0;
    } else if (auto_pad != "NOTSET") {
      c.fail(str("auto_pad '", auto_pad, "' is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID"));
    }
    if (ceil_mode) {
      const int64_t padded = size + w.pad_begin[d] + w.pad_end[d];
      int64_t out = (padded - span + w.stride[d] - 1) / w.stride[d] + 1;
      if ((out - 1) * w.stride[d] >= size + w.pad_begin[d]) --out;  // a window must start inside
      w.pad_end[d] += std::max<int64_t>(0, (out - 1) * w.stride[d] + span - padded);
    }
  }
  return w;
}

// baton's pad() pairs for the window's padding of a rank-4 tensor.
std::vector<int64_t> pad_pairs(const Window& w) {
  return {w.pad_begin[1], w.pad_end[1], w.pad_begin[0], w.pad_end[0]};
}

// x as rank 4: 1-D ops run over a height of 1.
Tensor as_2d(const NodeContext& c, const Tensor& x) {
  if (x.dim() == 3) return unsqueeze(x, 2);
  if (x.dim() != 4) c.fail(str("supports 1-D and 2-D inputs ([N,C,W] or [N,C,H,W]), got ", x.shape()));
  return x;
}
Tensor from_2d(const Tensor& y, int64_t rank) { return rank == 3 ? squeeze(y, 2) : y; }

// A per-channel vector [C] shaped to broadcast over [N, C, spatial...].
Tensor per_channel_of(const Tensor& v, int64_t rank) {
  Shape s(size_t(rank - 1), 1);
  s[0] = v.shape()[0];
  return reshape(v, s);
}

Outputs import_conv(NodeContext& c) {
  const Tensor& x0 = c.input(0);
  Tensor x = as_2d(c, x0), w = as_2d(c, c.input(1));
  std::vector<int64_t> kernel = c.attr_ints("kernel_shape");
  if (kernel.empty()) kernel = {w.shape().begin() + 2 + (4 - x0.dim()), w.shape().end()};
  Window win = window_of(c, x0.shape(), kernel, false);
  if (win.kernel[0] != w.shape()[2] || win.kernel[1] != w.shape()[3])
    c.fail(str("kernel_shape does not match the weight's shape ", c.input(1).shape()));
  Conv2dOptions options{.stride = win.stride, .padding = win.pad_begin, .dilation = win.dilation,
                        .groups = c.attr_int("group", 1)};
  if (win.pad_begin != win.pad_end) {
    x = pad(x, pad_pairs(win));
    options.padding = {0, 0};
  }
  return {from_2d(conv2d(x, w, c.has_input(2) ? c.input(2) : Tensor(), options), x0.dim())};
}

// ConvTranspose is the input gradient of a convolution (conv2d_backward_input): computed
// unpadded at its full size, (in - 1) * stride + (kernel - 1) * dilation + 1 +
// output_padding, then cropped by the pads (given, or derived from output_shape/auto_pad).
Outputs import_conv_transpose(NodeContext& c) {
  const Tensor& x0 = c.input(0);
  Tensor x = as_2d(c, x0), w = as_2d(c, c.input(1));
  const size_t n = size_t(x0.dim() - 2);
  const int64_t groups = c.attr_int("group", 1);
  auto two = [&](const char* name, int64_t fill) { return two_dims(c, c.attr_ints(name), n, fill, name); };
  const std::array<int64_t, 2> stride = two("strides", 1), dilation = two("dilations", 1),
                               extra = two("output_padding", 0);
  const std::vector<int64_t> output_shape = c.attr_ints("output_shape");
  const std::string auto_pad = c.attr_string("auto_pad", "NOTSET");
  std::vector<int64_t> pads = c.attr_ints("pads", std::vector<int64_t>(2 * n, 0));
  if (pads.size() != 2 * n) c.fail(str("pads has ", pads.size(), " values for ", n, " spatial dims"));
  Shape full{x.shape()[0], w.shape()[1] * groups, 1, 1};
  std::array<int64_t, 2> begin{0, 0}, end{0, 0};
  for (size_t d = 2 - n; d < 2; ++d) {
    const int64_t in = x.shape()[2 + d];
    if (sym::is_symbol(in)) c.fail(str("needs static spatial sizes, got ", x0.shape()));
    full[2 + d] = (in - 1) * stride[d] + (w.shape()[2 + d] - 1) * dilation[d] + 1 + extra[d];
    const size_t k = d - (2 - n);
    begin[d] = pads[k], end[d] = pads[k + n];
    int64_t want = !output_shape.empty() ? output_shape.at(output_shape.size() - n + k)
                   : auto_pad.rfind("SAME", 0) == 0 ? in * stride[d] : -1;
    if (want >= 0) {  // pads that give this output size; a larger one extends the end
      full[2 + d] = std::max(full[2 + d], want);
      const int64_t total = full[2 + d] - want;
      begin[d] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      end[d] = total - begin[d];
    }
  }
  static const ops::OpDef& backward_input = *ops::find_op("conv2d_backward_input");
  Tensor y = ops::call(backward_input, {x, w},
                       {{"stride", std::vector<int64_t>{stride[0], stride[1]}},
                        {"padding", std::vector<int64_t>{0, 0}},
                        {"dilation", std::vector<int64_t>{dilation[0], dilation[1]}},
                        {"groups", groups},
                        {"input_shape", full.vec()}},
                       c.importer.loc());
  for (size_t d = 0; d < 2; ++d)
    if (begin[d] || end[d]) y = slice(y, int64_t(2 + d), begin[d], full[2 + d] - end[d]);
  if (c.has_input(2)) y = y + per_channel_of(c.input(2), 4);
  return {from_2d(y, x0.dim())};
}

Outputs import_max_pool(NodeContext& c) {
  if (c.wants_output(1)) c.fail("the Indices output is not supported");
  if (c.attr_int("storage_order", 0) != 0) c.fail("storage_order = 1 is not supported");
  const Tensor& x0 = c.input(0);
  Tensor x = as_2d(c, x0);
  Window win = window_of(c, x0.shape(), c.attr_ints("kernel_shape"), true);
  if (win.dilation != std::array<int64_t, 2>{1, 1}) c.fail("dilations other than 1 are not supported");
  Pool2dOptions options{.kernel = win.kernel, .stride = win.stride, .padding = win.pad_begin};
  if (!win.plain_padding()) {
    x = pad(x, pad_pairs(win), -std::numeric_limits<double>::infinity());
    options.padding = {0, 0};
  }
  return {from_2d(max_pool2d(x, options), x0.dim())};
}

// Average pooling divides by the count of input elements in each window (padding counted
// only with count_include_pad): the pooled sum of x over the pooled sum of a mask.
Outputs import_average_pool(NodeContext& c) {
  const Tensor& x0 = c.input(0);
  Tensor x = as_2d(c, x0);
  Window win = window_of(c, x0.shape(), c.attr_ints("kernel_shape"), true);
  if (win.dilation != std::array<int64_t, 2>{1, 1}) c.fail("dilations other than 1 are not supported");
  const bool include_pad = c.attr_int("count_include_pad", 0) != 0;
  const Window declared = window_of(c, x0.shape(), c.attr_ints("kernel_shape"), false);  // without ceil_mode
  Pool2dOptions options{.kernel = win.kernel, .stride = win.stride, .padding = win.pad_begin};
  if (win.plain_padding() && (include_pad || win.pad_begin == std::array<int64_t, 2>{0, 0}))
    return {from_2d(avg_pool2d(x, options), x0.dim())};
  options.padding = {0, 0};
  Tensor mask = ones_like(x);
  if (include_pad) mask = pad(mask, pad_pairs(declared), 1.0);
  Window extension = win;  // what ceil_mode adds beyond the declared padding
  for (size_t d = 0; d < 2; ++d) {
    extension.pad_begin[d] = include_pad ? 0 : win.pad_begin[d];
    extension.pad_end[d] = include_pad ? win.pad_end[d] - declared.pad_end[d] : win.pad_end[d];
  }
  mask = pad(mask, pad_pairs(extension), 0.0);
  Tensor y = avg_pool2d(pad(x, pad_pairs(win)), options) / avg_pool2d(mask, options);
  return {from_2d(y, x0.dim())};
}

std::vector<int64_t> spatial_dims(const Tensor& x) {
  std::vector<int64_t> dims;
  for (int64_t d = 2; d < x.dim(); ++d) dims.push_back(d);
  return dims;
}


// -input[i, target[i], ...] weighted, with ignore_index and ONNX's reductions (mean divides
// by the summed weights of the counted elements).
Tensor nll(const NodeContext& c, const Tensor& log_prob, const Tensor& target0, const Tensor& weight) {
  Tensor target = cast(target0, DType::i64);
  Tensor valid, safe = target;
  if (c.has_attr("ignore_index")) {
    valid = ne(target, c.attr_int("ignore_index"));
    safe = where(valid, target, zeros_like(target));
  }
  Tensor picked = squeeze(gather(log_prob, 1, unsqueeze(safe, 1)), 1);
  Tensor w = weight.defined() ? reshape(index_select(weight, 0, reshape(safe, Shape{-1})), safe.shape())
                              : ones_like(picked);
  if (valid.defined()) w = w * cast(valid, w.dtype());
  Tensor loss = -picked * w;
  const std::string reduction = c.attr_string("reduction", "mean");
  if (reduction == "none") return loss;
  if (reduction == "sum") return sum(loss);
  if (reduction == "mean") return sum(loss) / sum(w);
  c.fail(str("reduction '", reduction, "' is not one of none, sum, mean"));
}

}  // namespace

BATON_ONNX_IMPORTER("Conv", import_conv);
BATON_ONNX_IMPORTER("ConvTranspose", import_conv_transpose);
BATON_ONNX_IMPORTER("MaxPool", import_max_pool);
BATON_ONNX_IMPORTER("AveragePool", import_average_pool);
BATON_ONNX_IMPORTER("GlobalAveragePool", [](NodeContext& c) -> Outputs {
  return {mean(c.input(0), spatial_dims(c.input(0)), true)};
});
BATON_ONNX_IMPORTER("GlobalMaxPool", [](NodeContext& c) -> Outputs {
  return {max(c.input(0), spatial_dims(c.input(0)), true)};
});

BATON_ONNX_IMPORTER("BatchNormalization", [](NodeContext& c) -> Outputs {
  if (c.attr_int("training_mode", 0) != 0 || (c.opset < 7 && c.attr_int("is_test", 0) == 0 && c.num_outputs() > 1))
    c.fail("training mode (batch statistics and updated running ones) is not supported");
  const double eps = c.attr_float("epsilon", 1e-5);
  return {batch_norm(c.input(0), c.input(3), c.input(4), c.input(1), c.input(2), false, 0.1, eps)};
});

BATON_ONNX_IMPORTER("InstanceNormalization", [](NodeContext& c) -> Outputs {
  const Tensor& x = c.input(0);
  std::vector<int64_t> dims = spatial_dims(x);
  Tensor centered = x - mean(x, dims, true);
  Tensor normalized = centered * rsqrt(var(x, dims, true, 0) + c.attr_float("epsilon", 1e-5));
  return {normalized * per_channel_of(c.input(1), x.dim()) + per_channel_of(c.input(2), x.dim())};
});

BATON_ONNX_IMPORTER("LayerNormalization", [](NodeContext& c) -> Outputs {
  const Tensor& x = c.input(0);
  const int64_t axis = axis_attr(c, "axis", -1, x.dim());
  const double eps = c.attr_float("epsilon", 1e-5);
  Shape normalized(std::vector<int64_t>(x.shape().begin() + axis, x.shape().end()));
  Outputs out;
  if (c.input(1).shape() == normalized && (!c.has_input(2) || c.input(2).shape() == normalized)) {
    out.push_back(layer_norm(x, normalized, c.input(1), c.has_input(2) ? c.input(2) : Tensor(), eps));
  } else {  // scale or bias broadcast
    out.push_back(layer_norm(x, normalized, {}, {}, eps) * c.input(1));
    if (c.has_input(2)) out[0] = out[0] + c.input(2);
  }
  if (c.wants_output(1) || c.wants_output(2)) {
    std::vector<int64_t> dims;
    for (int64_t d = axis; d < x.dim(); ++d) dims.push_back(d);
    out.push_back(mean(x, dims, true));
    out.push_back(rsqrt(var(x, dims, true, 0) + eps));
  }
  return out;
});

BATON_ONNX_IMPORTER("MatMul", [](NodeContext& c) -> Outputs { return {matmul(c.input(0), c.input(1))}; });

BATON_ONNX_IMPORTER("Gemm", [](NodeContext& c) -> Outputs {
  Tensor a = c.input(0), b = c.input(1);
  if (a.dim() != 2 || b.dim() != 2) c.fail(str("takes matrices, got ", a.shape(), " and ", b.shape()));
  if (c.attr_int("transA", 0) != 0) a = a.t();
  const bool trans_b = c.attr_int("transB", 0) != 0;
  const double alpha = c.attr_float("alpha", 1.0), beta = c.attr_float("beta", 1.0);
  Tensor bias = c.has_input(2) ? c.input(2) : Tensor();
  // The common case is a linear layer: one product with its bias.
  if (alpha == 1.0 && beta == 1.0 && bias.defined() && bias.dim() == 1 && bias.shape()[0] == b.shape()[trans_b ? 0 : 1])
    return {linear(a, trans_b ? b : b.t(), bias)};
  Tensor y = matmul(a, trans_b ? b.t() : b);
  if (alpha != 1.0) y = y * alpha;
  if (bias.defined()) y = y + (beta == 1.0 ? bias : bias * beta);
  return {y};
});

// Dropout: inference (or a ratio of 0) passes x through with an all-true mask.
BATON_ONNX_IMPORTER("Dropout", [](NodeContext& c) -> Outputs {
  const Tensor& x = c.input(0);
  double ratio = c.opset < 12 ? c.attr_float("ratio", 0.5) : (c.has_input(1) ? c.scalar_input(1) : 0.5);
  bool training = c.opset < 12 ? (c.opset < 7 && c.attr_int("is_test", 0) == 0) : (c.has_input(2) && c.scalar_input(2) != 0);
  if (training && ratio > 0) {
    if (c.wants_output(1)) c.fail("the mask of training-mode dropout is not supported");
    return {dropout(x, ratio, true)};
  }
  return {x, full_like(x, true, DType::b8)};
});

BATON_ONNX_IMPORTER("NegativeLogLikelihoodLoss", [](NodeContext& c) -> Outputs {
  return {nll(c, c.input(0), c.input(1), c.has_input(2) ? c.input(2) : Tensor())};
});

BATON_ONNX_IMPORTER("SoftmaxCrossEntropyLoss", [](NodeContext& c) -> Outputs {
  Tensor log_prob = log_softmax(c.input(0), 1);
  return {nll(c, log_prob, c.input(1), c.has_input(2) ? c.input(2) : Tensor()), log_prob};
});

}  // namespace baton::onnx::detail
