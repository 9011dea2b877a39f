// baton's dft written as ONNX DFT (opset 17): dim, inverse and onesided become the axis,
// inverse and onesided attributes, the transform length the dft_length input. (stft and
// the windows are composites and constants: they export as the ops they are made of.)
#include "baton/ops.h"
#include "io/onnx/exporter.h"

namespace baton::onnx::detail {

BATON_ONNX_EXPORTER("dft", [](ExportContext& c) {
  const ops::Attrs& a = c.attrs();
  const std::string length = c.constant(scalar_tensor<int64_t>(a.i("length")), "dft_length");
  c.add("DFT", {c.input(0), length}, {c.output()})
      .attr("axis", a.i("dim"))
      .attr("inverse", a.i("inverse"))
      .attr("onesided", a.i("onesided"));
});

}  // namespace baton::onnx::detail
