// element_count and full_like (ops that read only their input's shape), zeros_like and
// ones_like, and ops::size_count: the element counts that mean, var, the losses,
// batch_norm and layer_norm divide by. Eagerly they must compute what they always did; in
// a graph built once for a symbolic `batch` they must be right for every batch it runs with.
#include <cmath>

#include "harness/op_harness.h"
#include "ops/common.h"

namespace baton::testing {
namespace {

// The count as the op's dtype, which follows the input's (f64, or f32 in the f32 run).
OpCase count_case(std::string name, Shape shape, Dims dims, double expected) {
  return OpCase{
      .name = "shape_scalars.element_count/" + name,
      .make_inputs = [shape] { return Inputs{uniform(shape)}; },
      .fn = [dims](const Inputs& in) { return element_count(in[0], dims, in[0].dtype()); },
      .reference = [expected](const Inputs&) { return scalar_tensor(expected, f64); },
      .check_grad = false,
  };
}

OpCase full_like_case(std::string name, std::function<Tensor(const Tensor&)> input, double value) {
  return OpCase{
      .name = "shape_scalars.full_like/" + name,
      .make_inputs = [input] { return Inputs{input(uniform({2, 3, 4}))}; },
      .fn = [value](const Inputs& in) { return full_like(in[0], value, in[0].dtype()); },
      .reference = [value](const Inputs& in) { return full(in[0].shape(), value, f64); },
      .check_grad = false,
  };
}

BATON_OP_CASES {
  return {
      count_case("all", {2, 3, 4}, {}, 24),
      count_case("some_dims", {2, 3, 4}, {0, -1}, 8),
      count_case("one_dim", {2, 3, 4}, {1}, 3),
      count_case("zero_d", {}, {}, 1),
      count_case("empty_dim", {0, 3}, {}, 0),
      count_case("beside_an_empty_dim", {0, 3}, {1}, 3),
      OpCase{
          .name = "shape_scalars.element_count/as_i64",
          .make_inputs = [] { return Inputs{uniform({5, 7})}; },
          .fn = [](const Inputs& in) { return element_count(in[0], {0}, i64); },
          .reference = [](const Inputs&) { return scalar_tensor(int64_t(5)); },
          .check_grad = false,
      },
      full_like_case("contiguous", [](const Tensor& x) { return x; }, 2.5),
      full_like_case("of_a_view", [](const Tensor& x) { return transpose(x, 0, 2); }, -1),
      full_like_case("zero_d", [](const Tensor& x) { return sum(x); }, 3),
      full_like_case("empty", [](const Tensor& x) { return slice(x, 1, 0, 0); }, 1),
      OpCase{
          .name = "shape_scalars.full_like/as_i32",
          .make_inputs = [] { return Inputs{uniform({3, 2})}; },
          .fn = [](const Inputs& in) { return full_like(in[0], 7, i32); },
          .reference = [](const Inputs&) { return full({3, 2}, 7, i32); },
          .check_grad = false,
      },
  };
}

TEST(ElementCount, ResultIsA0dTensorOfTheAskedDtype) {
  Tensor x = zeros({4, 5}, i32);
  Tensor n = element_count(x, {}, f32);
  EXPECT_EQ(n.dtype(), f32);
  EXPECT_EQ(n.shape(), Shape{});
  EXPECT_EQ(n.item<float>(), 20.0f);
  EXPECT_EQ(element_count(x, {-1}, i64).item<int64_t>(), 5);
  EXPECT_EQ(element_count(scalar_tensor(2.0, f64), {0}, i64).item<int64_t>(), 1);  // as reductions
}

TEST(ElementCount, BadDimsNameTheOpAndLine) {
  Tensor x = zeros({2, 3});
  int line = __LINE__ + 1;
  EXPECT_THROWS_WITH(IndexError, element_count(x, {2}, f32), "[element_count]", "dim 2", "[2,3]",
                     "shape_scalars_test.cpp:" + std::to_string(line));
  EXPECT_THROWS_WITH(IndexError, element_count(x, {-3}, f32), "[element_count]", "dim -3");
  EXPECT_THROWS_WITH(ValueError, element_count(x, {1, -1}, f32), "[element_count]", "twice");
}

TEST(ShapeScalars, HaveNoGradient) {
  Tensor x = uniform({2, 3}).requires_grad_();
  EXPECT_FALSE(element_count(x, {}, f64).requires_grad());
  EXPECT_FALSE(full_like(x, 1, f64).requires_grad());
}

TEST(FullLike, TakesOnlyTheShapeAndIsContiguous) {
  Tensor x = uniform({3, 4}).t();  // strided
  Tensor y = full_like(x, 0.5, f32);
  EXPECT_EQ(y.shape(), Shape({4, 3}));
  EXPECT_EQ(y.dtype(), f32);
  EXPECT_TRUE(y.is_contiguous());
  EXPECT_EQ(y.to_vector<float>(), std::vector<float>(12, 0.5f));
  EXPECT_EQ(full_like(x, true, b8).to_vector<bool>(), std::vector<bool>(12, true));
}

TEST(FullLike, ZerosLikeAndOnesLikeOfConcreteTensorsAreUnchanged) {
  Tensor x = tensor({{1, 2, 3}, {4, 5, 6}});  // i32
  Tensor z = zeros_like(x), o = ones_like(x);
  EXPECT_EQ(z.dtype(), i32);
  EXPECT_EQ(z.shape(), Shape({2, 3}));
  EXPECT_EQ(z.to_vector<int>(), std::vector<int>(6, 0));
  EXPECT_EQ(o.to_vector<int>(), std::vector<int>(6, 1));
}

// What apply() hands its function: the number (NaN when it is a tensor) or the tensor.
double number_of(const ops::SizeCount& n) {
  double value = std::nan("");
  n.apply([&](auto k) {
    if constexpr (std::is_same_v<decltype(k), double>) value = k;
    return Tensor{};
  });
  return value;
}
Tensor tensor_of(const ops::SizeCount& n) {
  return n.apply([&](auto k) {
    if constexpr (std::is_same_v<decltype(k), double>) return Tensor{};
    else return k;
  });
}

ops::SizeCount count_of(const Tensor& x, const Dims& dims, DType dtype = f32) {
  return ops::size_count(x, dims, dtype, SourceLoc::current());
}

TEST(SizeCount, StaticSizesGiveThePlainNumber) {
  Tensor x = zeros({2, 3, 4});
  EXPECT_FALSE(count_of(x, {}).is_symbolic());
  EXPECT_EQ(number_of(count_of(x, {})), 24);
  EXPECT_EQ(number_of(count_of(x, {0, 2})), 8);
  EXPECT_EQ(number_of(count_of(scalar_tensor(1.0, f32), {})), 1);
  EXPECT_EQ(number_of(count_of(scalar_tensor(1.0, f32), {0})), 1);
  EXPECT_FALSE(tensor_of(count_of(x, {1})).defined());
}

TEST(SizeCount, ASymbolicCountedDimGivesAnElementCountTensor) {
  Graph g;
  Tensor x = g.placeholder(f32, {"batch", 10}, "x");
  EXPECT_EQ(number_of(count_of(x, {1})), 10);  // the symbolic dim is not counted
  for (const Dims& dims : {Dims{}, Dims{0}, Dims{0, 1}}) {
    ops::SizeCount n = count_of(x, dims, f64);
    ASSERT_TRUE(n.is_symbolic());
    EXPECT_TRUE(std::isnan(number_of(n)));
    Tensor t = tensor_of(n);
    ASSERT_TRUE(t.defined());
    EXPECT_TRUE(t.is_symbolic());
    EXPECT_EQ(t.dtype(), f64);
    EXPECT_EQ(t.shape(), Shape{});
  }
}

// The functions that divide by a count keep their eager results (the static path).
TEST(SizeCount, EagerUsersKeepTheirValues) {
  Tensor x = tensor({{1.0, 2.0, 3.0}, {4.0, 6.0, 8.0}});
  EXPECT_EQ(mean(x).item<double>(), 4.0);
  EXPECT_EQ(mean(x, {1}).to_vector<double>(), (std::vector<double>{2, 6}));
  EXPECT_EQ(mean(tensor({1, 2})).dtype(), f32);
  EXPECT_EQ(var(x, {1}).to_vector<double>(), (std::vector<double>{1, 4}));
  EXPECT_EQ(var(x, {1}, false, 0).to_vector<double>(), (std::vector<double>{2.0 / 3, 8.0 / 3}));
  EXPECT_EQ(mse_loss(x, zeros_like(x)).item<double>(), (1 + 4 + 9 + 16 + 36 + 64) / 6.0);

  Tensor logits = x.detach().requires_grad_();
  cross_entropy(logits, tensor({int64_t(0), int64_t(2)})).backward();
  Tensor expected = (softmax(x, 1) - tensor({{1.0, 0.0, 0.0}, {0.0, 0.0, 1.0}})) / 2.0;
  EXPECT_ALL_CLOSE(logits.grad(), expected, 1e-15, 0);
}

// --- symbolic: graphs built once for `batch`, run with two batch sizes ---

// Builds fn on a placeholder [batch, rest...] (f64) and checks a Session run against eager
// fn for two batch sizes.
void expect_same_as_eager(const std::function<Tensor(const Tensor&)>& fn, const Shape& rest) {
  Graph g;
  std::vector<SymDim> dims{"batch"};
  for (int64_t d : rest) dims.push_back(d);
  Tensor x = g.placeholder(f64, dims, "x");
  Tensor y = fn(x);
  ASSERT_TRUE(y.is_symbolic());
  Session sess(g);
  for (int64_t batch : {2, 5}) {
    Shape shape = rest;
    shape.insert(0, batch);
    Tensor tx = uniform(shape, -1, 1, uint64_t(batch));
    EXPECT_ALL_CLOSE(sess.run({y}, {{x, tx}})[0], fn(tx), 1e-12, 1e-12) << "batch " << batch;
  }
}

TEST(SymbolicCounts, MeanAndVar) {
  expect_same_as_eager([](const Tensor& x) { return mean(x); }, {3});
  expect_same_as_eager([](const Tensor& x) { return mean(x, {0}); }, {3});
  expect_same_as_eager([](const Tensor& x) { return mean(x, {1}); }, {3});
  expect_same_as_eager([](const Tensor& x) { return var(x, {0}); }, {3});
  expect_same_as_eager([](const Tensor& x) { return var(x, {}, false, 0); }, {3});
}

// The gradient of loss(x @ w) with respect to w, from a graph built for `batch` and run
// with two batch sizes, against eager autograd.
void expect_grad_same_as_eager(const std::function<Tensor(const Tensor&)>& loss, int64_t features,
                               int64_t outputs) {
  Graph g;
  Tensor x = g.placeholder(f64, {"batch", features}, "x");
  Tensor w = g.variable(uniform({features, outputs}, -1, 1, 9), "w");
  Tensor l = loss(matmul(x, w));
  Tensor gw = grad({l}, {w})[0];
  Session sess(g);
  for (int64_t batch : {2, 5}) {
    Tensor tx = uniform({batch, features}, -1, 1, uint64_t(batch));
    std::vector<Tensor> out = sess.run({l, gw}, {{x, tx}});
    Tensor ew = g.value_of(w).clone().requires_grad_();
    Tensor el = loss(matmul(tx, ew));
    el.backward();
    EXPECT_ALL_CLOSE(out[0], el, 1e-12, 1e-12) << "batch " << batch;
    EXPECT_ALL_CLOSE(out[1], ew.grad(), 1e-12, 1e-12) << "batch " << batch;
  }
}

TEST(SymbolicCounts, Gradients) {
  expect_grad_same_as_eager([](const Tensor& y) { return mean(y); }, 4, 3);
  expect_grad_same_as_eager([](const Tensor& y) { return var(y, {0}).sum(); }, 4, 3);
  expect_grad_same_as_eager([](const Tensor& y) { return mse_loss(y, zeros_like(y)); }, 4, 3);
  auto target = [](const Tensor& y) { return argmax(y, 1); };  // i64, computed in the graph
  expect_grad_same_as_eager([&](const Tensor& y) { return cross_entropy(y, target(y)); }, 4, 3);
  expect_grad_same_as_eager([&](const Tensor& y) { return nll_loss(log_softmax(y, 1), target(y)); },
                            4, 3);
  expect_grad_same_as_eager([](const Tensor& y) { return (layer_norm(y, {3}) * y).mean(); }, 4, 3);
}

TEST(SymbolicCounts, ZerosLikeAndOnesLike) {
  expect_same_as_eager([](const Tensor& x) { return zeros_like(x); }, {3});
  expect_same_as_eager([](const Tensor& x) { return ones_like(x) + x; }, {3});
  expect_same_as_eager([](const Tensor& x) { return full_like(x, 2, i32); }, {3});
}

TEST(SymbolicCounts, ElementCount) {
  expect_same_as_eager([](const Tensor& x) { return element_count(x, {}, f64); }, {3});
  expect_same_as_eager([](const Tensor& x) { return element_count(x, {0}, i64); }, {3});
}

}  // namespace
}  // namespace baton::testing
