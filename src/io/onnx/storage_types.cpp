// Element types baton stores but does not compute in (u8, i8, i16, u16, u32, u64, f16,
// bf16; dtype.h): the importer holds such values in their compute dtype (u8 in i32, f16 in
// f32) and remembers the storage dtype by ONNX name. After each node it decides which
// outputs are still of a storage dtype (an Add of two u8 tensors is u8) and rounds those
// back into it (cast to u8 and back), so that 250 + 10 in u8 is 4 as in ONNX Runtime and
// f16 arithmetic rounds to f16 after every op. Ops that only move or select values need
// no rounding. The model's outputs leave in their storage dtype (importer.cpp).
#include <algorithm>
#include <array>
#include <limits>

#include "io/onnx/importer.h"

namespace baton::onnx::detail {
namespace {

// Ops whose outputs have element types of their own (indices, shapes, counts, an explicit
// target type), never their inputs'.
constexpr std::array kOwnTypes = {
    "ArgMax", "ArgMin", "Bernoulli", "Cast", "CastLike", "ConvInteger", "DequantizeLinear",
    "DynamicQuantizeLinear", "EyeLike", "MatMulInteger", "Multinomial", "NonMaxSuppression", "NonZero",
    "QLinearConv", "QLinearMatMul", "QuantizeLinear", "RandomNormalLike", "RandomUniformLike", "Shape", "Size",
    "TfIdfVectorizer",
};

// Ops that only move, select or compare-and-pick their inputs' values.
constexpr std::array kKeepValues = {
    "Clip", "Compress", "Concat", "DepthToSpace", "Dropout", "Expand", "Flatten", "Gather", "GatherElements",
    "GatherND", "Identity", "If", "Loop", "Max", "MaxPool", "Min", "OneHot", "Pad", "ReduceMax", "ReduceMin",
    "Relu", "Reshape", "ReverseSequence", "Scatter", "ScatterElements", "ScatterND", "Slice", "SpaceToDepth",
    "Split", "Squeeze", "Tile", "TopK", "Transpose", "Trilu", "Unsqueeze", "Where",
};

bool listed(const auto& list, std::string_view op_type) {
  return std::find(list.begin(), list.end(), op_type) != list.end();
}

// The input whose element type the outputs follow when it differs from input 0's.
size_t typed_input(std::string_view op_type) {
  if (op_type == "Where") return 1;
  if (op_type == "OneHot") return 2;
  return 0;
}

}  // namespace

bool keeps_values(std::string_view op_type) { return listed(kKeepValues, op_type); }

void check_fits_compute_dtype(const Tensor& t, const std::string& what, SourceLoc loc) {
  if (t.dtype() != DType::u64 || t.is_symbolic()) return;
  for (uint64_t v : t.to_vector<uint64_t>())
    if (v > uint64_t(std::numeric_limits<int64_t>::max()))
      throw ValueError("onnx", str(what, " holds the u64 value ", v, "; baton computes u64 in i64, which holds "
                                   "values below 2^63 only"), loc);
}

std::optional<DType> implied_storage(const NodeContext& c, size_t i, const Tensor& out) {
  const std::string& op = c.node.op_type();
  if (!c.node.domain().empty() && c.node.domain() != "ai.onnx") return std::nullopt;
  if (listed(kOwnTypes, op)) return std::nullopt;
  if (i > 0 && op != "Split") return std::nullopt;  // second outputs are indices, masks, states
  auto storage_of = [&](size_t k) -> std::optional<DType> {
    if (!c.has_input(k)) return std::nullopt;
    const DType t = c.onnx_dtype(k);
    if (held_widened(t) && compute_dtype(t) == out.dtype()) return t;
    return std::nullopt;
  };
  const size_t first = typed_input(op);
  if (first > 0) return storage_of(first);
  for (size_t k = 0; k < c.num_inputs(); ++k)
    if (std::optional<DType> t = storage_of(k)) return t;
  return std::nullopt;
}

}  // namespace baton::onnx::detail
