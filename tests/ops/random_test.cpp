// random_uniform, random_normal and random_int (rand, randn, randint): values against the
// generator's sequence drawn here (std::mt19937_64 seeded as manual_seed seeds it), and a
// compiled function that draws anew on each call as eager code does.
#include <cmath>
#include <random>

#include "harness/op_harness.h"

namespace baton::testing {
namespace {

constexpr uint64_t kSeed = 7;
const Shape kShape{4, 6};

// The first n draws of the generator after manual_seed(kSeed), as each op maps them.
std::vector<double> uniform_draws(size_t n) {
  std::mt19937_64 gen(kSeed);
  std::vector<double> out;
  for (size_t i = 0; i < n; ++i) out.push_back(double(gen() >> 11) * 0x1.0p-53);
  return out;
}

std::vector<double> normal_draws(size_t n) {  // Box-Muller over pairs of uniforms
  std::vector<double> u = uniform_draws(n + 1), out;
  for (size_t i = 0; out.size() < n; i += 2) {
    const double r = std::sqrt(-2.0 * std::log(1.0 - u[i])), angle = 2 * M_PI * u[i + 1];
    out.push_back(r * std::cos(angle));
    if (out.size() < n) out.push_back(r * std::sin(angle));
  }
  return out;
}

std::vector<double> int_draws(size_t n, int64_t low, int64_t high) {
  std::mt19937_64 gen(kSeed);
  std::vector<double> out;
  for (size_t i = 0; i < n; ++i) out.push_back(double(low + int64_t(gen() % uint64_t(high - low))));
  return out;
}

// The _like form, which every mode runs (a static Graph has no other way to hold the op).
OpCase seeded_case(std::string name, std::function<Tensor(const Tensor&)> draw,
                   std::function<std::vector<double>(size_t)> draws) {
  return OpCase{
      .name = std::move(name),
      .make_inputs = [] { return Inputs{zeros(kShape, f64)}; },
      .fn = [draw](const Inputs& in) {
        manual_seed(kSeed);
        return draw(in[0]);
      },
      .reference = [draws](const Inputs&) { return tensor(draws(size_t(kShape.numel())), kShape); },
      .check_grad = false,
      .check_f32 = false,
      .replayable = false,  // fn seeds the generator, which only the trace does
  };
}

BATON_OP_CASES {
  return {
      seeded_case("random.random_uniform/like", [](const Tensor& x) { return rand_like(x); }, uniform_draws),
      seeded_case("random.random_normal/like", [](const Tensor& x) { return randn_like(x); }, normal_draws),
      seeded_case("random.random_int/like", [](const Tensor& x) { return randint_like(x, -3, 5); },
                  [](size_t n) { return int_draws(n, -3, 5); }),
  };
}

TEST(Random, ACompiledFunctionDrawsAnewOnEachCallAsEagerCodeDoes) {
  auto f = compile([](Tensor x) { return x + rand({16}) + randn({16}) + randint(0, 9, {16}, f32); });
  Tensor x = zeros({16});
  manual_seed(3);
  Tensor eager_first = x + rand({16}) + randn({16}) + randint(0, 9, {16}, f32);
  Tensor eager_second = x + rand({16}) + randn({16}) + randint(0, 9, {16}, f32);
  f(x);  // the trace
  manual_seed(3);
  Tensor first = f(x), second = f(x);
  EXPECT_TRUE(all_close(first, eager_first, 0, 0));
  EXPECT_TRUE(all_close(second, eager_second, 0, 0));
  EXPECT_FALSE(all_close(first, second, 0, 0));
}

// The forms with a shape draw the same values as the _like forms.
TEST(Random, ShapeAndLikeFormsDrawTheSameValues) {
  Tensor like = zeros(kShape, f64);
  for (auto [by_shape, by_like] :
       {std::pair<std::function<Tensor()>, std::function<Tensor()>>{[] { return rand(kShape, f64); },
                                                                    [&] { return rand_like(like); }},
        {[] { return randn(kShape, f64); }, [&] { return randn_like(like); }},
        {[] { return randint(-3, 5, kShape, f64); }, [&] { return randint_like(like, -3, 5); }}}) {
    manual_seed(kSeed);
    Tensor a = by_shape();
    manual_seed(kSeed);
    EXPECT_TRUE(all_close(a, by_like(), 0, 0));
  }
}

TEST(Random, BadSizesAndRangesNameTheOp) {
  EXPECT_THROWS_WITH(ShapeError, rand({2, -1}), "[random_uniform]", "negative", "[2,-1]");
  EXPECT_THROWS_WITH(ValueError, randint(2, 2, {1}), "[randint]", "empty range");
  EXPECT_THROWS_WITH(ValueError, randint_like(zeros({2}), 3, 1), "[randint_like]", "empty range [3, 1)");
}

}  // namespace
}  // namespace baton::testing
