// ONNX Mod and BitShift.
//
// Mod: fmod = 1 is C's fmod (the dividend's sign; baton::fmod), fmod = 0 Python's %
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

// BitShift {direction}: on unsigned types, held in i32 or i64 (storage_types.cpp rounds a
// left shift's result back into the model's type).
BATON_ONNX_IMPORTER("BitShift", [](NodeContext& c) -> Outputs {
  const std::string direction = c.attr_string("direction", "");
  if (direction != "LEFT" && direction != "RIGHT") c.fail(str("direction must be LEFT or RIGHT, not '", direction, "'"));
  return {direction == "LEFT" ? shift_left(c.input(0), c.input(1)) : shift_right(c.input(0), c.input(1))};
});

}  // namespace baton::onnx::detail
