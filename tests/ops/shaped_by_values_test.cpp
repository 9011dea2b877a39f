// The ops whose output shape is read from a tensor's values when they run
// (src/ops/shaped_by_values.cpp, src/ops/sum_over.cpp): reshape_to, expand_to, range_of
// and sum_over. Values against reshape, expand, sum and a plain loop; gradients against
// finite differences; in a graph, the dims are fresh symbols and one session runs any
// values (a staged plan); errors name the op.
// The harness's graph gradients multiply such an output (symbolic dims) by static weights:
// the broadcast's gradient sums over dims chosen when it runs (sum_to_shape_of, tested here).
#include <gtest/gtest.h>

#include <cmath>

#include "dispatch/registry.h"
#include "harness/op_harness.h"

namespace baton::testing {
namespace {

Tensor sizes(std::vector<int64_t> values) {
  const auto n = int64_t(values.size());
  return tensor(values, Shape{n});
}

OpCase reshape_to_case(const std::string& what, Shape from, std::vector<int64_t> to, bool copy_zeros, Shape want) {
  OpCase c;
  c.name = str("shape.reshape_to/", what);
  c.make_inputs = [from, to] { return Inputs{uniform(from, -2, 2, 3), sizes(to)}; };
  c.fn = [copy_zeros](const Inputs& in) { return reshape_to(in[0], in[1], copy_zeros); };
  c.reference = [want](const Inputs& in) { return reshape(in[0], want); };
  c.grad_inputs = {0};
  return c;
}

OpCase expand_to_case(const std::string& what, Shape from, std::vector<int64_t> to, Shape want) {
  OpCase c;
  c.name = str("shape.expand_to/", what);
  c.make_inputs = [from, to] { return Inputs{uniform(from, -2, 2, 5), sizes(to)}; };
  c.fn = [](const Inputs& in) { return expand_to(in[0], in[1]); };
  c.reference = [want](const Inputs& in) { return expand(in[0], want).contiguous(); };
  c.grad_inputs = {0};
  return c;
}

// start + i * delta for i below max(ceil((limit - start) / delta), 0), by a plain loop.
Tensor range_reference(double start, double limit, double delta) {
  std::vector<double> values;
  for (int64_t i = 0; i < int64_t(std::ceil((limit - start) / delta)); ++i) values.push_back(start + double(i) * delta);
  return tensor(values, Shape{int64_t(values.size())});
}

OpCase range_of_case(const std::string& what, double start, double limit, double delta) {
  OpCase c;
  c.name = str("shape.range_of/", what);
  c.make_inputs = [=] {
    return Inputs{scalar_tensor<double>(start), scalar_tensor<double>(limit), scalar_tensor<double>(delta)};
  };
  c.fn = [](const Inputs& in) { return range_of(in[0], in[1], in[2]); };
  c.reference = [=](const Inputs&) { return range_reference(start, limit, delta); };
  c.check_grad = false;  // its values do not vary smoothly with the bounds
  return c;
}

// sum_to_shape_of(g, like): g summed down to like's shape, the dims chosen when it runs.
OpCase sum_to_shape_of_case(const std::string& what, Shape g, Shape like) {
  OpCase c;
  c.name = str("reduce.sum_to_shape_of/", what);
  c.make_inputs = [g, like] { return Inputs{uniform(g, -2, 2, 9), zeros(like, f64)}; };
  c.fn = [](const Inputs& in) {
    return ops::call_many(*ops::find_op("sum_to_shape_of"), in, {}, SourceLoc::current())[0];
  };
  c.reference = [like](const Inputs& in) { return sum_to_size(in[0], like); };
  c.grad_inputs = {0};
  return c;
}

// sum_over(x, dims): sum with its dims in a tensor.
OpCase sum_over_case(const std::string& what, std::vector<int64_t> dims, bool keepdim, std::vector<int64_t> want) {
  OpCase c;
  c.name = str("reduce.sum_over/", what);
  c.make_inputs = [dims] { return Inputs{uniform({2, 3, 4}, -2, 2, 11), sizes(dims)}; };
  c.fn = [keepdim](const Inputs& in) { return sum_over(in[0], in[1], keepdim); };
  c.reference = [want, keepdim](const Inputs& in) { return sum(in[0], want, keepdim); };
  c.grad_inputs = {0};
  return c;
}

OpCase moving_dims_case(const std::string& op, const std::string& what, Shape from, std::vector<int64_t> dims,
                        Shape want) {
  OpCase c;
  c.name = str("shape.", op, "/", what);
  c.make_inputs = [from, dims] { return Inputs{uniform(from, -2, 2, 13), sizes(dims)}; };
  c.fn = [op](const Inputs& in) { return op == "unsqueeze_at" ? unsqueeze_at(in[0], in[1]) : squeeze_at(in[0], in[1]); };
  c.reference = [want](const Inputs& in) { return reshape(in[0], want); };
  c.grad_inputs = {0};
  return c;
}

BATON_OP_CASES {
  return {moving_dims_case("unsqueeze_at", "front_and_back", {2, 3}, {0, -1}, {1, 2, 3, 1}),
          moving_dims_case("unsqueeze_at", "middle", {2, 3}, {2, 1}, {2, 1, 1, 3}),
          moving_dims_case("squeeze_at", "two", {1, 2, 1, 3}, {-2, 0}, {2, 3}),
          moving_dims_case("squeeze_at", "to_scalar", {1}, {0}, {})};
}

TEST(ShapedByValues, MovingDimsBadPositionsAreErrors) {
  const Tensor x = zeros({2, 1});
  EXPECT_TRUE(throws_with<IndexError>([&] { unsqueeze_at(x, sizes({3})); }, {"unsqueeze_at", "dim 3 is out of range"}));
  EXPECT_TRUE(throws_with<ValueError>([&] { unsqueeze_at(x, sizes({1, -3})); }, {"unsqueeze_at", "twice"}));
  EXPECT_TRUE(throws_with<ValueError>([&] { squeeze_at(x, sizes({0})); }, {"squeeze_at", "which is not 1"}));
  EXPECT_TRUE(throws_with<DTypeError>([&] { squeeze_at(x, zeros({1})); }, {"squeeze_at", "integers"}));
}

BATON_OP_CASES {
  return {sum_over_case("keepdim", {0, -1}, true, {0, 2}), sum_over_case("drop_one", {1}, false, {1}),
          sum_over_case("drop_all", {2, 1, 0}, false, {0, 1, 2})};
}

BATON_OP_CASES {
  return {sum_to_shape_of_case("leading_and_ones", {2, 3, 4}, {3, 1}),
          sum_to_shape_of_case("same", {2, 3}, {2, 3}),
          sum_to_shape_of_case("to_scalar", {2, 3}, {})};
}

BATON_OP_CASES {
  return {reshape_to_case("infer_one", {2, 3, 4}, {4, -1}, false, {4, 6}),
          reshape_to_case("copy_zeros", {2, 3, 4}, {0, 0, 2, 2}, true, {2, 3, 2, 2}),
          reshape_to_case("to_scalar", {1, 1}, {}, false, {}),
          reshape_to_case("empty", {0, 3}, {3, 0}, false, {3, 0}),
          expand_to_case("leading_dims", {3, 1}, {2, 3, 4}, {2, 3, 4}),
          expand_to_case("both_ways", {1, 3, 1}, {2, 1, 5}, {2, 3, 5}),
          expand_to_case("fewer_values", {2, 3}, {3}, {2, 3}),
          range_of_case("up", 1, 4, 0.5),
          range_of_case("down", 5, -1, -2),
          range_of_case("empty", 3, 1, 1)};
}

TEST(ShapedByValues, IntegerRangesAndShapesOfI32) {
  const Tensor r = range_of(scalar_tensor<int64_t>(10), scalar_tensor<int64_t>(0), scalar_tensor<int64_t>(-3));
  EXPECT_EQ(r.dtype(), DType::i64);
  EXPECT_EQ(r.to_vector<int64_t>(), (std::vector<int64_t>{10, 7, 4, 1}));
  const Tensor x = arange(0, 6, 1, f32);
  EXPECT_EQ(reshape_to(x, tensor(std::vector<int32_t>{3, 2}, Shape{2})).shape(), (Shape{3, 2}));
}

TEST(ShapedByValues, TheOutputIsACopy) {
  Tensor x = zeros({2, 3});
  Tensor y = reshape_to(x, sizes({3, 2}));
  x.fill_(1.0);
  EXPECT_EQ(y.sum().item<float>(), 0.f);
}

TEST(ShapedByValues, BadValuesAreErrorsNamingTheOp) {
  const Tensor x = zeros({2, 3});
  EXPECT_TRUE(throws_with<ShapeError>([&] { reshape_to(x, sizes({-1, -1})); }, {"reshape_to", "only one -1"}));
  EXPECT_TRUE(throws_with<ShapeError>([&] { reshape_to(x, sizes({4, 2})); }, {"reshape_to", "cannot reshape [2,3]"}));
  EXPECT_TRUE(throws_with<ShapeError>([&] { reshape_to(x, sizes({0, 0, 0}), true); }, {"copies dim 2"}));
  EXPECT_TRUE(throws_with<DTypeError>([&] { reshape_to(x, zeros({2})); }, {"reshape_to", "1-D tensor of integers"}));
  EXPECT_TRUE(throws_with<ShapeError>([&] { expand_to(x, sizes({4, 3})); }, {"expand_to", "cannot expand [2,3]"}));
  EXPECT_TRUE(throws_with<ShapeError>([&] { expand_to(x, sizes({-2})); }, {"expand_to"}));
  EXPECT_TRUE(throws_with<ShapeError>([&] { expand_to(x, zeros({2, 2}, i64)); }, {"expand_to", "known length"}));
  const Tensor zero = scalar_tensor<double>(0), one = scalar_tensor<double>(1);
  EXPECT_TRUE(throws_with<ValueError>([&] { range_of(zero, one, zero); }, {"range_of", "no finite range"}));
  EXPECT_TRUE(throws_with<DTypeError>([&] { range_of(zero, scalar_tensor<float>(1), one); }, {"range_of", "one dtype"}));
}

TEST(ShapedByValues, SumOverBadDimsAreErrors) {
  const Tensor x = zeros({2, 3});
  EXPECT_TRUE(throws_with<ShapeError>([&] { sum_over(x, zeros({0}, i64)); }, {"sum_over", "at least one dim"}));
  EXPECT_TRUE(throws_with<DTypeError>([&] { sum_over(x, zeros({1})); }, {"sum_over", "1-D tensor of integers"}));
  EXPECT_TRUE(throws_with<Error>([&] { sum_over(x, sizes({1, -1})); }, {"twice"}));
  EXPECT_TRUE(throws_with<Error>([&] { sum_over(x, sizes({2})); }, {"dim 2"}));
}

// Dims fed to a graph: each run sums over the dims it is given; the gradient too.
TEST(ShapedByValues, SumOverFedDimsInAGraph) {
  Graph g("sum_over");
  Tensor x = g.placeholder(f64, {2, 3, 4}, "x");
  Tensor dims = g.placeholder(i64, {1}, "dims");
  Tensor y = sum_over(x, dims) * 2.0;
  Tensor dx = grad({sum(y * y)}, {x})[0];
  Session sess(g);
  const Tensor xv = uniform({2, 3, 4}, -1, 1, 5);
  for (int64_t d : {0, 2, -2}) {
    Tensor xe = xv.clone().requires_grad_();
    Tensor ye = sum(xe, {d}) * 2.0;
    sum(ye * ye).backward();
    std::vector<Tensor> got = sess.run({y, dx}, {{x, xv}, {dims, sizes({d})}});
    EXPECT_ALL_CLOSE(got[0], ye.detach(), 1e-12, 0);
    EXPECT_ALL_CLOSE(got[1], xe.grad(), 1e-12, 0);
  }
}

// In a graph the output dims are fresh symbols, except where expand_to keeps a known size;
// one session runs any values, its steps after the op specialized per size (stages).
TEST(ShapedByValues, InAGraphTheDimsAreSymbolsBoundWhenItRuns) {
  Graph g("shaped");
  Tensor x = g.placeholder(f32, {"n", 4}, "x");
  Tensor shape = g.placeholder(i64, {2}, "shape");
  Tensor rows = reshape_to(x, shape) * 2.0f;
  Tensor wide = expand_to(x, shape);
  EXPECT_TRUE(sym::is_symbol(rows.shape()[0]) && sym::is_symbol(rows.shape()[1]));
  EXPECT_TRUE(sym::is_symbol(wide.shape()[0]));
  EXPECT_EQ(wide.shape()[1], 4);  // x's size, whatever the values say
  Tensor total = sum(rows, {1});
  for (OptLevel level : {OptLevel::O0, OptLevel::O2}) {
    Session sess(g, {.level = level});
    for (auto [n, to] : std::vector<std::pair<int64_t, std::vector<int64_t>>>{{3, {2, 6}}, {3, {6, -1}}, {5, {-1, 10}}}) {
      const Tensor xv = uniform({n, 4}, -1, 1, uint64_t(n)).to(f32);
      std::vector<Tensor> got = sess.run({rows, total}, {{x, xv}, {shape, sizes(to)}});
      const Tensor want = reshape(xv, Shape(to)) * 2.0f;
      EXPECT_ALL_CLOSE(got[0], want, 0, 0);
      EXPECT_ALL_CLOSE(got[1], sum(want, {1}), 1e-6, 1e-6);
    }
    const Tensor xv = ones({1, 4});
    EXPECT_ALL_CLOSE(sess.run({wide}, {{x, xv}, {shape, sizes({3, 1})}})[0], ones({3, 4}), 0, 0);
  }
}

// expand_to's gradient where x's size is a symbol that is 1 in one run and not in the
// other: the dims to sum are chosen when the graph runs (sum_to_shape_of).
TEST(ShapedByValues, ExpandGradientWhereASymbolicSizeMayBeOne) {
  Graph g("expand_grad");
  Tensor x = g.placeholder(f64, {"n", 1}, "x");
  Tensor shape = g.placeholder(i64, {2}, "shape");
  Tensor dx = grad({sum(expand_to(x, shape) * 3.0)}, {x})[0];
  Session sess(g);
  for (auto [n, to] : std::vector<std::pair<int64_t, std::vector<int64_t>>>{{2, {2, 3}}, {1, {4, 3}}}) {
    Tensor xv = uniform({n, 1}, -1, 1, 3).requires_grad_();
    sum(expand_to(xv, sizes(to)) * 3.0).backward();
    EXPECT_ALL_CLOSE(sess.run({dx}, {{x, xv.detach()}, {shape, sizes(to)}})[0], xv.grad(), 1e-12, 0);
  }
}

// A compiled function whose shape tensor it computes from its input's values.
TEST(ShapedByValues, CompiledFunctionsReadTheValuesEachCall) {
  auto f = compile([](const Tensor& x, const Tensor& n) {
    return reshape_to(x, cat({reshape(n, {1}), sizes({-1})}, 0)) + range_of(scalar_tensor<float>(0), cast(n, f32), scalar_tensor<float>(1)).reshape({-1, 1});
  });
  for (int64_t n : {2, 3, 6}) {
    const Tensor x = arange(0, 6, 1, f32), nv = scalar_tensor<int64_t>(n);
    const Tensor want = reshape(x, {n, -1}) + arange(0, double(n), 1, f32).reshape({n, 1});
    EXPECT_ALL_CLOSE(f(x, nv), want, 0, 0);
  }
}

}  // namespace
}  // namespace baton::testing
