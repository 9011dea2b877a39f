// f32 batch norm on oneDNN. [N, C, ...] is seen as [N, C, 1, inner]. oneDNN's optimized
// kernels want channels innermost: [N, C] (inner 1) already is; images are reordered to
// nChw8c / nChw16c and back (plain nchw gets a slow C++ kernel), all prepared once per shape.
// Those reorders are memory-bound passes, so images take oneDNN only where it still wins
// (measured on the benchmark and ResNet shapes): the training forward. Their backward (the
// loop reads x and g twice; the oneDNN path also reorders x, g and gx: up to 1.8x slower) and
// inference (one multiply-add per element) stay loops; [N, C] inputs take oneDNN for all.
#include <bit>

#include "kernels/cpu/batch_norm.h"
#include "kernels/cpu/onednn.h"

namespace baton::kernels {
namespace {

namespace dnn = onednn;
using dnn::memory;
using Tag = memory::format_tag;
using Flags = dnnl::normalization_flags;

struct BnDescs {
  memory::desc plain, inner, channel;
  explicit BnDescs(const Tensor& x) {
    int64_t n = x.size(0), c = x.size(1), rest = x.numel() / std::max<int64_t>(1, n * c);
    dnn::Dims dims{n, c, 1, rest};  // inner along w: reorders run faster than with it along h
    plain = dnn::plain_desc(dims, rest == 1 ? Tag::nhwc : Tag::nchw);
    inner = dnn::plain_desc(dims, rest == 1 ? Tag::nhwc : dnn::blocked_channels_tag());
    channel = dnn::plain_desc({c}, Tag::x);
  }
};

const Flags kFlags = Flags::use_scale | Flags::use_shift;

// Whether oneDNN beats the loops (see the top of the file).
bool pays(const Tensor& x, bool training_forward) {
  return x.numel() > 0 && (training_forward || x.numel() == x.size(0) * x.size(1));
}

dnnl::batch_normalization_forward::primitive_desc forward_pd(const BnDescs& d, double eps,
                                                             bool training) {
  dnnl::batch_normalization_forward::desc desc(
      training ? dnnl::prop_kind::forward_training : dnnl::prop_kind::forward_inference, d.inner,
      float(eps), training ? kFlags : kFlags | Flags::use_global_stats);
  return {desc, dnn::default_attr(), dnn::engine()};
}

std::string key_of(const char* kind, const Tensor& x, double eps) {
  return dnn::key(kind, x.shape().vec(), std::bit_cast<int64_t>(eps));
}

// One primitive with its reorders: x (and g, backward) in, the result out. usable is
// false when oneDNN offers only a reference kernel: the caller then runs its loops.
struct Prepared {
  std::optional<dnnl::primitive> prim;
  dnn::Reorder x_in, g_in, out;
  memory::desc scratch;
  bool usable = false;
  std::string impl;
};

const Prepared& forward_prims(const Tensor& x, double eps, bool training) {
  return dnn::cached<Prepared>(key_of(training ? "bn_fwd" : "bn_infer", x, eps), [&] {
    BnDescs d(x);
    auto pd = forward_pd(d, eps, training);
    Prepared p;
    p.usable = !dnn::note_impl(pd, str("batch_norm ", training ? "forward " : "inference ", x.shape())) &&
               pd.workspace_desc().get_size() == 0;
    if (!p.usable) return p;
    p.impl = pd.impl_info_str();
    p.prim = dnnl::batch_normalization_forward(pd);
    p.x_in = dnn::Reorder(d.plain, pd.src_desc());
    p.out = dnn::Reorder(pd.dst_desc(), d.plain);
    p.scratch = pd.scratchpad_desc();
    return p;
  });
}

const Prepared& backward_prims(const Tensor& x, double eps) {
  return dnn::cached<Prepared>(key_of("bn_bwd", x, eps), [&] {
    BnDescs d(x);
    dnnl::batch_normalization_backward::desc desc(dnnl::prop_kind::backward, d.inner, d.inner,
                                                  float(eps), kFlags);
    dnnl::batch_normalization_backward::primitive_desc pd(desc, dnn::default_attr(), dnn::engine(),
                                                          forward_pd(d, eps, true));
    Prepared p;
    p.usable = !dnn::note_impl(pd, str("batch_norm backward ", x.shape())) &&
               pd.workspace_desc().get_size() == 0;
    if (!p.usable) return p;
    p.impl = pd.impl_info_str();
    p.prim = dnnl::batch_normalization_backward(pd);
    p.x_in = dnn::Reorder(d.plain, pd.src_desc());
    p.g_in = dnn::Reorder(d.plain, pd.diff_dst_desc());
    p.out = dnn::Reorder(pd.diff_src_desc(), d.plain);
    p.scratch = pd.scratchpad_desc();
    return p;
  });
}

// The arguments shared by both directions; `keep` holds every buffer until the run ends.
struct Args {
  std::unordered_map<int, memory> map;
  std::vector<Tensor> keep;
  memory::desc channel;
  void plain(int arg, const Tensor& t, const memory::desc& md) {  // dense tensor as is
    keep.push_back(dnn::dense(t));
    map.emplace(arg, dnn::wrap(md, keep.back()));
  }
  void per_channel(int arg, const Tensor& t) { plain(arg, t, channel); }
  void reordered(int arg, const Tensor& t, const dnn::Reorder& r) {
    keep.push_back(dnn::dense(t));
    map.emplace(arg, r.apply(dnn::wrap(r.from, keep.back()), keep));
  }
  // The result memory of arg: `to` itself, or a buffer that finish() reorders into it.
  memory result(int arg, const Tensor& to, const dnn::Reorder& r) {
    memory user = dnn::wrap(r.to, to);
    memory prim = r.needed() ? dnn::buffer(r.from, keep) : user;
    map.emplace(arg, prim);
    return prim;
  }
};

}  // namespace

// Cached entries are never removed: a plan points at one while x's shape, eps, the
// direction and the thread count it was made for hold.
struct BatchNormPlan {
  const Prepared* prepared;
  Shape shape;
  double eps;
  bool training, backward;
  int threads;
  bool serves(const Tensor& x, double e, bool t, bool b) const {
    return e == eps && t == training && b == backward && threads == kernels::max_threads() && x.shape() == shape;
  }
};

std::shared_ptr<const BatchNormPlan> prepare_batch_norm_f32(const Tensor& x, double eps, bool training,
                                                            bool backward, PreparedKernel& prepared) {
  if (!pays(x, training && !backward)) return nullptr;
  const Prepared& p = backward ? backward_prims(x, eps) : forward_prims(x, eps, training);
  if (!p.usable) return nullptr;
  prepared.implementation = p.impl;
  prepared.scratch_bytes = p.scratch.get_size();
  return std::make_shared<const BatchNormPlan>(
      BatchNormPlan{&p, x.shape(), eps, training, backward, kernels::max_threads()});
}

// y, mean and var (training: the batch mean and biased variance; inference: mean and var
// already hold the running statistics). False when the caller's loop is to run instead.
bool batch_norm_forward_onednn(const Tensor& x, const Tensor& w, const Tensor& b, double eps,
                               bool training, const Tensor& y, const Tensor& mean, const Tensor& var,
                               const BatchNormPlan* plan) {
  if (!pays(x, training)) return false;
  const Prepared& p = plan && plan->serves(x, eps, training, false) ? *plan->prepared : forward_prims(x, eps, training);
  if (!p.usable) return false;
  Args a{.channel = BnDescs(x).channel};
  a.reordered(DNNL_ARG_SRC, x, p.x_in);
  a.per_channel(DNNL_ARG_SCALE, w);
  a.per_channel(DNNL_ARG_SHIFT, b);
  a.per_channel(DNNL_ARG_MEAN, mean);  // contiguous outputs: written (or read) in place
  a.per_channel(DNNL_ARG_VARIANCE, var);
  memory out = a.result(DNNL_ARG_DST, y, p.out);
  dnn::execute(*p.prim, a.map, p.scratch);
  p.out.into(out, dnn::wrap(p.out.to, y));
  return true;
}

// Training backward from the forward's batch statistics: gx, gweight, gbias.
bool batch_norm_backward_onednn(const Tensor& g, const Tensor& x, const Tensor& w,
                                const Tensor& mean, const Tensor& var, double eps, const Tensor& gx,
                                const Tensor& gw, const Tensor& gb, const BatchNormPlan* plan) {
  if (!pays(x, false)) return false;
  const Prepared& p = plan && plan->serves(x, eps, true, true) ? *plan->prepared : backward_prims(x, eps);
  if (!p.usable) return false;
  Args a{.channel = BnDescs(x).channel};
  a.reordered(DNNL_ARG_SRC, x, p.x_in);
  a.reordered(DNNL_ARG_DIFF_DST, g, p.g_in);
  a.per_channel(DNNL_ARG_SCALE, w);
  // oneDNN 2.6 insists on a shift argument here but never reads it; the scale stands in.
  a.per_channel(DNNL_ARG_SHIFT, w);
  a.per_channel(DNNL_ARG_MEAN, mean);
  a.per_channel(DNNL_ARG_VARIANCE, var);
  a.per_channel(DNNL_ARG_DIFF_SCALE, gw);
  a.per_channel(DNNL_ARG_DIFF_SHIFT, gb);
  memory out = a.result(DNNL_ARG_DIFF_SRC, gx, p.out);
  dnn::execute(*p.prim, a.map, p.scratch);
  p.out.into(out, dnn::wrap(p.out.to, gx));
  return true;
}

}  // namespace baton::kernels
