// max_pool2d, avg_pool2d, adaptive_avg_pool2d and their backward ops (NCHW).
#include <optional>

#include "baton/ops.h"
#include "ops/common.h"
#include "kernels/cpu/pool.h"
#include "ops/sym_dims.h"

namespace baton::ops {
namespace {

void require_image(const CallContext& c, const Shape& s) {
  if (s.size() != 4) c.fail("input must be [N, C, H, W], got ", s);
}

// Windowed pooling geometry from attrs kernel, stride, padding (PyTorch's rules).
kernels::PoolGeom pool_geom(const CallContext& c, const Shape& in) {
  require_image(c, in);
  const auto &k = c.attrs.ints("kernel"), &s = c.attrs.ints("stride"), &p = c.attrs.ints("padding");
  for (int d = 0; d < 2; ++d)
    if (k[size_t(d)] < 1 || s[size_t(d)] < 1 || p[size_t(d)] < 0 || p[size_t(d)] > k[size_t(d)] / 2)
      c.template fail<ValueError>("invalid options: kernel ", Shape(k), ", stride ", Shape(s),
                                  ", padding ", Shape(p), " (padding must be at most half the kernel)");
  // The output size is computed from these (the batch and channels may be symbolic).
  require_static_dim(c, in, 2, "the input height", "the output size is computed from it");
  require_static_dim(c, in, 3, "the input width", "the output size is computed from it");
  kernels::PoolGeom g{in[0], in[1], in[2], in[3], k[0], k[1], s[0], s[1], p[0], p[1], 0, 0};
  g.oh = window_positions(c, "kernel height", g.h, g.ph, g.kh, g.sh);
  g.ow = window_positions(c, "kernel width", g.w, g.pw, g.kw, g.sw);
  return g;
}

kernels::PoolGeom adaptive_geom(const CallContext& c, const Shape& in) {
  require_image(c, in);
  const auto& o = c.attrs.ints("output_size");
  if (o[0] < 1 || o[1] < 1) c.template fail<ValueError>("invalid output size ", Shape(o));
  return kernels::PoolGeom{in[0], in[1], in[2], in[3], 0, 0, 0, 0, 0, 0, o[0], o[1]};
}

Shape output_shape(const kernels::PoolGeom& g) { return {g.n, g.c, g.oh, g.ow}; }
Shape input_shape_attr(const CallContext& c) { return Shape(c.attrs.ints("input_shape")); }

// A backward op's geometry: the gradient must have the forward output's shape.
kernels::PoolGeom backward_geom(const CallContext& c, kernels::PoolGeom (*geom)(const CallContext&, const Shape&)) {
  require_float(c);
  kernels::PoolGeom g = geom(c, input_shape_attr(c));
  if (!(c.input(0).shape() == output_shape(g))) c.fail("output gradient must be ", output_shape(g));
  return g;
}

// The kernels' parameters (OpDef::params): the geometry of a forward op from its input, of
// a backward op from its input_shape.
kernels::PoolGeom forward_pool(const CallContext& c) { return pool_geom(c, c.input(0).shape()); }
kernels::PoolGeom backward_pool(const CallContext& c) { return backward_geom(c, pool_geom); }
kernels::PoolGeom forward_adaptive(const CallContext& c) { return adaptive_geom(c, c.input(0).shape()); }
kernels::PoolGeom backward_adaptive(const CallContext& c) { return backward_geom(c, adaptive_geom); }
const kernels::PoolGeom& geom_of(const CallContext& c) { return c.params<kernels::PoolGeom>(); }

TensorMeta float_like_output(const InferContext& c, const kernels::PoolGeom& g) {
  require_float(c);
  return {c.input(0).dtype(), output_shape(g)};
}
TensorMeta backward_meta(const InferContext& c, kernels::PoolGeom (*geom)(const CallContext&, const Shape&)) {
  backward_geom(c, geom);
  return {c.input(0).dtype(), input_shape_attr(c)};
}

Attrs with_input_shape(const Attrs& a, const Shape& s) {
  Attrs out = a;
  out.set("input_shape", s.vec());
  return out;
}
Attrs without_input_shape(const Attrs& a) {
  Attrs out;
  for (auto& [name, v] : a.items())
    if (name != "input_shape") out.set(name, v);
  return out;
}

// A plan step's f32 pooling: its oneDNN primitive, made once for the planned layouts.
PrepareFn prepare_pool(kernels::PoolKind kind) {
  return [kind](const CallContext& c, std::span<const Tensor> outputs) {
    Prepared p;
    if (c.input(0).dtype() == f32)
      p.state = kernels::prepare_pool_forward_f32(geom_of(c), kind, c.input(0), outputs[0],
                                                  p, c.input_block(0), c.output_block(0));
    return p;
  };
}

const kernels::PoolForwardPlan* pool_plan(const KernelContext& c) {
  return static_cast<const kernels::PoolForwardPlan*>(c.prepared);
}

// A plan step of max_pool2d_window, max_pool2d_values or the window's backward: the
// layouts of its operands and, for a forward (`kind`) over a plain f32 input, its oneDNN
// primitive.
Prepared prepare_window_pool(const CallContext& c, std::span<const Tensor> outputs,
                             std::optional<kernels::PoolKind> kind) {
  Prepared p;
  auto plan = std::make_shared<kernels::WindowPoolPlan>(kernels::window_pool_plan(c.channel_blocks));
  if (plan->block || !kind || kernels::max_pool_window_channels_last(c.input(0))) p.implementation = "loops";
  else if (c.input(0).dtype() == f32)
    plan->onednn = kernels::prepare_pool_forward_f32(geom_of(c), *kind, c.input(0), outputs[0], p);
  p.state = std::move(plan);
  return p;
}

const kernels::WindowPoolPlan* window_plan(const KernelContext& c) {
  return static_cast<const kernels::WindowPoolPlan*>(c.prepared);
}

Cost pool_cost(const CallContext& c, std::span<const TensorMeta> out) {
  double n = double(c.input(0).numel()) + double(out[0].shape.numel());
  return {n, n * double(dtype_size(out[0].dtype))};
}

}  // namespace

BATON_OP(max_pool2d_op, "max_pool2d")
    .inputs(1)
    .ints_attr("kernel", 2)
    .ints_attr("stride", 2)
    .ints_attr("padding", 2)
    .outputs(2)  // values and the flat (h * w) index of each maximum
    .channels_last({0})
    .infer([](const InferContext& c) {
      kernels::PoolGeom g = pool_geom(c, c.input(0).shape());
      return std::vector<TensorMeta>{float_like_output(c, g), {i64, output_shape(g)}};
    })
    .params(forward_pool)
    .cpu([](const KernelContext& c) {
      kernels::max_pool_forward(geom_of(c), c.input(0), c.output(0), c.output(1), pool_plan(c));
    })
    .prepared_by(prepare_pool(kernels::PoolKind::Max))
    .grad([](const GradContext& c) {
      return Grads{call(*find_op("max_pool2d_backward"), {c.grad_output(0), c.output(1)},
                        with_input_shape(c.attrs, c.input(0).shape()), c.loc)};
    })
    .cost(pool_cost)
    .onnx("MaxPool");

// max_pool2d's values without its indices, for inference: what max_pool2d becomes in a
// plan when nothing reads the indices (src/passes/simplify.cpp). No gradient rule.
BATON_OP(max_pool2d_values_op, "max_pool2d_values")
    .inputs(1)
    .ints_attr("kernel", 2)
    .ints_attr("stride", 2)
    .ints_attr("padding", 2)
    .channels_last({0})
    .channel_blocked({0})
    .infer([](const InferContext& c) { return float_like_output(c, pool_geom(c, c.input(0).shape())); })
    .params(forward_pool)
    .cpu([](const KernelContext& c) {
      kernels::max_pool_values(geom_of(c), c.input(0), c.output(), window_plan(c));
    })
    .prepared_by([](const CallContext& c, std::span<const Tensor> outputs) {
      return prepare_window_pool(c, outputs, kernels::PoolKind::MaxValues);
    })
    .cost(pool_cost);

// Inputs (grad_output, indices from max_pool2d); attr input_shape.
BATON_OP(max_pool2d_backward_op, "max_pool2d_backward")
    .inputs(2)
    .channels_last({0})
    .ints_attr("kernel", 2)
    .ints_attr("stride", 2)
    .ints_attr("padding", 2)
    .ints_attr("input_shape", 4)
    .infer([](const InferContext& c) {
      // The kernel reads one i64 index per output gradient element.
      if (c.input(1).dtype() != i64 || !(c.input(1).shape() == c.input(0).shape()))
        c.fail("indices must be i64 with the output gradient's shape");
      return backward_meta(c, pool_geom);
    })
    .params(backward_pool)
    .cpu([](const KernelContext& c) {
      kernels::max_pool_backward(geom_of(c), c.input(0), c.input(1), c.output());
    })
    .cost(pool_cost);

// max_pool2d as a plan runs it when only max_pool2d_backward reads the indices
// (src/passes/simplify.cpp): the second output is each maximum's window offset
// ky * kw + kx (i32) instead of its flat index: what oneDNN's workspace holds, half the
// bytes, nothing decoded; in the values' layout, so channels-last or channel-blocked in a
// training plan.
BATON_OP(max_pool2d_window_op, "max_pool2d_window")
    .inputs(1)
    .ints_attr("kernel", 2)
    .ints_attr("stride", 2)
    .ints_attr("padding", 2)
    .outputs(2)
    .channels_last({0})
    .channel_blocked({0}, {0, 1})
    .infer([](const InferContext& c) {
      kernels::PoolGeom g = pool_geom(c, c.input(0).shape());
      return std::vector<TensorMeta>{float_like_output(c, g), {i32, output_shape(g)}};
    })
    .params(forward_pool)
    .cpu([](const KernelContext& c) {
      kernels::max_pool_window_forward(geom_of(c), c.input(0), c.output(0), c.output(1), window_plan(c));
    })
    .prepared_by([](const CallContext& c, std::span<const Tensor> outputs) {
      return prepare_window_pool(c, outputs, kernels::PoolKind::MaxWindow);
    })
    .grad([](const GradContext& c) {
      return Grads{call(*find_op("max_pool2d_window_backward"), {c.grad_output(0), c.output(1)},
                        with_input_shape(c.attrs, c.input(0).shape()), c.loc)};
    })
    .cost(pool_cost);

// Inputs (grad_output, window offsets from max_pool2d_window[, maxima]); attr
// input_shape. With maxima (max_pool2d_window's values), gradients land only where their
// window's maximum is > 0: when the pooling read a relu's result, that is the relu's
// backward, which a plan fuses in so (src/passes/fuse_epilogue.cpp).
BATON_OP(max_pool2d_window_backward_op, "max_pool2d_window_backward")
    .inputs(2, 3)
    .channels_last({0, 1, 2})
    .channel_blocked({0, 1, 2})
    .ints_attr("kernel", 2)
    .ints_attr("stride", 2)
    .ints_attr("padding", 2)
    .ints_attr("input_shape", 4)
    .infer([](const InferContext& c) {
      if (c.input(1).dtype() != i32 || !(c.input(1).shape() == c.input(0).shape()))
        c.fail("window offsets must be i32 with the output gradient's shape");
      if (c.inputs.size() == 3 && (c.input(2).dtype() != c.input(0).dtype() || !(c.input(2).shape() == c.input(0).shape())))
        c.fail("the window maxima must have the output gradient's dtype and shape");
      return backward_meta(c, pool_geom);
    })
    .params(backward_pool)
    .cpu([](const KernelContext& c) {
      kernels::max_pool_window_backward(geom_of(c), c.input(0), c.input(1), c.output(),
                                        c.inputs.size() == 3 ? &c.input(2) : nullptr, window_plan(c));
    })
    .prepared_by([](const CallContext& c, std::span<const Tensor> outputs) {
      return prepare_window_pool(c, outputs, std::nullopt);
    })
    .cost(pool_cost);

BATON_OP(avg_pool2d_op, "avg_pool2d")
    .inputs(1)
    .channels_last({0})
    .channel_blocked({0})
    .ints_attr("kernel", 2)
    .ints_attr("stride", 2)
    .ints_attr("padding", 2)
    .infer([](const InferContext& c) { return float_like_output(c, pool_geom(c, c.input(0).shape())); })
    .params(forward_pool)
    .cpu([](const KernelContext& c) {
      kernels::avg_pool_forward(geom_of(c), c.input(0), c.output(), pool_plan(c));
    })
    .prepared_by(prepare_pool(kernels::PoolKind::Average))
    .grad([](const GradContext& c) {
      return Grads{call(*find_op("avg_pool2d_backward"), {c.grad_output()},
                        with_input_shape(c.attrs, c.input(0).shape()), c.loc)};
    })
    .cost(pool_cost)
    .onnx("AveragePool");

// Input grad_output; attr input_shape. Linear: its gradient is avg_pool2d again.
BATON_OP(avg_pool2d_backward_op, "avg_pool2d_backward")
    .inputs(1)
    .ints_attr("kernel", 2)
    .ints_attr("stride", 2)
    .ints_attr("padding", 2)
    .ints_attr("input_shape", 4)
    .infer([](const InferContext& c) { return backward_meta(c, pool_geom); })
    .params(backward_pool)
    .cpu([](const KernelContext& c) {
      kernels::avg_pool_backward(geom_of(c), c.input(0), c.output());
    })
    .grad([](const GradContext& c) {
      return Grads{call(avg_pool2d_op, {c.grad_output()}, without_input_shape(c.attrs), c.loc)};
    })
    .cost(pool_cost);

BATON_OP(adaptive_avg_pool2d_op, "adaptive_avg_pool2d")
    .inputs(1)
    .ints_attr("output_size", 2)
    .infer([](const InferContext& c) { return float_like_output(c, adaptive_geom(c, c.input(0).shape())); })
    .params(forward_adaptive)
    .cpu([](const KernelContext& c) {
      kernels::adaptive_avg_forward(geom_of(c), c.input(0), c.output());
    })
    .grad([](const GradContext& c) {
      return Grads{call(*find_op("adaptive_avg_pool2d_backward"), {c.grad_output()},
                        with_input_shape(c.attrs, c.input(0).shape()), c.loc)};
    })
    .cost(pool_cost);

BATON_OP(adaptive_avg_pool2d_backward_op, "adaptive_avg_pool2d_backward")
    .inputs(1)
    .ints_attr("output_size", 2)
    .ints_attr("input_shape", 4)
    .infer([](const InferContext& c) { return backward_meta(c, adaptive_geom); })
    .params(backward_adaptive)
    .cpu([](const KernelContext& c) {
      kernels::adaptive_avg_backward(geom_of(c), c.input(0), c.output());
    })
    .grad([](const GradContext& c) {
      return Grads{call(adaptive_avg_pool2d_op, {c.grad_output()}, without_input_shape(c.attrs), c.loc)};
    })
    .cost(pool_cost);

}  // namespace baton::ops

namespace baton {
namespace {

ops::Attrs pool_attrs(const Pool2dOptions& o) {
  const auto& k = o.kernel;
  std::array<int64_t, 2> s = o.stride[0] == 0 && o.stride[1] == 0 ? k : o.stride;
  return {{"kernel", std::vector<int64_t>{k[0], k[1]}},
          {"stride", std::vector<int64_t>{s[0], s[1]}},
          {"padding", std::vector<int64_t>{o.padding[0], o.padding[1]}}};
}

}  // namespace

Tensor max_pool2d(const Tensor& x, const Pool2dOptions& options, SourceLoc loc) {
  Tensor in[1] = {x};
  return ops::call_many(ops::max_pool2d_op, in, pool_attrs(options), loc)[0];
}

std::pair<Tensor, Tensor> max_pool2d_with_indices(const Tensor& x, const Pool2dOptions& options, SourceLoc loc) {
  Tensor in[1] = {x};
  std::vector<Tensor> out = ops::call_many(ops::max_pool2d_op, in, pool_attrs(options), loc);
  return {out[0], out[1]};
}

Tensor avg_pool2d(const Tensor& x, const Pool2dOptions& options, SourceLoc loc) {
  return ops::call(ops::avg_pool2d_op, {x}, pool_attrs(options), loc);
}

// Sizes that divide the input evenly are plain average pooling. A symbolic input size
// keeps the adaptive op, which derives its windows from the real size on every run.
Tensor adaptive_avg_pool2d(const Tensor& x, std::array<int64_t, 2> out, SourceLoc loc) {
  if (x.dim() == 4 && out[0] > 0 && out[1] > 0 && x.size(2) > 0 && x.size(3) > 0 &&
      x.size(2) % out[0] == 0 && x.size(3) % out[1] == 0) {
    std::array<int64_t, 2> k{x.size(2) / out[0], x.size(3) / out[1]};
    return avg_pool2d(x, Pool2dOptions{k, k, {0, 0}}, loc);
  }
  return ops::call(ops::adaptive_avg_pool2d_op, {x}, {{"output_size", std::vector<int64_t>{out[0], out[1]}}},
                   loc);
}

}  // namespace baton
