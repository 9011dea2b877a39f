// baton's math ops with attributes written as ONNX (opset 17): cumsum (CumSum), triangle
// (Trilu), fmod and remainder (Mod; a float remainder is fmod moved to the divisor's sign),
// shift_left/shift_right (BitShift on the bits as unsigned), logical_not of a non-bool
// tensor (Not of its truth), relu_backward (Where on the output's sign), sum_to_shape_of
// (ReduceSum over axes computed from the two shapes), sum_over (ReduceSum, its axes fed),
// softmax_backward, log_softmax_backward and layer_norm_backward (their formulas).
#include "io/onnx/export_compose.h"

namespace baton::onnx::detail {
namespace {

// CumSum needs an axis, which a scalar lacks: it is summed as a 1-element vector. An axis
// in a tensor is CumSum's axis input.
void cumsum_export(ExportContext& c) {
  const bool scalar = c.input_type(0).shape.rank() == 0;
  if (!scalar && c.num_inputs() > 1) {
    c.add("CumSum", {c.input(0), cast_to(c, c.input(1), c.input_type(1).dtype, DType::i64)}, {c.output()})
        .attr("exclusive", c.attrs().i("exclusive"))
        .attr("reverse", c.attrs().i("reverse"));
    return;
  }
  const std::string x = scalar ? step(c, "Reshape", {c.input(0), c.ints({1}, "shape")}).out : c.input(0);
  const std::string summed = scalar ? c.fresh("cumsum") : c.output();
  c.add("CumSum", {x, c.constant(scalar_tensor<int64_t>(scalar ? 0 : c.attrs().i("dim")), "axis")}, {summed})
      .attr("exclusive", c.attrs().i("exclusive"))
      .attr("reverse", c.attrs().i("reverse"));
  if (scalar) c.add("Reshape", {summed, c.ints({}, "shape")}, {c.output()});
}

void triangle_export(ExportContext& c) {
  c.add("Trilu", {c.input(0), c.constant(scalar_tensor<int64_t>(c.attrs().i("k")), "k")}, {c.output()})
      .attr("upper", c.attrs().i("upper"));
}

// Python's remainder: ONNX's Mod with fmod=0 for integers; for floats (where ONNX allows
// only fmod=1) the truncated remainder r, plus the divisor where r is not 0 and its sign
// differs from the divisor's.
void remainder_export(ExportContext& c) {
  if (!is_floating(c.input_type(0).dtype)) {
    c.add("Mod", {c.input(0), c.input(1)}, {c.output()}).attr("fmod", int64_t(0));
    return;
  }
  const std::string b = c.input(1), zero = scalar(c, 0, c.input_type(0).dtype);
  Step r = step(c, "Mod", {c.input(0), b});
  r.node.attr("fmod", int64_t(1));
  const std::string r_negative = step(c, "Less", {r.out, zero}).out, b_negative = step(c, "Less", {b, zero}).out;
  const std::string signs_differ = step(c, "Xor", {r_negative, b_negative}).out;
  const std::string nonzero = step(c, "Not", {step(c, "Equal", {r.out, zero}).out}).out;
  const std::string shift = step(c, "And", {nonzero, signs_differ}).out;
  c.add("Where", {shift, step(c, "Add", {r.out, b}).out, r.out}, {c.output()});
}

// BitShift takes unsigned types only: the i32 or i64 bits go through u32 or u64.
void shift_export(ExportContext& c, const char* direction) {
  const DType t = c.output_type().dtype, bits = t == DType::i32 ? DType::u32 : DType::u64;
  if (t != DType::i32 && t != DType::i64) c.fail(str("shifts ", t, " values; ONNX's BitShift takes u32 or u64 bits"));
  Step shifted = step(c, "BitShift", {cast_to(c, c.input(0), t, bits), cast_to(c, c.input(1), t, bits)});
  shifted.node.attr("direction", std::string(direction));
  c.add("Cast", {shifted.out}, {c.output()}).attr("to", onnx_type(t));
}

// sum_to_shape_of(g, like): g summed over the dims where like, padded in front with 1s to
// g's rank, has a 1 that g has not; the axes come from the shapes when the model runs.
void sum_to_shape_of_export(ExportContext& c) {
  const int64_t lead = int64_t(c.input_type(0).shape.rank()) - int64_t(c.input_type(1).shape.rank());
  const std::string one = c.constant(scalar_tensor<int64_t>(1), "one"), like_shape = step(c, "Shape", {c.input(1)}).out;
  Step padded = step(c, "Concat", {c.ints(std::vector<int64_t>(size_t(lead), 1), "ones"), like_shape});
  padded.node.attr("axis", int64_t(0));
  const std::string like_one = step(c, "Equal", {padded.out, one}).out;
  const std::string g_one = step(c, "Equal", {step(c, "Shape", {c.input(0)}).out, one}).out;
  const std::string widened = step(c, "And", {like_one, step(c, "Not", {g_one}).out}).out;
  const std::string axes = step(c, "Reshape", {step(c, "NonZero", {widened}).out, c.ints({-1}, "shape")}).out;
  Step summed = step(c, "ReduceSum", {c.input(0), axes});
  summed.node.attr("keepdims", int64_t(1)).attr("noop_with_empty_axes", int64_t(1));
  c.add("Reshape", {summed.out, like_shape}, {c.output()});
}

// The sum of t over dim, the dim kept.
std::string sum_keeping(ExportContext& c, const std::string& t) {
  Step summed = step(c, "ReduceSum", {t, c.ints({c.attrs().i("dim")}, "axes")});
  summed.node.attr("keepdims", int64_t(1));
  return summed.out;
}

}  // namespace

BATON_ONNX_EXPORTER("sum_to_shape_of", sum_to_shape_of_export);
BATON_ONNX_EXPORTER("cumsum", cumsum_export);
// sum_over is ReduceSum with its axes as an input (integers summed as int64, as baton
// sums them); its output's dims are symbols it names.
BATON_ONNX_EXPORTER("sum_over", [](ExportContext& c) {
  const DType t = c.input_type(0).dtype;
  const std::string x = is_floating(t) ? c.input(0) : cast_to(c, c.input(0), t, DType::i64);
  c.add("ReduceSum", {x, cast_to(c, c.input(1), c.input_type(1).dtype, DType::i64)}, {c.output()})
      .attr("keepdims", c.attrs().i("keepdim"));
  c.writer().add_shape_source(c.output(), c.output_type().shape.raw());
});
BATON_ONNX_EXPORTER("triangle", triangle_export);
BATON_ONNX_EXPORTER("remainder", remainder_export);
BATON_ONNX_EXPORTER("fmod", [](ExportContext& c) {
  c.add("Mod", {c.input(0), c.input(1)}, {c.output()}).attr("fmod", int64_t(1));
});
BATON_ONNX_EXPORTER("shift_left", [](ExportContext& c) { shift_export(c, "LEFT"); });
BATON_ONNX_EXPORTER("shift_right", [](ExportContext& c) { shift_export(c, "RIGHT"); });
BATON_ONNX_EXPORTER("logical_not", [](ExportContext& c) {
  c.add("Not", {cast_to(c, c.input(0), c.input_type(0).dtype, DType::b8)}, {c.output()});
});
// relu_backward(g, y): g where the relu's output y is positive, else 0.
BATON_ONNX_EXPORTER("relu_backward", [](ExportContext& c) {
  const std::string zero = scalar(c, 0, c.input_type(0).dtype);
  c.add("Where", {step(c, "Greater", {c.input(1), zero}).out, c.input(0), zero}, {c.output()});
});

// softmax_backward(g, y): y * (g - sum(g * y)) over dim.
BATON_ONNX_EXPORTER("softmax_backward", [](ExportContext& c) {
  const std::string s = sum_keeping(c, step(c, "Mul", {c.input(0), c.input(1)}).out);
  c.add("Mul", {c.input(1), step(c, "Sub", {c.input(0), s}).out}, {c.output()});
});
// log_softmax_backward(g, y): g - exp(y) * sum(g) over dim.
BATON_ONNX_EXPORTER("log_softmax_backward", [](ExportContext& c) {
  const std::string s = sum_keeping(c, c.input(0));
  c.add("Sub", {c.input(0), step(c, "Mul", {step(c, "Exp", {c.input(1)}).out, s}).out}, {c.output()});
});
// layer_norm_backward(g, y, rstd): rstd * (g - mean(g) - y * mean(g * y)) over the last
// `axes` dims.
BATON_ONNX_EXPORTER("layer_norm_backward", [](ExportContext& c) {
  std::vector<int64_t> axes;
  for (int64_t k = c.attrs().i("axes"); k >= 1; --k) axes.push_back(-k);
  auto mean_of = [&](const std::string& t) {
    Step m = step(c, "ReduceMean", {t});
    m.node.attr("axes", axes).attr("keepdims", int64_t(1));
    return m.out;
  };
  const std::string &g = c.input(0), &y = c.input(1);
  const std::string centered = step(c, "Sub", {g, mean_of(g)}).out;
  const std::string along_y = step(c, "Mul", {y, mean_of(step(c, "Mul", {g, y}).out)}).out;
  c.add("Mul", {c.input(2), step(c, "Sub", {centered, along_y}).out}, {c.output()});
});

}  // namespace baton::onnx::detail
