// f32 backward convolutions on oneDNN: the input gradient, and the weight gradient (with
// the bias gradient when asked), each prepared once per geometry and layouts; the weight
// gradient's way of computing is measured where there is more than one.
#include <chrono>
#include <functional>
#include <limits>
#include <type_traits>

#include "kernels/cpu/conv.h"
#include "kernels/cpu/conv_onednn.h"
#include "kernels/cpu/reduce.h"

namespace baton::kernels {

using namespace conv_detail;

namespace {

// The activation layouts of a backward convolution: the output gradient's and the input's
// (or the input gradient's), each plain or channels-last.
struct BackwardLayouts {
  Tag dy, x;
  BackwardLayouts(const Tensor& dy_t, const Tensor& x_t) : dy(dnn::activation_tag(dy_t)), x(dnn::activation_tag(x_t)) {
    // One channel (a first layer's input) is stored alike in both: take the other's.
    if (x_t.size(1) == 1) x = dy;
    else if (dy_t.size(1) == 1) dy = x;
  }
  int64_t key() const { return (dy == Tag::nhwc ? 1 : 0) + (x == Tag::nhwc ? 2 : 0); }
  bool channels_last() const { return dy == Tag::nhwc && x == Tag::nhwc; }
};

// The training forward a backward primitive is made for, over these activation descriptors.
dnnl::convolution_forward::primitive_desc forward_hint(const ConvDescs& d, const memory::desc& src,
                                                      const memory::desc& dst) {
  dnnl::convolution_forward::desc desc(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct, src,
                                       d.w_any, dst, d.strides, d.dilates, d.pad_l, d.pad_r);
  return {desc, dnn::default_attr(), dnn::engine()};
}

// A backward primitive (convolution_backward_data or _weights) descriptor: channels-last
// activations are handed to oneDNN as they are (its jit kernels take nhwc here, as fast as
// the blocked layout for the CNN step's layers, and nothing is reordered); otherwise, or
// where that finds only a reference kernel, oneDNN picks.
// A weight gradient with `bias` also sums the bias gradient (in the same pass over dy).
template <class Primitive>
typename Primitive::primitive_desc backward_pd(const ConvDescs& d, const BackwardLayouts& l, bool bias = false) {
  auto make = [&](const memory::desc& src, const memory::desc& dst) {
    auto desc = [&] {
      if constexpr (std::is_same_v<Primitive, dnnl::convolution_backward_weights>) {
        if (bias)
          return typename Primitive::desc(dnnl::algorithm::convolution_direct, src, d.w_any, d.bias, dst, d.strides,
                                          d.dilates, d.pad_l, d.pad_r);
      }
      return typename Primitive::desc(dnnl::algorithm::convolution_direct, src, d.w_any, dst, d.strides, d.dilates,
                                      d.pad_l, d.pad_r);
    }();
    return typename Primitive::primitive_desc(desc, dnn::default_attr(), dnn::engine(), forward_hint(d, src, dst));
  };
  if (l.channels_last()) {
    auto pd = make(d.src, d.dst);
    if (!dnn::is_reference(pd)) return pd;
  }
  return make(d.src_any, d.dst_any);
}

const Prepared& backward_input_prepared(const ConvGeom& g, const BackwardLayouts& l) {
  return dnn::cached<Prepared>(geom_key("conv_bwd_in", g, l.key()), [&] {
    ConvDescs d(g, l.x, l.dy);
    auto pd = backward_pd<dnnl::convolution_backward_data>(d, l);
    dnn::note_impl(pd, "conv2d backward input " + shapes(g));
    return Prepared{dnnl::convolution_backward_data(pd), dnn::Reorder(d.dst, pd.diff_dst_desc()),
                    dnn::Reorder(d.w, pd.weights_desc()), dnn::Reorder(pd.diff_src_desc(), d.src),
                    pd.scratchpad_desc(), DNNL_ARG_DIFF_DST, DNNL_ARG_WEIGHTS, DNNL_ARG_DIFF_SRC,
                    {}, pd.impl_info_str()};
  });
}

const Prepared& backward_weight_prepared(const ConvGeom& g, const BackwardLayouts& l, bool bias = false) {
  return dnn::cached<Prepared>(geom_key("conv_bwd_w", g, l.key() + (bias ? 4 : 0)), [&] {
    ConvDescs d(g, l.x, l.dy);
    auto pd = backward_pd<dnnl::convolution_backward_weights>(d, l, bias);
    dnn::note_impl(pd, "conv2d backward weight " + shapes(g));
    return Prepared{dnnl::convolution_backward_weights(pd), dnn::Reorder(d.dst, pd.diff_dst_desc()),
                    dnn::Reorder(d.src, pd.src_desc()), dnn::Reorder(pd.diff_weights_desc(), d.w),
                    pd.scratchpad_desc(), DNNL_ARG_DIFF_DST, DNNL_ARG_SRC, DNNL_ARG_DIFF_WEIGHTS,
                    {}, pd.impl_info_str()};
  });
}

}  // namespace

// How a weight gradient (and, when asked, the bias gradient) is computed: a oneDNN
// primitive, or im2col + GEMM (conv_first_layer.cpp); the bias gradient in the primitive's
// pass, or summed apart.
struct WeightGradChoice {
  const Prepared* primitive = nullptr;  // nullptr: im2col + GEMM
  bool sum_bias = false;
  std::string implementation;
};

// A backward convolution's kernel, chosen once for a plan step.
struct ConvBackwardPlan {
  const Prepared* input_gradient = nullptr;        // conv2d_backward_input's primitive
  const WeightGradChoice* weight_gradient = nullptr;  // or the weight gradient's choice
  BackwardLayouts layouts;
  bool bias = false;
  int threads;
  bool serves(const BackwardLayouts& l, bool with_bias = false) const {
    return l.dy == layouts.dy && l.x == layouts.x && threads == kernels::max_threads() && with_bias == bias;
  }
};

namespace {

// A tensor of meta's shape and layout (plain or channels-last) to time kernels on.
Tensor scratch_like(const Tensor& meta) {
  const Shape& s = meta.shape();
  if (!dnn::is_channels_last(meta)) return zeros(s, f32);
  return zeros({s[0], s[2], s[3], s[1]}, f32).permute({0, 3, 1, 2});
}

double best_ms(const std::function<void()>& run) {
  run();  // warm-up: first-touch of buffers, oneDNN's JIT
  double best = std::numeric_limits<double>::infinity();
  for (int i = 0; i < 3; ++i) {
    const auto start = std::chrono::steady_clock::now();
    run();
    best = std::min(best, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  return best;
}

void compute(const WeightGradChoice& c, const ConvGeom& g, const Tensor& dy, const Tensor& src, const Tensor& gw,
             const Tensor* gb) {
  if (c.primitive) run(*c.primitive, dy, src, c.sum_bias ? nullptr : gb, gw, DNNL_ARG_DIFF_BIAS);
  else conv_backward_weight_gemm_f32(g, dy, src, gw);
  if (gb && c.sum_bias) sum_into<float>(dy, {0, 2, 3}, gb->data<float>());
}

// The ways to compute a weight gradient: oneDNN's primitive (with the bias gradient in its
// pass, or summed apart), and for few input channels im2col + GEMM. No rule holds across
// machines and shapes: on an AVX2 machine oneDNN's first-layer kernel ran 5x slower than
// the GEMM, here 3x faster, and here summing the first layer's bias gradient in oneDNN's
// pass made it 2.7x slower. So where there is more than one way, each is timed once per
// geometry, layouts and bias, on zero-filled tensors of the step's shapes, and the
// fastest kept (explain() shows the times).
const WeightGradChoice& weight_grad_choice(const ConvGeom& g, const Tensor& gy, const Tensor& x, bool bias) {
  const BackwardLayouts l(gy, x);
  return dnn::cached<WeightGradChoice>(geom_key("conv_bwd_w_choice", g, l.key() + (bias ? 4 : 0)), [&] {
    const char* summed = bias ? ", bias summed" : "";
    const Prepared& alone = backward_weight_prepared(g, l);
    std::vector<WeightGradChoice> ways{{&alone, bias, alone.impl + summed}};
    if (bias) {
      const Prepared& with = backward_weight_prepared(g, l, true);
      ways.push_back({&with, false, with.impl + " with the bias"});
    }
    if (conv_weight_grad_by_gemm(g)) ways.push_back({nullptr, bias, std::string("im2col+sgemm") + summed});
    if (ways.size() == 1) return ways[0];
    Tensor dy = scratch_like(gy), src = scratch_like(x), gw = zeros(g.weight_shape(), f32), gb = zeros({g.o}, f32);
    std::string times;
    size_t fastest = 0;
    double fastest_ms = std::numeric_limits<double>::infinity();
    for (size_t i = 0; i < ways.size(); ++i) {
      const double ms = best_ms([&] { compute(ways[i], g, dy, src, gw, bias ? &gb : nullptr); });
      times += str(i ? "; " : "", ways[i].implementation, " ", ms, " ms");
      if (ms < fastest_ms) fastest = i, fastest_ms = ms;
    }
    WeightGradChoice chosen = ways[fastest];
    chosen.implementation += " (measured: " + times + ")";
    return chosen;
  });
}

}  // namespace

std::shared_ptr<const ConvBackwardPlan> prepare_conv_backward_input_f32(const ConvGeom& g, const Tensor& gy,
                                                                        const Tensor& gx, PreparedKernel& prepared) {
  const BackwardLayouts l(gy, gx);
  const Prepared& p = backward_input_prepared(g, l);
  prepared.implementation = p.impl;
  prepared.scratch_bytes = p.scratch.get_size();
  return std::make_shared<const ConvBackwardPlan>(ConvBackwardPlan{&p, nullptr, l, false, kernels::max_threads()});
}

std::shared_ptr<const ConvBackwardPlan> prepare_conv_backward_weight_f32(const ConvGeom& g, const Tensor& gy,
                                                                         const Tensor& x, bool bias,
                                                                         PreparedKernel& prepared) {
  const BackwardLayouts l(gy, x);
  const WeightGradChoice& choice = weight_grad_choice(g, gy, x, bias);
  prepared.implementation = choice.implementation;
  prepared.scratch_bytes = choice.primitive ? choice.primitive->scratch.get_size() : 0;
  return std::make_shared<const ConvBackwardPlan>(ConvBackwardPlan{nullptr, &choice, l, bias, kernels::max_threads()});
}

void conv_backward_input_f32(const ConvGeom& g, const Tensor& gy, const Tensor& w, const Tensor& gx,
                             const ConvBackwardPlan* plan) {
  const Tensor dy = dnn::plain_or_channels_last(gy);
  const BackwardLayouts l(dy, gx);
  const Prepared& p = plan && plan->input_gradient && plan->serves(l) ? *plan->input_gradient
                                                                      : backward_input_prepared(g, l);
  run(p, dy, dnn::dense(w), nullptr, gx);
}

void conv_backward_weight_f32(const ConvGeom& g, const Tensor& gy, const Tensor& x, const Tensor& gw,
                              const ConvBackwardPlan* plan, const Tensor* gb) {
  const Tensor dy = dnn::plain_or_channels_last(gy), src = dnn::plain_or_channels_last(x);
  const BackwardLayouts l(dy, src);
  const bool bias = gb != nullptr;
  const WeightGradChoice& c = plan && plan->weight_gradient && plan->serves(l, bias) ? *plan->weight_gradient
                                                                                     : weight_grad_choice(g, dy, src, bias);
  compute(c, g, dy, src, gw, gb);
}

}  // namespace baton::kernels
