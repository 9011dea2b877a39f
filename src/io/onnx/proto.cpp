#include "io/onnx/proto.h"

#include "core/atomic_file.h"

#include <climits>
#include <filesystem>
#include <cstring>
#include <limits>
#include <type_traits>

namespace baton::onnx::detail {
namespace {

using ::onnx::TensorProto;

[[noreturn]] void corrupt(const std::string& what, const std::string& why) {
  throw IOError("onnx", str(what, ": ", why), SourceLoc::current());
}

// numel of dims, refusing negative dims and products that overflow.
int64_t checked_numel(const TensorProto& p, const std::string& what) {
  int64_t n = 1;
  for (int64_t d : p.dims()) {
    if (d < 0) corrupt(what, str("has a negative dim (", d, ")"));
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / d) corrupt(what, "has more elements than int64 counts");
    n *= d;
  }
  return n;
}

}  // namespace

::onnx::ModelProto parse_model(std::string_view bytes, const std::string& name) {
  if (bytes.size() > size_t(INT_MAX))
    throw IOError("onnx", str(name, ": ", bytes.size(), " bytes; protobuf reads at most 2 GiB"), SourceLoc::current());
  ::onnx::ModelProto model;
  // An empty message parses too: a model must at least hold a graph.
  if (!model.ParseFromArray(bytes.data(), int(bytes.size())) || !model.has_graph())
    throw IOError("onnx", str(name, ": not an ONNX model (", bytes.empty() ? "an empty file" : "no ModelProto with a graph", ")"),
                  SourceLoc::current());
  return model;
}

std::optional<DType> to_dtype(int32_t t) {
  switch (t) {
    case TensorProto::FLOAT: return DType::f32;
    case TensorProto::DOUBLE: return DType::f64;
    case TensorProto::INT32: return DType::i32;
    case TensorProto::INT64: return DType::i64;
    case TensorProto::BOOL: return DType::b8;
    case TensorProto::UINT8: return DType::u8;
    case TensorProto::INT8: return DType::i8;
    case TensorProto::INT16: return DType::i16;
    case TensorProto::UINT16: return DType::u16;
    case TensorProto::UINT32: return DType::u32;
    case TensorProto::UINT64: return DType::u64;
    case TensorProto::FLOAT16: return DType::f16;
    case TensorProto::BFLOAT16: return DType::bf16;
    case TensorProto::STRING: return DType::string;
    default: return std::nullopt;
  }
}

int32_t to_onnx_type(DType dtype) {
  switch (dtype) {
    case DType::f32: return TensorProto::FLOAT;
    case DType::f64: return TensorProto::DOUBLE;
    case DType::i32: return TensorProto::INT32;
    case DType::i64: return TensorProto::INT64;
    case DType::b8: return TensorProto::BOOL;
    case DType::u8: return TensorProto::UINT8;
    case DType::i8: return TensorProto::INT8;
    case DType::i16: return TensorProto::INT16;
    case DType::u16: return TensorProto::UINT16;
    case DType::u32: return TensorProto::UINT32;
    case DType::u64: return TensorProto::UINT64;
    case DType::f16: return TensorProto::FLOAT16;
    case DType::bf16: return TensorProto::BFLOAT16;
    case DType::string: return TensorProto::STRING;
  }
  return TensorProto::UNDEFINED;
}

std::string onnx_type_name(int32_t t) {
  if (TensorProto::DataType_IsValid(t)) return TensorProto::DataType_Name(TensorProto::DataType(t));
  return str("element type ", t);
}

Tensor to_tensor(const TensorProto& p, const std::string& what) {
  if (p.data_location() == TensorProto::EXTERNAL)
    corrupt(what, "keeps its data in an external file; baton reads only models with their data inside");
  if (p.has_segment()) corrupt(what, "is a segment of a tensor; segmented tensors are not supported");
  std::optional<DType> dtype = to_dtype(p.data_type());
  if (!dtype)
    throw DTypeError("onnx", str(what, ": baton has no ", onnx_type_name(p.data_type()), " tensors"),
                     SourceLoc::current());
  const int64_t numel = checked_numel(p, what);
  const size_t itemsize = dtype_size(*dtype);
  if (*dtype == DType::string && p.has_raw_data()) corrupt(what, "is a STRING tensor with raw data (ONNX keeps strings in string_data)");
  if (p.has_raw_data()) {
    const std::string& raw = p.raw_data();
    // Compare without multiplying numel by itemsize first: it may overflow.
    if (raw.size() % itemsize != 0 || int64_t(raw.size() / itemsize) != numel)
      corrupt(what, str("has ", raw.size(), " bytes of data for ", numel, " elements of ", itemsize, " bytes"));
    Tensor t = empty(Shape(std::vector<int64_t>(p.dims().begin(), p.dims().end())), *dtype);
    if (!raw.empty()) std::memcpy(t.raw_data(), raw.data(), raw.size());
    if (*dtype == DType::b8)
      for (bool* b = t.data<bool>(), *e = b + numel; b != e; ++b) *b = reinterpret_cast<const uint8_t&>(*b) != 0;
    return t;
  }
  // Typed fields: check the count before allocating (a hostile file may declare huge dims).
  // The 16-bit floats sit in int32_data as their bits.
  auto from_field = [&]<class T>(const auto& field, T*) {
    if (int64_t(field.size()) != numel) corrupt(what, str("holds ", field.size(), " values for ", numel, " elements"));
    Tensor t = empty(Shape(std::vector<int64_t>(p.dims().begin(), p.dims().end())), *dtype);
    T* out = t.data<T>();
    for (int64_t i = 0; i < numel; ++i) {
      if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) out[i].bits = uint16_t(field.Get(int(i)));
      else if constexpr (std::is_same_v<T, std::string>) out[i] = field.Get(int(i));
      else out[i] = static_cast<T>(field.Get(int(i)));
    }
    return t;
  };
  switch (*dtype) {
    case DType::f32: return from_field(p.float_data(), (float*)nullptr);
    case DType::f64: return from_field(p.double_data(), (double*)nullptr);
    case DType::i32: return from_field(p.int32_data(), (int32_t*)nullptr);
    case DType::b8: return from_field(p.int32_data(), (bool*)nullptr);
    case DType::i64: return from_field(p.int64_data(), (int64_t*)nullptr);
    case DType::u8: return from_field(p.int32_data(), (uint8_t*)nullptr);
    case DType::i8: return from_field(p.int32_data(), (int8_t*)nullptr);
    case DType::i16: return from_field(p.int32_data(), (int16_t*)nullptr);
    case DType::u16: return from_field(p.int32_data(), (uint16_t*)nullptr);
    case DType::u32: return from_field(p.uint64_data(), (uint32_t*)nullptr);
    case DType::u64: return from_field(p.uint64_data(), (uint64_t*)nullptr);
    case DType::f16: return from_field(p.int32_data(), (Half*)nullptr);
    case DType::bf16: return from_field(p.int32_data(), (BFloat16*)nullptr);
    case DType::string: return from_field(p.string_data(), (std::string*)nullptr);
  }
  corrupt(what, "has an element type baton cannot read");
}

Value to_value(const ::onnx::SequenceProto& p, const std::string& what) {
  if (p.elem_type() != ::onnx::SequenceProto::TENSOR)
    corrupt(what, "is a sequence of something other than tensors; baton reads sequences of tensors");
  std::vector<Tensor> items;
  for (int i = 0; i < p.tensor_values_size(); ++i) items.push_back(to_tensor(p.tensor_values(i), str(what, " item ", i)));
  return Value::sequence(std::move(items));
}

Value to_value(const ::onnx::OptionalProto& p, const std::string& what) {
  switch (p.elem_type()) {
    case ::onnx::OptionalProto::UNDEFINED: return Value();
    case ::onnx::OptionalProto::TENSOR: return to_tensor(p.tensor_value(), what);
    case ::onnx::OptionalProto::SEQUENCE: return to_value(p.sequence_value(), what);
    default: corrupt(what, "is an optional of something other than a tensor or a sequence");
  }
}

void read_message(const std::string& path, const char* op, ::google::protobuf::MessageLite& message, SourceLoc loc) {
  const std::string bytes = baton::detail::read_file(path, op, "an ONNX data file");
  std::string type = message.GetTypeName();
  if (type.rfind("onnx.", 0) == 0) type.erase(0, 5);
  if (bytes.size() > size_t(INT_MAX) || !message.ParseFromArray(bytes.data(), int(bytes.size())))
    throw IOError(op, str(path, ": not a ", type), loc);
}

Value load_value(const std::string& path, const ValueInfo& info, SourceLoc loc) {
  const std::string name = std::filesystem::path(path).filename().string();
  if (info.optional) {
    ::onnx::OptionalProto p;
    read_message(path, "onnx.load_value", p, loc);
    return to_value(p, name);
  }
  ::onnx::SequenceProto p;
  read_message(path, "onnx.load_value", p, loc);
  return to_value(p, name);
}

void to_proto(const Tensor& t, TensorProto& p) {
  Tensor c = t.contiguous();
  p.set_data_type(to_onnx_type(c.dtype()));
  p.clear_dims();
  for (int64_t d : c.shape()) p.add_dims(d);
  if (c.dtype() == DType::string) {  // ONNX keeps strings in their own field, never as raw data
    p.clear_string_data();
    for (const std::string* s = c.data<std::string>(), *e = s + c.numel(); s != e; ++s) p.add_string_data(*s);
    return;
  }
  p.set_raw_data(std::string(static_cast<const char*>(c.raw_data()), c.nbytes()));
}

}  // namespace baton::onnx::detail
