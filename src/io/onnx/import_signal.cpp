// ONNX signal-processing ops: DFT (opset 17 with its axis attribute, opset 20 with an axis
// input), STFT, the HannWindow, HammingWindow and BlackmanWindow generators and
// MelWeightMatrix. Lengths, steps and window sizes must be known when the model loads.
#include "baton/ops.h"
#include "io/onnx/importer.h"

namespace baton::onnx::detail {
namespace {

// A known integer input holding one value.
int64_t one_int(const NodeContext& c, size_t i, const char* what) {
  const std::vector<int64_t> v = c.ints_input(i);
  if (v.size() != 1) c.fail(str(what, " (input ", i, ") must hold one integer, not ", v.size(), " values"));
  return v[0];
}

// The output_datatype attribute (default FLOAT) as a baton dtype.
DType output_dtype(const NodeContext& c) {
  const int64_t type = c.attr_int("output_datatype", 1);
  std::optional<DType> dtype = to_dtype(int32_t(type));
  if (!dtype) c.fail(str("output_datatype ", onnx_type_name(int32_t(type)), " is not a type baton has"));
  return *dtype;
}

using WindowFn = Tensor (*)(int64_t, bool, DType, SourceLoc);

ImportFn window_importer(WindowFn make) {
  return [make](NodeContext& c) -> Outputs {
    const int64_t size = one_int(c, 0, "size");
    if (size < 0) c.fail(str("the window size must not be negative, got ", size));
    return {make(size, c.attr_int("periodic", 1) != 0, output_dtype(c), c.importer.loc())};
  };
}

}  // namespace

// DFT(input, dft_length?) {axis = 1, inverse = 0, onesided = 0}; from opset 20
// DFT(input, dft_length?, axis? = -2) {inverse, onesided}.
BATON_ONNX_IMPORTER("DFT", [](NodeContext& c) -> Outputs {
  const Tensor& x = c.input(0);
  if (x.dim() < 2) c.fail(str("the input must be [batch, signal dims..., 1 or 2], not shape ", x.shape()));
  const int64_t raw_axis = c.opset >= 20 ? (c.has_input(2) ? one_int(c, 2, "axis") : -2) : c.attr_int("axis", 1);
  const int64_t axis = normalize_axis(c, raw_axis, x.dim());
  if (axis == x.dim() - 1) c.fail(str("axis ", raw_axis, " is the last dim (the complex parts) of ", x.shape()));
  const bool inverse = c.attr_int("inverse", 0) != 0, onesided = c.attr_int("onesided", 0) != 0;
  int64_t length = 0;
  if (c.has_input(1)) {
    length = one_int(c, 1, "dft_length");
  } else {
    const int64_t n = c.static_dim(x, axis, "the transformed dim (or a dft_length input)");
    length = inverse && onesided ? 2 * (n - 1) : n;
  }
  if (length < 1) c.fail(str("the transform length must be positive, got ", length));
  return {dft(x, axis, length, inverse, onesided)};
});

// STFT(signal, frame_step, window?, frame_length?) {onesided = 1}.
BATON_ONNX_IMPORTER("STFT", [](NodeContext& c) -> Outputs {
  const int64_t step = one_int(c, 1, "frame_step");
  const Tensor window = c.has_input(2) ? c.input(2) : Tensor();
  const int64_t frame_length = c.has_input(3) ? one_int(c, 3, "frame_length") : -1;
  if (frame_length < -1 || frame_length == 0) c.fail(str("frame_length must be positive, got ", frame_length));
  return {stft(c.input(0), step, window, frame_length, c.attr_int("onesided", 1) != 0)};
});

BATON_ONNX_IMPORTER("HannWindow", window_importer(&hann_window));
BATON_ONNX_IMPORTER("HammingWindow", window_importer(&hamming_window));
BATON_ONNX_IMPORTER("BlackmanWindow", window_importer(&blackman_window));

// MelWeightMatrix(num_mel_bins, dft_length, sample_rate, lower_edge_hertz,
// upper_edge_hertz) {output_datatype = FLOAT}.
BATON_ONNX_IMPORTER("MelWeightMatrix", [](NodeContext& c) -> Outputs {
  return {mel_weight_matrix(one_int(c, 0, "num_mel_bins"), one_int(c, 1, "dft_length"), one_int(c, 2, "sample_rate"),
                            c.scalar_input(3), c.scalar_input(4), output_dtype(c), c.importer.loc())};
});

}  // namespace baton::onnx::detail
