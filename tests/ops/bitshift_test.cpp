// shift_left and shift_right (src/ops/bitshift.cpp): values against multiplying and dividing
// by powers of two on unsigned bits, broadcasting, counts past the width, errors.
#include <cstdint>

#include "harness/op_harness.h"

namespace baton::testing {
namespace {

OpCase shift_case(bool left) {
  OpCase c;
  c.name = left ? "binary.shift_left/broadcast" : "binary.shift_right/broadcast";
  c.make_inputs = [] {
    return Inputs{tensor<int64_t>({{5, 1000, 7}, {1, 2, 3}}), tensor<int64_t>({0, 3, 9})};
  };
  c.fn = [left](const Inputs& in) { return left ? shift_left(in[0], in[1]) : shift_right(in[0], in[1]); };
  c.reference = [left](const Inputs& in) {
    const Tensor p = cast(pow(2.0, cast(in[1], f64)), f64);
    return left ? cast(in[0], f64) * p : floor(cast(in[0], f64) / p);
  };
  c.check_grad = false;
  c.check_f32 = false;
  return c;
}

BATON_OP_CASES { return {shift_case(true), shift_case(false)}; }

TEST(BitShift, ShiftsTheUnsignedBits) {
  Tensor a = tensor<int64_t>({1, 16, 255, 3, -1});
  Tensor n = tensor<int64_t>({0, 2, 4, 63, 60});
  EXPECT_EQ(shift_left(a, n).to_vector<int64_t>(),
            (std::vector<int64_t>{1, 64, 4080, int64_t(uint64_t(3) << 63), int64_t(uint64_t(15) << 60)}));
  EXPECT_EQ(shift_right(a, n).to_vector<int64_t>(), (std::vector<int64_t>{1, 4, 15, 0, 15}));
  Tensor b = tensor<int32_t>({-8, 7});
  EXPECT_EQ(shift_right(b, 1).to_vector<int32_t>(), (std::vector<int32_t>{int32_t(uint32_t(-8) >> 1), 3}));
}

TEST(BitShift, BroadcastsAndStopsAtTheWidth) {
  Tensor a = tensor<int32_t>({{1, 2}, {3, 4}});
  EXPECT_EQ(shift_left(a, tensor<int32_t>({1, 32})).to_vector<int32_t>(), (std::vector<int32_t>{2, 0, 6, 0}));
  EXPECT_EQ(shift_right(a, tensor<int32_t>({{1}, {40}})).to_vector<int32_t>(), (std::vector<int32_t>{0, 1, 0, 0}));
}

TEST(BitShift, RefusesFloatsAndNegativeCounts) {
  EXPECT_THROWS_WITH(DTypeError, shift_left(tensor({1.f}), tensor({1.f})), "[shift_left]", "expects integer tensors");
  EXPECT_THROWS_WITH(ValueError, shift_right(tensor({8}), tensor({-1})), "[shift_right]", "negative");
  EXPECT_THROWS_WITH(ShapeError, shift_left(tensor({1, 2}), tensor({1, 2, 3})), "[shift_left]");
}

}  // namespace
}  // namespace baton::testing
