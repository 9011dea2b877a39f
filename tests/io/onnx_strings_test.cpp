// ONNX models with STRING tensors: StringNormalizer (with and without stopwords, [C] and
// [1, C]), Cast between strings and numbers, string initializers, exports of change_case
// and string casts that the checker accepts and that re-import with the same outputs, and
// malformed string data.
#include <onnx/checker.h>

#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "baton/baton.h"
#include "baton/onnx.h"
#include "harness/op_harness.h"
#include "io/export_round_trip.h"
#include "io/onnx_model_builder.h"

namespace baton {
namespace {

using ::onnx::TensorProto;
using onnx_testing::add_int_attr;
using onnx_testing::add_string_attr;
using onnx_testing::add_strings_attr;
using onnx_testing::ModelBuilder;
using Strings = std::vector<std::string>;

Tensor words(const Strings& v, Shape shape = {}) {
  if (shape.empty()) shape = {int64_t(v.size())};
  return tensor(v, shape);
}

ModelBuilder normalizer(std::vector<int64_t> dims, const std::string& action, const Strings& stopwords,
                        bool case_sensitive) {
  ModelBuilder b;
  b.input("x", TensorProto::STRING, dims);
  auto* n = b.node("StringNormalizer", {"x"}, {"y"});
  add_string_attr(n, "case_change_action", action);
  if (!stopwords.empty()) add_strings_attr(n, "stopwords", stopwords);
  add_int_attr(n, "is_case_sensitive", case_sensitive);
  b.output("y");
  return b;
}

TEST(OnnxStrings, StringNormalizerChangesCaseInTheGraph) {
  onnx::Model m = normalizer({-1}, "UPPER", {}, false).load();
  EXPECT_EQ(m.inputs()[0].dtype, DType::string);
  EXPECT_EQ(m.run({words({"Monday", "é"})})[0].to_vector<std::string>(), (Strings{"MONDAY", "É"}));
  EXPECT_EQ(m.run({words({"a", "b", "c"})})[0].to_vector<std::string>(), (Strings{"A", "B", "C"}));
}

TEST(OnnxStrings, StopwordsNeedTheInputValues) {
  onnx::Model m = normalizer({1, -1}, "LOWER", {"monday"}, false).load();
  Tensor out = m.run({words({"Monday", "Tuesday", "MONDAY"}, {1, 3})})[0];
  EXPECT_EQ(out.shape(), Shape({1, 1}));
  EXPECT_EQ(out.to_vector<std::string>(), (Strings{"tuesday"}));
  // Every word a stopword: one empty string, as ONNX specifies.
  Tensor none = m.run({words({"monday"}, {1, 1})})[0];
  EXPECT_EQ(none.shape(), Shape({1, 1}));
  EXPECT_EQ(none.to_vector<std::string>(), (Strings{""}));
  onnx::Model sensitive = normalizer({-1}, "NONE", {"monday"}, true).load();
  EXPECT_EQ(sensitive.run({words({"Monday", "monday"})})[0].to_vector<std::string>(), (Strings{"Monday"}));
}

TEST(OnnxStrings, BadStringNormalizersAreErrorsNamingTheNode) {
  EXPECT_THROWS_WITH(GraphError, normalizer({2}, "TITLE", {}, false).load(), "StringNormalizer",
                     "case_change_action 'TITLE'");
  EXPECT_THROWS_WITH(GraphError, normalizer({2, 3}, "UPPER", {}, false).load(), "StringNormalizer",
                     "[C] or [1, C]", "[2,3]");
  ModelBuilder numbers;
  numbers.input("x", TensorProto::FLOAT, {2});
  numbers.node("StringNormalizer", {"x"}, {"y"});
  numbers.output("y");
  EXPECT_THROWS_WITH(GraphError, numbers.load(), "takes a string tensor, got f32");
}

TEST(OnnxStrings, CastsBetweenTextAndNumbers) {
  ModelBuilder b;
  b.input("text", TensorProto::STRING, {3});
  b.input("x", TensorProto::FLOAT, {2});
  add_int_attr(b.node("Cast", {"text"}, {"numbers"}), "to", TensorProto::FLOAT);
  add_int_attr(b.node("Cast", {"x"}, {"shown"}), "to", TensorProto::STRING);
  b.output("numbers");
  b.output("shown");
  onnx::Model m = b.load();
  std::vector<Tensor> out = m.run({words({"1.5", "-INF", "2e3"}), tensor({0.1f, 7.f})});
  EXPECT_EQ(out[0].to_vector<float>(), (std::vector<float>{1.5f, -INFINITY, 2000.f}));
  EXPECT_EQ(out[1].to_vector<std::string>(), (Strings{"0.1", "7"}));
  EXPECT_THROWS_WITH(ValueError, m.run({words({"1", "two", "3"}), tensor({0.f, 0.f})}), "\"two\"");
}

TEST(OnnxStrings, StringInitializersAndMalformedStringData) {
  ModelBuilder b;
  auto* t = b.g->add_initializer();
  t->set_name("greeting");
  t->set_data_type(TensorProto::STRING);
  t->add_dims(2);
  t->add_string_data("hello");
  t->add_string_data("World");
  add_string_attr(b.node("StringNormalizer", {"greeting"}, {"y"}), "case_change_action", "UPPER");
  b.output("y");
  EXPECT_EQ(b.load().run(std::vector<Tensor>{})[0].to_vector<std::string>(), (Strings{"HELLO", "WORLD"}));
  ModelBuilder short_data = b;
  short_data.g->mutable_initializer(0)->add_dims(2);  // [2, 2] with 2 strings
  EXPECT_THROWS_WITH(Error, short_data.load(), "holds 2 values for 4 elements");
  ModelBuilder raw = b;
  raw.g->mutable_initializer(0)->set_raw_data("hellohello");
  EXPECT_THROWS_WITH(Error, raw.load(), "STRING tensor with raw data");
}

// Views carry strings (Reshape, Transpose, Slice...), and so do the ops that move whole
// elements (Gather, Concat, Where); arithmetic on them is a clear error, and shape math on
// small constants never tries to read strings as numbers.
TEST(OnnxStrings, ViewsAndElementMovesCarryStrings) {
  auto model = [](const std::string& op, std::vector<std::string> inputs, int64_t axis = -1) {
    ModelBuilder b;
    auto* t = b.g->add_initializer();
    t->set_name("names");
    t->set_data_type(TensorProto::STRING);
    t->add_dims(2);
    t->add_dims(2);
    for (const char* s : {"zero", "one", "two", "three"}) t->add_string_data(s);
    b.ints("i", {1, 0});
    b.input("pick", TensorProto::BOOL, {2});
    auto* n = b.node(op, inputs, {"out"});
    if (axis >= 0) add_int_attr(n, "axis", axis);
    b.output("out");
    return b;
  };
  const Tensor pick = tensor<bool>({true, false});
  auto run = [&](const ModelBuilder& b) { return b.load().run({pick})[0].to_vector<std::string>(); };
  EXPECT_EQ(run(model("Transpose", {"names"})), (Strings{"zero", "two", "one", "three"}));
  EXPECT_EQ(run(model("Gather", {"names", "i"}, 0)), (Strings{"two", "three", "zero", "one"}));
  EXPECT_EQ(run(model("Concat", {"names", "names"}, 1)),
            (Strings{"zero", "one", "zero", "one", "two", "three", "two", "three"}));
  EXPECT_EQ(run(model("Where", {"pick", "names", "names"})), (Strings{"zero", "one", "two", "three"}));
  EXPECT_THROWS_WITH(Error, model("Neg", {"names"}).load(), "Neg", "string tensors hold text");
}

TEST(OnnxStrings, ChangeCaseAndStringCastsExportAndRoundTrip) {
  Graph g;
  Tensor x = g.placeholder(DType::string, {"n", 2}, "x");  // not [C]: exported flattened around StringNormalizer
  Tensor v = g.placeholder(f32, {"n"}, "v");
  Tensor upper = change_case(x, CaseChange::upper);
  Tensor numbers = cast(x, f32) + 1.f;
  Tensor shown = change_case(cast(v, DType::string), CaseChange::lower);
  g.set_outputs({upper, numbers, shown});
  const std::string bytes = onnx::save_bytes(g);
  ::onnx::ModelProto proto;
  ASSERT_TRUE(proto.ParseFromString(bytes));
  EXPECT_NO_THROW(::onnx::checker::check_model(proto));
  onnx::Model m = onnx::load_bytes(bytes, "strings.onnx");
  const Tensor text = words({"1", "inf", "2.5", "NaN"}, {2, 2});
  std::vector<Tensor> out = m.run({text, tensor({INFINITY, 0.5f})});
  EXPECT_EQ(out[0].shape(), Shape({2, 2}));
  EXPECT_EQ(out[0].to_vector<std::string>(), (Strings{"1", "INF", "2.5", "NAN"}));
  std::vector<float> n = out[1].to_vector<float>();
  EXPECT_EQ(n[0], 2.f);
  EXPECT_EQ(n[1], INFINITY);
  EXPECT_EQ(n[2], 3.5f);
  EXPECT_TRUE(std::isnan(n[3]));
  EXPECT_EQ(out[2].to_vector<std::string>(), (Strings{"inf", "0.5"}));
}

// vocabulary_index with a constant vocabulary saves as ai.onnx.ml's LabelEncoder (a
// repeated word keeps its first position) and reads back as vocabulary_index.
TEST(OnnxStrings, VocabularyIndexSavesAsALabelEncoder) {
  Graph g;
  Tensor x = g.placeholder(DType::string, {"n"}, "x");
  Tensor ids = vocabulary_index(x, words({"the", "cat", "sat", "the", ""}));
  expect_round_trip(g, {x}, {ids}, {{words({"sat", "dog", "the", ""})}, {words({"cat"})}}, "LabelEncoder",
                    "vocabulary_index");
}

TEST(OnnxStrings, LabelEncodersFromStringsToEachValueType) {
  auto encoder = [](const std::function<void(::onnx::NodeProto*)>& values) {
    ModelBuilder b;
    b.m.add_opset_import()->set_domain("ai.onnx.ml");
    b.m.mutable_opset_import(1)->set_version(2);
    b.input("x", TensorProto::STRING, {2, 2});
    auto* n = b.node("LabelEncoder", {"x"}, {"y"});
    n->set_domain("ai.onnx.ml");
    add_strings_attr(n, "keys_strings", {"a", "b"});
    values(n);
    b.output("y");
    return b.load();
  };
  const Tensor x = words({"b", "zz", "a", "b"}, {2, 2});
  onnx::Model to_ints = encoder([](::onnx::NodeProto* n) {
    auto* v = n->add_attribute();
    v->set_name("values_int64s");
    v->set_type(::onnx::AttributeProto::INTS);
    v->add_ints(7);
    v->add_ints(9);
    add_int_attr(n, "default_int64", 42);
  });
  EXPECT_EQ(to_ints.run({x})[0].to_vector<int64_t>(), (std::vector<int64_t>{9, 42, 7, 9}));
  onnx::Model to_text = encoder([](::onnx::NodeProto* n) { add_strings_attr(n, "values_strings", {"A", "B"}); });
  EXPECT_EQ(to_text.run({x})[0].to_vector<std::string>(), (Strings{"B", "_Unused", "A", "B"}));
  ModelBuilder no_keys;
  no_keys.input("x", TensorProto::INT64, {2});
  auto* n = no_keys.node("LabelEncoder", {"x"}, {"y"});
  n->set_domain("ai.onnx.ml");
  no_keys.output("y");
  EXPECT_THROWS_WITH(Error, no_keys.load(), "LabelEncoder", "needs keys");
}

// A LabelEncoder over int64 or float elements: its keys_int64s or keys_floats. Float keys
// compare with == (ONNX Runtime's map): -0 finds 0, NaN finds nothing.
TEST(OnnxStrings, LabelEncodersFromNumbers) {
  auto encoder = [](int elem, const std::function<void(::onnx::NodeProto*)>& attrs) {
    ModelBuilder b;
    b.m.add_opset_import()->set_domain("ai.onnx.ml");
    b.m.mutable_opset_import(1)->set_version(2);
    b.input("x", elem, {3});
    auto* n = b.node("LabelEncoder", {"x"}, {"y"});
    n->set_domain("ai.onnx.ml");
    attrs(n);
    b.output("y");
    return b.load();
  };
  onnx::Model ids_to_text = encoder(TensorProto::INT64, [](::onnx::NodeProto* n) {
    auto* keys = n->add_attribute();
    keys->set_name("keys_int64s");
    keys->set_type(::onnx::AttributeProto::INTS);
    for (int64_t k : {5, -2, 5}) keys->add_ints(k);
    add_strings_attr(n, "values_strings", {"five", "minus two", "again"});
  });
  EXPECT_EQ(ids_to_text.run({tensor<int64_t>({-2, 5, 4})})[0].to_vector<std::string>(),
            (Strings{"minus two", "five", "_Unused"}));
  onnx::Model floats_to_ids = encoder(TensorProto::FLOAT, [](::onnx::NodeProto* n) {
    onnx_testing::add_floats_attr(n, "keys_floats", {0.f, 1.5f, std::nanf("")});
    auto* values = n->add_attribute();
    values->set_name("values_int64s");
    values->set_type(::onnx::AttributeProto::INTS);
    for (int64_t v : {10, 11, 12}) values->add_ints(v);
  });
  EXPECT_EQ(floats_to_ids.run({tensor<float>({1.5f, -0.0f, std::nanf("")})})[0].to_vector<int64_t>(),
            (std::vector<int64_t>{11, 10, -1}));
  EXPECT_THROWS_WITH(Error, floats_to_ids.run({tensor<int64_t>({1, 2, 3})}), "x");  // the declared input type
  auto mixed = [&] {
    return encoder(TensorProto::INT64, [](::onnx::NodeProto* n) {
      onnx_testing::add_floats_attr(n, "keys_floats", {1.f});
      onnx_testing::add_floats_attr(n, "values_floats", {2.f});
    });
  };
  EXPECT_THROWS_WITH(Error, mixed(), "LabelEncoder", "i64", "f32", "one type");
}

// ai.onnx.ml opset 4 gives keys, values and the default as tensor attributes.
TEST(OnnxStrings, LabelEncodersFromTensorAttributes) {
  ModelBuilder b;
  b.m.add_opset_import()->set_domain("ai.onnx.ml");
  b.m.mutable_opset_import(1)->set_version(4);
  b.input("x", TensorProto::INT64, {4});
  auto* n = b.node("LabelEncoder", {"x"}, {"y"});
  n->set_domain("ai.onnx.ml");
  auto tensor_attr = [&](const std::string& name) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(::onnx::AttributeProto::TENSOR);
    return a->mutable_t();
  };
  TensorProto* keys = tensor_attr("keys_tensor");
  keys->set_data_type(TensorProto::INT64);
  keys->add_dims(3);
  for (int64_t k : {3, 1, 4}) keys->add_int64_data(k);
  TensorProto* values = tensor_attr("values_tensor");
  values->set_data_type(TensorProto::DOUBLE);
  values->add_dims(3);
  for (double v : {0.5, 1.5, 2.5}) values->add_double_data(v);
  b.output("y");
  onnx::Model defaulted = b.load();
  const Tensor x = tensor<int64_t>({4, 9, 3, 1});
  const std::vector<double> want{2.5, -0.0, 0.5, 1.5};
  EXPECT_EQ(defaulted.run({x})[0].to_vector<double>(), want);  // the default of doubles: -0.0
  TensorProto* fallback = tensor_attr("default_tensor");
  fallback->set_data_type(TensorProto::DOUBLE);
  fallback->add_dims(1);
  fallback->add_double_data(7.0);
  EXPECT_EQ(b.load().run({x})[0].to_vector<double>(), (std::vector<double>{2.5, 7.0, 0.5, 1.5}));
  fallback->set_data_type(TensorProto::INT64);  // a default of another type than the values
  fallback->clear_double_data();
  fallback->add_int64_data(7);
  EXPECT_THROWS_WITH(Error, b.load(), "LabelEncoder", "default_tensor", "i64", "f64");
  values->add_dims(1);  // 3 keys, 3 values shaped [3, 1]: read flat
  fallback->set_data_type(TensorProto::DOUBLE);
  fallback->clear_int64_data();
  fallback->add_double_data(7.0);
  EXPECT_EQ(b.load().run({x})[0].to_vector<double>(), (std::vector<double>{2.5, 7.0, 0.5, 1.5}));
  // Values of a storage type (float16 here) are picked as f32 and stored back; the
  // default without default_tensor is -0.0.
  n->mutable_attribute()->RemoveLast();  // default_tensor
  values->set_data_type(TensorProto::FLOAT16);
  values->clear_double_data();
  for (int32_t half : {0x3800, 0x3E00, 0x4100}) values->add_int32_data(half);  // 0.5, 1.5, 2.5
  const Tensor halves = b.load().run({x})[0];
  EXPECT_EQ(halves.dtype(), DType::f16);
  EXPECT_EQ(cast(halves, f64).to_vector<double>(), want);
  keys->add_int64_data(8);  // 4 keys of dims [3]: a malformed tensor
  EXPECT_THROWS_WITH(Error, b.load(), "keys_tensor");
}

// vocabulary_index with a constant number vocabulary saves as a LabelEncoder with
// keys_int64s or keys_floats (repeats and NaN left out) and reads back the same. i32
// elements are looked up as int64; f64 ones as float, where only an element the cast to
// float gives back finds its key (2.5 + 1e-12 is no key though its float is 2.5).
TEST(OnnxStrings, NumberVocabulariesSaveAsLabelEncoders) {
  Graph g;
  Tensor ids = g.placeholder(DType::i64, {"n"}, "ids");
  Tensor values = g.placeholder(f32, {"m"}, "values");
  Tensor small = g.placeholder(DType::i32, {"n"}, "small");
  Tensor wide = g.placeholder(DType::f64, {"k"}, "wide");
  Tensor a = vocabulary_index(ids, tensor<int64_t>({7, 40, 7, -1}));
  Tensor b = vocabulary_index(values, tensor<float>({std::nanf(""), 2.5f, 0.f, 2.5f}));
  Tensor c = vocabulary_index(small, tensor<int32_t>({7, 40, 7, -1}));
  Tensor d = vocabulary_index(wide, tensor<double>({std::nan(""), 2.5, 0.0, 1e30f, 2.5}));
  expect_round_trip(g, {ids, values, small, wide}, {a, b, c, d},
                    {{tensor<int64_t>({40, 7, 3, -1}), tensor<float>({2.5f, -0.0f, std::nanf(""), 1.f}),
                      tensor<int32_t>({-1, 2, 40, 7}), tensor<double>({2.5, 2.5 + 1e-12, double(1e30f), 1e30, -0.0})}},
                    "LabelEncoder", "vocabulary_index");
}

// f64 keys that no float equals have no LabelEncoder form: a clear error naming the key.
TEST(OnnxStrings, WideKeysNoFloatEqualsDoNotSave) {
  Graph g;
  Tensor wide = g.placeholder(DType::f64, {"k"}, "wide");
  g.set_outputs({vocabulary_index(wide, tensor<double>({2.5, 0.1}))});
  EXPECT_THROWS_WITH(GraphError, onnx::save_bytes(g), "vocabulary_index", "f64 key 0.1", "no float equals");
}

}  // namespace
}  // namespace baton
