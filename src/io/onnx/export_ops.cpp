// How baton's ops are written as ONNX (opset 17). Ops whose OpDef names an ONNX op and that
// have no attributes (relu, add, exp...) need nothing here (exporter.cpp).
#include <algorithm>
#include <cmath>
#include <numbers>

#include "baton/ops.h"
#include "io/onnx/export_compose.h"

namespace baton::onnx::detail {
namespace {

// The target of Reshape or Expand from a shape that may hold symbols: a symbol becomes
// `same` (0 for Reshape: copy the input's dim; 1 for Expand: keep it) where the input has
// that very dim at that place; one other symbol becomes -1 (Reshape only), and the rest
// are computed from the graph inputs' shapes.
std::string target_dims(ExportContext& c, const std::vector<int64_t>& target, int64_t same, bool allow_infer) {
  const Shape in = c.input_type(0).shape.raw();
  std::vector<int64_t> out = target;
  auto others = [&] { return std::count_if(out.begin(), out.end(), sym::is_symbol); };
  for (size_t i = 0; i < out.size(); ++i) {
    const size_t at = same == 1 ? i + in.size() - out.size() : i;  // Expand aligns trailing dims
    if (sym::is_symbol(out[i]) && at < in.size() && in[at] == out[i]) out[i] = same;
  }
  if (allow_infer && others() == 1) std::replace_if(out.begin(), out.end(), sym::is_symbol, int64_t(-1));
  return c.dims(out, "shape");
}

std::vector<int64_t> pairs_of(const std::vector<int64_t>& v) { return {v[0], v[1], v[0], v[1]}; }

void reduction(ExportContext& c, const char* op_type, bool axes_as_input) {
  std::vector<int64_t> dims = c.attrs().ints("dims");
  std::string x = c.input(0);
  if (c.input_type(0).dtype != c.output_type().dtype) {  // baton sums integers into i64
    const std::string widened = c.fresh("cast");
    c.add("Cast", {x}, {widened}).attr("to", int64_t(to_onnx_type(c.output_type().dtype)));
    x = widened;
  }
  Names inputs{x};
  if (axes_as_input && !dims.empty()) inputs.push_back(c.ints(dims, "axes"));
  OnnxNode n = c.add(op_type, inputs, {c.output()});
  n.attr("keepdims", c.attrs().i("keepdim"));
  if (!axes_as_input && !dims.empty()) n.attr("axes", dims);
}

void pool(ExportContext& c, const char* op_type) {
  const bool indices = c.node.num_outputs() > 1 && c.output_used(1);
  const std::string flat = indices ? c.fresh("indices") : "";
  OnnxNode n = c.add(op_type, {c.input(0)}, indices ? Names{c.output(0), flat} : Names{c.output(0)});
  n.attr("kernel_shape", c.attrs().ints("kernel"));
  std::vector<int64_t> stride = c.attrs().ints("stride");
  if (stride == std::vector<int64_t>{0, 0}) stride = c.attrs().ints("kernel");
  n.attr("strides", stride).attr("pads", pairs_of(c.attrs().ints("padding")));
  if (std::string(op_type) == "AveragePool") n.attr("count_include_pad", int64_t(1));
  if (indices) export_pool_indices(c, flat);
}

void conv(ExportContext& c) {
  const std::vector<int64_t> w = c.static_dims(c.input_type(1).shape, "the weight");
  Names inputs{c.input(0), c.input(1)};
  if (c.num_inputs() > 2) inputs.push_back(c.input(2));
  c.add("Conv", inputs, {c.output()})
      .attr("kernel_shape", std::vector<int64_t>{w[2], w[3]})
      .attr("strides", c.attrs().ints("stride"))
      .attr("pads", pairs_of(c.attrs().ints("padding")))
      .attr("dilations", c.attrs().ints("dilation"))
      .attr("group", c.attrs().i("groups"));
}

void linear(ExportContext& c) {
  const bool has_bias = c.num_inputs() > 2;
  if (c.input_type(0).shape.rank() == 2) {
    Names inputs{c.input(0), c.input(1)};
    if (has_bias) inputs.push_back(c.input(2));
    c.add("Gemm", inputs, {c.output()}).attr("transB", int64_t(1));
    return;
  }
  const std::string wt = c.fresh("weight_t"), product = has_bias ? c.fresh("product") : c.output();
  c.add("Transpose", {c.input(1)}, {wt}).attr("perm", std::vector<int64_t>{1, 0});
  c.add("MatMul", {c.input(0), wt}, {product});
  if (has_bias) c.add("Add", {product, c.input(2)}, {c.output()});
}

void batch_norm(ExportContext& c) {
  if (c.attrs().i("training") != 0) return export_batch_norm_training(c);
  c.add("BatchNormalization", {c.input(0), c.input(1), c.input(2), c.input(3), c.input(4)}, {c.output(0)})
      .attr("epsilon", c.attrs().f("eps"));
  for (size_t i = 1; i < 3; ++i)  // in inference the op's mean and var outputs are the running ones
    if (c.output_used(i)) c.add("Identity", {c.input(i + 2)}, {c.output(i)});
}

void layer_norm(ExportContext& c) {
  if (c.output_used(1) || c.output_used(2)) export_layer_norm_stats(c);
  const int64_t axes = c.attrs().i("axes");
  const std::vector<graph::Dim>& all = c.input_type(0).shape.dims();
  const Shape normalized = c.static_dims(graph::SymShape({all.end() - axes, all.end()}), "the normalized dims");
  const DType dtype = c.input_type(0).dtype;
  c.add("LayerNormalization", {c.input(0), c.constant(ones(normalized, dtype), "scale"),
                                c.constant(zeros(normalized, dtype), "bias")},
        {c.output(0)})
      .attr("axis", -axes)
      .attr("epsilon", c.attrs().f("eps"));
}

void adaptive_avg_pool(ExportContext& c) {
  const std::vector<int64_t> out = c.attrs().ints("output_size");
  if (out == std::vector<int64_t>{1, 1}) {
    c.add("GlobalAveragePool", {c.input(0)}, {c.output()});
    return;
  }
  const std::vector<int64_t> in = c.static_dims(c.input_type(0).shape, "the input");
  if (in[2] % out[0] || in[3] % out[1]) return export_adaptive_avg_pool(c);
  const std::vector<int64_t> k{in[2] / out[0], in[3] / out[1]};
  c.add("AveragePool", {c.input(0)}, {c.output()}).attr("kernel_shape", k).attr("strides", k);
}

// baton's pad pairs (low, high) run from the last dim; ONNX lists all begins, then ends.
void constant_pad(ExportContext& c) {
  const std::vector<int64_t> pairs = c.attrs().ints("pads");
  const size_t rank = c.input_type(0).shape.rank();
  std::vector<int64_t> pads(2 * rank, 0);
  for (size_t k = 0; 2 * k < pairs.size(); ++k) {
    pads[rank - 1 - k] = pairs[2 * k];
    pads[2 * rank - 1 - k] = pairs[2 * k + 1];
  }
  c.add("Pad", {c.input(0), c.ints(pads, "pads"), scalar(c, c.attrs().f("value"), c.input_type(0).dtype)},
        {c.output()});
}

void element_count(ExportContext& c) {
  const std::string shape = c.fresh("shape"), picked = c.fresh("sizes"), count = c.fresh("count");
  c.add("Shape", {c.input(0)}, {shape});
  std::vector<int64_t> dims = c.attrs().ints("dims");
  std::string sizes = shape;
  if (!dims.empty()) {
    c.add("Gather", {shape, c.ints(dims, "dims")}, {picked});
    sizes = picked;
  }
  c.add("ReduceProd", {sizes}, {count}).attr("keepdims", int64_t(0));
  c.add("Cast", {count}, {c.output()}).attr("to", int64_t(to_onnx_type(c.attrs().dtype("dtype"))));
}

}  // namespace

BATON_ONNX_EXPORTER("conv2d", conv);
BATON_ONNX_EXPORTER("linear", linear);
BATON_ONNX_EXPORTER("batch_norm", batch_norm);
BATON_ONNX_EXPORTER("layer_norm", layer_norm);
BATON_ONNX_EXPORTER("max_pool2d", [](ExportContext& c) { pool(c, "MaxPool"); });
BATON_ONNX_EXPORTER("max_pool2d_values", [](ExportContext& c) { pool(c, "MaxPool"); });
BATON_ONNX_EXPORTER("max_pool2d_window", [](ExportContext& c) { pool(c, "MaxPool"); });
BATON_ONNX_EXPORTER("avg_pool2d", [](ExportContext& c) { pool(c, "AveragePool"); });
BATON_ONNX_EXPORTER("adaptive_avg_pool2d", adaptive_avg_pool);
BATON_ONNX_EXPORTER("pad", constant_pad);
BATON_ONNX_EXPORTER("element_count", element_count);

BATON_ONNX_EXPORTER("view", [](ExportContext& c) {
  c.add("Reshape", {c.input(0), target_dims(c, c.attrs().ints("shape"), 0, true)}, {c.output()});
});
BATON_ONNX_EXPORTER("expand", [](ExportContext& c) {
  c.add("Expand", {c.input(0), target_dims(c, c.attrs().ints("shape"), 1, false)}, {c.output()});
});
// Reshape and Expand to a computed shape, and Range: sized by their values, their outputs
// are where a later dim that needs one of their symbols as a value reads it from.
BATON_ONNX_EXPORTER("reshape_to", [](ExportContext& c) {
  const std::string shape = cast_to(c, c.input(1), c.input_type(1).dtype, DType::i64);
  c.add("Reshape", {c.input(0), shape}, {c.output()}).attr("allowzero", int64_t(c.attrs().i("copy_zeros") == 0));
  c.writer().add_shape_source(c.output(), c.output_type().shape.raw());
});
BATON_ONNX_EXPORTER("expand_to", [](ExportContext& c) {
  c.add("Expand", {c.input(0), cast_to(c, c.input(1), c.input_type(1).dtype, DType::i64)}, {c.output()});
  c.writer().add_shape_source(c.output(), c.output_type().shape.raw());
});
// topk_by_values' k is TopK's K input (a 1-element int64 vector); its size is the symbol
// the outputs have along the axis.
BATON_ONNX_EXPORTER("topk_by_values", [](ExportContext& c) {
  const std::string k = cast_to(c, c.input(1), c.input_type(1).dtype, DType::i64);
  c.add("TopK", {c.input(0), step(c, "Reshape", {k, c.ints({1}, "shape")}).out}, {c.output(0), c.output(1)})
      .attr("axis", c.attrs().i("dim"))
      .attr("largest", c.attrs().i("largest"))
      .attr("sorted", int64_t(1));
  c.writer().add_shape_source(c.output(0), c.output_type(0).shape.raw());
});
BATON_ONNX_EXPORTER("topk", [](ExportContext& c) {
  c.add("TopK", {c.input(0), c.ints({c.attrs().i("k")}, "k")}, {c.output(0), c.output(1)})
      .attr("axis", c.attrs().i("dim"))
      .attr("largest", c.attrs().i("largest"))
      .attr("sorted", int64_t(1));
});
// unsqueeze_at and squeeze_at are Unsqueeze and Squeeze with their axes as an input.
BATON_ONNX_EXPORTER("unsqueeze_at", [](ExportContext& c) {
  c.add("Unsqueeze", {c.input(0), cast_to(c, c.input(1), c.input_type(1).dtype, DType::i64)}, {c.output()});
  c.writer().add_shape_source(c.output(), c.output_type().shape.raw());
});
BATON_ONNX_EXPORTER("squeeze_at", [](ExportContext& c) {
  c.add("Squeeze", {c.input(0), cast_to(c, c.input(1), c.input_type(1).dtype, DType::i64)}, {c.output()});
  c.writer().add_shape_source(c.output(), c.output_type().shape.raw());
});
BATON_ONNX_EXPORTER("range_of", [](ExportContext& c) {
  c.add("Range", {c.input(0), c.input(1), c.input(2)}, {c.output()});
  c.writer().add_shape_source(c.output(), c.output_type().shape.raw());
});
BATON_ONNX_EXPORTER("permute", [](ExportContext& c) {
  c.add("Transpose", {c.input(0)}, {c.output()}).attr("perm", c.attrs().ints("dims"));
});
BATON_ONNX_EXPORTER("squeeze", [](ExportContext& c) {
  if (c.output_type().shape.rank() == c.input_type(0).shape.rank())  // the dim was not 1: a no-op
    return void(c.add("Identity", {c.input(0)}, {c.output()}));
  c.add("Squeeze", {c.input(0), c.ints({c.attrs().i("dim")}, "axes")}, {c.output()});
});
BATON_ONNX_EXPORTER("unsqueeze", [](ExportContext& c) {
  c.add("Unsqueeze", {c.input(0), c.ints({c.attrs().i("dim")}, "axes")}, {c.output()});
});
BATON_ONNX_EXPORTER("slice", [](ExportContext& c) {
  const ops::Attrs& a = c.attrs();
  c.add("Slice", {c.input(0), c.dims({a.i("start")}, "starts"), c.dims({a.i("end")}, "ends"),
                  c.ints({a.i("dim")}, "axes"), c.ints({a.i("step")}, "steps")},
        {c.output()});
});
BATON_ONNX_EXPORTER("cat", [](ExportContext& c) {
  Names inputs;
  for (size_t i = 0; i < c.num_inputs(); ++i) inputs.push_back(c.input(i));
  c.add("Concat", inputs, {c.output()}).attr("axis", c.attrs().i("dim"));
});
BATON_ONNX_EXPORTER("cast", [](ExportContext& c) {
  c.add("Cast", {c.input(0)}, {c.output()}).attr("to", int64_t(to_onnx_type(c.attrs().dtype("dtype"))));
});
BATON_ONNX_EXPORTER("stop_gradient", [](ExportContext& c) { c.add("Identity", {c.input(0)}, {c.output()}); });
BATON_ONNX_EXPORTER("full_like", [](ExportContext& c) {
  const std::string shape = c.fresh("shape");
  c.add("Shape", {c.input(0)}, {shape});
  Tensor value = cast(scalar_tensor<double>(c.attrs().f("value")), c.attrs().dtype("dtype")).reshape({1});
  c.add("ConstantOfShape", {shape}, {c.output()}).attr("value", value);
});

BATON_ONNX_EXPORTER("softmax", [](ExportContext& c) {
  c.add("Softmax", {c.input(0)}, {c.output()}).attr("axis", c.attrs().i("dim"));
});
BATON_ONNX_EXPORTER("log_softmax", [](ExportContext& c) {
  c.add("LogSoftmax", {c.input(0)}, {c.output()}).attr("axis", c.attrs().i("dim"));
});
BATON_ONNX_EXPORTER("sum", [](ExportContext& c) { reduction(c, "ReduceSum", true); });
BATON_ONNX_EXPORTER("max", [](ExportContext& c) { reduction(c, "ReduceMax", false); });
BATON_ONNX_EXPORTER("min", [](ExportContext& c) { reduction(c, "ReduceMin", false); });
BATON_ONNX_EXPORTER("prod", [](ExportContext& c) { reduction(c, "ReduceProd", false); });
BATON_ONNX_EXPORTER("logsumexp", [](ExportContext& c) { reduction(c, "ReduceLogSumExp", false); });
BATON_ONNX_EXPORTER("argmax", [](ExportContext& c) {
  c.add("ArgMax", {c.input(0)}, {c.output()}).attr("axis", c.attrs().ints("dims").at(0)).attr("keepdims", c.attrs().i("keepdim"));
});
BATON_ONNX_EXPORTER("argmin", [](ExportContext& c) {
  c.add("ArgMin", {c.input(0)}, {c.output()}).attr("axis", c.attrs().ints("dims").at(0)).attr("keepdims", c.attrs().i("keepdim"));
});

BATON_ONNX_EXPORTER("gather", [](ExportContext& c) {
  c.add("GatherElements", {c.input(0), c.input(1)}, {c.output()}).attr("axis", c.attrs().i("dim"));
});
BATON_ONNX_EXPORTER("index_select", [](ExportContext& c) {
  c.add("Gather", {c.input(0), c.input(1)}, {c.output()}).attr("axis", c.attrs().i("dim"));
});
BATON_ONNX_EXPORTER("embedding", [](ExportContext& c) {
  c.add("Gather", {c.input(0), c.input(1)}, {c.output()}).attr("axis", int64_t(0));
});

BATON_ONNX_EXPORTER("leaky_relu", [](ExportContext& c) {
  // PRelu with a slope of the input's dtype: LeakyRelu's float attribute would round it.
  c.add("PRelu", {c.input(0), scalar(c, c.attrs().f("negative_slope"), c.input_type(0).dtype)}, {c.output()});
});
BATON_ONNX_EXPORTER("elu", [](ExportContext& c) {
  c.add("Elu", {c.input(0)}, {c.output()}).attr("alpha", c.attrs().f("alpha"));
});
BATON_ONNX_EXPORTER("clamp", [](ExportContext& c) {
  const DType t = c.input_type(0).dtype;
  c.add("Clip", {c.input(0), scalar(c, c.attrs().f("min"), t), scalar(c, c.attrs().f("max"), t)}, {c.output()});
});
BATON_ONNX_EXPORTER("rsqrt", [](ExportContext& c) {
  const std::string root = c.fresh("sqrt");
  c.add("Sqrt", {c.input(0)}, {root});
  c.add("Reciprocal", {root}, {c.output()});
});
BATON_ONNX_EXPORTER("silu", [](ExportContext& c) {
  const std::string s = c.fresh("sigmoid");
  c.add("Sigmoid", {c.input(0)}, {s});
  c.add("Mul", {c.input(0), s}, {c.output()});
});
// Gelu joins the default domain only in opset 20: 0.5 x (1 + erf(x / sqrt(2))).
BATON_ONNX_EXPORTER("gelu", [](ExportContext& c) {
  const DType t = c.input_type(0).dtype;
  const std::string scaled = c.fresh("scaled"), e = c.fresh("erf"), one_plus = c.fresh("one_plus"), half = c.fresh("half");
  c.add("Mul", {c.input(0), scalar(c, 1.0 / std::sqrt(2.0), t)}, {scaled});
  c.add("Erf", {scaled}, {e});
  c.add("Add", {e, scalar(c, 1.0, t)}, {one_plus});
  c.add("Mul", {c.input(0), scalar(c, 0.5, t)}, {half});
  c.add("Mul", {half, one_plus}, {c.output()});
});
// The tanh form: 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))).
BATON_ONNX_EXPORTER("gelu_tanh", [](ExportContext& c) {
  const DType t = c.input_type(0).dtype;
  const std::string& x = c.input(0);
  const std::string square = c.fresh("square"), cube = c.fresh("cube"), cubic = c.fresh("cubic"),
                    inner = c.fresh("inner"), u = c.fresh("u"), th = c.fresh("tanh"), one_plus = c.fresh("one_plus"),
                    half = c.fresh("half");
  c.add("Mul", {x, x}, {square});
  c.add("Mul", {square, x}, {cube});
  c.add("Mul", {cube, scalar(c, 0.044715, t)}, {cubic});
  c.add("Add", {x, cubic}, {inner});
  c.add("Mul", {inner, scalar(c, std::sqrt(2.0 / std::numbers::pi), t)}, {u});
  c.add("Tanh", {u}, {th});
  c.add("Add", {th, scalar(c, 1.0, t)}, {one_plus});
  c.add("Mul", {x, scalar(c, 0.5, t)}, {half});
  c.add("Mul", {half, one_plus}, {c.output()});
});
// The activations' gradient ops (g, y or x), written as their formulas.
BATON_ONNX_EXPORTER("sigmoid_backward", [](ExportContext& c) {  // g y (1 - y)
  const std::string &g = c.input(0), &y = c.input(1);
  const std::string one_minus = step(c, "Sub", {scalar(c, 1.0, c.input_type(1).dtype), y}).out;
  c.add("Mul", {g, step(c, "Mul", {y, one_minus}).out}, {c.output()});
});
BATON_ONNX_EXPORTER("tanh_backward", [](ExportContext& c) {  // g (1 - y^2)
  const std::string &g = c.input(0), &y = c.input(1);
  const std::string square = step(c, "Mul", {y, y}).out;
  c.add("Mul", {g, step(c, "Sub", {scalar(c, 1.0, c.input_type(1).dtype), square}).out}, {c.output()});
});
BATON_ONNX_EXPORTER("gelu_backward", [](ExportContext& c) {  // g (Phi(x) + x phi(x))
  const DType t = c.input_type(1).dtype;
  const std::string &g = c.input(0), &x = c.input(1);
  const std::string erf = step(c, "Erf", {step(c, "Mul", {x, scalar(c, std::numbers::sqrt2 / 2, t)}).out}).out;
  const std::string cdf = step(c, "Mul", {step(c, "Add", {erf, scalar(c, 1.0, t)}).out, scalar(c, 0.5, t)}).out;
  const std::string exponent = step(c, "Mul", {step(c, "Mul", {x, x}).out, scalar(c, -0.5, t)}).out;
  const std::string pdf =
      step(c, "Mul", {step(c, "Exp", {exponent}).out, scalar(c, std::numbers::inv_sqrtpi / std::numbers::sqrt2, t)}).out;
  c.add("Mul", {g, step(c, "Add", {cdf, step(c, "Mul", {x, pdf}).out}).out}, {c.output()});
});
// g (0.5 (1 + t) + 0.5 x (1 - t^2) u'), t = tanh(k (x + c x^3)), u' = k (1 + 3 c x^2).
BATON_ONNX_EXPORTER("gelu_tanh_backward", [](ExportContext& c) {
  const DType t = c.input_type(1).dtype;
  const std::string &g = c.input(0), &x = c.input(1);
  const double k = std::sqrt(2.0 / std::numbers::pi), cubic = 0.044715;
  auto times = [&](const std::string& a, const std::string& b) { return step(c, "Mul", {a, b}).out; };
  auto plus = [&](const std::string& a, const std::string& b) { return step(c, "Add", {a, b}).out; };
  const std::string x2 = times(x, x), one = scalar(c, 1.0, t), half = scalar(c, 0.5, t);
  const std::string inner = times(plus(x, times(times(x2, x), scalar(c, cubic, t))), scalar(c, k, t));
  const std::string th = step(c, "Tanh", {inner}).out;
  const std::string du = times(plus(times(x2, scalar(c, 3 * cubic, t)), one), scalar(c, k, t));
  const std::string slope = times(times(times(x, step(c, "Sub", {one, times(th, th)}).out), du), half);
  c.add("Mul", {g, plus(times(plus(th, one), half), slope)}, {c.output()});
});
BATON_ONNX_EXPORTER("silu_backward", [](ExportContext& c) {  // g s (1 + x (1 - s)), s = sigmoid(x)
  const DType t = c.input_type(1).dtype;
  const std::string &g = c.input(0), &x = c.input(1), one = scalar(c, 1.0, t);
  const std::string s = step(c, "Sigmoid", {x}).out;
  const std::string tail = step(c, "Mul", {x, step(c, "Sub", {one, s}).out}).out;
  c.add("Mul", {g, step(c, "Mul", {s, step(c, "Add", {one, tail}).out}).out}, {c.output()});
});
BATON_ONNX_EXPORTER("ne", [](ExportContext& c) {
  const std::string equal = c.fresh("equal");
  c.add("Equal", {c.input(0), c.input(1)}, {equal});
  c.add("Not", {equal}, {c.output()});
});

}  // namespace baton::onnx::detail
