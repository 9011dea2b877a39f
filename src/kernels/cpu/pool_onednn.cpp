// f32 max and average pooling on oneDNN. Its optimized kernels want channel-blocked
// tensors (nChw8c / nChw16c; plain nchw gets a slow C++ kernel, 10x behind our loops), so
// NCHW tensors are reordered in and out; channels-last ones (a plan's activations between
// convolutions) are read and written as they are. Everything is prepared once per shape
// and layout.
//
// Max pooling keeps the op's contract (values plus the i64 flat index of the first maximum
// in each window): oneDNN's training workspace holds, per output, the window-local offset
// ky * kw + kx of that maximum (padding positions counted), which we turn into plane
// indices. The backward op then stays the index scatter, faster than oneDNN's own
// backward plus its two reorders. oneDNN skips NaN and starts each window at -FLT_MAX (an
// all -inf window gives -FLT_MAX and a made-up index); inputs with NaN and outputs at
// -FLT_MAX take the loops instead, which propagate NaN and return -inf like PyTorch.
#include <atomic>
#include <limits>
#include <optional>

#include "kernels/cpu/loops.h"
#include "kernels/cpu/onednn.h"
#include "kernels/cpu/pool.h"

namespace baton::kernels {
namespace {

namespace dnn = onednn;
using dnn::memory;
using Tag = memory::format_tag;

// The tensors' layouts: plain or channels-last input and output, or channel-blocked ones
// (blocked: known only to the plan that stores them so; their strides are plain).
struct PoolLayouts {
  Tag src = Tag::nchw, dst = Tag::nchw;
  bool blocked = false;
  int64_t key() const { return dnn::tag_code(src) + 4 * dnn::tag_code(dst); }
  bool operator==(const PoolLayouts&) const = default;
};

struct PoolDescs {
  // src, dst: the tensors'; src_blocked, dst_blocked: the primitive's (channels-last when
  // the input is, else channel-blocked).
  memory::desc src, dst, src_blocked, dst_blocked;
  Tag prim_tag;
  dnn::Dims strides, kernel, dilation{0, 0}, pad_l, pad_r;
  explicit PoolDescs(const PoolGeom& g, PoolLayouts layouts = {}) {
    prim_tag = layouts.src == Tag::nhwc ? Tag::nhwc : dnn::blocked_channels_tag();
    dnn::Dims in{g.n, g.c, g.h, g.w}, out{g.n, g.c, g.oh, g.ow};
    src = dnn::plain_desc(in, layouts.src);
    dst = dnn::plain_desc(out, layouts.dst);
    src_blocked = dnn::plain_desc(in, prim_tag);
    dst_blocked = dnn::plain_desc(out, prim_tag);
    strides = {g.sh, g.sw};
    kernel = {g.kh, g.kw};
    pad_l = {g.ph, g.pw};
    // Right padding that gives oneDNN our (floor) output size; it can be negative (the
    // last input rows unused) and is at most the left padding.
    pad_r = {(g.oh - 1) * g.sh + g.kh - g.h - g.ph, (g.ow - 1) * g.sw + g.kw - g.w - g.pw};
  }
};

dnnl::algorithm algorithm_of(bool is_max) {
  return is_max ? dnnl::algorithm::pooling_max : dnnl::algorithm::pooling_avg_include_padding;
}

// Max pooling with indices trains (the workspace holds the argmax); max pooling of values
// alone and average pooling have no state.
dnnl::pooling_v2_forward::primitive_desc forward_pd(const PoolDescs& d, bool is_max, bool indices = true) {
  auto prop = is_max && indices ? dnnl::prop_kind::forward_training : dnnl::prop_kind::forward_inference;
  dnnl::pooling_v2_forward::desc desc(prop, algorithm_of(is_max), d.src_blocked, d.dst_blocked,
                                      d.strides, d.kernel, d.dilation, d.pad_l, d.pad_r);
  return {desc, dnn::default_attr(), dnn::engine()};
}

std::string key_of(const char* kind, const PoolGeom& g, PoolLayouts layouts = {}) {
  return dnn::key(kind, std::vector<int64_t>{g.n, g.c, g.h, g.w, g.kh, g.kw, g.sh, g.sw, g.ph, g.pw},
                  layouts.key());
}

std::string shapes(const char* what, const PoolGeom& g) {
  return str(what, " ", Shape{g.n, g.c, g.h, g.w}, " kernel ", Shape{g.kh, g.kw}, " stride ",
             Shape{g.sh, g.sw}, " padding ", Shape{g.ph, g.pw});
}

// One pooling primitive between reorders: `in` to the blocked layout, `out` back to NCHW.
// usable is false when oneDNN offers only a reference kernel (or, for max pooling, a
// workspace we cannot read): the callers then run the loops.
struct Prepared {
  std::optional<dnnl::primitive> prim;
  dnn::Reorder in, out;
  memory::desc workspace, scratch;
  bool usable = false;
  int64_t channel_block = 0;  // channels per block of the workspace (all of them channels-last)
  std::string impl;           // oneDNN's implementation
};

// The workspace layout we decode: one u8 (or s32, for windows of 256+ elements) per
// output, laid out like the primitive's output.
bool readable_workspace(const memory::desc& ws, const PoolDescs& d, const PoolGeom& g) {
  auto type = g.kh * g.kw < 256 ? memory::data_type::u8 : memory::data_type::s32;
  return ws == memory::desc(d.dst_blocked.dims(), type, d.prim_tag);
}

// Empty tensors are left to the loops. (Each size tested apart: the product of a hostile
// model's sizes can overflow, found by the onnx fuzzer.)
bool empty(const PoolGeom& g) { return g.planes() == 0 || g.h == 0 || g.w == 0 || g.oh == 0 || g.ow == 0; }

const Prepared& forward_prims(const PoolGeom& g, PoolKind kind, PoolLayouts layouts) {
  // Max pooling with flat indices or with window offsets: the same primitive and workspace.
  const bool is_max = kind != PoolKind::Average, indices = kind == PoolKind::Max || kind == PoolKind::MaxWindow;
  const char* name = !is_max ? "avg_pool_fwd" : indices ? "max_pool_fwd" : "max_pool_values_fwd";
  return dnn::cached<Prepared>(key_of(name, g, layouts), [&] {
    PoolDescs d(g, layouts);
    auto pd = forward_pd(d, is_max, indices);
    Prepared p;
    bool ref = dnn::note_impl(pd, shapes(is_max ? "max_pool2d forward" : "avg_pool2d forward", g));
    p.usable = !ref && (!is_max || !indices || readable_workspace(pd.workspace_desc(), d, g));
    if (!p.usable) return p;
    p.impl = pd.impl_info_str();
    p.prim = dnnl::pooling_v2_forward(pd);
    p.in = dnn::Reorder(d.src, pd.src_desc());
    p.out = dnn::Reorder(pd.dst_desc(), d.dst);
    p.workspace = pd.workspace_desc();
    p.scratch = pd.scratchpad_desc();
    p.channel_block = d.prim_tag == Tag::nhwc ? g.c : d.prim_tag == Tag::nChw16c ? 16 : 8;
    return p;
  });
}

const Prepared& avg_backward_prims(const PoolGeom& g) {
  return dnn::cached<Prepared>(key_of("avg_pool_bwd", g), [&] {
    PoolDescs d(g);
    auto hint = forward_pd(d, false);
    dnnl::pooling_v2_backward::desc desc(algorithm_of(false), d.src_blocked, d.dst_blocked, d.strides,
                                         d.kernel, d.dilation, d.pad_l, d.pad_r);
    dnnl::pooling_v2_backward::primitive_desc pd(desc, dnn::default_attr(), dnn::engine(), hint);
    Prepared p;
    p.usable = !dnn::note_impl(pd, shapes("avg_pool2d backward", g));
    if (!p.usable) return p;
    p.prim = dnnl::pooling_v2_backward(pd);
    p.in = dnn::Reorder(d.dst, pd.diff_dst_desc());
    p.out = dnn::Reorder(pd.diff_src_desc(), d.src);
    p.scratch = pd.scratchpad_desc();
    return p;
  });
}

// Runs p on `from` into `to`, in the layouts p was prepared for (`from` plain or
// channels-last, or blocked as p's input); arg_in / arg_out name the primitive's sides.
void run(const Prepared& p, const Tensor& from, const Tensor& to, int arg_in, int arg_out,
         const memory* workspace) {
  std::vector<Tensor> keep;
  Tensor x = dnn::plain_or_channels_last(from);  // as p was prepared for (blocked ones are contiguous)
  memory user_out = dnn::wrap(p.out.to, to);
  memory prim_out = p.out.needed() ? dnn::buffer(p.out.from, keep) : user_out;
  std::unordered_map<int, memory> args{{arg_in, p.in.apply(dnn::wrap(p.in.from, x), keep)},
                                       {arg_out, prim_out}};
  if (workspace) args.emplace(DNNL_ARG_WORKSPACE, *workspace);
  dnn::execute(*p.prim, std::move(args), p.scratch);
  p.out.into(prim_out, user_out);
}

// Output geometry of one plane, as plain values: a loop reading fields through a pointer
// reloads them after every store to the indices (they could alias) and stops vectorizing.
struct PlaneGeom {
  int64_t oh, ow, sh, sw, ph, pw, w, block;
};

// One plane: out[oy, ox] = flat (h * w) input position of the window offset in ws.
template <class W>
void decode_plane(const PlaneGeom g, const W* __restrict ws, const int64_t* __restrict offset,
                  int64_t* __restrict out) {
  for (int64_t oy = 0; oy < g.oh; ++oy) {
    const int64_t row = (oy * g.sh - g.ph) * g.w - g.pw;
    for (int64_t ox = 0; ox < g.ow; ++ox)
      out[oy * g.ow + ox] = row + ox * g.sw + offset[ws[(oy * g.ow + ox) * g.block]];
  }
}

// idx[n, c, oy, ox] from the workspace, laid out like the primitive's output: channels
// in blocks of `block` (all of them in one block when channels-last).
template <class W>
void workspace_to_indices(const PoolGeom& g, const W* ws, int64_t block, int64_t* idx) {
  const PlaneGeom pg{g.oh, g.ow, g.sh, g.sw, g.ph, g.pw, g.w, block};
  const int64_t c = g.c, outs = g.oh * g.ow, blocks = (c + block - 1) / block;
  std::vector<int64_t> offset(size_t(g.kh * g.kw));  // window offset -> plane offset
  for (int64_t k = 0; k < g.kh * g.kw; ++k) offset[size_t(k)] = (k / g.kw) * g.w + k % g.kw;
  kernels::parallel_range(g.planes(), [&](int64_t b, int64_t e) {
    for (int64_t p = b; p < e; ++p) {
      const int64_t n = p / c, ch = p % c;
      decode_plane(pg, ws + ((n * blocks + ch / block) * outs) * block + ch % block, offset.data(),
                   idx + p * outs);
    }
  }, kernels::grain_for(outs));
}

// offsets[n, c, oy, ox] (i32, of any strides) = the workspace's window offset. A
// channels-last offsets tensor and a channels-last primitive (one block of all channels)
// share their element order: one widening loop.
template <class W>
void workspace_to_offsets(const PoolGeom& g, const W* ws, int64_t block, const Tensor& offsets) {
  int32_t* out = offsets.data<int32_t>();
  const int64_t outs = g.oh * g.ow, blocks = (g.c + block - 1) / block;
  if (block == g.c && dnn::is_channels_last(offsets)) {
    kernels::parallel_range(g.planes() * outs, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) out[i] = int32_t(ws[i]);
    });
    return;
  }
  const Shape& st = offsets.strides();
  kernels::parallel_range(g.planes(), [&](int64_t b, int64_t e) {
    for (int64_t p = b; p < e; ++p) {
      const int64_t n = p / g.c, ch = p % g.c;
      const W* plane = ws + ((n * blocks + ch / block) * outs) * block + ch % block;
      int32_t* dst = out + n * st[0] + ch * st[1];
      for (int64_t oy = 0; oy < g.oh; ++oy)
        for (int64_t ox = 0; ox < g.ow; ++ox) dst[oy * st[2] + ox * st[3]] = int32_t(plane[(oy * g.ow + ox) * block]);
    }
  }, kernels::grain_for(outs));
}

// True when pred holds for any of p[0, n); spread over threads when large.
template <class Pred>
bool any_of(const float* p, int64_t n, Pred pred) {
  std::atomic<bool> found{false};
  kernels::parallel_range(n, [&](int64_t b, int64_t e) {
    int32_t hits = 0;  // a count, not a bool and no early exit: vectorizes
    for (int64_t i = b; i < e; ++i) hits += pred(p[i]) ? 1 : 0;
    if (hits) found.store(true, std::memory_order_relaxed);
  });
  return found.load();
}

}  // namespace

// Prepared entries are never removed from the cache: a plan may hold a pointer to one,
// which serves while the layouts and the thread count it was made for still hold.
struct PoolForwardPlan {
  const Prepared* prepared;
  PoolKind kind;
  PoolLayouts layouts;
  int threads;
};

std::shared_ptr<const PoolForwardPlan> prepare_pool_forward_f32(const PoolGeom& g, PoolKind kind, const Tensor& x,
                                                                const Tensor& y, PreparedKernel& prepared,
                                                                int64_t x_block, int64_t y_block) {
  if (empty(g)) return nullptr;
  const PoolLayouts layouts{dnn::planned_tag(x, x_block), dnn::planned_tag(y, y_block), x_block || y_block};
  const Prepared& p = forward_prims(g, kind, layouts);
  if (!p.usable && !layouts.blocked) return nullptr;
  prepared.implementation = p.impl;
  prepared.scratch_bytes = p.usable ? p.scratch.get_size() : 0;
  return std::make_shared<const PoolForwardPlan>(PoolForwardPlan{&p, kind, layouts, kernels::max_threads()});
}

void with_plain_layouts(const PoolForwardPlan* plan, const Tensor& x, const Tensor& y,
                        const std::function<void(const Tensor&, const Tensor&)>& loops) {
  if (!plan || !plan->layouts.blocked) return loops(x, y);
  const auto desc = [](const Tensor& t, Tag tag) { return dnn::plain_desc(dnn::dims_of(t.shape()), tag); };
  Tensor px = empty(x.shape(), f32), py = empty(y.shape(), f32);
  const dnn::Reorder in(desc(x, plan->layouts.src), desc(x, Tag::nchw)), out(desc(y, Tag::nchw), desc(y, plan->layouts.dst));
  if (in.needed()) in.into(dnn::wrap(in.from, dnn::in_layout(x, plan->layouts.src)), dnn::wrap(in.to, px));
  else copy_into(px, x);
  loops(px, py);
  if (out.needed()) out.into(dnn::wrap(out.from, py), dnn::wrap(out.to, y));
  else copy_into(y, py);
}

namespace {

// The layouts of a run: the plan's when it stores x or y channel-blocked (their strides
// do not tell), else those of x's plain or channels-last form and y.
PoolLayouts layouts_of(const Tensor& src, const Tensor& y, const PoolForwardPlan* plan) {
  if (plan && plan->layouts.blocked) return plan->layouts;
  return {dnn::activation_tag(src), dnn::activation_tag(y)};
}

// x as a run hands it to the primitive: plain or channels-last (any other layout copied
// plain), or in the layout a plan with blocked tensors was prepared for.
Tensor source_of(const Tensor& x, const PoolForwardPlan* plan) {
  return plan && plan->layouts.blocked ? dnn::in_layout(x, plan->layouts.src) : dnn::plain_or_channels_last(x);
}

// The plan's primitive when it was made for this call, else the cache's.
const Prepared& forward_for(const PoolGeom& g, PoolKind kind, PoolLayouts layouts, const PoolForwardPlan* plan) {
  if (plan && plan->kind == kind && plan->layouts == layouts && plan->threads == kernels::max_threads())
    return *plan->prepared;
  return forward_prims(g, kind, layouts);
}

// A training max pooling on oneDNN into y, its workspace then handed to decode(ws,
// channel_block) as one u8 (or s32) window position per output. False where the loops must
// run instead: oneDNN skips NaN, and an all -inf window gives -FLT_MAX with a made-up
// position.
template <class Decode>
bool max_pool_decoded(const PoolGeom& g, PoolKind kind, const Tensor& x, const Tensor& y,
                      const PoolForwardPlan* plan, Decode decode) {
  if (empty(g)) return false;
  const Tensor src = source_of(x, plan);
  const Prepared& p = forward_for(g, kind, layouts_of(src, y, plan), plan);
  if (!p.usable) return false;
  if (any_of(src.data<float>(), src.numel(), [](float v) { return v != v; })) return false;
  std::vector<Tensor> keep;
  memory ws = dnn::buffer(p.workspace, keep);
  run(p, src, y, DNNL_ARG_SRC, DNNL_ARG_DST, &ws);
  constexpr float lowest = -std::numeric_limits<float>::max();
  if (any_of(y.data<float>(), y.numel(), [](float v) { return v <= lowest; })) return false;
  if (p.workspace.data_type() == memory::data_type::u8)
    decode(static_cast<const uint8_t*>(ws.get_data_handle()), p.channel_block);
  else
    decode(static_cast<const int32_t*>(ws.get_data_handle()), p.channel_block);
  return true;
}

}  // namespace

bool max_pool_forward_onednn(const PoolGeom& g, const Tensor& x, const Tensor& y, const Tensor& idx,
                             const PoolForwardPlan* plan) {
  return max_pool_decoded(g, PoolKind::Max, x, y, plan, [&](const auto* ws, int64_t block) {
    workspace_to_indices(g, ws, block, idx.data<int64_t>());
  });
}

bool max_pool_window_forward_onednn(const PoolGeom& g, const Tensor& x, const Tensor& y, const Tensor& offsets,
                                    const PoolForwardPlan* plan) {
  return max_pool_decoded(g, PoolKind::MaxWindow, x, y, plan,
                          [&](const auto* ws, int64_t block) { workspace_to_offsets(g, ws, block, offsets); });
}

bool max_pool_values_onednn(const PoolGeom& g, const Tensor& x, const Tensor& y, const PoolForwardPlan* plan) {
  if (empty(g)) return false;
  const Tensor src = source_of(x, plan);
  const Prepared& p = forward_for(g, PoolKind::MaxValues, layouts_of(src, y, plan), plan);
  if (!p.usable) return false;
  if (any_of(src.data<float>(), src.numel(), [](float v) { return v != v; })) return false;
  run(p, src, y, DNNL_ARG_SRC, DNNL_ARG_DST, nullptr);
  constexpr float lowest = -std::numeric_limits<float>::max();
  return !any_of(y.data<float>(), y.numel(), [](float v) { return v <= lowest; });
}

bool avg_pool_forward_onednn(const PoolGeom& g, const Tensor& x, const Tensor& y, const PoolForwardPlan* plan) {
  if (empty(g)) return false;
  const Tensor src = source_of(x, plan);
  const Prepared& p = forward_for(g, PoolKind::Average, layouts_of(src, y, plan), plan);
  if (!p.usable) return false;
  run(p, src, y, DNNL_ARG_SRC, DNNL_ARG_DST, nullptr);
  return true;
}

bool avg_pool_backward_onednn(const PoolGeom& g, const Tensor& gy, const Tensor& gx) {
  if (empty(g)) return false;
  const Prepared& p = avg_backward_prims(g);
  if (!p.usable) return false;
  run(p, dnn::dense(gy), gx, DNNL_ARG_DIFF_DST, DNNL_ARG_DIFF_SRC, nullptr);
  return true;
}

}  // namespace baton::kernels
