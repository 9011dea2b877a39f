// ONNX importers of TfIdfVectorizer (import_text.cpp), Scan (import_control.cpp),
// BatchNormalization in training mode (import_nn.cpp), ReverseSequence and ScatterND with
// reductions mul/max/min (import_index.cpp), on hand-built models against values computed
// by hand, and a bad model for each.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "baton/baton.h"
#include "baton/onnx.h"
#include "harness/op_harness.h"
#include "io/onnx_model_builder.h"

namespace baton {
namespace {

using ::onnx::TensorProto;
using onnx_testing::add_float_attr;
using onnx_testing::add_floats_attr;
using onnx_testing::add_graph_attr;
using onnx_testing::add_int_attr;
using onnx_testing::add_string_attr;
using onnx_testing::add_strings_attr;
using onnx_testing::GraphBuilder;
using onnx_testing::ModelBuilder;

void add_ints_attr(::onnx::NodeProto* n, const std::string& name, const std::vector<int64_t>& v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(::onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}

// --- TfIdfVectorizer ---

// The pool of ONNX's node tests: 1-grams {2, 3, 5, 4} at 0..3, 2-grams {5 6, 7 8, 6 7} at 4..6.
::onnx::NodeProto* tfidf_node(ModelBuilder& b, const std::string& mode, int64_t min_length, int64_t max_length,
                              int64_t skip) {
  auto* n = b.node("TfIdfVectorizer", {"x"}, {"y"});
  add_string_attr(n, "mode", mode);
  add_int_attr(n, "min_gram_length", min_length);
  add_int_attr(n, "max_gram_length", max_length);
  add_int_attr(n, "max_skip_count", skip);
  add_ints_attr(n, "ngram_counts", {0, 4});
  add_ints_attr(n, "ngram_indexes", {0, 1, 2, 3, 4, 5, 6});
  add_ints_attr(n, "pool_int64s", {2, 3, 5, 4, 5, 6, 7, 8, 6, 7});
  return n;
}

std::vector<float> run_tfidf(ModelBuilder& b, const Tensor& x) {
  b.output("y");
  return b.load().run({x}).at(0).contiguous().to_vector<float>();
}

const std::vector<int64_t> kIds = {1, 1, 3, 3, 3, 7, 8, 6, 7, 5, 6, 8};

TEST(OnnxMiscOps, TfIdfCountsTermFrequencies) {
  ModelBuilder b(9);
  b.input("x", TensorProto::INT64, {12});
  tfidf_node(b, "TF", 1, 2, 5);
  EXPECT_EQ(run_tfidf(b, tensor<int64_t>(kIds, Shape{12})), (std::vector<float>{0, 3, 1, 0, 1, 3, 1}));
}

TEST(OnnxMiscOps, TfIdfWeighsCountsByMode) {
  const Tensor x = tensor<int32_t>(std::vector<int32_t>(kIds.begin(), kIds.end()), Shape{2, 6});
  // Counts per row: [0 3 0 0 0 0 0] and [0 0 1 0 1 1 1].
  const std::vector<float> w = {1, 2, 3, 4, 5, 6, 7};
  auto run = [&](const std::string& mode, bool weights) {
    ModelBuilder b(9);
    b.input("x", TensorProto::INT32, {2, 6});
    auto* n = tfidf_node(b, mode, 1, 2, 5);
    if (weights) add_floats_attr(n, "weights", w);
    return run_tfidf(b, x);
  };
  EXPECT_EQ(run("IDF", false), (std::vector<float>{0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1, 1, 1}));
  EXPECT_EQ(run("IDF", true), (std::vector<float>{0, 2, 0, 0, 0, 0, 0, 0, 0, 3, 0, 5, 6, 7}));
  EXPECT_EQ(run("TFIDF", false), (std::vector<float>{0, 3, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1, 1, 1}));
  EXPECT_EQ(run("TFIDF", true), (std::vector<float>{0, 6, 0, 0, 0, 0, 0, 0, 0, 3, 0, 5, 6, 7}));
}

// The same pool and rows as words: a string pool counts as the integer one does, and words
// outside the pool (here "one", "other") match no n-gram.
TEST(OnnxMiscOps, TfIdfCountsStringPools) {
  auto word = [](int64_t id) {
    static const std::vector<std::string> kWords = {"zero", "one", "two", "three", "four", "five", "six", "seven", "eight"};
    return kWords[size_t(id)];
  };
  ModelBuilder b(9);
  b.input("x", TensorProto::STRING, {2, 6});
  auto* n = tfidf_node(b, "TF", 1, 2, 5);
  n->mutable_attribute()->RemoveLast();  // pool_int64s
  std::vector<std::string> pool;
  for (int64_t id : {2, 3, 5, 4, 5, 6, 7, 8, 6, 7}) pool.push_back(word(id));
  add_strings_attr(n, "pool_strings", pool);
  std::vector<std::string> rows;
  for (int64_t id : kIds) rows.push_back(word(id));
  rows[0] = "other";
  EXPECT_EQ(run_tfidf(b, tensor(rows, {2, 6})), (std::vector<float>{0, 3, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1, 1, 1}));
  ModelBuilder numbers(9);
  numbers.input("x", TensorProto::INT64, {2});
  add_strings_attr(tfidf_node(numbers, "TF", 1, 1, 0), "pool_strings", {"a"});
  numbers.output("y");
  numbers.g->mutable_node(0)->mutable_attribute()->DeleteSubrange(6, 1);  // pool_int64s
  EXPECT_THROWS_WITH(Error, numbers.load(), "has a string pool but i64 input");
}

// The message of the baton::Error that loading `b` throws ("" when it loads).
std::string load_error(const ModelBuilder& b) {
  try {
    b.load();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(OnnxMiscOps, TfIdfRejectsBadModels) {
  auto error_of = [](const std::function<void(::onnx::NodeProto*)>& spoil) {
    ModelBuilder b(9);
    b.input("x", TensorProto::INT64, {12});
    spoil(tfidf_node(b, "TF", 1, 2, 0));
    b.output("y");
    return load_error(b);
  };
  auto has = [](const std::string& message, const std::string& part) {
    return message.find(part) != std::string::npos && message.find("TfIdfVectorizer") != std::string::npos;
  };
  EXPECT_PRED2(has, error_of([](auto* n) { n->mutable_attribute(0)->set_s("BM25"); }), "mode 'BM25'");
  EXPECT_PRED2(has, error_of([](auto* n) { add_strings_attr(n, "pool_strings", {"a"}); }),
               "needs one of the attributes pool_int64s and pool_strings");
  EXPECT_EQ(error_of([](auto* n) { add_floats_attr(n, "weights", {1, 2}); }), "");  // TF reads no weights
  EXPECT_PRED2(has, error_of([](auto* n) { n->mutable_attribute(5)->set_ints(6, -1); }), "must lie in [0, ");
  EXPECT_PRED2(has, error_of([](auto* n) { n->mutable_attribute(4)->set_ints(1, 5); }), "not a whole number");
  EXPECT_PRED2(has, error_of([](auto* n) { n->mutable_attribute(5)->mutable_ints()->RemoveLast(); }), "6 coordinates");
  EXPECT_PRED2(has, error_of([](auto* n) { n->mutable_attribute(1)->set_i(3); }), "min_length <= max_length");
  // IDF with too few weights.
  ModelBuilder b(9);
  b.input("x", TensorProto::INT64, {12});
  add_floats_attr(tfidf_node(b, "IDF", 1, 2, 0), "weights", {1, 2});
  b.output("y");
  EXPECT_PRED2(has, load_error(b), "2 weights for an output of 7");
  // A float input.
  ModelBuilder f(9);
  f.input("x", TensorProto::FLOAT, {12});
  tfidf_node(f, "TF", 1, 2, 0);
  f.output("y");
  EXPECT_PRED2(has, load_error(f), "i32 or i64");
}

// --- Scan ---

// Body (sum_in [2], x_t [2]) -> (sum_in + x_t, the same as a scan output).
void running_sum_body(::onnx::NodeProto* n, int64_t width) {
  GraphBuilder body = add_graph_attr(n, "body");
  body.input("sum_in", TensorProto::FLOAT, {width});
  body.input("next", TensorProto::FLOAT, {width});
  body.node("Add", {"sum_in", "next"}, {"sum_out"});
  body.node("Identity", {"sum_out"}, {"scan_out"});
  body.output("sum_out");
  body.output("scan_out");
}

TEST(OnnxMiscOps, Scan9SumsAlongAnAxisInEitherDirection) {
  auto run = [](const std::vector<int64_t>& input_axes, const std::vector<int64_t>& directions,
                const std::vector<int64_t>& output_axes, const std::vector<int64_t>& output_directions,
                const Tensor& x) {
    ModelBuilder b(11);
    b.input("init", TensorProto::FLOAT, {2});
    b.input("x", TensorProto::FLOAT, {x.shape()[0], x.shape()[1]});
    auto* n = b.node("Scan", {"init", "x"}, {"y", "z"});
    add_int_attr(n, "num_scan_inputs", 1);
    if (!input_axes.empty()) add_ints_attr(n, "scan_input_axes", input_axes);
    if (!directions.empty()) add_ints_attr(n, "scan_input_directions", directions);
    if (!output_axes.empty()) add_ints_attr(n, "scan_output_axes", output_axes);
    if (!output_directions.empty()) add_ints_attr(n, "scan_output_directions", output_directions);
    running_sum_body(n, 2);
    b.output("y");
    b.output("z");
    std::vector<Tensor> out = b.load().run({tensor<float>({0, 0}), x});
    return std::pair{out.at(0).contiguous().to_vector<float>(), out.at(1).contiguous()};
  };
  const Tensor x = tensor<float>({{1, 2}, {3, 4}, {5, 6}});
  auto [y, z] = run({}, {}, {}, {}, x);
  EXPECT_EQ(y, (std::vector<float>{9, 12}));
  EXPECT_EQ(z.shape(), (Shape{3, 2}));
  EXPECT_EQ(z.to_vector<float>(), (std::vector<float>{1, 2, 4, 6, 9, 12}));
  // Reversed input: sums 5 6, then 8 10, then 9 12.
  EXPECT_EQ(run({}, {1}, {}, {}, x).second.to_vector<float>(), (std::vector<float>{5, 6, 8, 10, 9, 12}));
  // Prepended output.
  EXPECT_EQ(run({}, {}, {}, {1}, x).second.to_vector<float>(), (std::vector<float>{9, 12, 4, 6, 1, 2}));
  // Output stacked along axis 1 (-1): [2, 3].
  const Tensor z1 = run({}, {}, {-1}, {}, x).second;
  EXPECT_EQ(z1.shape(), (Shape{2, 3}));
  EXPECT_EQ(z1.to_vector<float>(), (std::vector<float>{1, 4, 9, 2, 6, 12}));
  // Scanning x^T [2, 3] along axis 1 sees the same rows.
  EXPECT_EQ(run({1}, {}, {}, {}, x.t().contiguous()).first, (std::vector<float>{9, 12}));
}

TEST(OnnxMiscOps, Scan8RunsEachBatchEntryForItsSequenceLength) {
  ModelBuilder b(8);
  b.ints("lens", {3, 1});
  b.input("init", TensorProto::FLOAT, {2, 2});
  b.input("x", TensorProto::FLOAT, {2, 3, 2});
  auto* n = b.node("Scan", {"lens", "init", "x"}, {"y", "z"});
  add_int_attr(n, "num_scan_inputs", 1);
  add_ints_attr(n, "directions", {1});
  running_sum_body(n, 2);
  b.output("y");
  b.output("z");
  const Tensor init = tensor<float>({{0, 0}, {100, 100}});
  const Tensor x = tensor<float>({{{1, 2}, {3, 4}, {5, 6}}, {{7, 8}, {9, 10}, {11, 12}}});
  std::vector<Tensor> out = b.load().run({init, x});
  // Entry 0 runs backward over 3 steps; entry 1 over its first step only.
  EXPECT_EQ(out.at(0).to_vector<float>(), (std::vector<float>{9, 12, 107, 108}));
  EXPECT_EQ(out.at(1).shape(), (Shape{2, 3, 2}));
  EXPECT_EQ(out.at(1).to_vector<float>(), (std::vector<float>{5, 6, 8, 10, 9, 12, 107, 108, 0, 0, 0, 0}));
}

TEST(OnnxMiscOps, ScanRejectsBadModels) {
  auto load_with = [](int64_t scan_inputs, std::vector<int64_t> x_dims, const std::vector<int64_t>& axes) {
    ModelBuilder b(11);
    b.input("init", TensorProto::FLOAT, {2});
    b.input("x", TensorProto::FLOAT, x_dims);
    b.input("x2", TensorProto::FLOAT, {4, 2});
    auto* n = b.node("Scan", {"init", "x", "x2"}, {"y", "z"});
    add_int_attr(n, "num_scan_inputs", scan_inputs);
    if (!axes.empty()) add_ints_attr(n, "scan_input_axes", axes);
    GraphBuilder body = add_graph_attr(n, "body");
    body.input("sum_in", TensorProto::FLOAT, {2});
    body.input("a", TensorProto::FLOAT, {2});
    body.input("b", TensorProto::FLOAT, {2});
    body.node("Add", {"sum_in", "a"}, {"sum_out"});
    body.node("Add", {"sum_out", "b"}, {"scan_out"});
    body.output("sum_out");
    body.output("scan_out");
    b.output("y");
    b.output("z");
    return b.load();
  };
  EXPECT_NO_THROW(load_with(2, {4, 2}, {}));
  EXPECT_THROW(load_with(5, {4, 2}, {}), GraphError);   // more scan inputs than inputs
  EXPECT_THROW(load_with(2, {3, 2}, {}), GraphError);   // lengths 3 and 4 differ
  EXPECT_THROW(load_with(2, {4, 2}, {0}), GraphError);  // one axis for two inputs
  EXPECT_THROW(load_with(2, {4, 2}, {0, 2}), Error);    // axis out of range
}

// --- BatchNormalization, training mode ---

TEST(OnnxMiscOps, BatchNormTrainingUsesBatchStatisticsAndMovesTheRunningOnes) {
  ModelBuilder b(15);
  b.input("x", TensorProto::FLOAT, {2, 2, 2});
  b.floats("scale", {2}, {1, 2});
  b.floats("bias", {2}, {0, 1});
  b.floats("mean", {2}, {10, 20});
  b.floats("var", {2}, {1, 2});
  auto* n = b.node("BatchNormalization", {"x", "scale", "bias", "mean", "var"}, {"y", "running_mean", "running_var"});
  add_int_attr(n, "training_mode", 1);
  add_float_attr(n, "epsilon", 1e-2f);
  add_float_attr(n, "momentum", 0.8f);
  b.output("y");
  b.output("running_mean");
  b.output("running_var");
  // Channel 0 holds {0, 2, 4, 6}: mean 3, biased var 5. Channel 1 holds {1, 1, 3, 3}: mean 2, var 1.
  const Tensor x = tensor<float>({{{0, 2}, {1, 1}}, {{4, 6}, {3, 3}}});
  std::vector<Tensor> out = b.load().run({x});
  const double eps = 1e-2, s0 = 1 / std::sqrt(5 + eps), s1 = 2 / std::sqrt(1 + eps);
  const std::vector<double> y = {-3 * s0, -1 * s0, -s1 + 1, -s1 + 1, 1 * s0, 3 * s0, s1 + 1, s1 + 1};
  std::vector<float> got = out.at(0).to_vector<float>();
  for (size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(got[i], y[i], 1e-5) << i;
  // momentum 0.8: 10 * 0.8 + 3 * 0.2, 20 * 0.8 + 2 * 0.2; 1 * 0.8 + 5 * 0.2, 2 * 0.8 + 1 * 0.2.
  const std::vector<float> rm = out.at(1).to_vector<float>(), rv = out.at(2).to_vector<float>();
  EXPECT_NEAR(rm[0], 8.6, 1e-5);
  EXPECT_NEAR(rm[1], 16.4, 1e-5);
  EXPECT_NEAR(rv[0], 1.8, 1e-5);
  EXPECT_NEAR(rv[1], 1.8, 1e-5);
}

TEST(OnnxMiscOps, BatchNormTrainingRejectsAVector) {
  ModelBuilder b(15);
  b.input("x", TensorProto::FLOAT, {4});
  b.floats("p", {1}, {1});
  auto* n = b.node("BatchNormalization", {"x", "p", "p", "p", "p"}, {"y", "m", "v"});
  add_int_attr(n, "training_mode", 1);
  b.output("y");
  EXPECT_THROW(b.load(), GraphError);
}

// --- ReverseSequence ---

TEST(OnnxMiscOps, ReverseSequenceReversesEachBatchEntrysPrefix) {
  ModelBuilder b;
  b.input("x", TensorProto::FLOAT, {4, 4});
  b.ints("lens", {4, 3, 2, 1});
  auto* n = b.node("ReverseSequence", {"x", "lens"}, {"y"});
  add_int_attr(n, "time_axis", 0);
  add_int_attr(n, "batch_axis", 1);
  b.output("y");
  const Tensor x = tensor<float>({{0, 4, 8, 12}, {1, 5, 9, 13}, {2, 6, 10, 14}, {3, 7, 11, 15}});
  EXPECT_EQ(b.load().run({x}).at(0).to_vector<float>(),
            (std::vector<float>{3, 6, 9, 12, 2, 5, 8, 13, 1, 4, 10, 14, 0, 7, 11, 15}));
}

TEST(OnnxMiscOps, ReverseSequenceRejectsBadModels) {
  auto model = [](int64_t batch_axis, std::vector<int64_t> lens) {
    ModelBuilder b;
    b.input("x", TensorProto::FLOAT, {2, 3});
    b.ints("lens", lens);
    add_int_attr(b.node("ReverseSequence", {"x", "lens"}, {"y"}), "batch_axis", batch_axis);
    b.output("y");
    return b;
  };
  EXPECT_THROW(model(0, {1, 1}).load(), GraphError);  // time_axis 0 too
  EXPECT_THROW(model(1, {1, 2}).load(), Error);       // two lengths for a batch of 3
  // A length past the time dim (2), only known when the model runs.
  ModelBuilder late;
  late.input("x", TensorProto::FLOAT, {2, 3});
  late.input("lens", TensorProto::INT64, {3});
  late.node("ReverseSequence", {"x", "lens"}, {"y"});
  late.output("y");
  onnx::Model m = late.load();
  EXPECT_THROW(m.run({zeros({2, 3}, f32), tensor<int64_t>({1, 3, 0})}), IndexError);
}

// --- ScatterND with reductions ---

std::vector<float> scatter_nd(const std::string& reduction, const std::vector<int64_t>& indices) {
  ModelBuilder b;
  b.input("data", TensorProto::FLOAT, {4, 2});
  b.input("updates", TensorProto::FLOAT, {int64_t(indices.size()), 2});
  auto* t = b.g->add_initializer();
  t->set_name("indices");
  t->set_data_type(TensorProto::INT64);
  t->add_dims(int64_t(indices.size()));
  t->add_dims(1);
  for (int64_t i : indices) t->add_int64_data(i);
  add_string_attr(b.node("ScatterND", {"data", "indices", "updates"}, {"y"}), "reduction", reduction);
  b.output("y");
  const Tensor data = tensor<float>({{1, 2}, {3, 4}, {5, 6}, {7, 8}});
  std::vector<float> u;
  for (size_t i = 0; i < indices.size(); ++i) u.push_back(float(i + 2)), u.push_back(-float(i + 2));
  return b.load().run({data, tensor<float>(u, Shape{int64_t(indices.size()), 2})}).at(0).to_vector<float>();
}

TEST(OnnxMiscOps, ScatterNdMultipliesInOrderWithRepeatedIndices) {
  // Updates rows: [2 -2], [3 -3], [4 -4] at rows 0, 2, 0.
  EXPECT_EQ(scatter_nd("mul", {0, 2, 0}), (std::vector<float>{8, 16, 3, 4, 15, -18, 7, 8}));
  EXPECT_EQ(scatter_nd("max", {0, 2, -4}), (std::vector<float>{4, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(scatter_nd("min", {0, 2, 0}), (std::vector<float>{1, -4, 3, 4, 3, -3, 7, 8}));
  EXPECT_EQ(scatter_nd("none", {3, 1}), (std::vector<float>{1, 2, 3, -3, 5, 6, 2, -2}));
}

TEST(OnnxMiscOps, ScatterNdRejectsBadReductionsAndIndices) {
  EXPECT_THROW(scatter_nd("prod", {0}), GraphError);
  EXPECT_THROW(scatter_nd("mul", {4}), Error);
  EXPECT_THROW(scatter_nd("none", {1, 1}), GraphError);
  EXPECT_THROW(scatter_nd("max", std::vector<int64_t>(4097, 2)), GraphError);  // 4097 rounds
}

}  // namespace
}  // namespace baton
