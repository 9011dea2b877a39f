// sum, mean, prod, max, min, var, logsumexp, argmax, argmin against naive loops in double
// (and PyTorch values for var and logsumexp).
#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "harness/op_harness.h"

namespace baton::testing {
namespace {

using Fold = std::function<double(const std::vector<double>&)>;

// Groups the elements of x by output position (naive index arithmetic) and folds each group.
Tensor reduce_ref(const Tensor& x, Dims dims, bool keepdim, const Fold& f) {
  const int64_t rank = x.dim();
  std::vector<bool> reduced(size_t(rank), dims.empty());
  for (int64_t d : dims) reduced[size_t(d < 0 ? d + rank : d)] = true;
  Shape out_shape, kept_sizes;
  for (int64_t d = 0; d < rank; ++d) {
    if (!reduced[size_t(d)]) kept_sizes.push_back(x.shape()[size_t(d)]);
    if (!reduced[size_t(d)] || keepdim) out_shape.push_back(reduced[size_t(d)] ? 1 : x.shape()[size_t(d)]);
  }
  std::vector<std::vector<double>> groups(size_t(kept_sizes.numel()));
  std::vector<double> v = x.contiguous().to_vector<double>();
  for (int64_t i = 0; i < int64_t(v.size()); ++i) {
    int64_t rem = i, out = 0, scale = 1;
    for (int64_t d = rank - 1; d >= 0; --d) {
      int64_t size = x.shape()[size_t(d)], idx = rem % size;
      rem /= size;
      if (!reduced[size_t(d)]) {
        out += idx * scale;
        scale *= size;
      }
    }
    groups[size_t(out)].push_back(v[size_t(i)]);
  }
  std::vector<double> result;
  for (const auto& g : groups) result.push_back(f(g));
  return tensor(result, out_shape);
}

double sum_of(const std::vector<double>& g) {
  double s = 0;
  for (double v : g) s += v;
  return s;
}
double prod_of(const std::vector<double>& g) {
  double p = 1;
  for (double v : g) p *= v;
  return p;
}
double max_of(const std::vector<double>& g) { return *std::max_element(g.begin(), g.end()); }
double min_of(const std::vector<double>& g) { return *std::min_element(g.begin(), g.end()); }
double mean_of(const std::vector<double>& g) { return sum_of(g) / double(g.size()); }
double argmax_of(const std::vector<double>& g) { return double(std::max_element(g.begin(), g.end()) - g.begin()); }
double argmin_of(const std::vector<double>& g) { return double(std::min_element(g.begin(), g.end()) - g.begin()); }
double lse_of(const std::vector<double>& g) {
  double s = 0;
  for (double v : g) s += std::exp(v);
  return std::log(s);
}

using ReduceFn = std::function<Tensor(const Tensor&, const Dims&, bool)>;

OpCase reduce_case(std::string name, ReduceFn op, Fold f, Shape shape, Dims dims, bool keepdim,
                   double lo = -1, double hi = 1) {
  return OpCase{
      .name = name,
      .make_inputs = [shape, lo, hi] { return Inputs{uniform(shape, lo, hi, 11)}; },
      .fn = [op, dims, keepdim](const Inputs& in) { return op(in[0], dims, keepdim); },
      .reference = [f, dims, keepdim](const Inputs& in) { return reduce_ref(in[0], dims, keepdim, f); },
  };
}

ReduceFn sum_fn = [](const Tensor& x, const Dims& d, bool k) { return sum(x, d, k); };
ReduceFn mean_fn = [](const Tensor& x, const Dims& d, bool k) { return mean(x, d, k); };
ReduceFn prod_fn = [](const Tensor& x, const Dims& d, bool k) { return prod(x, d, k); };
ReduceFn max_fn = [](const Tensor& x, const Dims& d, bool k) { return max(x, d, k); };
ReduceFn min_fn = [](const Tensor& x, const Dims& d, bool k) { return min(x, d, k); };
ReduceFn lse_fn = [](const Tensor& x, const Dims& d, bool k) { return logsumexp(x, d, k); };

// Integer inputs sum exactly to i64.
OpCase int_sum_case() {
  return OpCase{
      .name = "reduce.sum/int_to_i64",
      .make_inputs = [] { return Inputs{arange(0, 24, 1, i32).reshape({2, 3, 4})}; },
      .fn = [](const Inputs& in) { return sum(in[0], {0, 2}); },
      .reference = [](const Inputs& in) { return reduce_ref(in[0], {0, 2}, false, sum_of).to(i64); },
      .check_grad = false,
  };
}

OpCase arg_case(std::string name, bool is_max, Shape shape, int64_t dim, bool keepdim) {
  return OpCase{
      .name = name,
      .make_inputs = [shape] { return Inputs{uniform(shape, -1, 1, 5)}; },
      .fn = [is_max, dim, keepdim](const Inputs& in) {
        return is_max ? argmax(in[0], dim, keepdim) : argmin(in[0], dim, keepdim);
      },
      .reference = [is_max, dim, keepdim](const Inputs& in) {
        return reduce_ref(in[0], {dim}, keepdim, is_max ? argmax_of : argmin_of).to(i64);
      },
      .check_grad = false,
  };
}

// x with zeros planted: row 0 none, row 1 one, row 2 two (exercises the zero-safe gradient).
OpCase prod_zeros_case() {
  return OpCase{
      .name = "reduce.prod/with_zeros",
      .make_inputs = [] {
        Tensor x = uniform({3, 4}, 0.5, 1.5, 3);
        double* p = x.data<double>();
        p[4 + 2] = 0;
        p[8 + 0] = 0;
        p[8 + 3] = 0;
        return Inputs{x};
      },
      .fn = [](const Inputs& in) { return prod(in[0], {1}); },
      .reference = [](const Inputs& in) { return reduce_ref(in[0], {1}, false, prod_of); },
  };
}

BATON_OP_CASES {
  OpCase big = reduce_case("reduce.sum/leading_dim_blocks", sum_fn, sum_of, {150, 300}, {0}, false);
  big.check_grad = false;  // same rule as the small cases; 45000 finite differences are slow
  return {
      reduce_case("reduce.sum/all", sum_fn, sum_of, {3, 4}, {}, false),
      reduce_case("reduce.sum/last", sum_fn, sum_of, {3, 4}, {1}, false),
      reduce_case("reduce.sum/leading", sum_fn, sum_of, {5, 6}, {0}, false),
      reduce_case("reduce.sum/middle_keepdim", sum_fn, sum_of, {2, 3, 4}, {1}, true),
      reduce_case("reduce.sum/two_leading", sum_fn, sum_of, {3, 2, 5}, {0, 1}, false),
      reduce_case("reduce.sum/outer_dims", sum_fn, sum_of, {2, 3, 4}, {0, 2}, false),
      reduce_case("reduce.sum/negative_dims", sum_fn, sum_of, {2, 3, 4}, {-1, -3}, true),
      // a conv bias gradient: runs of reduced dims on both sides of the kept one
      reduce_case("reduce.sum/channel_bias", sum_fn, sum_of, {3, 4, 5, 6}, {0, 2, 3}, false),
      reduce_case("reduce.max/channel", max_fn, max_of, {3, 4, 5, 2}, {0, 2, 3}, true),
      reduce_case("reduce.sum/scalar", sum_fn, sum_of, {}, {}, false),
      big,
      int_sum_case(),
      reduce_case("reduce.mean/dims", mean_fn, mean_of, {3, 4, 2}, {0, -1}, false),
      reduce_case("reduce.mean/all_keepdim", mean_fn, mean_of, {3, 4}, {}, true),
      reduce_case("reduce.prod/last", prod_fn, prod_of, {3, 5}, {1}, false, 0.5, 1.5),
      reduce_case("reduce.prod/leading_keepdim", prod_fn, prod_of, {4, 3}, {0}, true, 0.5, 1.5),
      prod_zeros_case(),
      reduce_case("reduce.max/all", max_fn, max_of, {3, 4}, {}, false),
      reduce_case("reduce.max/last_keepdim", max_fn, max_of, {3, 5}, {-1}, true),
      reduce_case("reduce.max/leading", max_fn, max_of, {4, 3, 2}, {0}, false),
      reduce_case("reduce.min/outer_dims", min_fn, min_of, {2, 3, 4}, {0, 2}, false),
      reduce_case("reduce.min/leading", min_fn, min_of, {5, 3}, {0}, true),
      reduce_case("reduce.logsumexp/last", lse_fn, lse_of, {3, 5}, {1}, false, -5, 5),
      reduce_case("reduce.logsumexp/all_keepdim", lse_fn, lse_of, {2, 3, 2}, {}, true, -5, 5),
      torch_case("reduce.logsumexp/torch_dims", "logsumexp_dims",
                 [](const Inputs& in) { return logsumexp(in[0], {0, 2}); }),
      torch_case("reduce.var/torch_dim1", "var_dim1", [](const Inputs& in) { return var(in[0], {1}); }),
      OpCase{
          .name = "reduce.var/all_correction0_keepdim",
          .make_inputs = [] { return Inputs{uniform({3, 4}, 2, 5, 9)}; },
          .fn = [](const Inputs& in) { return var(in[0], {}, true, 0); },
          .reference = [](const Inputs& in) {
            return reduce_ref(in[0], {}, true, [](const std::vector<double>& g) {
              double m = mean_of(g), s = 0;
              for (double v : g) s += (v - m) * (v - m);
              return s / double(g.size());
            });
          },
      },
      arg_case("reduce.argmax/last", true, {4, 5}, 1, false),
      arg_case("reduce.argmax/leading_keepdim", true, {4, 3}, 0, true),
      arg_case("reduce.argmin/middle", false, {2, 4, 3}, -2, false),
  };
}

TEST(Reduce, SumOfIntegersIsI64AndMeanOfIntegersIsF32) {
  Tensor x = tensor({{1, 2, 3}, {4, 5, 6}});  // i32
  EXPECT_EQ(sum(x).dtype(), i64);
  EXPECT_EQ(sum(x).item<int64_t>(), 21);
  EXPECT_EQ(sum(tensor({true, true, false})).item<int64_t>(), 2);
  EXPECT_EQ(mean(x, {1}).dtype(), f32);
  EXPECT_EQ(mean(x, {1}).to_vector<float>(), (std::vector<float>{2, 5}));
  EXPECT_EQ(prod(x, {0}).dtype(), i64);
  EXPECT_EQ(prod(x, {0}).to_vector<int64_t>(), (std::vector<int64_t>{4, 10, 18}));
  EXPECT_EQ(prod(tensor({true, false, true})).item<int64_t>(), 0);
  EXPECT_EQ(max(x).dtype(), i32);
  EXPECT_EQ(max(x).item<int>(), 6);
  EXPECT_EQ(min(x, {1}).to_vector<int>(), (std::vector<int>{1, 4}));
  EXPECT_EQ(max(tensor({false, true})).item<bool>(), true);
}

TEST(Reduce, FloatSumOverManyRowsStaysAccurate) {
  // 100000 rows of 0.1f: a plain running float sum would drift by ~1%.
  Tensor x = full({100000, 3}, 0.1, f32);
  for (float v : sum(x, {0}).to_vector<float>()) EXPECT_NEAR(v, 10000.0, 0.05);
  for (float v : sum(x.t(), {1}).to_vector<float>()) EXPECT_NEAR(v, 10000.0, 0.05);
}

TEST(Reduce, LargeReductionsRunInParallelAndAgree) {
  Tensor x = uniform({512, 700});
  auto cols = sum(x, {0}).to_vector<double>(), rows = sum(x, {1}).to_vector<double>();
  auto ref_cols = reduce_ref(x, {0}, false, sum_of).to_vector<double>();
  auto ref_rows = reduce_ref(x, {1}, false, sum_of).to_vector<double>();
  for (size_t i = 0; i < cols.size(); ++i) EXPECT_NEAR(cols[i], ref_cols[i], 1e-10);
  for (size_t i = 0; i < rows.size(); ++i) EXPECT_NEAR(rows[i], ref_rows[i], 1e-10);
  EXPECT_ALL_CLOSE(max(x, {0}), reduce_ref(x, {0}, false, max_of), 0, 0);
}

TEST(Reduce, FewLongColumnsSplitTheirRowsBetweenThreads) {
  Tensor x = uniform({40000, 5});
  EXPECT_ALL_CLOSE(sum(x, {0}), reduce_ref(x, {0}, false, sum_of), 1e-9, 1e-9);
  EXPECT_ALL_CLOSE(max(x, {0}), reduce_ref(x, {0}, false, max_of), 0, 0);
  // Channels-last [n, c, h, w] (a plan's activation gradient) summed over n, h, w as a conv
  // bias gradient is, and over h, w: columns in memory order.
  Tensor last = uniform({8, 6, 40, 40}).permute({0, 2, 3, 1}).contiguous().permute({0, 3, 1, 2});
  EXPECT_ALL_CLOSE(sum(last, {0, 2, 3}), reduce_ref(last.contiguous(), {0, 2, 3}, false, sum_of), 1e-9, 1e-9);
  EXPECT_ALL_CLOSE(sum(last, {2, 3}), reduce_ref(last.contiguous(), {2, 3}, false, sum_of), 1e-9, 1e-9);
  EXPECT_ALL_CLOSE(sum(last, {1}), reduce_ref(last.contiguous(), {1}, false, sum_of), 1e-9, 1e-9);
}

TEST(Reduce, StridedInputs) {
  Tensor x = arange(0, 24, 1, f64).reshape({4, 6});
  Tensor t = x.t();  // [6,4], not contiguous
  EXPECT_ALL_CLOSE(sum(t, {0}), reduce_ref(t, {0}, false, sum_of), 0, 0);
  EXPECT_ALL_CLOSE(max(t, {1}), reduce_ref(t, {1}, false, max_of), 0, 0);
  EXPECT_EQ(argmin(t, 0).to_vector<int64_t>(), (std::vector<int64_t>{0, 0, 0, 0}));
}

TEST(Reduce, MaxGradientIsSharedEvenlyBetweenTies) {
  Tensor x = tensor({1.0, 3.0, 3.0, 2.0}).requires_grad_();
  max(x).backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{0, 0.5, 0.5, 0}));
}

TEST(Reduce, ArgmaxPicksTheFirstOfTiesAndNaN) {
  EXPECT_EQ(argmax(tensor({1.0f, 3.0f, 3.0f}), 0).item<int64_t>(), 1);
  EXPECT_EQ(argmin(tensor({2, 1, 1}), 0).item<int64_t>(), 1);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(argmax(tensor({1.0f, nan, 5.0f}), 0).item<int64_t>(), 1);
  EXPECT_TRUE(std::isnan(max(tensor({1.0f, nan, 5.0f})).item<float>()));
}

TEST(Reduce, LogsumexpIsStableForLargeAndInfiniteValues) {
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_NEAR(logsumexp(tensor({1000.0, 1000.0}), {0}).item<double>(), 1000 + std::log(2.0), 1e-9);
  EXPECT_NEAR(logsumexp(tensor({-1000.0f, -1000.0f}), {0}).item<float>(), -1000 + std::log(2.0), 1e-3);
  EXPECT_EQ(logsumexp(tensor({-inf, -inf}), {0}).item<double>(), -inf);
  EXPECT_EQ(logsumexp(tensor({1.0, inf}), {0}).item<double>(), inf);
}

// The first largest (smallest) of a group, a NaN counting as both: argmax's definition.
double first_best_of(const std::vector<double>& g, bool largest) {
  size_t at = 0;
  for (size_t i = 1; i < g.size() && !std::isnan(g[at]); ++i)
    if (std::isnan(g[i]) || (largest ? g[i] > g[at] : g[i] < g[at])) at = i;
  return double(at);
}

// Values from a few levels (ties everywhere), -0 beside +0, and a NaN in about one group of
// three: rows (the reduced dim innermost, searched in vector blocks), columns (kept dims
// inside it, read row after row), a long row the threads split.
TEST(Reduce, ArgmaxAndArgminFindTheFirstBestInRowsAndColumns) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> level(-3, 3);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  struct Case { Shape shape; int64_t dim; };
  for (const Case& c : {Case{{37, 203}, 1}, Case{{203, 37}, 0}, Case{{3, 300, 5}, 1}, Case{{2, 3, 70}, 2},
                        Case{{1, 200003}, 1}, Case{{300, 600}, 0}}) {
    std::vector<double> v(size_t(c.shape.numel()));
    for (double& e : v) e = level(rng) == 0 ? (rng() % 2 ? -0.0 : 0.0) : double(level(rng));
    for (size_t i = 0; i < v.size() / 60 + 1; ++i) v[rng() % v.size()] = nan;
    for (DType t : {f32, f64, i32}) {
      std::vector<double> w = v;
      if (t == i32) std::replace_if(w.begin(), w.end(), [](double e) { return std::isnan(e); }, 0.0);
      Tensor x = tensor(w, c.shape).to(t);
      for (bool largest : {true, false}) {
        SCOPED_TRACE(str(c.shape, " dim ", c.dim, " ", t, largest ? " argmax" : " argmin"));
        Tensor got = largest ? argmax(x, c.dim) : argmin(x, c.dim);
        Fold best = [largest](const std::vector<double>& g) { return first_best_of(g, largest); };
        EXPECT_EQ(got.to_vector<int64_t>(), reduce_ref(x, {c.dim}, false, best).to(i64).to_vector<int64_t>());
      }
    }
  }
}

// Rows longer than the kernel's block of exponentials, columns, columns inside an outer
// dim, dims in two runs and one long row, against sums of exp in double; columns of -inf,
// of a +inf, of a NaN, and with a -inf among finite values.
TEST(Reduce, LogsumexpOfRowsAndColumnsAgreesWithDouble) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> value(-20, 20);
  struct Case { Shape shape; Dims dims; };
  for (const Case& c : {Case{{37, 1500}, {1}}, Case{{1500, 37}, {0}}, Case{{3, 40, 300}, {1}},
                        Case{{4, 5, 6}, {0, 2}}, Case{{300001}, {}}}) {
    std::vector<double> v(size_t(c.shape.numel()));
    for (double& e : v) e = value(rng);
    for (DType t : {f32, f64}) {
      SCOPED_TRACE(str(c.shape, " over ", c.dims.size(), " dims, ", t));
      Tensor x = tensor(v, c.shape).to(t);
      // f32: each exponential rounds to float (relative 1e-7) and the result itself.
      const double tol = t == f32 ? 2e-6 : 1e-12;
      EXPECT_ALL_CLOSE(logsumexp(x, c.dims), reduce_ref(x, c.dims, false, lse_of), tol, tol);
    }
  }
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  Tensor columns = tensor(std::vector<double>{-inf, 1, -inf, 2, -inf, inf, nan, 3,
                                              -inf, 1, -inf, 2, -inf, 0, 1, -inf}, {4, 4});
  for (DType t : {f32, f64}) {
    Tensor x = columns.to(t);
    EXPECT_ALL_CLOSE(logsumexp(x, {0}), reduce_ref(x, {0}, false, lse_of), 1e-6, 1e-6);
    EXPECT_ALL_CLOSE(logsumexp(x.t(), {1}), reduce_ref(x, {0}, false, lse_of), 1e-6, 1e-6);
  }
}

// Tensors with a dim of no elements, outside or inside the reduced one, in the rows and
// the columns layouts: the right shapes, and logsumexp of nothing is -inf.
TEST(Reduce, LogsumexpArgmaxAndCumsumTakeEmptyTensors) {
  EXPECT_EQ(argmax(zeros({0, 5, 3}), 1).shape(), (Shape{0, 3}));
  EXPECT_EQ(argmin(zeros({2, 5, 0}), 1).shape(), (Shape{2, 0}));
  EXPECT_EQ(logsumexp(zeros({0, 5, 3}), {1}).shape(), (Shape{0, 3}));
  EXPECT_EQ(logsumexp(zeros({2, 5, 0}), {1}).shape(), (Shape{2, 0}));
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(logsumexp(zeros({2, 0, 3}, f64), {1}).to_vector<double>(), std::vector<double>(6, -inf));
  EXPECT_EQ(logsumexp(zeros({2, 0}, f64), {1}).to_vector<double>(), std::vector<double>(2, -inf));
  EXPECT_EQ(cumsum(zeros({0, 4}), 1, false, true).shape(), (Shape{0, 4}));
  EXPECT_EQ(cumsum(zeros({4, 0}), 1).shape(), (Shape{4, 0}));
}

TEST(Reduce, VarOfOneElementIsNaN) {
  EXPECT_TRUE(std::isnan(var(tensor({2.0})).item<double>()));
  EXPECT_EQ(var(tensor({2.0}), {}, false, 0).item<double>(), 0.0);
}

TEST(Reduce, BadDimNamesOpAndLine) {
  Tensor x = zeros({2, 3});
  int line = __LINE__ + 1;
  EXPECT_THROWS_WITH(IndexError, sum(x, {2}), "[sum]", "dim 2", "[2,3]", "reduce_test.cpp:" + std::to_string(line));
  line = __LINE__ + 1;
  EXPECT_THROWS_WITH(IndexError, mean(x, {-3}), "[mean]", "dim -3", "reduce_test.cpp:" + std::to_string(line));
  line = __LINE__ + 1;
  EXPECT_THROWS_WITH(IndexError, var(x, {5}), "[var]", "reduce_test.cpp:" + std::to_string(line));
  line = __LINE__ + 1;
  EXPECT_THROWS_WITH(IndexError, argmax(x, 2), "[argmax]", "reduce_test.cpp:" + std::to_string(line));
  line = __LINE__ + 1;
  EXPECT_THROWS_WITH(IndexError, max(x, {0, 4}), "[max]", "reduce_test.cpp:" + std::to_string(line));
  EXPECT_THROWS_WITH(ValueError, sum(x, {1, -1}), "[sum]", "twice");
}

// max and min of a row fold it in 8 chains (chain k takes elements k, k + 8, ...), combine
// them pairwise and fold the tail in; between -0 and +0, and between NaNs (NaN wins), the
// one folded in first stays, so that order decides the bits. The kernel runs the chains as
// vector lanes: against the order written out here, element by element, on rows of -0,
// +0, losing values and NaNs of several payloads and both signs.
template <class T>
T extremum_in_chains(const T* p, int64_t n, bool is_max) {
  auto fold = [is_max](T a, T b) { return (b != b) || (is_max ? b > a : b < a) ? b : a; };
  const T init = is_max ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::infinity();
  std::vector<T> chain(8, init);
  const int64_t body = n / 8 * 8;
  for (int64_t i = 0; i < body; ++i) chain[size_t(i % 8)] = fold(chain[size_t(i % 8)], p[i]);
  T total = fold(fold(fold(chain[0], chain[1]), fold(chain[2], chain[3])),
                 fold(fold(chain[4], chain[5]), fold(chain[6], chain[7])));
  for (int64_t i = body; i < n; ++i) total = fold(total, p[i]);
  return total;
}

template <class T>
void expect_extremum_rows_in_chain_order(int64_t rows, int64_t n) {
  using Bits = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
  std::mt19937_64 gen(uint64_t(rows * 1000 + n));
  for (bool is_max : {true, false}) {
    Tensor x = empty({rows, n}, dtype_v<T>);
    for (int64_t i = 0; i < x.numel(); ++i) {
      const uint64_t r = gen() % 100;
      T v = r < 45 ? T(-0.0) : r < 90 ? T(0.0) : T(is_max ? -1 : 1) * T(r);
      if (r >= 98)
        v = std::bit_cast<T>(std::bit_cast<Bits>(std::numeric_limits<T>::quiet_NaN()) | Bits(gen() % 8 + 1) |
                             (Bits(gen() % 2) << (sizeof(T) * 8 - 1)));
      x.data<T>()[i] = v;
    }
    const Tensor got = is_max ? max(x, {1}) : min(x, {1});
    for (int64_t r = 0; r < rows; ++r) {
      const T want = extremum_in_chains(x.data<T>() + r * n, n, is_max);
      ASSERT_EQ(std::bit_cast<Bits>(got.data<T>()[r]), std::bit_cast<Bits>(want))
          << (is_max ? "max" : "min") << " of row " << r << " of " << n << " " << dtype_v<T>;
    }
  }
}

TEST(Reduce, MaxAndMinFoldARowInEightChains) {
  for (int64_t n : {1, 7, 8, 9, 16, 23, 64, 1000, 1003}) {
    expect_extremum_rows_in_chain_order<float>(50, n);
    expect_extremum_rows_in_chain_order<double>(50, n);
  }
  expect_extremum_rows_in_chain_order<float>(1, 5001);  // one row
}

TEST(Reduce, MaxOfAnEmptyDimIsAValueError) {
  Tensor x = zeros({0, 3});
  EXPECT_THROWS_WITH(ValueError, max(x, {0}), "[max]", "empty", "reduce_test.cpp:");
  EXPECT_EQ(sum(x, {0}).to_vector<float>(), (std::vector<float>{0, 0, 0}));
  EXPECT_EQ(max(x, {1}).shape(), Shape({0}));
}

}  // namespace
}  // namespace baton::testing
