// ONNX importers of import_misc.cpp on hand-built models: Einsum (matmul, batch matmul,
// sums, implicit output, ellipsis with broadcasting, diagonals, three operands), TopK
// (ties, smallest, integers, axis 0) and LRN, against hand-computed values.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "baton/baton.h"
#include "baton/onnx.h"
#include "io/onnx_model_builder.h"

namespace baton {
namespace {

using ::onnx::TensorProto;
using onnx_testing::add_float_attr;
using onnx_testing::add_int_attr;
using onnx_testing::add_string_attr;
using onnx_testing::ModelBuilder;

// y = Einsum(equation)(inputs named x0, x1, ... of the given shapes).
onnx::Model einsum_model(const std::string& equation, const std::vector<std::vector<int64_t>>& shapes) {
  ModelBuilder b;
  std::vector<std::string> names;
  for (size_t i = 0; i < shapes.size(); ++i) {
    names.push_back("x" + std::to_string(i));
    b.input(names.back(), TensorProto::FLOAT, shapes[i]);
  }
  add_string_attr(b.node("Einsum", names, {"y"}), "equation", equation);
  b.output("y");
  return b.load();
}

std::vector<float> run_einsum(const std::string& equation, const std::vector<Tensor>& xs, Shape* shape = nullptr) {
  std::vector<std::vector<int64_t>> shapes;
  for (const Tensor& x : xs) shapes.emplace_back(x.shape().begin(), x.shape().end());
  Tensor y = einsum_model(equation, shapes).run(xs).at(0);
  if (shape) *shape = y.shape();
  return y.contiguous().to_vector<float>();
}

const Tensor a = tensor<float>({{1, 2}, {3, 4}});
const Tensor b = tensor<float>({{5, 6}, {7, 8}});

TEST(OnnxMisc, EinsumMatmul) {
  Shape s;
  EXPECT_EQ(run_einsum("ij,jk->ik", {a, b}, &s), (std::vector<float>{19, 22, 43, 50}));
  EXPECT_EQ(s, (Shape{2, 2}));
  // Implicit output: the letters that occur once, sorted.
  EXPECT_EQ(run_einsum("ij,jk", {a, b}), (std::vector<float>{19, 22, 43, 50}));
  // b^T a^T = (ab)^T.
  EXPECT_EQ(run_einsum("ij, jk -> ki", {a, b}), (std::vector<float>{19, 43, 22, 50}));
}

TEST(OnnxMisc, EinsumBatchMatmul) {
  const Tensor x = tensor<float>({{{1, 2}, {3, 4}}, {{1, 0}, {0, 1}}});
  const Tensor y = tensor<float>({{{5, 6}, {7, 8}}, {{2, 3}, {4, 5}}});
  EXPECT_EQ(run_einsum("bij,bjk->bik", {x, y}), (std::vector<float>{19, 22, 43, 50, 2, 3, 4, 5}));
}

TEST(OnnxMisc, EinsumSumsAndTransposes) {
  const Tensor x = tensor<float>({{1, 2, 3}, {4, 5, 6}});
  EXPECT_EQ(run_einsum("ij->i", {x}), (std::vector<float>{6, 15}));
  EXPECT_EQ(run_einsum("ij->j", {x}), (std::vector<float>{5, 7, 9}));
  Shape s;
  EXPECT_EQ(run_einsum("ij->", {x}, &s), (std::vector<float>{21}));
  EXPECT_EQ(s, Shape{});
  EXPECT_EQ(run_einsum("ij,ij", {x, x}), (std::vector<float>{91}));
  EXPECT_EQ(run_einsum("ij,ij->i", {x, x}), (std::vector<float>{14, 77}));
  EXPECT_EQ(run_einsum("i,i", {tensor<float>({1, 2, 3}), tensor<float>({4, 5, 6})}), (std::vector<float>{32}));
  // Implicit output "ij" of "ji": the transpose.
  EXPECT_EQ(run_einsum("ji", {x}, &s), (std::vector<float>{1, 4, 2, 5, 3, 6}));
  EXPECT_EQ(s, (Shape{3, 2}));
  // Outer product, and a letter summed away in one operand only.
  EXPECT_EQ(run_einsum("i,j->ij", {tensor<float>({1, 2}), tensor<float>({3, 4, 5})}),
            (std::vector<float>{3, 4, 5, 6, 8, 10}));
  EXPECT_EQ(run_einsum("ij,k->k", {x, tensor<float>({1, 2})}), (std::vector<float>{21, 42}));
}

TEST(OnnxMisc, EinsumDiagonalsAndThreeOperands) {
  EXPECT_EQ(run_einsum("ii->i", {a}), (std::vector<float>{1, 4}));
  EXPECT_EQ(run_einsum("ii", {a}), (std::vector<float>{5}));
  const Tensor identity = tensor<float>({{1, 0}, {0, 1}});
  EXPECT_EQ(run_einsum("ij,jk,kl->il", {a, identity, b}), (std::vector<float>{19, 22, 43, 50}));
}

TEST(OnnxMisc, EinsumEllipsisBroadcasts) {
  // [1, 2, 2] x [3, 2, 2]: the ellipsis dim of size 1 broadcasts.
  const Tensor x = tensor<float>({{{1, 2}, {3, 4}}});
  const Tensor y = tensor<float>({{{1, 0}, {0, 1}}, {{2, 0}, {0, 2}}, {{0, 0}, {0, 0}}});
  Shape s;
  EXPECT_EQ(run_einsum("...ij,...jk->...ik", {x, y}, &s),
            (std::vector<float>{1, 2, 3, 4, 2, 4, 6, 8, 0, 0, 0, 0}));
  EXPECT_EQ(s, (Shape{3, 2, 2}));
  // One operand without ellipsis dims; implicit output puts the ellipsis first.
  EXPECT_EQ(run_einsum("...ij,jk", {tensor<float>({{{1, 2}, {3, 4}}, {{1, 0}, {0, 1}}}), b}, &s),
            (std::vector<float>{19, 22, 43, 50, 5, 6, 7, 8}));
  EXPECT_EQ(s, (Shape{2, 2, 2}));
  // The batch diagonal of the backend tests.
  EXPECT_EQ(run_einsum("...ii->...i", {tensor<float>({{{1, 2}, {3, 4}}, {{5, 6}, {7, 8}}})}),
            (std::vector<float>{1, 4, 5, 8}));
}

TEST(OnnxMisc, EinsumRejectsBadEquations) {
  EXPECT_ANY_THROW(einsum_model("ij,jk->ik", {{2, 2}}));
  EXPECT_ANY_THROW(einsum_model("ijk->i", {{2, 2}}));
  EXPECT_ANY_THROW(einsum_model("ij->iq", {{2, 2}}));
  EXPECT_ANY_THROW(einsum_model("i..j->i", {{2, 2}}));
}

// values, indices = TopK(x, k) along axis.
std::vector<Tensor> run_top_k(const Tensor& x, int64_t k, int64_t axis, bool largest, int elem = TensorProto::FLOAT) {
  ModelBuilder m;
  m.input("x", elem, std::vector<int64_t>(x.shape().begin(), x.shape().end()));
  m.ints("k", {k});
  auto* n = m.node("TopK", {"x", "k"}, {"values", "indices"});
  add_int_attr(n, "axis", axis);
  add_int_attr(n, "largest", largest ? 1 : 0);
  m.output("values");
  m.output("indices");
  return m.load().run({x});
}

TEST(OnnxMisc, TopKPicksTheLowerIndexOfTies) {
  const Tensor x = tensor<float>({{1, 3, 3, 2}, {5, -1, 5, 0}});
  std::vector<Tensor> out = run_top_k(x, 2, 1, true);
  EXPECT_EQ(out.at(0).contiguous().to_vector<float>(), (std::vector<float>{3, 3, 5, 5}));
  EXPECT_EQ(out.at(1).contiguous().to_vector<int64_t>(), (std::vector<int64_t>{1, 2, 0, 2}));
  EXPECT_EQ(out.at(1).dtype(), DType::i64);
  out = run_top_k(x, 3, -1, false);
  EXPECT_EQ(out.at(0).contiguous().to_vector<float>(), (std::vector<float>{1, 2, 3, -1, 0, 5}));
  EXPECT_EQ(out.at(1).contiguous().to_vector<int64_t>(), (std::vector<int64_t>{0, 3, 1, 1, 3, 0}));
}

TEST(OnnxMisc, TopKOnIntegersAndAxisZero) {
  const Tensor x = tensor<int64_t>({{1, 3, 3, 2}, {5, -1, 5, 0}});
  std::vector<Tensor> out = run_top_k(x, 4, 1, true, TensorProto::INT64);
  EXPECT_EQ(out.at(0).contiguous().to_vector<int64_t>(), (std::vector<int64_t>{3, 3, 2, 1, 5, 5, 0, -1}));
  EXPECT_EQ(out.at(1).contiguous().to_vector<int64_t>(), (std::vector<int64_t>{1, 2, 3, 0, 0, 2, 3, 1}));
  const Tensor y = tensor<float>({{1, 6}, {4, 2}, {4, 7}});
  out = run_top_k(y, 2, 0, true);
  EXPECT_EQ(out.at(0).shape(), (Shape{2, 2}));
  EXPECT_EQ(out.at(0).contiguous().to_vector<float>(), (std::vector<float>{4, 7, 4, 6}));
  EXPECT_EQ(out.at(1).contiguous().to_vector<int64_t>(), (std::vector<int64_t>{1, 2, 2, 0}));
  EXPECT_ANY_THROW(run_top_k(y, 4, 0, true));  // K larger than the axis
}

// y = LRN(x) over x = [1, 3, 1, 1] = {1, 2, 3}.
std::vector<float> run_lrn(int64_t size, float alpha, float beta, float bias) {
  ModelBuilder m;
  m.input("x", TensorProto::FLOAT, {1, 3, 1, 1});
  auto* n = m.node("LRN", {"x"}, {"y"});
  add_int_attr(n, "size", size);
  add_float_attr(n, "alpha", alpha);
  add_float_attr(n, "beta", beta);
  add_float_attr(n, "bias", bias);
  m.output("y");
  return m.load().run({reshape(tensor<float>({1, 2, 3}), Shape{1, 3, 1, 1})}).at(0).contiguous().to_vector<float>();
}

void expect_near(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6) << i;
}

TEST(OnnxMisc, LrnSumsSquaresOverTheChannelWindow) {
  // size 3: windows {0, 1}, {0, 1, 2}, {1, 2}; alpha / size = 1, beta 1, bias 1.
  expect_near(run_lrn(3, 3, 1, 1), {1.0f / 6, 2.0f / 15, 3.0f / 14});
  // size 2: windows {0, 1}, {1, 2}, {2} (floor before, ceil after).
  expect_near(run_lrn(2, 2, 1, 1), {1.0f / 6, 2.0f / 14, 3.0f / 10});
  // beta 0.5, bias 2, alpha / size = 0.5 over size 1: x / sqrt(2 + x^2 / 2).
  expect_near(run_lrn(1, 0.5f, 0.5f, 2), {1 / std::sqrt(2.5f), 2 / std::sqrt(4.0f), 3 / std::sqrt(6.5f)});
}

}  // namespace
}  // namespace baton
