// The ops whose output sizes depend on their input's values. nonzero
// (src/ops/nonzero.cpp): coordinates against a plain walk over the elements in every dtype
// and rank (NaN counts as nonzero), strided inputs, inputs split over many pieces. unique
// (src/ops/unique.cpp): hand-worked values, slices, first appearance order, errors. The
// harness runs both eagerly, as graphs (staged plans) and compiled.
#include <gtest/gtest.h>

#include <limits>

#include "harness/op_harness.h"

namespace baton::testing {
namespace {

// What nonzero must give, by a plain walk over the elements.
Tensor nonzero_reference(const Tensor& x) {
  const std::vector<double> v = cast(x, f64).contiguous().to_vector<double>();
  const Shape& shape = x.shape();
  std::vector<int64_t> rows;
  int64_t count = 0;
  for (int64_t i = 0; i < int64_t(v.size()); ++i) {
    if (v[size_t(i)] == 0) continue;
    ++count;
    std::vector<int64_t> at(shape.size());
    for (int64_t d = int64_t(shape.size()), rest = i; d-- > 0; rest /= shape[size_t(d)])
      at[size_t(d)] = rest % shape[size_t(d)];
    rows.insert(rows.end(), at.begin(), at.end());
  }
  return tensor(rows, Shape{count, x.dim()});
}

void expect_same(const Tensor& got, const Tensor& want) {
  ASSERT_EQ(got.dtype(), DType::i64);
  ASSERT_EQ(got.shape(), want.shape());
  EXPECT_EQ(got.contiguous().to_vector<int64_t>(), want.to_vector<int64_t>());
}

OpCase nonzero_case(const std::string& what, Shape shape, double zero_share) {
  OpCase c;
  c.name = str("index.nonzero/", what);
  // Values below zero_share * 4 - 2 become 0: about that share of zeros.
  c.make_inputs = [shape, zero_share] {
    Tensor u = uniform(shape, -2, 2, 11);
    return Inputs{u * cast(u > zero_share * 4 - 2, f64)};
  };
  c.fn = [](const Inputs& in) { return nonzero(in[0]); };
  c.reference = [](const Inputs& in) { return nonzero_reference(in[0]); };
  c.check_grad = false;  // integer coordinates
  c.atol = c.rtol = 0;
  return c;
}

BATON_OP_CASES {
  return {nonzero_case("1d", {9}, 0.5), nonzero_case("2d", {4, 5}, 0.3), nonzero_case("3d_mostly_zero", {3, 4, 2}, 0.9),
          nonzero_case("all_zero", {2, 3}, 1.0), nonzero_case("scalar", {}, 0.2), nonzero_case("empty", {3, 0}, 0.5)};
}

TEST(Nonzero, CoordinatesInRowMajorOrder) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor x = tensor(std::vector<float>{0, 1, 0, 2, 0, nan}, Shape{2, 3});
  expect_same(nonzero(x), tensor(std::vector<int64_t>{0, 1, 1, 0, 1, 2}, Shape{3, 2}));  // NaN counts
}

TEST(Nonzero, EveryDtypeAndRank) {
  expect_same(nonzero(tensor(std::vector<int32_t>{0, 7, -1, 0}, Shape{4})),
              tensor(std::vector<int64_t>{1, 2}, Shape{2, 1}));
  expect_same(nonzero(tensor(std::vector<bool>{true, false, true, true}, Shape{2, 2})),
              tensor(std::vector<int64_t>{0, 0, 1, 0, 1, 1}, Shape{3, 2}));
  expect_same(nonzero(scalar_tensor<double>(2.5)), tensor(std::vector<int64_t>{}, Shape{1, 0}));
  expect_same(nonzero(scalar_tensor<double>(0)), tensor(std::vector<int64_t>{}, Shape{0, 0}));
  expect_same(nonzero(zeros({3, 0, 2})), tensor(std::vector<int64_t>{}, Shape{0, 3}));
  Tensor strided = transpose(uniform({5, 7}, -1, 1, 3).to(f32) > 0.2, 0, 1);
  expect_same(nonzero(strided), nonzero_reference(strided));
}

// Big enough for many pieces counted side by side (nonzero.cpp), with runs of zeros
// across the pieces' edges.
TEST(Nonzero, ManyPieces) {
  Tensor x = relu(uniform({3, 1000, 301}, -3, 1, 5)).to(f32);
  expect_same(nonzero(x), nonzero_reference(x));
}

TEST(Nonzero, HasNoGradient) {
  Tensor x = tensor(std::vector<float>{0, 1, 2}, Shape{3}).requires_grad_(true);
  Tensor idx = nonzero(x);
  EXPECT_FALSE(idx.requires_grad());
}

// ---- unique ----------------------------------------------------------------------------

std::vector<int64_t> ints(const Tensor& t) { return t.contiguous().to_vector<int64_t>(); }

TEST(Unique, SortedElementsWithIndicesInverseAndCounts) {
  const UniqueResult r = unique(tensor(std::vector<float>{2, 1, 1, 3, 4, 3}, Shape{6}));
  EXPECT_EQ(r.values.to_vector<float>(), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(ints(r.first_indices), (std::vector<int64_t>{1, 0, 3, 4}));
  EXPECT_EQ(ints(r.inverse), (std::vector<int64_t>{1, 0, 0, 2, 3, 2}));
  EXPECT_EQ(ints(r.counts), (std::vector<int64_t>{2, 1, 2, 1}));
  const UniqueResult u = unique(tensor(std::vector<int32_t>{2, 1, 1, 3, 4, 3}, Shape{2, 3}), std::nullopt, false);
  EXPECT_EQ(u.values.to_vector<int32_t>(), (std::vector<int32_t>{2, 1, 3, 4}));  // first appearance
  EXPECT_EQ(ints(u.inverse), (std::vector<int64_t>{0, 1, 1, 2, 3, 2}));
}

// Slices along a dim compare lexicographically: the columns of [[1, 0, 1], [2, 5, 2]].
TEST(Unique, SlicesAlongADim) {
  const UniqueResult r = unique(tensor(std::vector<double>{1, 0, 1, 2, 5, 2}, Shape{2, 3}), 1);
  EXPECT_EQ(r.values.shape(), (Shape{2, 2}));
  EXPECT_EQ(r.values.to_vector<double>(), (std::vector<double>{0, 1, 5, 2}));
  EXPECT_EQ(ints(r.first_indices), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(ints(r.inverse), (std::vector<int64_t>{1, 0, 1}));
  EXPECT_EQ(ints(r.counts), (std::vector<int64_t>{1, 2}));
}

TEST(Unique, Errors) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_THROWS_WITH(ValueError, unique(tensor(std::vector<float>{1, nan}, Shape{2})), "[unique]", "NaN");
  EXPECT_THROWS_WITH(ShapeError, unique(scalar_tensor<float>(1), 0), "[unique]", "rank 1 or more");
  EXPECT_THROWS_WITH(IndexError, unique(zeros({2, 3}), 2), "[unique]", "out of range");
}

// What unique gives for the [6, 2] input of the cases below, worked by hand: its rows are
// (3,1) (0,2) (3,1) (-1,4) (0,2) (3,0), its elements 3 1 0 2 3 1 -1 4 0 2 3 0. The values
// are the input at the first indices.
struct UniqueExpected {
  std::vector<int64_t> first, inverse, counts;
};
const UniqueExpected kElements{{6, 2, 1, 3, 0, 7}, {4, 2, 1, 3, 4, 2, 0, 5, 1, 3, 4, 1}, {1, 3, 2, 2, 3, 1}};
const UniqueExpected kRowsSorted{{3, 1, 5, 0}, {3, 1, 3, 0, 1, 2}, {1, 2, 1, 2}};
const UniqueExpected kRowsUnsorted{{0, 1, 3, 5}, {0, 1, 0, 2, 1, 3}, {2, 2, 1, 1}};

Tensor i64s(const std::vector<int64_t>& v) { return tensor(v, Shape{int64_t(v.size())}); }

// One output (0 values, 1 first indices, 2 inverse, 3 counts) of unique over that input.
OpCase unique_case(const std::string& what, std::optional<int64_t> dim, bool sorted, int output) {
  OpCase c;
  c.name = str("index.unique/", what);
  c.make_inputs = [] { return Inputs{tensor(std::vector<double>{3, 1, 0, 2, 3, 1, -1, 4, 0, 2, 3, 0}, Shape{6, 2})}; };
  c.fn = [=](const Inputs& in) {
    const UniqueResult r = unique(in[0], dim, sorted);
    return std::vector<Tensor>{r.values, r.first_indices, r.inverse, r.counts}[size_t(output)];
  };
  c.reference = [=](const Inputs& in) {
    const UniqueExpected& e = !dim ? kElements : sorted ? kRowsSorted : kRowsUnsorted;
    const Tensor values = index_select(dim ? in[0] : reshape(in[0], {-1}), 0, i64s(e.first));
    return std::vector<Tensor>{values, i64s(e.first), i64s(e.inverse), i64s(e.counts)}[size_t(output)];
  };
  c.check_grad = false;  // a selection, no gradient through unique
  c.atol = c.rtol = 0;
  return c;
}

BATON_OP_CASES {
  return {unique_case("elements", std::nullopt, true, 0), unique_case("elements_first", std::nullopt, true, 1),
          unique_case("elements_inverse", std::nullopt, true, 2), unique_case("elements_counts", std::nullopt, true, 3),
          unique_case("rows", 0, true, 0), unique_case("rows_inverse", 0, true, 2),
          unique_case("rows_unsorted", 0, false, 0), unique_case("rows_unsorted_counts", 0, false, 3)};
}

}  // namespace
}  // namespace baton::testing
