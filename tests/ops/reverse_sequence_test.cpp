// reverse_sequence (src/ops/reverse_sequence.cpp): values against an index loop for batch
// and time in either order and with trailing dims, gradients by the harness, integer and
// bool dtypes, and errors (bad lengths, dims, dtypes).
#include "harness/op_harness.h"

namespace baton::testing {
namespace {

// out[..b..t..] = x[..b..(t < len[b] ? len[b] - 1 - t : t)..], element by element.
Tensor reversed(const Tensor& x_in, const std::vector<int64_t>& lengths, int64_t batch_dim, int64_t time_dim) {
  const Tensor x = x_in.contiguous();
  const Shape& s = x.shape();
  if (batch_dim < 0) batch_dim += x.dim();
  if (time_dim < 0) time_dim += x.dim();
  const std::vector<double> v = x.to_vector<double>();
  std::vector<double> out(v.size());
  std::vector<int64_t> at(s.size(), 0);
  for (size_t i = 0; i < v.size(); ++i) {
    std::vector<int64_t> from = at;
    const int64_t n = lengths[size_t(at[size_t(batch_dim)])], t = at[size_t(time_dim)];
    if (t < n) from[size_t(time_dim)] = n - 1 - t;
    int64_t flat = 0;
    for (size_t d = 0; d < s.size(); ++d) flat = flat * s[d] + from[d];
    out[i] = v[size_t(flat)];
    for (size_t d = s.size(); d-- > 0;) {
      if (++at[d] < s[d]) break;
      at[d] = 0;
    }
  }
  return tensor(out, s);
}

OpCase reverse_case(const std::string& what, Shape shape, std::vector<int64_t> lengths, int64_t batch_dim,
                    int64_t time_dim) {
  OpCase c;
  c.name = str("shape.reverse_sequence/", what);
  c.make_inputs = [shape, lengths] {
    return Inputs{uniform(shape, -2, 2, 3), tensor<int64_t>(lengths, Shape{int64_t(lengths.size())})};
  };
  c.fn = [=](const Inputs& in) { return reverse_sequence(in[0], in[1], batch_dim, time_dim); };
  c.reference = [=](const Inputs& in) { return reversed(in[0], lengths, batch_dim, time_dim); };
  c.grad_inputs = {0};
  return c;
}

BATON_OP_CASES {
  return {
      reverse_case("batch_first", {4, 5}, {0, 2, 5, 1}, 0, 1),
      reverse_case("time_first", {5, 3}, {5, 3, 1}, 1, 0),
      reverse_case("trailing_dims", {3, 4, 2, 3}, {4, 0, 3}, 0, 1),
      reverse_case("dims_apart", {3, 2, 4}, {1, 3, 2}, 0, 2),
      reverse_case("time_before_batch_apart", {4, 2, 3}, {4, 2, 3}, -1, 0),
      reverse_case("empty_time", {2, 0, 3}, {0, 0}, 0, 1),
  };
}

TEST(ReverseSequence, OnnxNodeTestValues) {
  const Tensor x = reshape(arange(16), Shape{4, 4});
  EXPECT_EQ(reverse_sequence(x, tensor<int64_t>({0, 2, 3, 4}), 0, 1).to_vector<int64_t>(),
            (std::vector<int64_t>{0, 1, 2, 3, 5, 4, 6, 7, 10, 9, 8, 11, 15, 14, 13, 12}));
  const Tensor xt = x.t();  // [[0, 4, 8, 12], [1, 5, 9, 13], ...], time first
  EXPECT_EQ(reverse_sequence(xt, tensor<int32_t>({4, 3, 2, 1}), 1, 0).to_vector<int64_t>(),
            (std::vector<int64_t>{3, 6, 9, 12, 2, 5, 8, 13, 1, 4, 10, 14, 0, 7, 11, 15}));
}

TEST(ReverseSequence, AnyDtypeAndLargeInputs) {
  const Tensor b = tensor({{true, false, false}, {false, true, true}});
  EXPECT_EQ(reverse_sequence(b, tensor<int64_t>({2, 3}), 0, 1).to_vector<bool>(),
            (std::vector<bool>{false, true, false, true, true, false}));
  const Tensor x = uniform({64, 50, 7}, -1, 1, 4);
  std::vector<int64_t> lengths;
  for (int64_t i = 0; i < 64; ++i) lengths.push_back(i % 51);
  EXPECT_ALL_CLOSE(reverse_sequence(x, tensor<int64_t>(lengths, Shape{64}), 0, 1), reversed(x, lengths, 0, 1), 0, 0);
}

TEST(ReverseSequence, Errors) {
  const Tensor x = zeros({2, 3});
  int line = __LINE__ + 1;
  EXPECT_THROWS_WITH(IndexError, reverse_sequence(x, tensor<int64_t>({1, 4}), 0, 1), "[reverse_sequence]", "length 4",
                     "size 3", "reverse_sequence_test.cpp:" + std::to_string(line));
  EXPECT_THROWS_WITH(IndexError, reverse_sequence(x, tensor<int64_t>({-1, 0}), 0, 1), "length -1");
  EXPECT_THROWS_WITH(ShapeError, reverse_sequence(x, tensor<int64_t>({1, 1, 1}), 0, 1), "one length per batch entry",
                     "f32[2,3]", "i64[3]");
  EXPECT_THROWS_WITH(ValueError, reverse_sequence(x, tensor<int64_t>({1, 1}), 1, -1), "must differ");
  EXPECT_THROWS_WITH(IndexError, reverse_sequence(x, tensor<int64_t>({1, 1}), 0, 2), "[reverse_sequence]");
  EXPECT_THROWS_WITH(DTypeError, reverse_sequence(x, tensor({1.0, 1.0}), 0, 1), "lengths must be i64");
  EXPECT_THROWS_WITH(ShapeError, reverse_sequence(zeros({3}), tensor<int64_t>({1, 1, 1}), 0, 1), "at least 2 dims");
}

}  // namespace
}  // namespace baton::testing
