// f32 backward convolutions on oneDNN: the input gradient, and the weight gradient (with
// the bias gradient when asked), each prepared once per geometry and layouts; the weight
// gradient's way of computing is measured where there is more than one.
#include <algorithm>
#include <type_traits>
#include <vector>

#include "kernels/cpu/conv.h"
#include "kernels/cpu/conv_onednn.h"
#include "kernels/cpu/copy.h"
#include "kernels/cpu/finite.h"
#include "kernels/cpu/reduce.h"
#include "kernels/cpu/vec8.h"

namespace baton::kernels {

using namespace conv_detail;

namespace {

// Channels per block of a channel-blocked layout (nChw8c, nChw16c), else 0.
int64_t block_of(Tag t) { return t == Tag::nChw8c ? 8 : t == Tag::nChw16c ? 16 : 0; }

// The activation layouts of a backward convolution: the output gradient's and the input's
// (or the input gradient's), each plain or channels-last, or channel-blocked where a plan
// stores it so (blocks of 0: the strides tell).
struct BackwardLayouts {
  Tag dy, x;
  BackwardLayouts(const Tensor& dy_t, const Tensor& x_t, int64_t dy_block = 0, int64_t x_block = 0)
      : dy(dnn::planned_tag(dy_t, dy_block)), x(dnn::planned_tag(x_t, x_block)) {
    // One channel (a first layer's input) is stored alike plain and channels-last: take the
    // other's layout, unless that is blocked (which pads one channel to a block).
    if (x_t.size(1) == 1 && !dy_block) x = dy;
    else if (dy_t.size(1) == 1 && !x_block) dy = x;
  }
  int64_t key() const { return dnn::tag_code(dy) + 4 * dnn::tag_code(x); }  // < 16
  bool blocked() const { return block_of(dy) || block_of(x); }
  // Both given (channels-last or blocked): oneDNN is asked for exactly these.
  bool exact() const { return dy != Tag::nchw && x != Tag::nchw; }
};

// The training forward a backward primitive is made for, over these activation descriptors.
dnnl::convolution_forward::primitive_desc forward_hint(const ConvDescs& d, const memory::desc& src,
                                                      const memory::desc& dst) {
  dnnl::convolution_forward::desc desc(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct, src,
                                       d.w_any, dst, d.strides, d.dilates, d.pad_l, d.pad_r);
  return {desc, dnn::default_attr(), dnn::engine()};
}

// A backward primitive (convolution_backward_data or _weights) descriptor: channels-last
// or channel-blocked activations are handed to oneDNN as they are (nothing is reordered);
// otherwise, or where that finds only a reference kernel, oneDNN picks.
// A weight gradient with `bias` also sums the bias gradient (in the same pass over dy).
// With `measured`, the fastest of oneDNN's implementations, their times written there.
template <class Primitive>
typename Primitive::primitive_desc backward_pd(const ConvDescs& d, const BackwardLayouts& l, bool bias,
                                               std::string* measured) {
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
    // The descriptor's iterator reads the hint for its next implementations: it lives while they are tried.
    const auto hint = forward_hint(d, src, dst);
    typename Primitive::primitive_desc pd(desc, dnn::default_attr(), dnn::engine(), hint);
    return measured ? dnn::fastest_implementation(pd, *measured) : pd;
  };
  if (l.exact()) {
    auto pd = make(d.src, d.dst);
    if (!dnn::is_reference(pd)) return pd;
  }
  return make(d.src_any, d.dst_any);
}

// Plans' (`timed`) take the fastest of oneDNN's implementations (dnn::fastest_implementation).
const Prepared& backward_input_prepared(const ConvGeom& g, const BackwardLayouts& l, bool timed = false) {
  return dnn::cached<Prepared>(geom_key(timed ? "conv_bwd_in_timed" : "conv_bwd_in", g, l.key()), [&] {
    ConvDescs d(g, l.x, l.dy);
    std::string measured;
    auto pd = backward_pd<dnnl::convolution_backward_data>(d, l, false, timed ? &measured : nullptr);
    dnn::note_impl(pd, "conv2d backward input " + shapes(g));
    return Prepared{dnnl::convolution_backward_data(pd), dnn::Reorder(d.dst, pd.diff_dst_desc()),
                    dnn::Reorder(d.w, pd.weights_desc()), dnn::Reorder(pd.diff_src_desc(), d.src),
                    pd.scratchpad_desc(), DNNL_ARG_DIFF_DST, DNNL_ARG_WEIGHTS, DNNL_ARG_DIFF_SRC,
                    {}, pd.impl_info_str(), measured};
  });
}

const Prepared& backward_weight_prepared(const ConvGeom& g, const BackwardLayouts& l, bool bias, bool timed) {
  return dnn::cached<Prepared>(geom_key(timed ? "conv_bwd_w_timed" : "conv_bwd_w", g, l.key() + (bias ? 16 : 0)), [&] {
    ConvDescs d(g, l.x, l.dy);
    std::string measured;
    auto pd = backward_pd<dnnl::convolution_backward_weights>(d, l, bias, timed ? &measured : nullptr);
    dnn::note_impl(pd, "conv2d backward weight " + shapes(g));
    return Prepared{dnnl::convolution_backward_weights(pd), dnn::Reorder(d.dst, pd.diff_dst_desc()),
                    dnn::Reorder(d.src, pd.src_desc()), dnn::Reorder(pd.diff_weights_desc(), d.w),
                    pd.scratchpad_desc(), DNNL_ARG_DIFF_DST, DNNL_ARG_SRC, DNNL_ARG_DIFF_WEIGHTS,
                    {}, pd.impl_info_str(), measured};
  });
}

}  // namespace

// How a weight gradient (and, when asked, the bias gradient) is computed: a oneDNN
// primitive, or im2col + GEMM (conv_first_layer.cpp); the bias gradient in the primitive's
// pass, or summed apart.
struct WeightGradChoice {
  const Prepared* primitive = nullptr;  // nullptr: im2col + GEMM
  bool sum_bias = false;                // the bias gradient summed apart, not in the same pass
  std::string implementation;
  bool winograd = false;  // baton's Winograd
  int64_t winograd_block = kWinogradLargeBlock;  // its blocks (conv_winograd.h)
  // oneDNN's first pick for the layouts (what eager calls take where they time nothing),
  // the bias gradient in its pass: it runs instead where dy or x is not finite, when this
  // way puts their infinities and NaNs elsewhere. Winograd's transforms spread one over
  // whole tiles; im2col kernels multiply the padding's zeros by it (NaN where a direct
  // kernel skips the padding). Null where this way computes as that one does.
  const Prepared* not_finite = nullptr;
};

// A backward convolution's kernel, chosen once for a plan step.
struct ConvBackwardPlan {
  const Prepared* input_gradient = nullptr;        // conv2d_backward_input's primitive
  const WeightGradChoice* weight_gradient = nullptr;  // or the weight gradient's choice
  BackwardLayouts layouts;
  bool bias = false;
  int threads;
  bool own_winograd = false;  // the input gradient by baton's Winograd (input_gradient: if not finite)
  int64_t winograd_block = kWinogradLargeBlock;
  size_t winograd_kernel = 0;  // which of them (kInputGradientKernels)
  bool serves(const BackwardLayouts& l, bool with_bias = false) const {
    return l.dy == layouts.dy && l.x == layouts.x && threads == kernels::max_threads() && with_bias == bias;
  }
};

namespace {

// The bias gradient: dy summed over n, h and w. A channel-blocked dy holds each pixel's
// channels of a block side by side: 8 of them are summed as one vector over an image's
// pixels, and the images' sums are added in double (sum_into's precision).
void sum_bias(const Tensor& dy, int64_t block, const Tensor& gb) {
  if (!block) return sum_into<float>(dy, {0, 2, 3}, gb.data<float>());
  const int64_t channels = dy.size(1), pixels = dy.size(2) * dy.size(3);
  std::vector<double> total(size_t(channels), 0.0);
  const float* p = dy.data<float>();
  for (int64_t n = 0; n < dy.size(0); ++n)
    for (int64_t c = 0; c < channels; c += kVec8) {
      const float* g = p + (n * channels + c / block * block) * pixels + c % block;
      F32x8 sum{};
      for (int64_t i = 0; i < pixels; ++i) sum += load8<F32x8>(g + i * block);
      for (int64_t lane = 0; lane < kVec8; ++lane) total[size_t(c + lane)] += sum[lane];
    }
  std::copy(total.begin(), total.end(), gb.data<float>());
}

// The weight gradient by baton's Winograd (conv_winograd.h): 3x3, stride 1, activations in
// 8-channel vectors.
bool weight_gradient_by_winograd_fits(const ConvGeom& g, const BackwardLayouts& l) {
  return winograd_fits(g) && vectors_of(l.dy, g.output_shape()) && vectors_of(l.x, g.input_shape());
}

// False where gw is not contiguous: oneDNN's kernel runs then.
bool weight_gradient_by_winograd(const ConvGeom& g, const BackwardLayouts& l, const Tensor& dy, const Tensor& src,
                                 const Tensor& gw, int64_t block) {
  if (!gw.is_contiguous()) return false;
  conv_winograd_weight_grad_f32(g, src.data<float>(), *vectors_of(l.x, g.input_shape()), dy.data<float>(),
                                *vectors_of(l.dy, g.output_shape()), gw.data<float>(),
                                static_cast<float*>(dnn::lent_scratch(winograd_weight_grad_scratch_bytes(g, block))),
                                block);
  return true;
}

// dy and src in layouts l. The GEMM and the bias sum read dy's channel blocks; the GEMM's
// first layers (c <= 3) never have a blocked input, which needs whole blocks of channels.
void compute(const WeightGradChoice& c, const ConvGeom& g, const BackwardLayouts& l, const Tensor& dy,
             const Tensor& src, const Tensor& gw, const Tensor* gb) {
  if (c.not_finite && (has_non_finite(dy) || has_non_finite(src)))
    return run(*c.not_finite, dy, src, gb, gw, DNNL_ARG_DIFF_BIAS);
  const bool by_winograd = c.winograd && weight_gradient_by_winograd(g, l, dy, src, gw, c.winograd_block);
  if (!by_winograd && c.primitive) run(*c.primitive, dy, src, c.sum_bias ? nullptr : gb, gw, DNNL_ARG_DIFF_BIAS);
  else if (!by_winograd) conv_backward_weight_gemm_f32(g, dy, src, gw, block_of(l.dy), gb);
  if (gb && c.sum_bias) sum_bias(dy, block_of(l.dy), *gb);
}

// A choice that runs oneDNN's primitive, its record naming the times oneDNN's
// implementations were chosen by (Prepared::measured), as the other steps' records do.
WeightGradChoice with_implementation_times(WeightGradChoice c) {
  if (c.primitive && !c.winograd && !c.primitive->measured.empty())
    c.implementation += " (oneDNN's implementations: " + c.primitive->measured + ")";
  return c;
}

// c with its WeightGradChoice::not_finite: `first`, unless c computes as it does (both
// skip the padding, or both multiply its zeros, as oneDNN's gemm kernels and baton's
// im2col + GEMM do).
WeightGradChoice with_not_finite(WeightGradChoice c, const Prepared& first) {
  const bool multiplies_padding = !c.winograd && (!c.primitive || is_im2col(*c.primitive));
  if (c.winograd || multiplies_padding != is_im2col(first)) c.not_finite = &first;
  return c;
}

// The ways to compute a weight gradient: oneDNN's primitive (with the bias gradient in its
// pass, or summed apart), for few input channels im2col + GEMM, and for 3x3 stride-1 ones
// over 8-channel vectors baton's Winograd (or as a WinogradOverride says). No rule holds across
// machines and shapes: on an AVX2 machine oneDNN's first-layer kernel ran 5x slower than
// the GEMM, here 3x faster, and here summing the first layer's bias gradient in oneDNN's
// pass made it 2.7x slower. So where there is more than one way, each is timed once per
// geometry, layouts and bias, on zero-filled tensors of the step's shapes, and the
// fastest kept where it clearly beats oneDNN's first (dnn::clear_winner; explain() shows
// the times).
// A plan's (`timed`) oneDNN primitives are the fastest of oneDNN's implementations.
const WeightGradChoice& weight_grad_choice(const ConvGeom& g, const BackwardLayouts& l, const Tensor& gy,
                                           const Tensor& x, bool bias, bool timed = false) {
  const std::optional<bool> forced = winograd_forced();
  const int64_t key = l.key() + (bias ? 16 : 0) + (forced ? (*forced ? 32 : 64) : 0) + (timed ? 128 : 0);
  return dnn::cached<WeightGradChoice>(geom_key("conv_bwd_w_choice", g, key), [&] {
    const char* summed = bias ? ", bias summed" : "";
    const Prepared& alone = backward_weight_prepared(g, l, false, timed);
    const Prepared& first = backward_weight_prepared(g, l, bias, /*timed=*/false);
    const std::string winograd = std::string("baton winograd F(4x4,3x3)") + summed;
    const bool by_winograd = weight_gradient_by_winograd_fits(g, l) && !(forced && !*forced);
    if (by_winograd && forced) return with_not_finite({&alone, bias, winograd + " (forced)", true}, first);
    std::vector<WeightGradChoice> ways{{&alone, bias, alone.impl + summed}};
    if (by_winograd)  // small blocks first: they hold less scratch
      for (int64_t block : {kWinogradSmallBlock, kWinogradLargeBlock})
        ways.push_back({&alone, bias, str(winograd, ", ", block >> 20, " MiB blocks"), true, block});
    if (bias) {
      const Prepared& with = backward_weight_prepared(g, l, true, timed);
      ways.push_back({&with, false, with.impl + " with the bias"});
    }
    if (conv_weight_grad_by_gemm(g))  // over blocked dy: vector sums, no GEMM (conv_first_layer.cpp)
      ways.push_back({nullptr, false, std::string(block_of(l.dy) ? "im2col+blocked sums" : "im2col+sgemm") +
                                          (bias ? " with the bias" : "")});
    if (ways.size() == 1) return with_not_finite(with_implementation_times(ways[0]), first);
    Tensor dy = kernels::zeros_laid_out_as(gy), src = kernels::zeros_laid_out_as(x),
           gw = kernels::zeros(g.weight_shape(), f32), gb = kernels::zeros({g.o}, f32);
    std::vector<std::function<void()>> runs;
    for (const WeightGradChoice& way : ways)
      runs.push_back([&] { compute(way, g, l, dy, src, gw, bias ? &gb : nullptr); });
    const std::vector<double> ms = dnn::best_ms(runs);
    std::string times;
    for (size_t i = 0; i < ways.size(); ++i) times += str(i ? "; " : "", ways[i].implementation, " ", ms[i], " ms");
    std::vector<double> eligible = ms;
    if (by_winograd) keep_large_blocks_only_where_clearly_faster(eligible, 1, 2, g);
    WeightGradChoice chosen = ways[dnn::clear_winner(eligible)];
    chosen.implementation += " (measured: " + times + ")";
    return with_not_finite(with_implementation_times(chosen), first);
  });
}

// baton's two Winograd kernels for an input gradient (conv_winograd.h): a forward
// convolution of dy with the weights transposed and flipped, over the input's tiles, or
// the forward's transforms transposed, over the output's tiles. Which is faster depends on
// the shape: on the 2-core Zen 4 of 2026-12-03 the first took 7.6 ms for ResNet's 56x56
// 64-channel layer at bs8 against 8.8, the second 1.1-1.2 ms for the CNN's conv 2 (13x13
// inputs, 11x11 outputs: 9 tiles an image against 16) against 1.6.
const std::vector<std::string> kInputGradientKernels = {"F(4x4,3x3) flipped", "F(4x4,3x3) transposed"};
constexpr size_t kFlipped = 0, kTransposed = 1;

size_t input_gradient_scratch_bytes(const ConvGeom& g, size_t kernel, int64_t block) {
  return kernel == kTransposed ? winograd_input_grad_scratch_bytes(g, block)
                               : winograd_scratch_bytes(winograd_input_gradient_geom(g), block);
}

// 3x3, stride 1, activations in 8-channel vectors (either kernel fits the same shapes).
bool input_gradient_by_winograd_fits(const ConvGeom& g, const BackwardLayouts& l) {
  const bool shape = g.kh == 3 && g.kw == 3 && g.sh == 1 && g.sw == 1 && g.dh == 1 && g.dw == 1 && g.groups == 1 &&
                     g.ph <= 2 && g.pw <= 2;
  return shape && winograd_input_gradient_fits(g) && vectors_of(l.dy, g.output_shape()) &&
         vectors_of(l.x, g.input_shape());
}

// False where dy or the weights are not finite (the transforms would turn an infinity into
// NaN where direct convolution keeps it): oneDNN's kernel runs then.
bool input_gradient_by_winograd(const ConvGeom& g, const BackwardLayouts& l, const Tensor& dy, const Tensor& w,
                                const Tensor& gx, int64_t block, size_t kernel) {
  if (has_non_finite(dy) || has_non_finite(w)) return false;
  const VectorLayout in = *vectors_of(l.dy, g.output_shape()), out = *vectors_of(l.x, g.input_shape());
  float* scratch = static_cast<float*>(dnn::lent_scratch(input_gradient_scratch_bytes(g, kernel, block)));
  if (kernel == kTransposed) {
    const Tensor packed = winograd_pack_transposed_weights(g, w);
    conv_winograd_input_grad_f32(g, dy.data<float>(), in, packed.data<float>(), gx.data<float>(), out, scratch, block);
    return true;
  }
  const Tensor packed = winograd_pack_input_gradient_weights(g, w);
  conv_winograd_f32(winograd_input_gradient_geom(g), {.x = dy.data<float>(),
                                                      .x_layout = in,
                                                      .packed_weights = packed.data<float>(),
                                                      .bias = nullptr,
                                                      .residual = nullptr,
                                                      .residual_layout = out,
                                                      .relu = false,
                                                      .out = gx.data<float>(),
                                                      .out_layout = out,
                                                      .scratch = scratch,
                                                      .block_bytes = block});
  return true;
}

// baton's Winograd kernels or oneDNN's backward-data kernel for an input gradient: timed
// in turns once per geometry and layouts. A WinogradOverride that forces Winograd takes
// the kernel with fewer tiles.
WinogradChoice input_gradient_choice(const ConvGeom& g, const ConvBackwardPlan& plan, const Tensor& gy,
                                     const Tensor& gx) {
  const Prepared& p = *plan.input_gradient;
  const bool fewer_tiles = winograd_tiles(g) < winograd_tiles(winograd_input_gradient_geom(g));
  if (std::optional<WinogradChoice> forced =
          forced_winograd_choice(p.impl, fewer_tiles ? kTransposed : kFlipped, kInputGradientKernels))
    return *forced;
  return dnn::cached<WinogradChoice>(geom_key("conv_bwd_in_own_winograd", g, plan.layouts.key()), [&] {
    const Tensor dy = kernels::zeros_laid_out_as(gy), result = kernels::zeros_laid_out_as(gx),
                 w = kernels::zeros(g.weight_shape(), f32);
    ConvBackwardPlan own = plan;
    own.own_winograd = true;
    const size_t scratch =
        std::max({p.scratch.get_size(), input_gradient_scratch_bytes(g, kFlipped, kWinogradLargeBlock),
                  input_gradient_scratch_bytes(g, kTransposed, kWinogradLargeBlock)});
    return timed_winograd_choice(
        g, p.impl, scratch, [&] { conv_backward_input_f32(g, dy, w, result, &plan); },
        [&](size_t kernel, int64_t block) {
          own.winograd_kernel = kernel;
          own.winograd_block = block;
          conv_backward_input_f32(g, dy, w, result, &own);
        },
        kInputGradientKernels);
  });
}

}  // namespace

std::shared_ptr<const ConvBackwardPlan> prepare_conv_backward_input_f32(const ConvGeom& g, const Tensor& gy,
                                                                        const Tensor& gx, PreparedKernel& prepared,
                                                                        int64_t gy_block, int64_t gx_block) {
  const BackwardLayouts l(gy, gx, gy_block, gx_block);
  const Prepared& p = backward_input_prepared(g, l, /*timed=*/true);
  prepared.implementation = p.record();
  prepared.scratch_bytes = p.scratch.get_size();
  auto plan = std::make_shared<ConvBackwardPlan>(ConvBackwardPlan{&p, nullptr, l, false, kernels::max_threads()});
  if (input_gradient_by_winograd_fits(g, l)) {
    const WinogradChoice choice = input_gradient_choice(g, *plan, gy, gx);
    prepared.implementation = choice.record;
    plan->own_winograd = choice.own;
    plan->winograd_block = choice.block_bytes;
    plan->winograd_kernel = choice.kernel;
    if (choice.own)
      prepared.scratch_bytes =
          std::max(prepared.scratch_bytes, input_gradient_scratch_bytes(g, choice.kernel, choice.block_bytes));
  }
  return plan;
}

std::shared_ptr<const ConvBackwardPlan> prepare_conv_backward_weight_f32(const ConvGeom& g, const Tensor& gy,
                                                                         const Tensor& x, bool bias,
                                                                         PreparedKernel& prepared, int64_t gy_block,
                                                                         int64_t x_block) {
  const BackwardLayouts l(gy, x, gy_block, x_block);
  const WeightGradChoice& choice = weight_grad_choice(g, l, gy, x, bias, /*timed=*/true);
  prepared.implementation = choice.implementation;
  prepared.scratch_bytes = choice.primitive ? choice.primitive->scratch.get_size() : 0;
  if (choice.winograd)  // the plan lends the kernel its transforms' room too
    prepared.scratch_bytes = std::max(prepared.scratch_bytes, winograd_weight_grad_scratch_bytes(g, choice.winograd_block));
  auto plan = std::make_shared<ConvBackwardPlan>(ConvBackwardPlan{nullptr, &choice, l, bias, kernels::max_threads()});
  return plan;
}

int64_t shared_winograd_block(const ConvBackwardPlan& input, const ConvBackwardPlan& weight) {
  const bool input_transposed = input.own_winograd && input.winograd_kernel == kTransposed;
  const bool weight_own = weight.weight_gradient && weight.weight_gradient->winograd;
  return input_transposed && weight_own ? input.winograd_block : 0;
}

// A run's operands: as a plan with channel-blocked ones prepared them (in_layout passes
// those through), else plain or channels-last.
namespace {
bool planned_blocked(const ConvBackwardPlan* plan) { return plan && plan->layouts.blocked(); }
Tensor operand(const ConvBackwardPlan* plan, const Tensor& t, Tag planned) {
  return planned_blocked(plan) ? dnn::in_layout(t, planned) : dnn::plain_or_channels_last(t);
}
}  // namespace

void conv_backward_input_f32(const ConvGeom& g, const Tensor& gy, const Tensor& w, const Tensor& gx,
                             const ConvBackwardPlan* plan) {
  const Tensor dy = operand(plan, gy, plan ? plan->layouts.dy : Tag::nchw);
  const BackwardLayouts l = planned_blocked(plan) ? plan->layouts : BackwardLayouts(dy, gx);
  const bool planned = plan && plan->input_gradient && plan->serves(l);
  if (planned && plan->own_winograd &&
      input_gradient_by_winograd(g, l, dy, w, gx, plan->winograd_block, plan->winograd_kernel))
    return;
  run(planned ? *plan->input_gradient : backward_input_prepared(g, l), dy, dnn::dense(w), nullptr, gx);
}

void conv_backward_weight_f32(const ConvGeom& g, const Tensor& gy, const Tensor& x, const Tensor& gw,
                              const ConvBackwardPlan* plan, const Tensor* gb) {
  const Tensor dy = operand(plan, gy, plan ? plan->layouts.dy : Tag::nchw);
  const Tensor src = operand(plan, x, plan ? plan->layouts.x : Tag::nchw);
  const BackwardLayouts l = planned_blocked(plan) ? plan->layouts : BackwardLayouts(dy, src);
  const bool bias = gb != nullptr;
  const WeightGradChoice& c = plan && plan->weight_gradient && plan->serves(l, bias)
                                  ? *plan->weight_gradient
                                  : weight_grad_choice(g, l, dy, src, bias);
  compute(c, g, l, dy, src, gw, gb);
}

}  // namespace baton::kernels
