// fused_elementwise_max, _min and _prod, and fused_elementwise_and_max, _and_min and
// _and_prod, which also write the elements (made by the reduction-fusion pass): harness
// cases against the unfused public ops, and bit-for-bit equality with fused_elementwise's
// elements folded by `max`, `min` and `prod` on every path of the kernel (short rows, long
// rows, columns, a middle run, dims in several runs, everything, on several threads), on
// values where the fold's order decides the bits: -0 against +0, NaNs of different
// payloads and signs, and a product's rounding. Errors name the op.
#include <bit>
#include <cmath>
#include <cstring>
#include <random>

#include "dispatch/registry.h"
#include "harness/op_harness.h"

namespace baton::testing {
namespace {

Tensor fused(const std::string& program, const Inputs& in) {
  return ops::call_many(*ops::find_op("fused_elementwise"), in, {{"program", program}}, SourceLoc::current())[0];
}

// fused_elementwise_<reduce> ("max", "min" or "prod").
Tensor fused_fold(const std::string& reduce, const std::string& program, const Inputs& in,
                  const std::vector<int64_t>& dims, bool keepdim, SourceLoc loc = SourceLoc::current()) {
  const ops::Attrs attrs{{"program", program}, {"dims", dims}, {"keepdim", int64_t(keepdim)}};
  return ops::call_many(*ops::find_op("fused_elementwise_" + reduce), in, attrs, loc)[0];
}

// fused_elementwise_and_<reduce>: the elements and their max (min).
std::vector<Tensor> fused_fold_keeping(const std::string& reduce, const std::string& program, const Inputs& in,
                                       const std::vector<int64_t>& dims, bool keepdim,
                                       SourceLoc loc = SourceLoc::current()) {
  const ops::Attrs attrs{{"program", program}, {"dims", dims}, {"keepdim", int64_t(keepdim)}};
  return ops::call_many(*ops::find_op("fused_elementwise_and_" + reduce), in, attrs, loc);
}

// The unfused op of that name.
Tensor unfused(const std::string& reduce, const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  return reduce == "max" ? max(x, dims, keepdim) : reduce == "min" ? min(x, dims, keepdim) : prod(x, dims, keepdim);
}

// |x - t| * w: an absolute error's terms, with a bias row w.
const char* kAbsError = "r0=sub(in0,in1); r1=abs(r0); r2=mul(r1,in2)";

// x, t of `shape` and w a row of its last dim.
Inputs abs_error_inputs(const Shape& shape) {
  return Inputs{uniform(shape, -2, 2, 1), uniform(shape, -2, 2, 2), uniform({shape.back()}, 0, 1, 3)};
}

OpCase extremum_case(std::string reduce, std::string what, Shape shape, std::vector<int64_t> dims, bool keepdim) {
  return OpCase{
      .name = "fused.fused_elementwise_" + reduce + "/" + what,
      .make_inputs = [shape] { return abs_error_inputs(shape); },
      .fn = [=](const Inputs& i) { return fused_fold(reduce, kAbsError, i, dims, keepdim); },
      .reference = [=](const Inputs& i) { return unfused(reduce, abs(i[0] - i[1]) * i[2], dims, keepdim); },
      .check_grad = false,
  };
}

// fused_elementwise_and_<reduce>'s result `output`: 0 the elements, 1 their max (min).
OpCase kept_case(std::string reduce, std::string what, Shape shape, std::vector<int64_t> dims, size_t output) {
  return OpCase{
      .name = "fused.fused_elementwise_and_" + reduce + "/" + what,
      .make_inputs = [shape] { return abs_error_inputs(shape); },
      .fn = [=](const Inputs& i) { return fused_fold_keeping(reduce, kAbsError, i, dims, true).at(output); },
      .reference =
          [=](const Inputs& i) {
            const Tensor elements = abs(i[0] - i[1]) * i[2];
            return output == 0 ? elements : unfused(reduce, elements, dims, true);
          },
      .check_grad = false,
  };
}

BATON_OP_CASES {
  return {extremum_case("max", "last_dim", {6, 300}, {1}, false), extremum_case("max", "all", {5, 9, 11}, {}, false),
          extremum_case("min", "leading_dim_keepdim", {40, 70}, {0}, true),
          extremum_case("min", "last_dims", {4, 6, 50}, {1, 2}, false),
          kept_case("max", "last_dim_elements", {6, 300}, {1}, 0), kept_case("max", "last_dim_max", {6, 300}, {1}, 1),
          kept_case("min", "leading_dim_min", {40, 70}, {0}, 1), extremum_case("prod", "last_dim", {6, 30}, {1}, true),
          kept_case("prod", "leading_dim_prod", {20, 30}, {0}, 1)};
}

// Every bit equal, NaNs included (their payloads and signs), or with `any_nan` any NaN
// matching any NaN: which of two NaNs a product keeps depends on the order in which the
// compiler puts a multiplication's operands, which it may swap in each inlined copy.
template <class T>
::testing::AssertionResult identical(const Tensor& actual, const Tensor& expected, bool any_nan = false) {
  if (actual.shape() != expected.shape() || actual.dtype() != expected.dtype())
    return ::testing::AssertionFailure() << "shapes or dtypes differ";
  const Tensor a = actual.contiguous(), e = expected.contiguous();
  for (int64_t i = 0; i < a.numel(); ++i) {
    const T x = a.data<T>()[i], y = e.data<T>()[i];
    if (any_nan && std::isnan(x) && std::isnan(y)) continue;
    if (std::memcmp(&x, &y, sizeof(T)) != 0)
      return ::testing::AssertionFailure() << "element " << i << ": " << x << " vs " << y;
  }
  return ::testing::AssertionSuccess();
}

// A quiet NaN of one of eight payloads and either sign.
template <class T>
T some_nan(std::mt19937_64& gen) {
  using Bits = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
  const Bits payload = Bits(gen() % 8 + 1), sign = Bits(gen() % 2) << (sizeof(T) * 8 - 1);
  return std::bit_cast<T>(std::bit_cast<Bits>(std::numeric_limits<T>::quiet_NaN()) | payload | sign);
}

// Values whose max (min) is a zero of either sign or a NaN: -0 and +0, numbers of the
// losing sign, and with `nans`, NaNs (a few in a hundred).
template <class T>
Tensor ties_and_nans(const Shape& shape, bool for_max, bool nans, uint64_t seed) {
  std::mt19937_64 gen(seed);
  Tensor x = empty(shape, dtype_v<T>);
  for (int64_t i = 0; i < x.numel(); ++i) {
    const uint64_t r = gen() % 100;
    const T v = r < 40 ? T(-0.0) : r < 80 ? T(0.0) : T(for_max ? -1.5 : 1.5) * T(r);
    x.data<T>()[i] = nans && r >= 97 ? some_nan<T>(gen) : v;
  }
  return x;
}

// Factors whose products round differently in each order and stay finite over thousands
// of them (0.97 to 1.03, either sign), and with `nans`, NaNs (a few in a thousand), of
// which a product keeps the one its order meets first.
template <class T>
Tensor factors_and_nans(const Shape& shape, bool nans, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> factor(0.97, 1.03);
  Tensor x = empty(shape, dtype_v<T>);
  for (int64_t i = 0; i < x.numel(); ++i) {
    const T v = T(factor(gen) * (gen() % 2 ? 1.0 : -1.0));
    x.data<T>()[i] = nans && gen() % 1000 < 3 ? some_nan<T>(gen) : v;
  }
  return x;
}

// The fused fold against the fused elements folded by the op: every bit; and the same for
// the fold that keeps the elements, whose elements are those too. The program is x * 1
// (the elements are x's, payloads and zero signs kept) times a ones row.
template <class T>
void expect_fold_of_elements(const Shape& shape, const std::vector<int64_t>& dims) {
  const char* program = "r0=mul(in0,in1)";
  for (const std::string reduce : {"max", "min", "prod"})
    for (bool nans : {false, true}) {
      const Tensor values = reduce == "prod" ? factors_and_nans<T>(shape, nans, 11)
                                             : ties_and_nans<T>(shape, reduce == "max", nans, 11);
      const Inputs in{values, ones({shape.back()}).to(dtype_v<T>)};
      const Tensor elements = fused(program, in);
      for (bool keepdim : {false, true}) {
        const Tensor expected = unfused(reduce, elements, dims, keepdim);
        const std::string what = str(reduce, " ", shape, " dims ", dims.size(), " nans ", nans, " keepdim ", keepdim);
        const bool any_nan = reduce == "prod";
        EXPECT_TRUE(identical<T>(fused_fold(reduce, program, in, dims, keepdim), expected, any_nan)) << what;
        const std::vector<Tensor> kept = fused_fold_keeping(reduce, program, in, dims, keepdim);
        EXPECT_TRUE(identical<T>(kept.at(0), elements)) << what << " (kept elements)";
        EXPECT_TRUE(identical<T>(kept.at(1), expected, any_nan)) << what << " (kept)";
      }
    }
}

TEST(FusedElementwiseFold, ShortAndLongRowsFoldAsTheOpsDo) {
  expect_fold_of_elements<float>({300, 1000}, {1});  // rows shorter than a block: several per evaluation
  expect_fold_of_elements<float>({7, 5003}, {1});    // rows of several blocks and a tail
  expect_fold_of_elements<double>({30, 20, 7}, {1, 2});
  expect_fold_of_elements<double>({5, 2051}, {1});
}

TEST(FusedElementwiseFold, ColumnsFoldAsTheOpsDo) {
  expect_fold_of_elements<float>({4000, 300}, {0});  // over the batch: threads split the rows
  expect_fold_of_elements<float>({64, 2500}, {0});   // several column chunks
  expect_fold_of_elements<double>({6, 500, 40}, {1});
  expect_fold_of_elements<double>({9, 13, 77}, {0, 1});
}

TEST(FusedElementwiseFold, DimsInSeveralRunsFoldAsTheOpsDo) {
  expect_fold_of_elements<float>({64, 128, 8, 8}, {0, 2, 3});  // rows of 64, over threads; then columns
  expect_fold_of_elements<double>({6, 5, 4, 3, 20}, {0, 2, 4});
}

TEST(FusedElementwiseFold, EverythingFoldsAsTheOpsDo) {
  expect_fold_of_elements<float>({3000, 700}, {});  // over 2 * kParallelGrain: split over threads
  expect_fold_of_elements<double>({13, 17}, {0, 1});
}

// Anomaly mode runs each instruction through its op, then the reduction's own kernel.
TEST(FusedElementwiseFold, AnomalyModeGivesTheSameBits) {
  const Tensor x = uniform({300, 200}, -2, 2, 1).to(f32), b = uniform({200}, -1, 1, 2).to(f32);
  const char* program = "r0=add(in0,in1); r1=tanh(r0)";
  for (const std::string reduce : {"max", "min"}) {
    detect_anomaly(true);
    const Tensor checked = fused_fold(reduce, program, {x, b}, {0}, false);
    detect_anomaly(false);
    EXPECT_TRUE(identical<float>(checked, fused_fold(reduce, program, {x, b}, {0}, false))) << reduce;
  }
  const DetectAnomalyGuard on;
  EXPECT_THROWS_WITH(RuntimeError, fused_fold_keeping("max", "r0=log(in0)", {tensor({1.0f, -1.0f})}, {0}, false),
                     "[log] anomaly detected: output 0 (f32[2]) holds NaN at flat index 1");
  const std::vector<Tensor> checked = fused_fold_keeping("min", program, {x, b}, {1}, true);
  detect_anomaly(false);
  const std::vector<Tensor> fast = fused_fold_keeping("min", program, {x, b}, {1}, true);
  EXPECT_TRUE(identical<float>(checked.at(0), fast.at(0)));
  EXPECT_TRUE(identical<float>(checked.at(1), fast.at(1)));
}

// A product over a dim of no elements is one, as prod gives it (a batch of none), kept
// elements or not; a max or min of nothing is an error (below).
TEST(FusedElementwiseFold, AProductOfNothingIsOne) {
  const Tensor none = zeros({3, 0, 5});
  const Tensor expected = prod(none, {1});
  EXPECT_TRUE(identical<float>(expected, ones({3, 5})));
  EXPECT_TRUE(identical<float>(fused_fold("prod", "r0=neg(in0)", {none}, {1}, false), expected));
  const std::vector<Tensor> kept = fused_fold_keeping("prod", "r0=neg(in0)", {none}, {1}, false);
  EXPECT_EQ(kept.at(0).shape(), (Shape{3, 0, 5}));
  EXPECT_TRUE(identical<float>(kept.at(1), expected));
}

TEST(FusedElementwiseFold, ErrorsNameTheOpAndTheLine) {
  const Tensor x = zeros({3, 4, 5}), none = zeros({3, 0, 5});
  const int line = __LINE__ + 1;
  EXPECT_THROWS_WITH(ValueError, fused_fold("max", "r0=neg(in0)", {x}, {1, 1}, false), "[fused_elementwise_max]",
                     "lists a dim twice", "fused_elementwise_fold_test.cpp:" + std::to_string(line));
  EXPECT_THROWS_WITH(ValueError, fused_fold("min", "r0=neg(in0)", {none}, {1}, false), "[fused_elementwise_min]",
                     "empty dim", "[3,0,5]");
  EXPECT_THROWS_WITH(ValueError, fused_fold("max", "r0=add(in0,in1)", {x}, {0}, false), "[fused_elementwise_max]",
                     "reads 2 input(s)");
  EXPECT_THROWS_WITH(ValueError, fused_fold_keeping("max", "r0=neg(in0)", {none}, {1}, false),
                     "[fused_elementwise_and_max]", "empty dim", "[3,0,5]");
  EXPECT_THROWS_WITH(IndexError, fused_fold_keeping("min", "r0=neg(in0)", {x}, {0, 3}, false),
                     "[fused_elementwise_and_min]");
}

}  // namespace
}  // namespace baton::testing
