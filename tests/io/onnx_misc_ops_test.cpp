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
  EXPECT_PRED2(has, error_of([](auto* n) { add_strings_attr(n, "pool_strings", {"a"}); }), "string pools");
  EXPECT_EQ(error_of([](auto* n) { add_floats_attr(n, "weights", {1, 2}); }), "");  // TF reads no weights
  EXPECT_PRED2(has, error_of([](auto* n) { n->mutable_attribute(5)->set_ints(6, -1); }), "must not be negative");
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

}  // namespace
}  // namespace baton
