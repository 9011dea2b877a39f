// Models with element types baton stores but computes in a wider dtype (u8, i8, f16...;
// src/io/onnx/storage_types.cpp): inputs and outputs keep the model's types, arithmetic
// wraps and rounds as in that type, Cast and quantization ops.
#include <gtest/gtest.h>

#include <cmath>

#include "baton/baton.h"
#include "baton/onnx.h"
#include "harness/op_harness.h"
#include "io/onnx_model_builder.h"

namespace baton {
namespace {

using ::onnx::TensorProto;
using onnx_testing::add_int_attr;
using onnx_testing::ModelBuilder;

TEST(OnnxStorageTypes, Uint8ArithmeticWrapsAndKeepsTheType) {
  ModelBuilder b;
  b.input("a", TensorProto::UINT8, {3});
  b.input("b", TensorProto::UINT8, {3});
  b.node("Add", {"a", "b"}, {"sum"});
  b.node("Sub", {"a", "b"}, {"diff"});
  b.node("Max", {"a", "b"}, {"big"});
  b.output("sum");
  b.output("diff");
  b.output("big");
  onnx::Model m = b.load();
  EXPECT_EQ(m.inputs()[0].dtype, u8);
  const Tensor a = cast(tensor({250, 3, 7}), u8), c = cast(tensor({10, 5, 7}), u8);
  std::vector<Tensor> out = m.run({a, c});
  for (const Tensor& t : out) EXPECT_EQ(t.dtype(), u8);
  EXPECT_EQ(out[0].to_vector<int64_t>(), (std::vector<int64_t>{4, 8, 14}));
  EXPECT_EQ(out[1].to_vector<int64_t>(), (std::vector<int64_t>{240, 254, 0}));
  EXPECT_EQ(out[2].to_vector<int64_t>(), (std::vector<int64_t>{250, 5, 7}));
  EXPECT_THROWS_WITH(ShapeError, m.run({tensor({1, 2, 3}), c}), "input 'a' is u8[3], given i32[3]");
}

TEST(OnnxStorageTypes, HalfPrecisionRoundsAfterEveryOp) {
  ModelBuilder b;
  b.input("x", TensorProto::FLOAT16, {2});
  b.node("Mul", {"x", "x"}, {"sq"});
  b.node("Cast", {"sq"}, {"y"});
  add_int_attr(b.g->mutable_node(1), "to", TensorProto::FLOAT);
  b.output("sq");
  b.output("y");
  onnx::Model m = b.load();
  const Tensor x = cast(tensor({1.001f, 300.f}), f16);
  std::vector<Tensor> out = m.run({x});
  EXPECT_EQ(out[0].dtype(), f16);
  EXPECT_EQ(out[1].dtype(), f32);
  // (1 + 2^-10)^2 = 1 + 2^-9 + 2^-20 rounds to 1 + 2^-9 in f16; 300^2 overflows f16.
  EXPECT_EQ(out[1].to_vector<float>(), (std::vector<float>{1.f + 1.f / 512, INFINITY}));
}

TEST(OnnxStorageTypes, CastsToStorageTypesSaturateOrWrapAsDocumented) {
  ModelBuilder b;
  b.input("x", TensorProto::FLOAT, {3});
  b.node("Cast", {"x"}, {"y"});
  add_int_attr(b.g->mutable_node(0), "to", TensorProto::INT8);
  b.output("y");
  std::vector<Tensor> out = b.load().run({tensor({-1000.f, 3.9f, 127.f})});
  EXPECT_EQ(out[0].dtype(), i8);
  EXPECT_EQ(out[0].to_vector<int64_t>(), (std::vector<int64_t>{-128, 3, 127}));
}

TEST(OnnxStorageTypes, QuantizeAndDequantizeRoundTrip) {
  ModelBuilder b;
  b.input("x", TensorProto::FLOAT, {4});
  b.floats("scale", {}, {0.5f});
  auto* zp = b.g->add_initializer();
  zp->set_name("zp");
  zp->set_data_type(TensorProto::INT8);
  zp->add_int32_data(-3);
  b.node("QuantizeLinear", {"x", "scale", "zp"}, {"q"});
  b.node("DequantizeLinear", {"q", "scale", "zp"}, {"y"});
  b.output("q");
  b.output("y");
  std::vector<Tensor> out = b.load().run({tensor({0.25f, 0.75f, 100.f, -100.f})});
  EXPECT_EQ(out[0].dtype(), i8);
  // 0.25 / 0.5 = 0.5 rounds to even (0), 0.75 / 0.5 = 1.5 to 2; then saturated.
  EXPECT_EQ(out[0].to_vector<int64_t>(), (std::vector<int64_t>{-3, -1, 127, -128}));
  EXPECT_EQ(out[1].to_vector<float>(), (std::vector<float>{0.f, 1.f, 65.f, -62.5f}));
}

TEST(OnnxStorageTypes, MatMulIntegerIsExact) {
  ModelBuilder b;
  b.input("a", TensorProto::UINT8, {2, 3});
  b.input("b", TensorProto::UINT8, {3, 1});
  b.node("MatMulInteger", {"a", "b"}, {"y"});
  b.output("y");
  std::vector<Tensor> out =
      b.load().run({cast(tensor({{255, 255, 255}, {1, 2, 3}}), u8), cast(tensor({{255}, {255}, {1}}), u8)});
  EXPECT_EQ(out[0].dtype(), i32);
  EXPECT_EQ(out[0].to_vector<int32_t>(), (std::vector<int32_t>{255 * 255 * 2 + 255, 255 + 510 + 3}));
}

TEST(OnnxStorageTypes, BitShiftDropsTheBitsShiftedOut) {
  ModelBuilder b;
  b.input("x", TensorProto::UINT8, {2});
  b.input("n", TensorProto::UINT8, {2});
  onnx_testing::add_string_attr(b.node("BitShift", {"x", "n"}, {"y"}), "direction", "LEFT");
  b.output("y");
  std::vector<Tensor> out = b.load().run({cast(tensor({255, 3}), u8), cast(tensor({1, 2}), u8)});
  EXPECT_EQ(out[0].to_vector<int64_t>(), (std::vector<int64_t>{254, 12}));
}

// u64 computes in i64: values of 2^63 and more are an error naming the value, never a
// silent wrap to a negative number.
TEST(OnnxStorageTypes, Uint64BeyondInt64IsAnError) {
  ModelBuilder b;
  b.input("a", TensorProto::UINT64, {2});
  b.node("Add", {"a", "a"}, {"sum"});
  b.output("sum");
  onnx::Model m = b.load();
  const uint64_t big = uint64_t(1) << 63;
  EXPECT_EQ(m.run({tensor<uint64_t>({3, (big >> 1) - 1})})[0].to_vector<uint64_t>(),
            (std::vector<uint64_t>{6, big - 2}));
  EXPECT_THROWS_WITH(ValueError, m.run({tensor<uint64_t>({1, big})}), "input 'a'", "u64 value 9223372036854775808");
  ModelBuilder with_constant;
  auto* t = with_constant.g->add_initializer();
  t->set_name("c");
  t->set_data_type(TensorProto::UINT64);
  t->add_dims(1);
  t->add_uint64_data(~uint64_t(0));
  with_constant.node("Identity", {"c"}, {"y"});
  with_constant.output("y");
  EXPECT_THROWS_WITH(ValueError, with_constant.load(), "'c'", "u64 value 18446744073709551615");
}

}  // namespace
}  // namespace baton
