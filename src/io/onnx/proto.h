// The ONNX protobuf messages (Debian's libonnx-dev) and their conversion to baton values:
// parsing a model's bytes with limits, TensorProto <-> Tensor, ONNX element types.
// Only io/onnx/ includes this header: the generated protobuf headers are heavy.
#pragma once
#include <onnx/onnx_pb.h>
#include <onnx/onnx-data_pb.h>

#include <optional>
#include <string>
#include <string_view>

#include "baton/onnx.h"
#include "baton/tensor.h"

namespace baton::onnx::detail {

// Parses a model. Throws IOError naming `name` for bytes that are not a ModelProto.
::onnx::ModelProto parse_model(std::string_view bytes, const std::string& name);

// The baton dtype of an ONNX element type (TensorProto::DataType), nullopt when baton has
// no such tensors (string, complex...).
std::optional<DType> to_dtype(int32_t onnx_type);
int32_t to_onnx_type(DType dtype);
// "FLOAT", "UINT8"...: how messages name an ONNX element type.
std::string onnx_type_name(int32_t onnx_type);

// The tensor a TensorProto holds (raw_data or the typed fields). `what` names it in
// errors ("initializer 'conv1.weight'"). Throws DTypeError for an element type baton
// lacks and IOError for inconsistent sizes, negative dims or external data.
Tensor to_tensor(const ::onnx::TensorProto& proto, const std::string& what);
// A SequenceProto's tensors, or what an OptionalProto holds (a tensor, a sequence, none).
Value to_value(const ::onnx::SequenceProto& proto, const std::string& what);
Value to_value(const ::onnx::OptionalProto& proto, const std::string& what);
// Parses the file at `path` into `message`: IOError from `op` naming the file when it cannot
// be read or is not such a message.
void read_message(const std::string& path, const char* op, ::google::protobuf::MessageLite& message, SourceLoc loc);
// A test-data file holding a value of `info`'s kind: an OptionalProto for an optional, a
// SequenceProto for a sequence (IOError when it is not one).
Value load_value(const std::string& path, const ValueInfo& info, SourceLoc loc);
// The TensorProto of a concrete tensor (raw_data, little-endian).
void to_proto(const Tensor& t, ::onnx::TensorProto& proto);

}  // namespace baton::onnx::detail
