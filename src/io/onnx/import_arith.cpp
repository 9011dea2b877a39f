// ONNX Mod: fmod = 1 is C's fmod (the dividend's sign; baton::fmod), fmod = 0 Python's %
// (the divisor's sign; baton::remainder), which ONNX allows for integers only.
#include "baton/ops.h"
#include "io/onnx/importer.h"

namespace baton::onnx::detail {

BATON_ONNX_IMPORTER("Mod", [](NodeContext& c) -> Outputs {
  const Tensor &a = c.input(0), &b = c.input(1);
  if (a.dtype() != b.dtype()) c.fail(str("inputs must share a dtype, got ", a.dtype(), " and ", b.dtype()));
  const bool c_fmod = c.attr_int("fmod", 0) != 0;
  if (is_floating(a.dtype()) && !c_fmod) c.fail("fmod must be 1 for floating-point inputs");
  return {c_fmod ? fmod(a, b) : remainder(a, b)};
});

}  // namespace baton::onnx::detail
