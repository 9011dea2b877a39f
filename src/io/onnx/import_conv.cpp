// ONNX convolution and pooling: Conv, ConvTranspose, MaxPool (and its Indices output),
// AveragePool. Images are NCHW; baton's conv2d and pooling are 2-D, so 1-D runs as 2-D
// over a height of 1, and 3-D ([N,C,D,H,W]) is composed from 2-D ops over (H,W) with the
// depth folded into the batch, combined over the depth taps of the window (sum for Conv,
// max or sum for pooling). Dilated pooling (any rank) combines strided slices of the
// padded input, one per kernel tap.
#include <algorithm>
#include <array>
#include <functional>
#include <limits>

#include "baton/ops.h"
#include "dispatch/registry.h"
#include "io/onnx/importer.h"

namespace baton::onnx::detail {
namespace {

// Per spatial dim: depth, height, width. Fewer spatial dims fill the leading entries
// (kernel, stride and dilation 1, no padding).
using Dims = std::array<int64_t, 3>;
std::array<int64_t, 2> hw(const Dims& a) { return {a[1], a[2]}; }

// The window of a convolution or pooling node over spatial sizes `in`: kernel, strides,
// dilations and the padding before and after each spatial dim (auto_pad resolved, and the
// extension ceil_mode needs added to pad_end).
struct Window {
  Dims kernel{1, 1, 1}, stride{1, 1, 1}, dilation{1, 1, 1}, pad_begin{0, 0, 0}, pad_end{0, 0, 0};
  int64_t span(size_t d) const { return (kernel[d] - 1) * dilation[d] + 1; }
  bool dilated() const { return dilation != Dims{1, 1, 1}; }
  bool symmetric_hw() const { return pad_begin[1] == pad_end[1] && pad_begin[2] == pad_end[2]; }
  // baton's conv2d and pooling take equal padding on both sides of H and W, at most half
  // the kernel (pooling); other padding is added with pad() first.
  bool plain_padding() const {
    return symmetric_hw() && pad_begin[1] <= kernel[1] / 2 && pad_begin[2] <= kernel[2] / 2;
  }
};

// Attribute values for the last `n` spatial dims, left-filled with `fill` to three dims.
Dims three_dims(const NodeContext& c, const std::vector<int64_t>& v, size_t n, int64_t fill, const char* what) {
  if (!v.empty() && v.size() != n) c.fail(str(what, " has ", v.size(), " values for ", n, " spatial dims"));
  Dims out{fill, fill, fill};
  for (size_t i = 0; i < v.size(); ++i) out[3 - n + i] = v[i];
  return out;
}

size_t spatial_rank(const NodeContext& c, const Shape& x) {
  if (x.size() < 3 || x.size() > 5)
    c.fail(str("supports 1-D, 2-D and 3-D inputs ([N,C,W], [N,C,H,W] or [N,C,D,H,W]), got ", x));
  return x.size() - 2;
}

Window window_of(const NodeContext& c, const Shape& x, std::vector<int64_t> kernel, bool pooling) {
  const size_t n = spatial_rank(c, x);
  Window w;
  w.kernel = three_dims(c, kernel, n, 1, "kernel_shape");
  w.stride = three_dims(c, c.attr_ints("strides"), n, 1, "strides");
  w.dilation = three_dims(c, c.attr_ints("dilations"), n, 1, "dilations");
  std::vector<int64_t> pads = c.attr_ints("pads");
  if (!pads.empty() && pads.size() != 2 * n) c.fail(str("pads has ", pads.size(), " values for ", n, " spatial dims"));
  if (!pads.empty()) {
    w.pad_begin = three_dims(c, {pads.begin(), pads.begin() + long(n)}, n, 0, "pads");
    w.pad_end = three_dims(c, {pads.begin() + long(n), pads.end()}, n, 0, "pads");
  }
  for (size_t d = 0; d < 3; ++d)
    if (w.stride[d] <= 0 || w.kernel[d] <= 0 || w.dilation[d] <= 0 || w.pad_begin[d] < 0 || w.pad_end[d] < 0)
      c.fail("kernel, strides and dilations must be positive and pads not negative");
  const std::string auto_pad = c.attr_string("auto_pad", "NOTSET");
  const bool ceil_mode = pooling && c.attr_int("ceil_mode", 0) != 0;
  for (size_t d = 3 - n; d < 3; ++d) {
    const int64_t size = x[2 + d - (3 - n)];
    if ((auto_pad != "NOTSET" || ceil_mode) && sym::is_symbol(size))
      c.fail(str("auto_pad and ceil_mode need static spatial sizes, got ", x));
    const int64_t span = w.span(d);
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

// baton's pad() pairs (last dim first) for the window's padding of the last `n` spatial dims.
std::vector<int64_t> pad_pairs(const Window& w, size_t n) {
  std::vector<int64_t> pairs(2 * n);
  for (size_t i = 0; i < n; ++i) pairs[2 * i] = w.pad_begin[2 - i], pairs[2 * i + 1] = w.pad_end[2 - i];
  return pairs;
}
bool any_nonzero(const std::vector<int64_t>& v) {
  return std::any_of(v.begin(), v.end(), [](int64_t p) { return p != 0; });
}
Tensor pad_if(const Tensor& x, const std::vector<int64_t>& pairs, double value) {
  return any_nonzero(pairs) ? pad(x, pairs, value) : x;
}

// x as rank 4: 1-D ops run over a height of 1.
Tensor as_2d(const Tensor& x) { return x.dim() == 3 ? unsqueeze(x, 2) : x; }
Tensor from_2d(const Tensor& y, int64_t rank) { return rank == 3 ? squeeze(y, 2) : y; }


// The max or sum over the window's kernel taps: for each tap, x (padded already) sliced
// along each of `axes` (tensor dim, window dim) from the tap's offset with the stride, as
// many elements as the output has.
Tensor combine_taps(const NodeContext& c, const Tensor& x, const Window& win,
                    const std::vector<std::pair<int64_t, size_t>>& axes, bool is_max) {
  std::vector<int64_t> out(axes.size());
  for (size_t a = 0; a < axes.size(); ++a) {
    const auto [dim, d] = axes[a];
    const int64_t size = x.shape()[size_t(dim)];
    if (sym::is_symbol(size)) c.fail(str("needs static spatial sizes to combine the window's taps, got ", x.shape()));
    out[a] = size < win.span(d) ? 0 : (size - win.span(d)) / win.stride[d] + 1;
    if (out[a] < 1) c.fail(str("the window (kernel ", win.kernel[d], ", dilation ", win.dilation[d],
                               ") is larger than the padded input ", size));
  }
  Tensor acc;
  std::vector<int64_t> tap(axes.size(), 0);
  while (true) {
    Tensor t = x;
    for (size_t a = 0; a < axes.size(); ++a) {
      const auto [dim, d] = axes[a];
      const int64_t start = tap[a] * win.dilation[d];
      t = slice(t, dim, start, start + (out[a] - 1) * win.stride[d] + 1, win.stride[d]);
    }
    acc = !acc.defined() ? t : is_max ? maximum(acc, t) : acc + t;
    size_t a = axes.size();  // next tap, the last axis fastest
    while (a > 0 && ++tap[a - 1] == win.kernel[axes[a - 1].second]) tap[--a] = 0;
    if (a == 0) break;
  }
  return acc;
}
std::vector<std::pair<int64_t, size_t>> all_spatial_axes(int64_t rank) {
  std::vector<std::pair<int64_t, size_t>> axes;
  for (int64_t i = 0; i < rank - 2; ++i) axes.push_back({2 + i, size_t(3 - (rank - 2) + i)});
  return axes;
}

// 3-D from 2-D: f (a 2-D op over (H,W)) applied to every depth slice of x [N,C,D,H,W] as
// one batch, then combined over the window's depth taps: [N,C',Dout,H',W'].
Tensor over_depth(const NodeContext& c, const Tensor& x, const Window& win, bool is_max,
                  const std::function<Tensor(const Tensor&)>& f) {
  if (sym::is_symbol(x.shape()[2])) c.fail(str("3-D needs a static depth, got ", x.shape()));
  Tensor y = f(flatten(permute(x, {0, 2, 1, 3, 4}), 0, 1));
  const Shape s = y.shape();
  y = reshape(y, Shape{x.shape()[0], x.shape()[2], s[1], s[2], s[3]});
  return permute(combine_taps(c, y, win, {{1, 0}}, is_max), {0, 2, 1, 3, 4});
}

Outputs import_conv(NodeContext& c) {
  const Tensor &x0 = c.input(0), &w0 = c.input(1);
  const int64_t rank = x0.dim();
  const size_t n = spatial_rank(c, x0.shape());
  if (w0.dim() != rank) c.fail(str("the weight's shape ", w0.shape(), " does not match the input's ", x0.shape()));
  std::vector<int64_t> kernel = c.attr_ints("kernel_shape");
  if (kernel.empty()) kernel = {w0.shape().begin() + 2, w0.shape().end()};
  Window win = window_of(c, x0.shape(), kernel, false);
  for (size_t i = 0; i < n; ++i)
    if (win.kernel[3 - n + i] != w0.shape()[2 + i])
      c.fail(str("kernel_shape does not match the weight's shape ", w0.shape()));
  Conv2dOptions options{.stride = hw(win.stride), .padding = hw(win.pad_begin), .dilation = hw(win.dilation),
                        .groups = c.attr_int("group", 1)};
  Tensor bias = c.has_input(2) ? c.input(2) : Tensor();
  std::vector<int64_t> pads = pad_pairs(win, n);
  if (win.symmetric_hw()) std::fill(pads.begin(), pads.begin() + std::min<long>(4, long(pads.size())), 0);
  else options.padding = {0, 0};
  Tensor x = pad_if(x0, pads, 0.0);
  if (rank < 5) return {from_2d(conv2d(as_2d(x), as_2d(w0), bias, options), rank)};
  // 3-D: the sum over depth taps k of conv2d(depth slices k*dilation + stride*i, w[:,:,k]).
  const int64_t depth = x.shape()[2];
  if (sym::is_symbol(depth)) c.fail(str("3-D convolution needs a static depth, got ", x0.shape()));
  const int64_t out_depth = depth < win.span(0) ? 0 : (depth - win.span(0)) / win.stride[0] + 1;
  if (out_depth < 1) c.fail(str("the kernel's depth span ", win.span(0), " exceeds the padded depth ", depth));
  Tensor xt = permute(x, {0, 2, 1, 3, 4}), acc;
  for (int64_t k = 0; k < win.kernel[0]; ++k) {
    const int64_t start = k * win.dilation[0];
    Tensor s = flatten(slice(xt, 1, start, start + (out_depth - 1) * win.stride[0] + 1, win.stride[0]), 0, 1);
    Tensor yk = conv2d(s, squeeze(slice(w0, 2, k, k + 1), 2), {}, options);
    acc = acc.defined() ? acc + yk : yk;
  }
  const Shape s = acc.shape();
  acc = permute(reshape(acc, Shape{x.shape()[0], out_depth, s[1], s[2], s[3]}), {0, 2, 1, 3, 4});
  if (bias.defined()) acc = acc + per_channel(bias, 5);
  return {acc};
}

// ConvTranspose is the input gradient of a convolution (conv2d_backward_input): computed
// unpadded at its full size, (in - 1) * stride + (kernel - 1) * dilation + 1 +
// output_padding, then cropped by the pads (given, or derived from output_shape/auto_pad).
// 3-D: for each depth tap k, the 2-D one of every input depth slice (folded into the batch)
// with w[:,:,k], placed at output depths i * stride + k * dilation (zeros interleaved), summed.
Outputs import_conv_transpose(NodeContext& c) {
  const Tensor &x0 = c.input(0), &w0 = c.input(1);
  const int64_t rank = x0.dim();
  const size_t n = spatial_rank(c, x0.shape());
  if (w0.dim() != rank) c.fail(str("the weight's shape ", w0.shape(), " does not match the input's ", x0.shape()));
  const int64_t groups = c.attr_int("group", 1);
  auto attr = [&](const char* name, int64_t fill) { return three_dims(c, c.attr_ints(name), n, fill, name); };
  const Dims stride = attr("strides", 1), dilation = attr("dilations", 1), extra = attr("output_padding", 0);
  const std::vector<int64_t> output_shape = c.attr_ints("output_shape");
  const std::string auto_pad = c.attr_string("auto_pad", "NOTSET");
  std::vector<int64_t> pads = c.attr_ints("pads", std::vector<int64_t>(2 * n, 0));
  if (pads.size() != 2 * n) c.fail(str("pads has ", pads.size(), " values for ", n, " spatial dims"));
  Dims full{1, 1, 1}, begin{0, 0, 0}, end{0, 0, 0}, in{1, 1, 1};
  for (size_t d = 3 - n; d < 3; ++d) {
    const size_t k = d - (3 - n);
    in[d] = x0.shape()[2 + k];
    if (sym::is_symbol(in[d])) c.fail(str("needs static spatial sizes, got ", x0.shape()));
    full[d] = (in[d] - 1) * stride[d] + (w0.shape()[2 + k] - 1) * dilation[d] + 1 + extra[d];
    begin[d] = pads[k], end[d] = pads[k + n];
    int64_t want = !output_shape.empty() ? output_shape.at(output_shape.size() - n + k)
                   : auto_pad.rfind("SAME", 0) == 0 ? in[d] * stride[d] : -1;
    if (want >= 0) {  // pads that give this output size; a larger one extends the end
      full[d] = std::max(full[d], want);
      const int64_t total = full[d] - want;
      begin[d] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      end[d] = total - begin[d];
    }
  }
  static const ops::OpDef& backward_input = *ops::find_op("conv2d_backward_input");
  auto transposed_2d = [&](const Tensor& x, const Tensor& w) {  // [B,C,H,W] -> [B,M,full H,full W]
    return ops::call(backward_input, {x, w},
                     {{"stride", std::vector<int64_t>{stride[1], stride[2]}},
                      {"padding", std::vector<int64_t>{0, 0}},
                      {"dilation", std::vector<int64_t>{dilation[1], dilation[2]}},
                      {"groups", groups},
                      {"input_shape", std::vector<int64_t>{x.shape()[0], w.shape()[1] * groups, full[1], full[2]}}},
                     c.importer.loc());
  };
  Tensor y;
  if (n < 3) {
    y = transposed_2d(as_2d(x0), as_2d(w0));
  } else {
    const Tensor x = flatten(permute(x0, {0, 2, 1, 3, 4}), 0, 1);
    const int64_t placed = (in[0] - 1) * stride[0] + 1;  // input depths with stride - 1 zeros between
    for (int64_t k = 0; k < w0.shape()[2]; ++k) {
      Tensor z = transposed_2d(x, squeeze(slice(w0, 2, k, k + 1), 2));
      const Shape s = z.shape();
      z = reshape(z, Shape{x0.shape()[0], in[0], s[1], s[2], s[3]});
      if (stride[0] > 1) {
        z = pad(unsqueeze(z, 2), {0, 0, 0, 0, 0, 0, 0, stride[0] - 1});
        z = slice(reshape(z, Shape{x0.shape()[0], in[0] * stride[0], s[1], s[2], s[3]}), 1, 0, placed);
      }
      z = pad(z, {0, 0, 0, 0, 0, 0, k * dilation[0], full[0] - k * dilation[0] - placed});
      y = y.defined() ? y + z : z;
    }
    y = permute(y, {0, 2, 1, 3, 4});
  }
  const int64_t first = n < 3 ? 1 : 0;  // the window dim of y's dim 2
  for (size_t d = size_t(first); d < 3; ++d)
    if (begin[d] || end[d]) y = slice(y, int64_t(2 + d - first), begin[d], full[d] - end[d]);
  if (c.has_input(2)) y = y + per_channel(c.input(2), y.dim());
  return {from_2d(y, rank)};
}

// MaxPool's Indices output: each maximum's position in the flattened input, counting over
// N, C and the (unpadded) spatial dims, which are row-major, or column-major with
// storage_order 1. max_pool2d gives the position in its (padded) plane; a table built here,
// from padded positions to input positions, translates it, and the plane's offset is added.
// 1-D and 2-D windows without dilation.
Outputs max_pool_with_indices(NodeContext& c, const Tensor& x0, const Window& win, bool column_major) {
  const int64_t rank = x0.dim();
  if (rank > 4 || win.dilated()) c.fail("the Indices output supports 1-D and 2-D pooling without dilations");
  const int64_t batch = c.static_dim(x0, 0, "the Indices output"), channels = c.static_dim(x0, 1, "the Indices output");
  const int64_t h = rank == 4 ? c.static_dim(x0, 2, "the Indices output") : 1;
  const int64_t w = c.static_dim(x0, rank - 1, "the Indices output");
  Pool2dOptions options{.kernel = hw(win.kernel), .stride = hw(win.stride), .padding = hw(win.pad_begin)};
  std::vector<int64_t> pads = pad_pairs(win, size_t(rank - 2));
  const bool plain = win.plain_padding();
  if (plain) std::fill(pads.begin(), pads.end(), 0);
  else options.padding = {0, 0};
  const Tensor x = as_2d(pad_if(x0, pads, -std::numeric_limits<double>::infinity()));
  const auto [values, in_plane] = max_pool2d_with_indices(x, options, c.importer.loc());
  const int64_t hp = x.shape()[2], wp = x.shape()[3];
  const int64_t top = plain ? 0 : win.pad_begin[1], left = plain ? 0 : win.pad_begin[2];
  std::vector<int64_t> table(size_t(hp * wp));  // padded plane position -> input position
  for (int64_t i = 0; i < hp; ++i)
    for (int64_t j = 0; j < wp; ++j) {
      const int64_t y = std::clamp<int64_t>(i - top, 0, h - 1), xx = std::clamp<int64_t>(j - left, 0, w - 1);
      table[size_t(i * wp + j)] = column_major ? xx * h + y : y * w + xx;
    }
  const Tensor within = reshape(index_select(tensor(table, Shape{hp * wp}), 0, reshape(in_plane, Shape{-1})),
                                in_plane.shape());
  const Tensor plane_offsets = reshape(arange(batch * channels) * (h * w), Shape{batch, channels, 1, 1});
  return {from_2d(values, rank), from_2d(within + plane_offsets, rank)};
}

Outputs import_max_pool(NodeContext& c) {
  const int64_t storage_order = c.attr_int("storage_order", 0);
  if (storage_order != 0 && storage_order != 1) c.fail(str("storage_order must be 0 or 1, not ", storage_order));
  const Tensor& x0 = c.input(0);
  if (is_integral(x0.dtype())) {  // (u8 and i8 models hold i32): pooled as exact f64 values
    NodeContext as_float(c.node, c.opset, {cast(x0, DType::f64)}, c.importer);
    Outputs out = import_max_pool(as_float);
    out[0] = cast(out[0], x0.dtype());
    return out;
  }
  const int64_t rank = x0.dim();
  const size_t n = spatial_rank(c, x0.shape());
  const Window win = window_of(c, x0.shape(), c.attr_ints("kernel_shape"), true);
  if (c.wants_output(1)) return max_pool_with_indices(c, x0, win, storage_order == 1);
  constexpr double lowest = -std::numeric_limits<double>::infinity();
  if (win.dilated())  // the max over the kernel's taps, each a strided slice of the padded input
    return {combine_taps(c, pad_if(x0, pad_pairs(win, n), lowest), win, all_spatial_axes(rank), true)};
  Pool2dOptions options{.kernel = hw(win.kernel), .stride = hw(win.stride), .padding = hw(win.pad_begin)};
  std::vector<int64_t> pads = pad_pairs(win, n);
  if (win.plain_padding()) std::fill(pads.begin(), pads.begin() + std::min<long>(4, long(pads.size())), 0);
  else options.padding = {0, 0};
  Tensor x = pad_if(x0, pads, lowest);
  if (rank < 5) return {from_2d(max_pool2d(as_2d(x), options), rank)};
  return {over_depth(c, x, win, true, [&](const Tensor& t) { return max_pool2d(t, options); })};
}

// Average pooling divides by the count of input elements in each window (padding counted
// only with count_include_pad): the pooled sum of x over the pooled sum of a mask.
Outputs import_average_pool(NodeContext& c) {
  const Tensor& x0 = c.input(0);
  const int64_t rank = x0.dim();
  const size_t n = spatial_rank(c, x0.shape());
  const Window win = window_of(c, x0.shape(), c.attr_ints("kernel_shape"), true);
  const bool include_pad = c.attr_int("count_include_pad", 0) != 0;
  const Window declared = window_of(c, x0.shape(), c.attr_ints("kernel_shape"), false);  // without ceil_mode
  Pool2dOptions options{.kernel = hw(win.kernel), .stride = hw(win.stride), .padding = hw(win.pad_begin)};
  if (rank < 5 && !win.dilated() && win.plain_padding() &&
      (include_pad || hw(win.pad_begin) == std::array<int64_t, 2>{0, 0}))
    return {from_2d(avg_pool2d(as_2d(x0), options), rank)};
  options.padding = {0, 0};
  Tensor mask = ones_like(x0);
  if (include_pad) mask = pad_if(mask, pad_pairs(declared, n), 1.0);
  Window extension = win;  // what ceil_mode adds beyond the declared padding
  for (size_t d = 0; d < 3; ++d) {
    extension.pad_begin[d] = include_pad ? 0 : win.pad_begin[d];
    extension.pad_end[d] = include_pad ? win.pad_end[d] - declared.pad_end[d] : win.pad_end[d];
  }
  mask = pad_if(mask, pad_pairs(extension, n), 0.0);
  // Window sums (up to the same factor for x and the mask).
  auto pooled = [&](const Tensor& t) -> Tensor {
    if (win.dilated()) return combine_taps(c, t, win, all_spatial_axes(rank), false);
    if (rank < 5) return from_2d(avg_pool2d(as_2d(t), options), rank);
    return over_depth(c, t, win, false, [&](const Tensor& s) { return avg_pool2d(s, options); });
  };
  return {pooled(pad_if(x0, pad_pairs(win, n), 0.0)) / pooled(mask)};
}

}  // namespace

BATON_ONNX_IMPORTER("Conv", import_conv);
BATON_ONNX_IMPORTER("ConvTranspose", import_conv_transpose);
BATON_ONNX_IMPORTER("MaxPool", import_max_pool);
BATON_ONNX_IMPORTER("AveragePool", import_average_pool);

}  // namespace baton::onnx::detail
