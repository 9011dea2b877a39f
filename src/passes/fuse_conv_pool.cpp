// Convolution-pooling fusion: a 3x3 convolution (its relu fused) whose output only a 2x2
// max pooling of stride 2 reads becomes one conv2d_max_pool2d (a training plan's
// max_pool2d_window, with window offsets) or conv2d_max_pool2d_values (inference's
// max_pool2d_values), so the convolution's output (4x the pooled size) is neither written
// nor read again. For few input channels (a network's first layer) its kernel sums each
// window's four convolution outputs in registers; for channels in Winograd's geometry
// (kernels/cpu/conv_pool.h, ConvPoolPlan) baton's Winograd pools in its output transform
// where the plan times it fastest. With few input channels a convolution does little
// arithmetic per output byte: the CNN's first layer (1 channel in, 32 out, batch 64) took
// 0.21 ms in oneDNN's kernel and 0.11 in the pooling after it, mostly memory traffic,
// against 0.23-0.27 ms fused on two threads; training steps of such a layer and a second
// convolution, 1 to 4 input channels, padded or not, ran 0.80-0.91x as long as unfused
// (docs/PERF.md).
#include "kernels/cpu/conv_pool.h"
#include "kernels/cpu/conv_winograd.h"
#include "passes/analysis.h"
#include "passes/fusion.h"
#include "passes/report.h"

namespace baton::passes {
namespace {

bool ints_are(const graph::Node& n, const char* name, std::vector<int64_t> v) { return n.attrs.ints(name) == v; }

// Whether the fused kernel serves a convolution of these weights and padding (the batch
// and image size do not matter: the geometry below only carries what winograd_fits reads).
bool kernel_serves(const Shape& w, const std::vector<int64_t>& padding) {
  if (w[1] <= kernels::kConvPoolDirectChannels) return w[0] % 8 == 0;  // the vector path
  const kernels::ConvGeom g{1, w[1], 8, 8, w[0], 3, 3, 8, 8, 1, 1, 1, padding[0], padding[1], 1, 1};
  return kernels::winograd_fits(g);  // ConvPoolPlan
}

// The conv2d or conv2d_fused (bias, no residual, no activation but relu) that only `pool` reads, when the fused
// kernel serves both; else nullptr.
graph::Node* fusable_conv(const graph::Graph& g, const VolatileValues& vol, const graph::Node& pool) {
  const bool pooling = pool.op_name() == "max_pool2d_window" || pool.op_name() == "max_pool2d_values";
  if (!pooling || !ints_are(pool, "kernel", {2, 2}) || !ints_are(pool, "stride", {2, 2}) ||
      !ints_are(pool, "padding", {0, 0}))
    return nullptr;
  graph::Node* conv = pool.input(0)->producer();
  if (!conv || (conv->op_name() != "conv2d" && conv->op_name() != "conv2d_fused") || conv->num_inputs() != 3 ||
      only_reader(g, vol, *conv) != &pool)
    return nullptr;
  const graph::TensorType& w = conv->input(1)->type;
  const Shape dims = w.shape.raw();
  if (w.dtype != DType::f32 || dims.size() != 4 || dims[0] < 0 || dims[1] < 1 || dims[2] != 3 || dims[3] != 3 ||
      !kernel_serves(dims, conv->attrs.ints("padding")))
    return nullptr;
  if (conv->attrs.i("groups") != 1 || !ints_are(*conv, "stride", {1, 1}) || !ints_are(*conv, "dilation", {1, 1}))
    return nullptr;
  // The pooled kernels apply a relu alone (in registers, or in Winograd's pooled stores).
  const std::string act = conv->attrs.has("activation") ? conv->attrs.s("activation") : "none";
  return act == "none" || act == "relu" ? conv : nullptr;
}

}  // namespace

bool fuse_conv_pool(graph::Graph& g, Context&, Effect& effect) {
  const VolatileValues vol(g);
  const Describer describe(g);
  bool changed = false;
  for (graph::Node* pool : node_list(g)) {
    graph::Node* conv = fusable_conv(g, vol, *pool);
    if (!conv) continue;
    ops::Attrs attrs;
    for (const char* name : {"stride", "padding", "dilation"}) attrs.set(name, conv->attrs.ints(name));
    attrs.set("groups", int64_t(1));
    attrs.set("activation", conv->attrs.has("activation") ? conv->attrs.s("activation") : std::string("none"));
    attrs.set("pool_kernel", pool->attrs.ints("kernel"));
    attrs.set("pool_stride", pool->attrs.ints("stride"));
    std::vector<graph::TensorType> types;
    for (size_t i = 0; i < pool->num_outputs(); ++i) types.push_back(pool->output(i)->type);
    const bool offsets = types.size() == 2;
    graph::Node* fused = g.add_node(offsets ? "conv2d_max_pool2d" : "conv2d_max_pool2d_values",
                                    {conv->input(0), conv->input(1), conv->input(2)}, types, attrs, conv->loc);
    fused->fused_from = fused_ops(*conv) + " + " + fused_ops(*pool);
    g.move_before(fused, conv);
    effect.details.push_back(str(describe.node(*conv), " and ", describe.node(*pool), " fused"));
    for (size_t i = 0; i < types.size(); ++i) g.replace_all_uses(pool->output(i), fused->output(i));
    g.erase_node(pool);
    g.erase_node(conv);
    changed = true;
  }
  return changed;
}

}  // namespace baton::passes
