// baton's dft written as ONNX DFT (opset 17): dim, inverse and onesided become the axis,
// inverse and onesided attributes, the transform length the dft_length input. ONNX 17
// refuses inverse and onesided together, so an inverse real FFT first rebuilds the whole
// Hermitian spectrum (X[L - k] = conj(X[k])), then takes the real part of its inverse.
// (stft and the windows are composites and constants: they export as the ops they are
// made of.)
#include "io/onnx/export_compose.h"

namespace baton::onnx::detail {
namespace {

std::string slice_axis(ExportContext& c, const std::string& x, int64_t axis, int64_t begin, int64_t end) {
  return step(c, "Slice", {x, c.ints({begin}, "starts"), c.ints({end}, "ends"), c.ints({axis}, "axes")}).out;
}

// x padded with zeros at the end of `axis` by `extra`.
std::string pad_end(ExportContext& c, const std::string& x, size_t rank, int64_t axis, int64_t extra) {
  std::vector<int64_t> pads(2 * rank, 0);
  pads[rank + size_t(axis)] = extra;
  return step(c, "Pad", {x, c.ints(pads, "pads")}).out;
}

// The length-L spectrum whose first L / 2 + 1 bins are x's (cut or zero-padded), as
// complex numbers.
std::string hermitian_spectrum(ExportContext& c, int64_t dim, int64_t length) {
  const std::vector<int64_t> in = c.static_dims(c.input_type(0).shape, "the input");
  const size_t rank = in.size();
  const int64_t half = length / 2 + 1;
  std::string x = in.back() == 1 ? pad_end(c, c.input(0), rank, int64_t(rank) - 1, 1) : c.input(0);
  x = in[size_t(dim)] >= half ? slice_axis(c, x, dim, 0, half) : pad_end(c, x, rank, dim, half - in[size_t(dim)]);
  if (length - half == 0) return x;
  std::vector<int64_t> mirrored;  // bins half .. L - 1 read X[L - k]
  for (int64_t k = half; k < length; ++k) mirrored.push_back(length - k);
  Step gathered = step(c, "Gather", {x, c.ints(mirrored, "mirrored")});
  gathered.node.attr("axis", dim);
  const DType t = c.input_type(0).dtype;
  const std::string conjugate = step(c, "Mul", {gathered.out, c.constant(cast(tensor<double>({1, -1}), t), "conj")}).out;
  Step full = step(c, "Concat", {x, conjugate});
  full.node.attr("axis", dim);
  return full.out;
}

void inverse_real_dft(ExportContext& c) {
  const int64_t rank = int64_t(c.input_type(0).shape.rank());
  const int64_t dim = normalized_dim(c.attrs().i("dim"), size_t(rank));
  const int64_t length = c.attrs().i("length");
  Step inverse = step(c, "DFT", {hermitian_spectrum(c, dim, length)});
  inverse.node.attr("axis", dim).attr("inverse", int64_t(1));
  c.add("Slice", {inverse.out, c.ints({0}, "starts"), c.ints({1}, "ends"), c.ints({rank - 1}, "axes")}, {c.output()});
}

}  // namespace

BATON_ONNX_EXPORTER("dft", [](ExportContext& c) {
  const ops::Attrs& a = c.attrs();
  if (a.i("inverse") != 0 && a.i("onesided") != 0) return inverse_real_dft(c);
  const std::string length = c.constant(scalar_tensor<int64_t>(a.i("length")), "dft_length");
  c.add("DFT", {c.input(0), length}, {c.output()})
      .attr("axis", a.i("dim"))
      .attr("inverse", a.i("inverse"))
      .attr("onesided", a.i("onesided"));
});

}  // namespace baton::onnx::detail
