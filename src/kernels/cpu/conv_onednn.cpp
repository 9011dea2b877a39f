// f32 convolution on oneDNN. Primitives pick their own (blocked) layouts with `any`
// everywhere (mixing `any` with fixed layouts can fall back to ref kernels); tensors at the
// op boundary (NCHW or channels-last activations, OIHW weights) are reordered in and out
// when the primitive's layout differs, all prepared once per shape and layout. On this
// CPU the forward picks channels-last activations, so a plan that keeps them so between
// convolutions reorders only at its edges.
#include <chrono>
#include <cstring>
#include <functional>
#include <list>
#include <mutex>

#include "core/allocator.h"
#include "core/tensor_impl.h"
#include "kernels/cpu/conv.h"
#include "kernels/cpu/copy.h"
#include "kernels/cpu/onednn.h"

namespace baton::kernels {
namespace {

namespace dnn = onednn;
using dnn::memory;
using Tag = memory::format_tag;

std::string geom_key(const char* kind, const ConvGeom& g, int64_t extra) {
  return dnn::key(kind, std::vector<int64_t>{g.n, g.c, g.h, g.w, g.o, g.kh, g.kw, g.oh, g.ow,
                                             g.groups, g.sh, g.sw, g.ph, g.pw, g.dh, g.dw},
                  extra);
}

// The descriptors of one geometry: `any` (for the primitive) and plain (for tensors).
struct ConvDescs {
  memory::desc src_any, w_any, dst_any, bias, src, w, dst;
  dnn::Dims strides, dilates, pad_l, pad_r;
  explicit ConvDescs(const ConvGeom& g, Tag src_tag = Tag::nchw, Tag dst_tag = Tag::nchw) {
    auto f32 = memory::data_type::f32;
    dnn::Dims wd = g.groups == 1 ? dnn::Dims{g.o, g.c, g.kh, g.kw}
                                 : dnn::Dims{g.groups, g.og(), g.cg(), g.kh, g.kw};
    src_any = memory::desc({g.n, g.c, g.h, g.w}, f32, Tag::any);
    w_any = memory::desc(wd, f32, Tag::any);
    dst_any = memory::desc({g.n, g.o, g.oh, g.ow}, f32, Tag::any);
    bias = memory::desc({g.o}, f32, Tag::x);
    src = memory::desc({g.n, g.c, g.h, g.w}, f32, src_tag);
    w = memory::desc(wd, f32, g.groups == 1 ? Tag::oihw : Tag::goihw);
    dst = memory::desc({g.n, g.o, g.oh, g.ow}, f32, dst_tag);
    strides = {g.sh, g.sw};
    dilates = {g.dh - 1, g.dw - 1};  // oneDNN counts the gaps
    pad_l = {g.ph, g.pw};
    // Right padding that makes oneDNN's output size equal ours (floor division).
    pad_r = {(g.oh - 1) * g.sh + (g.kh - 1) * g.dh + 1 - g.h - g.ph,
             (g.ow - 1) * g.sw + (g.kw - 1) * g.dw + 1 - g.w - g.pw};
  }
};

dnnl::convolution_forward::primitive_desc forward_pd(const ConvDescs& d, bool bias, dnnl::prop_kind prop,
                                                     const dnnl::primitive_attr& attr = dnn::default_attr(),
                                                     dnnl::algorithm algorithm = dnnl::algorithm::convolution_direct) {
  auto desc = bias ? dnnl::convolution_forward::desc(prop, algorithm, d.src_any, d.w_any, d.bias, d.dst_any,
                                                     d.strides, d.dilates, d.pad_l, d.pad_r)
                   : dnnl::convolution_forward::desc(prop, algorithm, d.src_any, d.w_any, d.dst_any, d.strides,
                                                     d.dilates, d.pad_l, d.pad_r);
  return {desc, attr, dnn::engine()};
}

// The epilogue as post-ops: the residual is accumulated (`sum`) into the destination,
// which holds it before the convolution runs; then the activation.
dnnl::primitive_attr epilogue_attr(const ConvEpilogue& e) {
  dnnl::primitive_attr attr = dnn::default_attr();
  dnnl::post_ops ops;
  if (e.residual) ops.append_sum(1.f);
  if (e.relu) ops.append_eltwise(1.f, dnnl::algorithm::eltwise_relu, 0.f, 0.f);
  attr.set_post_ops(ops);
  return attr;
}

// One prepared primitive with two inputs and one output, and the reorders around it.
struct Prepared {
  dnnl::primitive prim;
  dnn::Reorder in0, in1, out;
  memory::desc scratch;
  int arg0, arg1, arg_out;
  dnn::Reorder residual = {};  // plain destination -> the primitive's (forward with a residual)
  std::string impl = {};       // oneDNN's implementation ("brgconv:avx512_core")
};

// Weights of plan constants in the primitive's layout, most recently used first, at most
// kCachedWeightBytes in all. An entry is valid while its tensor's storage lives and has
// the version it had when reordered: any write through an op bumps the version.
struct CachedWeights {
  const Prepared* prim;
  std::weak_ptr<Storage> storage;
  uint64_t version;
  int64_t offset;
  Tensor reordered;
};
constexpr size_t kCachedWeightBytes = size_t(512) << 20;

struct WeightCache {
  std::mutex mutex;
  std::list<CachedWeights> entries;
  // Drops the copies of weights that are gone; empty_cache() calls it.
  void trim() {
    std::lock_guard lock(mutex);
    entries.remove_if([](const CachedWeights& e) { return e.storage.expired(); });
  }
};

WeightCache& weight_cache() {
  static auto* cache = [] {
    auto* c = new WeightCache;
    baton::detail::on_empty_cache([c] { c->trim(); });
    return c;
  }();
  return *cache;
}

memory cached_weights(const Prepared& p, const Tensor& w) {
  WeightCache& c = weight_cache();
  std::list<CachedWeights>* cache = &c.entries;
  const std::shared_ptr<Storage>& storage = w.impl()->storage;
  std::lock_guard lock(c.mutex);
  for (auto it = cache->begin(); it != cache->end();) {
    const bool same_weights = it->prim == &p && it->storage.lock() == storage && it->offset == w.offset();
    // Weights that are gone (a plan or a model freed) or were written since: free the copy.
    if (it->storage.expired() || (same_weights && it->version != storage->version())) {
      it = cache->erase(it);
      continue;
    }
    if (same_weights) {
      cache->splice(cache->begin(), *cache, it);
      return dnn::wrap(p.in1.to, it->reordered);
    }
    ++it;
  }
  std::vector<Tensor> keep;
  memory m = p.in1.apply(dnn::wrap(p.in1.from, dnn::dense(w)), keep);
  cache->push_front({&p, storage, storage->version(), w.offset(), keep.back()});
  size_t bytes = 0;
  for (auto it = cache->begin(); it != cache->end(); ++it)
    if ((bytes += it->reordered.nbytes()) > kCachedWeightBytes) {
      cache->erase(it, cache->end());
      break;
    }
  return m;
}

// t0, t1 and result in the layouts p was prepared for (plain or channels-last).
void run(const Prepared& p, const Tensor& t0, const Tensor& t1, const Tensor* bias,
         const Tensor& result) {
  std::vector<Tensor> keep;
  std::unordered_map<int, memory> args{
      {p.arg0, p.in0.apply(dnn::wrap(p.in0.from, t0), keep)},
      {p.arg1, p.in1.apply(dnn::wrap(p.in1.from, t1), keep)}};
  memory user_out = dnn::wrap(p.out.to, result);
  memory prim_out = p.out.needed() ? dnn::buffer(p.out.from, keep) : user_out;
  args.emplace(p.arg_out, prim_out);
  if (bias) {
    keep.push_back(dnn::dense(*bias));  // alive until the primitive has run
    args.emplace(DNNL_ARG_BIAS, memory({{bias->numel()}, memory::data_type::f32, Tag::x}, dnn::engine(),
                                       keep.back().raw_data()));
  }
  dnn::execute(p.prim, std::move(args), p.scratch);
  p.out.into(prim_out, user_out);
}

std::string shapes(const ConvGeom& g) {
  return str(g.input_shape(), " * ", g.weight_shape(), " groups ", g.groups, " stride ", g.sh,
             " pad ", g.ph, " dilation ", g.dh);
}

// The residual in the destination, which the sum post-op adds to: reordered into the
// primitive's buffer, or copied into `out` when their layouts agree (nothing to do when the
// plan put the result over the residual's buffer).
void place_residual(const Prepared& p, const Tensor& residual, const Tensor& out, const memory& prim_out) {
  if (p.out.needed()) {
    const Tensor r = dnn::plain_or_channels_last(residual);
    if (p.residual.needed()) p.residual.into(dnn::wrap(p.residual.from, r), prim_out);
    else std::memcpy(prim_out.get_data_handle(), r.raw_data(), p.residual.to.get_size());  // one layout
  } else if (residual.raw_data() != out.raw_data()) {
    copy_into(out, residual);
  }
}

// The layouts of a forward convolution's activations: channels-last, or plain (what
// plain_or_channels_last makes of any other).
struct ConvLayouts {
  Tag src, dst, residual;
  ConvLayouts(const Tensor& src, const Tensor& out, const Tensor* residual)
      : src(dnn::activation_tag(src)),
        dst(dnn::activation_tag(out)),
        residual(residual ? dnn::activation_tag(*residual) : Tag::nchw) {}
  bool operator==(const ConvLayouts&) const = default;
};

// winograd: oneDNN's Winograd algorithm (3x3, stride 1), which throws dnnl::error where
// oneDNN has no kernel for it (AVX2 machines, some channel counts).
const Prepared& forward_prepared(const ConvGeom& g, const ConvLayouts& l, bool bias, bool training,
                                 const ConvEpilogue& e, bool winograd = false) {
  const int64_t extra = (bias ? 1 : 0) + (training ? 2 : 0) + (e.residual ? 4 : 0) + (e.relu ? 8 : 0) +
                        (l.src == Tag::nhwc ? 16 : 0) + (l.dst == Tag::nhwc ? 32 : 0) +
                        (l.residual == Tag::nhwc ? 64 : 0) + (winograd ? 128 : 0);
  return dnn::cached<Prepared>(geom_key("conv_fwd", g, extra), [&] {
    ConvDescs d(g, l.src, l.dst);
    auto pd = forward_pd(d, bias, training ? dnnl::prop_kind::forward_training : dnnl::prop_kind::forward_inference,
                         epilogue_attr(e),
                         winograd ? dnnl::algorithm::convolution_winograd : dnnl::algorithm::convolution_direct);
    dnn::note_impl(pd, "conv2d forward " + shapes(g));
    memory::desc residual(d.dst.dims(), memory::data_type::f32, l.residual);
    return Prepared{dnnl::convolution_forward(pd), dnn::Reorder(d.src, pd.src_desc()),
                    dnn::Reorder(d.w, pd.weights_desc()), dnn::Reorder(pd.dst_desc(), d.dst),
                    pd.scratchpad_desc(), DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST,
                    dnn::Reorder(residual, pd.dst_desc()), pd.impl_info_str()};
  });
}

}  // namespace

// Prepared entries are never removed from the cache, so a plan may hold a pointer to one;
// it serves while the layouts and the thread count it was made for still hold.
struct ConvForwardPlan {
  const Prepared* prepared;
  ConvLayouts layouts;
  bool training;
  int threads;
};

namespace {

// Winograd (F(4x4, 3x3)) does fewer multiplications than direct convolution for 3x3,
// stride-1 kernels: oneDNN's runs ResNet-18 bs8 in 0.75x the time of our direct plan here
// (docs/PERF.md). It pays where the transforms are amortized: many channels (the CNN
// step's 32-channel layer ran slower) and a batch (at bs1 it saved 7%, while its weights,
// kept transformed, take 4x the memory of the plain ones). Its rounding differs from
// direct convolution's by a few ulps.
bool winograd_fits(const ConvGeom& g, bool training) {
  const bool shape = g.kh == 3 && g.kw == 3 && g.sh == 1 && g.sw == 1 && g.dh == 1 && g.dw == 1 && g.groups == 1;
  return !training && shape && g.c >= 64 && g.o >= 64 && g.n >= 4;
}

// The plan's kernel: Winograd where it fits and oneDNN has an optimized one, else direct.
const Prepared& planned_forward(const ConvGeom& g, const ConvLayouts& l, bool bias, bool training,
                                const ConvEpilogue& e) {
  if (winograd_fits(g, training)) {
    try {
      const Prepared& w = forward_prepared(g, l, bias, training, e, true);
      if (!w.impl.starts_with("ref")) return w;
    } catch (const dnnl::error&) {  // no Winograd kernel for this shape or machine
    }
  }
  return forward_prepared(g, l, bias, training, e);
}

}  // namespace

std::shared_ptr<const ConvForwardPlan> prepare_conv_forward_f32(const ConvGeom& g, const Tensor& x,
                                                                const Tensor& out, bool bias, bool training,
                                                                const ConvEpilogue& e, std::string& implementation) {
  const ConvLayouts layouts(x, out, e.residual);  // a run copies any other layout plain
  const Prepared& p = planned_forward(g, layouts, bias, training, e);
  implementation = p.impl;
  return std::make_shared<const ConvForwardPlan>(ConvForwardPlan{&p, layouts, training, kernels::max_threads()});
}

void conv_forward_f32(const ConvGeom& g, const Tensor& x, const Tensor& w, const Tensor* bias,
                      const Tensor& out, bool training, const ConvEpilogue& e, const ConvForwardPlan* plan) {
  const Tensor src = dnn::plain_or_channels_last(x);
  const ConvLayouts layouts(src, out, e.residual);
  const bool planned =
      plan && plan->layouts == layouts && plan->training == training && plan->threads == kernels::max_threads();
  const Prepared& p = planned ? *plan->prepared : forward_prepared(g, layouts, bias != nullptr, training, e);
  if (!e.residual && !(e.cache_weights && p.in1.needed())) return run(p, src, dnn::dense(w), bias, out);
  std::vector<Tensor> keep;
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, p.in0.apply(dnn::wrap(p.in0.from, src), keep)}};
  args.emplace(DNNL_ARG_WEIGHTS, e.cache_weights && p.in1.needed()
                                     ? cached_weights(p, w)
                                     : p.in1.apply(dnn::wrap(p.in1.from, dnn::dense(w)), keep));
  memory user_out = dnn::wrap(p.out.to, out);
  memory prim_out = p.out.needed() ? dnn::buffer(p.out.from, keep) : user_out;
  if (e.residual) place_residual(p, *e.residual, out, prim_out);
  args.emplace(DNNL_ARG_DST, prim_out);
  if (bias) {
    keep.push_back(dnn::dense(*bias));
    args.emplace(DNNL_ARG_BIAS, memory({{bias->numel()}, memory::data_type::f32, Tag::x}, dnn::engine(),
                                       keep.back().raw_data()));
  }
  dnn::execute(p.prim, std::move(args), p.scratch);
  p.out.into(prim_out, user_out);
}

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
template <class Primitive>
typename Primitive::primitive_desc backward_pd(const ConvDescs& d, const BackwardLayouts& l) {
  auto make = [&](const memory::desc& src, const memory::desc& dst) {
    typename Primitive::desc desc(dnnl::algorithm::convolution_direct, src, d.w_any, dst, d.strides, d.dilates,
                                  d.pad_l, d.pad_r);
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

const Prepared& backward_weight_prepared(const ConvGeom& g, const BackwardLayouts& l) {
  return dnn::cached<Prepared>(geom_key("conv_bwd_w", g, l.key()), [&] {
    ConvDescs d(g, l.x, l.dy);
    auto pd = backward_pd<dnnl::convolution_backward_weights>(d, l);
    dnn::note_impl(pd, "conv2d backward weight " + shapes(g));
    return Prepared{dnnl::convolution_backward_weights(pd), dnn::Reorder(d.dst, pd.diff_dst_desc()),
                    dnn::Reorder(d.src, pd.src_desc()), dnn::Reorder(pd.diff_weights_desc(), d.w),
                    pd.scratchpad_desc(), DNNL_ARG_DIFF_DST, DNNL_ARG_SRC, DNNL_ARG_DIFF_WEIGHTS,
                    {}, pd.impl_info_str()};
  });
}

}  // namespace

// A backward convolution's kernel, chosen once for a plan step: a oneDNN primitive, or
// (weight gradients of first layers) the im2col + GEMM kernel where it measured faster.
struct ConvBackwardPlan {
  const Prepared* prepared;  // nullptr: im2col + GEMM
  BackwardLayouts layouts;
  int threads;
  bool serves(const BackwardLayouts& l) const {
    return l.dy == layouts.dy && l.x == layouts.x && threads == kernels::max_threads();
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
  double best = 1e300;
  for (int i = 0; i < 3; ++i) {
    const auto start = std::chrono::steady_clock::now();
    run();
    best = std::min(best, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  return best;
}

// Whether im2col + GEMM computes this weight gradient faster than oneDNN's primitive, and
// what that choice is called. Only first layers (few input channels) are candidates:
// there oneDNN's blocked kernels pad the channels and ran 5x slower than the GEMM on an
// AVX2 machine, while on AVX-512 ones its kernel ran 3x faster. So it is measured, once
// per geometry and layouts, on zero-filled tensors of the step's shapes.
struct WeightGradChoice {
  bool gemm = false;
  std::string implementation;
};

const WeightGradChoice& weight_grad_choice(const ConvGeom& g, const Tensor& gy, const Tensor& x) {
  const BackwardLayouts l(gy, x);
  return dnn::cached<WeightGradChoice>(geom_key("conv_bwd_w_choice", g, l.key()), [&] {
    const Prepared& p = backward_weight_prepared(g, l);
    if (!conv_weight_grad_by_gemm(g)) return WeightGradChoice{false, p.impl};
    Tensor dy = scratch_like(gy), src = scratch_like(x), gw = zeros(g.weight_shape(), f32);
    const double onednn_ms = best_ms([&] { run(p, dy, src, nullptr, gw); });
    const double gemm_ms = best_ms([&] { conv_backward_weight_gemm_f32(g, dy, src, gw); });
    const bool gemm = gemm_ms < onednn_ms;
    return WeightGradChoice{gemm, str(gemm ? "im2col+sgemm" : p.impl, " (measured: im2col+sgemm ", gemm_ms, " ms, ",
                                      p.impl, " ", onednn_ms, " ms)")};
  });
}

}  // namespace

std::shared_ptr<const ConvBackwardPlan> prepare_conv_backward_input_f32(const ConvGeom& g, const Tensor& gy,
                                                                        const Tensor& gx, std::string& implementation) {
  const BackwardLayouts l(gy, gx);
  const Prepared& p = backward_input_prepared(g, l);
  implementation = p.impl;
  return std::make_shared<const ConvBackwardPlan>(ConvBackwardPlan{&p, l, kernels::max_threads()});
}

std::shared_ptr<const ConvBackwardPlan> prepare_conv_backward_weight_f32(const ConvGeom& g, const Tensor& gy,
                                                                         const Tensor& x, std::string& implementation) {
  const BackwardLayouts l(gy, x);
  const WeightGradChoice& choice = weight_grad_choice(g, gy, x);
  implementation = choice.implementation;
  const Prepared* p = choice.gemm ? nullptr : &backward_weight_prepared(g, l);
  return std::make_shared<const ConvBackwardPlan>(ConvBackwardPlan{p, l, kernels::max_threads()});
}

void conv_backward_input_f32(const ConvGeom& g, const Tensor& gy, const Tensor& w, const Tensor& gx,
                             const ConvBackwardPlan* plan) {
  const Tensor dy = dnn::plain_or_channels_last(gy);
  const BackwardLayouts l(dy, gx);
  const Prepared& p = plan && plan->serves(l) ? *plan->prepared : backward_input_prepared(g, l);
  run(p, dy, dnn::dense(w), nullptr, gx);
}

void conv_backward_weight_f32(const ConvGeom& g, const Tensor& gy, const Tensor& x, const Tensor& gw,
                              const ConvBackwardPlan* plan) {
  const Tensor dy = dnn::plain_or_channels_last(gy), src = dnn::plain_or_channels_last(x);
  const BackwardLayouts l(dy, src);
  const Prepared* p = plan && plan->serves(l) ? plan->prepared
                      : weight_grad_choice(g, dy, src).gemm ? nullptr
                                                           : &backward_weight_prepared(g, l);
  if (p) run(*p, dy, src, nullptr, gw);
  else conv_backward_weight_gemm_f32(g, dy, src, gw);
}

}  // namespace baton::kernels
