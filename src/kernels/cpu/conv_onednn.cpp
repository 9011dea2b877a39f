// f32 convolution on oneDNN. Primitives pick their own (blocked) layouts with `any`
// everywhere (mixing `any` with fixed layouts can fall back to ref kernels); tensors at the
// op boundary (NCHW or channels-last activations, OIHW weights) are reordered in and out
// when the primitive's layout differs, all prepared once per shape and layout. On this
// CPU the forward picks channels-last activations, so a plan that keeps them so between
// convolutions reorders only at its edges.
#include <atomic>
#include <cstring>
#include <list>
#include <mutex>
#include <optional>

#include "core/allocator.h"
#include "core/tensor_impl.h"
#include "kernels/cpu/conv.h"
#include "kernels/cpu/conv_onednn.h"
#include "kernels/cpu/conv_winograd.h"
#include "kernels/cpu/copy.h"
#include "kernels/cpu/finite.h"
#include "kernels/cpu/onednn.h"

namespace baton::kernels {
namespace conv_detail {

std::string geom_key(const char* kind, const ConvGeom& g, int64_t extra) {
  return dnn::key(kind, std::vector<int64_t>{g.n, g.c, g.h, g.w, g.o, g.kh, g.kw, g.oh, g.ow,
                                             g.groups, g.sh, g.sw, g.ph, g.pw, g.dh, g.dw},
                  extra);
}

void run(const Prepared& p, const Tensor& t0, const Tensor& t1, const Tensor* bias, const Tensor& result,
         int bias_arg) {
  std::vector<Tensor> keep;
  std::unordered_map<int, memory> args{
      {p.arg0, p.in0.apply(dnn::wrap(p.in0.from, t0), keep)},
      {p.arg1, p.in1.apply(dnn::wrap(p.in1.from, t1), keep)}};
  memory user_out = dnn::wrap(p.out.to, result);
  memory prim_out = p.out.needed() ? dnn::buffer(p.out.from, keep) : user_out;
  args.emplace(p.arg_out, prim_out);
  if (bias) {
    keep.push_back(dnn::dense(*bias));  // alive until the primitive has run
    args.emplace(bias_arg, memory({{bias->numel()}, memory::data_type::f32, Tag::x}, dnn::engine(),
                                  keep.back().raw_data()));
  }
  dnn::execute(p.prim, std::move(args), p.scratch);
  p.out.into(prim_out, user_out);
}

bool is_im2col(const Prepared& p) { return p.impl.find("gemm") != std::string::npos; }

std::optional<VectorLayout> vectors_of(Tag tag, const Shape& nchw) {
  if (tag == Tag::nChw8c) return blocked8_vectors(nchw);
  if (tag == Tag::nhwc) return channels_last_vectors(nchw);
  return std::nullopt;
}

std::optional<WinogradChoice> forced_winograd_choice(const std::string& impl, size_t kernel,
                                                     const std::vector<std::string>& names) {
  const std::optional<bool> forced = winograd_forced();
  if (!forced) return std::nullopt;
  if (!*forced) return WinogradChoice{false, impl + " (winograd refused)"};
  return WinogradChoice{true, "baton winograd " + names[kernel] + " (forced)", kWinogradLargeBlock, kernel};
}

WinogradChoice timed_winograd_choice(const ConvGeom& g, const std::string& impl, size_t scratch_bytes,
                                     const std::function<void()>& direct,
                                     const std::function<void(size_t, int64_t)>& own,
                                     const std::vector<std::string>& names) {
  const Tensor scratch = empty({int64_t(scratch_bytes / sizeof(float)) + 1}, f32);
  const dnn::StepScratch lent(scratch.raw_data(), scratch_bytes);
  constexpr int64_t kBlocks[] = {kWinogradSmallBlock, kWinogradLargeBlock};
  // Way 0 is oneDNN's; way 1 + 2k + b is baton's kernel k with blocks kBlocks[b].
  auto kernel_of = [](size_t way) { return (way - 1) / 2; };
  auto block_of = [&](size_t way) { return kBlocks[(way - 1) % 2]; };
  std::vector<std::function<void()>> ways = {direct};
  for (size_t way = 1; way <= 2 * names.size(); ++way)
    ways.push_back([&, way] { own(kernel_of(way), block_of(way)); });
  const std::vector<double> ms = dnn::best_ms(ways);
  std::string times = str(" (measured: ", impl, " ", ms[0], " ms");
  for (size_t way = 1; way < ways.size(); ++way) {
    times += way % 2 ? str("; winograd ", names[kernel_of(way)], ", ") : std::string("; ");
    times += str(block_of(way) >> 20, " MiB blocks ", ms[way], " ms");
  }
  times += ")";
  std::vector<double> eligible = ms;
  for (size_t way = 1; way < ways.size(); way += 2)  // each kernel's small, then large blocks
    keep_large_blocks_only_where_clearly_faster(eligible, way, way + 1, g);
  const size_t way = dnn::clear_winner(eligible);
  if (way == 0) return {false, impl + times};
  return {true, str("baton winograd ", names[kernel_of(way)], ", ", block_of(way) >> 20, " MiB blocks", times),
          block_of(way), kernel_of(way)};
}

std::string shapes(const ConvGeom& g) {
  return str(g.input_shape(), " * ", g.weight_shape(), " groups ", g.groups, " stride ", g.sh,
             " pad ", g.ph, " dilation ", g.dh);
}

}  // namespace conv_detail

namespace {

using namespace conv_detail;

// Activations in the layouts oneDNN prefers (`any`), or `fixed` in d's. With `measured`,
// the fastest of oneDNN's implementations, their times written there.
dnnl::convolution_forward::primitive_desc forward_pd(const ConvDescs& d, bool bias, dnnl::prop_kind prop,
                                                     const dnnl::primitive_attr& attr = dnn::default_attr(),
                                                     bool fixed = false, std::string* measured = nullptr) {
  constexpr dnnl::algorithm direct = dnnl::algorithm::convolution_direct;
  const memory::desc& src = fixed ? d.src : d.src_any;
  const memory::desc& dst = fixed ? d.dst : d.dst_any;
  auto desc = bias ? dnnl::convolution_forward::desc(prop, direct, src, d.w_any, d.bias, dst, d.strides, d.dilates,
                                                     d.pad_l, d.pad_r)
                   : dnnl::convolution_forward::desc(prop, direct, src, d.w_any, dst, d.strides, d.dilates, d.pad_l,
                                                     d.pad_r);
  dnnl::convolution_forward::primitive_desc pd(desc, attr, dnn::engine());
  return measured ? dnn::fastest_implementation(pd, *measured) : pd;  // while desc lives
}

// A plan's forward: where oneDNN's first pick takes the activations in the plan's layouts
// anyway, the fastest of its implementations for exactly those layouts, asked for as that
// pick describes them (with `any`, its other kernels would ask for other layouts, and
// reorders on every run); else its first pick. `measured` gets the times.
dnnl::convolution_forward::primitive_desc fastest_forward_pd(const ConvDescs& d, bool bias, dnnl::prop_kind prop,
                                                             const dnnl::primitive_attr& attr,
                                                             std::string& measured) {
  auto first = forward_pd(d, bias, prop, attr);
  if (!dnn::same_bytes(first.src_desc(), d.src) || !dnn::same_bytes(first.dst_desc(), d.dst)) return first;
  ConvDescs exact = d;
  exact.src = first.src_desc();
  exact.dst = first.dst_desc();
  return forward_pd(exact, bias, prop, attr, /*fixed=*/true, &measured);
}

// Whether oneDNN has a post-op for the activation that computes what baton's op does.
// oneDNN 2.6's soft_relu loses softplus's small values: -1.9e-6 for x = -20 (softplus is
// positive) and 1% off at x = -10. Softplus runs after the convolution, as baton's op.
bool has_post_op(const Activation& a) { return a.kind != Activation::Kind::softplus; }

// oneDNN's eltwise algorithm (with its alpha and beta) computing baton's activation op:
// the same function; the transcendental ones (logistic, tanh, gelu_erf, swish, elu) by
// their own approximations, within a few ulps of baton's (docs/passes.md).
void append_activation(dnnl::post_ops& ops, const Activation& a) {
  using K = Activation::Kind;
  using dnnl::algorithm;
  const float alpha = float(a.alpha), beta = float(a.beta);
  switch (a.kind) {
    case K::none: return;
    case K::relu: return ops.append_eltwise(1.f, algorithm::eltwise_relu, 0.f, 0.f);
    case K::leaky_relu: return ops.append_eltwise(1.f, algorithm::eltwise_relu, alpha, 0.f);  // x > 0 ? x : alpha x
    case K::sigmoid: return ops.append_eltwise(1.f, algorithm::eltwise_logistic, 0.f, 0.f);
    case K::tanh: return ops.append_eltwise(1.f, algorithm::eltwise_tanh, 0.f, 0.f);
    case K::gelu: return ops.append_eltwise(1.f, algorithm::eltwise_gelu_erf, 0.f, 0.f);
    case K::gelu_tanh: return ops.append_eltwise(1.f, algorithm::eltwise_gelu_tanh, 0.f, 0.f);
    case K::silu: return ops.append_eltwise(1.f, algorithm::eltwise_swish, 1.f, 0.f);  // x * logistic(1 x)
    case K::softplus: return;  // has_post_op: none
    case K::elu: return ops.append_eltwise(1.f, algorithm::eltwise_elu, alpha, 0.f);
    case K::clamp: return ops.append_eltwise(1.f, algorithm::eltwise_clip, alpha, beta);  // min(max(x, a), b)
  }
}

// The epilogue as post-ops: the residual is accumulated (`sum`) into the destination,
// which holds it before the convolution runs; then the activation.
dnnl::primitive_attr epilogue_attr(const ConvEpilogue& e) {
  dnnl::primitive_attr attr = dnn::default_attr();
  dnnl::post_ops ops;
  if (e.residual) ops.append_sum(1.f);
  append_activation(ops, e.act);
  attr.set_post_ops(ops);
  return attr;
}

// Weights of plan constants in the primitive's layout, most recently used first, at most
// kCachedWeightBytes in all. An entry is valid while its tensor's storage lives and has
// the version it had when reordered: any write through an op bumps the version.
struct CachedWeights {
  const Prepared* prim;
  std::weak_ptr<Storage> storage;
  uint64_t version;
  int64_t offset;
  Tensor reordered;
  bool finite;  // no NaN or infinity in the weights
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

// Weights in a primitive's layout, and whether they are all finite (a relu post-op needs
// to know: finite.h).
struct LaidOutWeights {
  memory m;
  bool finite;
};

LaidOutWeights cached_weights(const Prepared& p, const Tensor& w) {
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
      return {dnn::wrap(p.in1.to, it->reordered), it->finite};
    }
    ++it;
  }
  std::vector<Tensor> keep;
  memory m = p.in1.apply(dnn::wrap(p.in1.from, dnn::dense(w)), keep);
  const bool finite = !has_non_finite(w);
  cache->push_front({&p, storage, storage->version(), w.offset(), keep.back(), finite});
  size_t bytes = 0;
  for (auto it = cache->begin(); it != cache->end(); ++it)
    if ((bytes += it->reordered.nbytes()) > kCachedWeightBytes) {
      cache->erase(it, cache->end());
      break;
    }
  return {m, finite};
}

// The residual (in the layout p was prepared for) in the destination, which the sum
// post-op adds to: reordered or copied into the primitive's buffer (nothing to do when the
// plan put the result over the residual's buffer).
void place_residual(const Prepared& p, const Tensor& residual, const Tensor& out, const memory& prim_out) {
  if (!p.out.needed() && residual.raw_data() == out.raw_data()) return;
  if (p.residual.needed()) p.residual.into(dnn::wrap(p.residual.from, residual), prim_out);
  else std::memcpy(prim_out.get_data_handle(), residual.raw_data(), p.residual.to.get_size());  // one layout
}

// The layouts of a forward convolution's activations: channels-last, or plain (what
// plain_or_channels_last makes of any other), or channel-blocked where a plan says so.
struct ConvLayouts {
  Tag src, dst, residual;
  ConvLayouts(const Tensor& src, const Tensor& out, const Tensor* residual, ActivationBlocks blocks = {})
      : src(dnn::planned_tag(src, blocks.src)),
        dst(dnn::planned_tag(out, blocks.dst)),
        residual(residual ? dnn::planned_tag(*residual, blocks.residual) : Tag::nchw),
        blocked(blocks.any()) {}
  bool blocked;  // some tensor's strides do not tell its layout: only a plan's runs use these
  bool operator==(const ConvLayouts&) const = default;
  // 2 bits per activation, for cache keys.
  int64_t key() const { return dnn::tag_code(src) + 4 * dnn::tag_code(dst) + 16 * dnn::tag_code(residual); }
};

// What tells a geometry's forward kernels apart in the caches.
int64_t forward_key(const ConvLayouts& l, bool bias, bool training, const ConvEpilogue& e) {
  return (bias ? 1 : 0) + (training ? 2 : 0) + (e.residual ? 4 : 0) + (e.act.any() ? 8 : 0) + 16 * l.key();
}

// oneDNN's direct convolution. (Its Winograd kernel, AVX-512 only, keeps the weights
// transformed at 4x their size and lends itself tens of MiB of scratchpad: ResNet-18 bs8
// held 282 MiB beyond its parameters with it against 89 MiB without, and baton's own
// Winograd, below, measures faster than oneDNN's direct kernel on those layers anyway.)
// A plan's (`timed`) takes the fastest of oneDNN's implementations.
const Prepared& forward_prepared(const ConvGeom& g, const ConvLayouts& l, bool bias, bool training,
                                 const ConvEpilogue& e, bool timed = false) {
  return dnn::cached<Prepared>(geom_key(timed ? "conv_fwd_timed" : "conv_fwd", g, forward_key(l, bias, training, e)) +
                                  activation_key(e.act),
                              [&] {
    ConvDescs d(g, l.src, l.dst);
    const auto prop = training ? dnnl::prop_kind::forward_training : dnnl::prop_kind::forward_inference;
    std::string measured;
    auto pd = timed ? fastest_forward_pd(d, bias, prop, epilogue_attr(e), measured)
                    : forward_pd(d, bias, prop, epilogue_attr(e));
    dnn::note_impl(pd, "conv2d forward " + shapes(g));
    memory::desc residual(d.dst.dims(), memory::data_type::f32, l.residual);
    return Prepared{dnnl::convolution_forward(pd), dnn::Reorder(d.src, pd.src_desc()),
                    dnn::Reorder(d.w, pd.weights_desc()), dnn::Reorder(pd.dst_desc(), d.dst),
                    pd.scratchpad_desc(), DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST,
                    dnn::Reorder(residual, pd.dst_desc()), pd.impl_info_str(), measured};
  });
}

}  // namespace

// Prepared entries are never removed from the cache, so a plan may hold a pointer to one;
// it serves while the layouts and the thread count it was made for still hold.
struct ConvForwardPlan {
  ConvForwardPlan(const Prepared* p, ConvLayouts l, bool t) : prepared(p), layouts(l), training(t) {}
  const Prepared* prepared;
  ConvLayouts layouts;
  bool training;
  int threads = kernels::max_threads();
  // oneDNN's first pick (what eager calls run), where `prepared` is a timed im2col kernel
  // and that one is not: it runs instead for weights that are not finite, whose products
  // with the padding's zeros im2col would make NaN (is_im2col). Null otherwise.
  const Prepared* not_finite = nullptr;

  // The step's weights in the primitive's layout (cache_weights), found without a lock
  // while the weight tensor's storage, offset and version are the packed ones. Packs stay
  // until the plan goes (a run may still read the one it found), so a plan packs at most
  // kMaxPacks times (weights written between runs); its later runs use the shared cache.
  struct Packed {
    std::weak_ptr<Storage> storage;
    uint64_t version;
    int64_t offset;
    Tensor weights;
    bool finite;
    bool holds(const Tensor& w) const {
      const std::shared_ptr<Storage>& s = w.impl()->storage;
      return storage.lock() == s && version == s->version() && offset == w.offset();
    }
  };
  // The weights packed when the plan was made, from a constant of the plan (folded batch
  // norm): then the only copy, the step's weight input being metadata (PreparedKernel::adopted).
  Tensor prepacked;
  bool prepacked_finite = true;
  // baton's Winograd kernel, where it measured faster than oneDNN's direct one
  // (conv_winograd.h). `winograd`: the weights of a plan constant in its order, their only
  // copy; other weights are put in that order by each run.
  bool own_winograd = false;
  int64_t winograd_block = kWinogradLargeBlock;
  Tensor winograd;
  bool winograd_finite = true;
  static constexpr size_t kMaxPacks = 2;
  mutable std::atomic<const Packed*> packed{nullptr};
  mutable std::mutex packing;  // taken only to pack
  mutable std::vector<std::unique_ptr<const Packed>> packs;
};

namespace {

// w in p's weight layout for a plan step: its pack when current, else packed now (or,
// past the plan's packs, the shared cache's copy).
LaidOutWeights planned_weights(const ConvForwardPlan& plan, const Prepared& p, const Tensor& w) {
  if (const ConvForwardPlan::Packed* k = plan.packed.load(std::memory_order_acquire); k && k->holds(w))
    return {dnn::wrap(p.in1.to, k->weights), k->finite};
  std::lock_guard lock(plan.packing);
  if (const ConvForwardPlan::Packed* k = plan.packed.load(std::memory_order_relaxed); k && k->holds(w))
    return {dnn::wrap(p.in1.to, k->weights), k->finite};
  if (plan.packs.size() >= ConvForwardPlan::kMaxPacks) return cached_weights(p, w);
  std::vector<Tensor> keep;
  p.in1.apply(dnn::wrap(p.in1.from, dnn::dense(w)), keep);
  const std::shared_ptr<Storage>& storage = w.impl()->storage;
  plan.packs.push_back(std::make_unique<const ConvForwardPlan::Packed>(
      ConvForwardPlan::Packed{storage, storage->version(), w.offset(), keep.back(), !has_non_finite(w)}));
  plan.packed.store(plan.packs.back().get(), std::memory_order_release);
  return {dnn::wrap(p.in1.to, plan.packs.back()->weights), plan.packs.back()->finite};
}

}  // namespace

namespace {

// The plan may let the constant weights go: the pack is their only copy, and the plain
// weights can be made again from it (oihw, or goihw), where oneDNN can reorder that way.
void adopt_weights(const ConvForwardPlan& plan, const Prepared& p, const Shape& shape, PreparedKernel& prepared) {
  std::optional<dnn::Reorder> back;
  try {
    back.emplace(p.in1.to, p.in1.from);
  } catch (const dnnl::error&) {
    return;
  }
  prepared.adopted.push_back({1, [back = *back, pack = plan.prepacked, shape] {
                                Tensor w = empty(shape, f32);
                                back.into(dnn::wrap(back.from, pack), dnn::wrap(back.to, w));
                                return w;
                              }});
}

}  // namespace

namespace {

// Whether baton's Winograd may take a step: a geometry of the kernel's, activations in
// layouts of 8-channel vectors.
bool own_winograd_fits(const ConvGeom& g, const ConvLayouts& l, const ConvEpilogue& e) {
  return winograd_fits(g) && vectors_of(l.src, g.input_shape()) && vectors_of(l.dst, g.output_shape()) &&
         (!e.residual || vectors_of(l.residual, g.output_shape()));
}

// baton's Winograd for a plan step that chose it, src and the residual in the plan's
// layouts. False where the input or the weights are not finite: the transforms would turn
// an infinity into NaN where direct convolution keeps it (oneDNN's kernel runs then). A
// non-finite bias or residual is added after the transforms, as direct convolution adds it.
bool run_own_winograd(const ConvGeom& g, const ConvForwardPlan& plan, const Tensor& src, const Tensor& w,
                      const Tensor* bias, const Tensor* out, const ConvEpilogue& e,
                      const WinogradPooling* pool = nullptr) {
  const bool relu = e.act.kind == Activation::Kind::relu;
  if (pool && e.act.any() && !relu) return false;  // its pooled stores apply relu alone
  const bool constant = plan.winograd.defined();
  if (!(constant ? plan.winograd_finite : !has_non_finite(w)) || has_non_finite(src)) return false;
  const Tensor packed = constant ? plan.winograd : winograd_pack_weights(g, w);
  const ConvLayouts& l = plan.layouts;
  const Tensor dense_bias = bias ? dnn::dense(*bias) : Tensor();
  conv_winograd_f32(g, {.x = src.data<float>(),
                        .x_layout = *vectors_of(l.src, g.input_shape()),
                        .packed_weights = packed.data<float>(),
                        .bias = bias ? dense_bias.data<float>() : nullptr,
                        .residual = e.residual ? e.residual->data<float>() : nullptr,
                        .residual_layout = e.residual ? *vectors_of(l.residual, g.output_shape()) : VectorLayout{},
                        .relu = relu,
                        .out = out ? out->data<float>() : nullptr,
                        .out_layout = *vectors_of(l.dst, g.output_shape()),
                        .pool = pool,
                        .scratch = static_cast<float*>(dnn::lent_scratch(winograd_scratch_bytes(g, plan.winograd_block))),
                        .block_bytes = plan.winograd_block});
  if (out && !relu) apply_activation(e.act, *out);  // baton's own functions, after the transform
  return true;
}

// baton's Winograd or oneDNN's direct kernel for a plan step: each timed once per geometry,
// layouts, epilogue and kind of weights (a plan constant, packed once; or weights the run
// packs) on zero-filled operands of the step's shapes. Winograd wins where there are tiles
// enough to amortize its transforms: at bs1 ResNet's last layers have 4 tiles an image,
// over which the weights' transform (made each run) may cost more than it saves.
WinogradChoice own_winograd_choice(const ConvGeom& g, const ConvForwardPlan& plan, const Tensor& x, const Tensor& out,
                                   bool bias, const ConvEpilogue& e, bool constant) {
  if (std::optional<WinogradChoice> forced = forced_winograd_choice(plan.prepared->impl)) return *forced;
  const int64_t key = forward_key(plan.layouts, bias, plan.training, e) + (constant ? 1 << 20 : 0);
  return dnn::cached<WinogradChoice>(geom_key("conv_fwd_own_winograd", g, key) + activation_key(e.act), [&] {
    const Tensor weights = kernels::zeros(g.weight_shape(), f32), b = kernels::zeros({g.o}, f32);
    const Tensor src = kernels::zeros_laid_out_as(x), dst = kernels::zeros_laid_out_as(out);
    const Tensor residual = e.residual ? kernels::zeros_laid_out_as(*e.residual) : Tensor();
    ConvEpilogue with = e;
    with.residual = e.residual ? &residual : nullptr;
    // Two plans, as the step's would be: one with the weights packed for oneDNN, one with
    // them in Winograd's order.
    ConvForwardPlan direct(plan.prepared, plan.layouts, plan.training), own(plan.prepared, plan.layouts, plan.training);
    if (constant && e.cache_weights && plan.prepared->in1.needed()) {
      std::vector<Tensor> keep;
      plan.prepared->in1.apply(dnn::wrap(plan.prepared->in1.from, weights), keep);
      direct.prepacked = keep.back();
    }
    own.own_winograd = true;
    if (constant) own.winograd = winograd_pack_weights(g, weights);
    auto run = [&](const ConvForwardPlan& trial) {
      conv_forward_f32(g, src, weights, bias ? &b : nullptr, dst, plan.training, with, &trial);
    };
    return timed_winograd_choice(
        g, plan.prepared->impl,
        std::max(plan.prepared->scratch.get_size(), winograd_scratch_bytes(g, kWinogradLargeBlock)),
        [&] { run(direct); },
        [&](size_t, int64_t block) {
          own.winograd_block = block;
          run(own);
        });
  });
}

}  // namespace

std::shared_ptr<const ConvForwardPlan> prepare_conv_forward_f32(const ConvGeom& g, const Tensor& x,
                                                                const Tensor& out, bool bias, bool training,
                                                                const ConvEpilogue& e, PreparedKernel& prepared,
                                                                ActivationBlocks blocks, const Tensor* constant_weights) {
  const ConvLayouts layouts(x, out, e.residual, blocks);  // a run copies any other layout plain
  const Prepared& p = forward_prepared(g, layouts, bias, training, e, /*timed=*/true);
  prepared.implementation = p.record();
  prepared.scratch_bytes = p.scratch.get_size();
  auto plan = std::make_shared<ConvForwardPlan>(&p, layouts, training);
  if (is_im2col(p)) {
    const Prepared& first = forward_prepared(g, layouts, bias, training, e);
    if (!is_im2col(first)) plan->not_finite = &first;
  }
  if (own_winograd_fits(g, layouts, e)) {
    const WinogradChoice choice = own_winograd_choice(g, *plan, x, out, bias, e, constant_weights != nullptr);
    prepared.implementation = choice.record;
    if (choice.own) {
      plan->own_winograd = true;
      plan->winograd_block = choice.block_bytes;
      prepared.scratch_bytes = std::max(prepared.scratch_bytes, winograd_scratch_bytes(g, choice.block_bytes));
      if (constant_weights) {  // the packed weights are their only copy (reordered, not transformed)
        const Tensor packed = winograd_pack_weights(g, *constant_weights);
        plan->winograd = packed;
        prepared.constant_copy_bytes = detail::size_class(packed.impl()->storage->nbytes());
        plan->winograd_finite = !has_non_finite(*constant_weights);
        prepared.adopted.push_back({1, [g, packed] { return winograd_unpack_weights(g, packed); }});
      }
      return plan;
    }
  }
  if (constant_weights && e.cache_weights && p.in1.needed()) {
    std::vector<Tensor> keep;
    p.in1.apply(dnn::wrap(p.in1.from, dnn::dense(*constant_weights)), keep);
    plan->prepacked = keep.back();
    prepared.constant_copy_bytes = detail::size_class(plan->prepacked.impl()->storage->nbytes());
    plan->prepacked_finite = !has_non_finite(*constant_weights);
    adopt_weights(*plan, p, constant_weights->shape(), prepared);
  }
  return plan;
}

namespace {

// Whether an activation post-op might treat a NaN or an infinity of the result otherwise
// than baton's op (relu's makes NaN 0: finite.h): some operand is not finite. Then the
// activation runs apart, as baton's functions. Weights kept in the primitive's layout were
// checked when reordered.
bool activation_needs_apart(const ConvEpilogue& e, const Tensor& src, const Tensor& w, const Tensor* bias,
                            std::optional<bool> weights_finite) {
  if (!e.act.any()) return false;
  const bool weights_ok = weights_finite ? *weights_finite : !has_non_finite(w);
  return !weights_ok || has_non_finite(src) || (bias && has_non_finite(*bias)) ||
         (e.residual && has_non_finite(*e.residual));
}

// The weights in q's layout, and whether they are known finite (nullopt: not checked): the
// plan's prepacked copy (w is then metadata), reordered when q wants another layout; the
// plan's or the shared cache's pack (cache_weights); else w reordered now. planned: q is
// the plan's own primitive.
std::pair<memory, std::optional<bool>> weights_for(const Prepared& q, const Tensor& w, const ConvEpilogue& e,
                                                   const ConvForwardPlan* plan, bool planned,
                                                   std::vector<Tensor>& keep) {
  if (plan && plan->prepacked.defined()) {
    const memory::desc& packed = plan->prepared->in1.to;
    return {dnn::Reorder(packed, q.in1.to).apply(dnn::wrap(packed, plan->prepacked), keep), plan->prepacked_finite};
  }
  if (!(e.cache_weights && q.in1.needed())) return {q.in1.apply(dnn::wrap(q.in1.from, dnn::dense(w)), keep), std::nullopt};
  const LaidOutWeights k = planned ? planned_weights(*plan, q, w) : cached_weights(q, w);
  return {k.m, k.finite};
}

// One forward convolution with p, made for g, these layouts (src, and the residual, already
// in them) and e. plan: the step's, when it has one (its packs); planned: p is its primitive.
void run_forward(const ConvGeom& g, bool training, const Prepared& p, const ConvLayouts& layouts, const Tensor& src,
                 const Tensor& w, const Tensor* bias, const Tensor& out, const ConvEpilogue& e,
                 const ConvForwardPlan* plan, bool planned) {
  std::vector<Tensor> keep;
  const auto [weights, weights_finite] = weights_for(p, w, e, plan, planned, keep);
  if (planned && plan->not_finite && !(weights_finite ? *weights_finite : !has_non_finite(w)))
    return run_forward(g, training, *plan->not_finite, layouts, src, w, bias, out, e, plan, false);
  if (activation_needs_apart(e, src, w, bias, weights_finite)) {
    ConvEpilogue apart = e;
    apart.act = {};
    apart.cache_weights = false;
    run_forward(g, training, forward_prepared(g, layouts, bias != nullptr, training, apart), layouts, src, w, bias,
                out, apart, plan, false);
    return apply_activation(e.act, out);
  }
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, p.in0.apply(dnn::wrap(p.in0.from, src), keep)},
                                       {DNNL_ARG_WEIGHTS, weights}};
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
  if (!has_post_op(e.act)) apply_activation(e.act, out);
}

}  // namespace

void conv_forward_f32(const ConvGeom& g, const Tensor& x, const Tensor& w, const Tensor* bias,
                      const Tensor& out, bool training, const ConvEpilogue& e, const ConvForwardPlan* plan) {
  // Blocked tensors carry plain strides: their layouts are known only to the plan, whose
  // other tensors are then brought to the layouts it was prepared for.
  const bool blocked = plan && plan->layouts.blocked;
  const Tensor src = blocked ? dnn::in_layout(x, plan->layouts.src) : dnn::plain_or_channels_last(x);
  const ConvLayouts layouts = blocked ? plan->layouts : ConvLayouts(src, out, e.residual);
  const bool planned =
      plan && plan->layouts == layouts && plan->training == training && plan->threads == kernels::max_threads();
  const Prepared& p = planned ? *plan->prepared : forward_prepared(g, layouts, bias != nullptr, training, e);
  const bool own_winograd = planned && plan->own_winograd;
  // The quick way runs p as it is. A planned im2col kernel goes through run_forward, which
  // runs oneDNN's first pick instead where the weights are not finite.
  const bool may_run_first_pick = planned && plan->not_finite;
  if (!e.residual && !e.cache_weights && !e.act.any() && !own_winograd && !may_run_first_pick)
    return run(p, src, dnn::dense(w), bias, out);
  Tensor residual;
  ConvEpilogue with = e;
  if (e.residual) {
    residual = dnn::in_layout(*e.residual, layouts.residual);
    with.residual = &residual;
  }
  if (own_winograd) {
    if (run_own_winograd(g, *plan, src, w, bias, &out, with)) return;
    if (plan->winograd.defined()) {  // oneDNN's kernel on the weights back in their order (w is metadata)
      with.cache_weights = false;
      return run_forward(g, training, p, layouts, src, winograd_unpack_weights(g, plan->winograd), bias, out, with,
                         plan, false);
    }
  }
  run_forward(g, training, p, layouts, src, w, bias, out, with, plan, planned);
}

bool runs_own_winograd(const ConvForwardPlan& plan) { return plan.own_winograd; }

bool conv_forward_pooled_f32(const ConvGeom& g, const Tensor& x, const Tensor& w, const Tensor* bias,
                             const ConvEpilogue& e, const ConvForwardPlan& plan, const WinogradPooling& pool) {
  if (!plan.own_winograd || e.residual || plan.threads != kernels::max_threads()) return false;
  const bool blocked = plan.layouts.blocked;
  const Tensor src = blocked ? dnn::in_layout(x, plan.layouts.src) : dnn::plain_or_channels_last(x);
  if (!blocked && dnn::planned_tag(src, 0) != plan.layouts.src) return false;
  return run_own_winograd(g, plan, src, w, bias, nullptr, e, &pool);
}

}  // namespace baton::kernels
