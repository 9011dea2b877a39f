// Printing follows PyTorch's repr; the expected strings below are PyTorch 1.13's output
// (with baton's dtype names, and the shape added to summarized tensors).
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include <baton/baton.h>

namespace baton {
namespace {

std::string show(const Tensor& t) {
  std::ostringstream os;
  os << t;
  return os.str();
}

TEST(Print, FloatVectors) {
  EXPECT_EQ(show(tensor({1.f, 2.f})), "tensor([1., 2.])");
  EXPECT_EQ(show(tensor({-1.f, 2.f})), "tensor([-1.,  2.])");
  EXPECT_EQ(show(tensor({1.5f, 2.25f})), "tensor([1.5000, 2.2500])");
  EXPECT_EQ(show(tensor({1.0, 2.0})), "tensor([1., 2.], dtype=f64)");
}

TEST(Print, ScientificWhenMagnitudesSpreadOrAreExtreme) {
  EXPECT_EQ(show(tensor({0.001f, 10.0f})), "tensor([1.0000e-03, 1.0000e+01])");
  EXPECT_EQ(show(tensor({1e-5f, 1.0f})), "tensor([1.0000e-05, 1.0000e+00])");
  EXPECT_EQ(show(tensor({1e9f, 1.0f})), "tensor([1.0000e+09, 1.0000e+00])");
}

TEST(Print, NonFiniteAndScalars) {
  EXPECT_EQ(show(tensor({NAN, 1.0f, INFINITY})), "tensor([nan, 1., inf])");
  EXPECT_EQ(show(scalar_tensor(3.0f)), "tensor(3.)");
  EXPECT_EQ(show(scalar_tensor(int64_t(7))), "tensor(7)");
}

TEST(Print, Matrices) {
  EXPECT_EQ(show(tensor<int64_t>({{1, 2}, {3, 4}})), "tensor([[1, 2],\n        [3, 4]])");
  EXPECT_EQ(show(tensor({{1.5f, -2.25f}, {3.f, 4.f}})),
            "tensor([[ 1.5000, -2.2500],\n        [ 3.0000,  4.0000]])");
  EXPECT_EQ(show(tensor<int64_t>({{{1, 2}, {3, 4}}, {{5, 6}, {7, 8}}})),
            "tensor([[[1, 2],\n         [3, 4]],\n\n        [[5, 6],\n         [7, 8]]])");
}

TEST(Print, OtherDtypes) {
  EXPECT_EQ(show(tensor({true, false})), "tensor([ True, False])");
  EXPECT_EQ(show(tensor({1, 20})), "tensor([ 1, 20], dtype=i32)");
}

TEST(Print, EmptyTensors) {
  EXPECT_EQ(show(zeros({0})), "tensor([])");
  EXPECT_EQ(show(zeros({2, 0})), "tensor([], shape=[2,0])");
}

TEST(Print, StridedViewsPrintTheirValues) {
  Tensor x = tensor<int64_t>({{1, 2}, {3, 4}});
  EXPECT_EQ(show(x.t()), "tensor([[1, 3],\n        [2, 4]])");
}

TEST(Print, LargeTensorsAreSummarizedWithTheirShape) {
  EXPECT_EQ(show(arange(3000).reshape({30, 100})),
            "tensor([[   0,    1,    2,  ...,   97,   98,   99],\n"
            "        [ 100,  101,  102,  ...,  197,  198,  199],\n"
            "        [ 200,  201,  202,  ...,  297,  298,  299],\n"
            "        ...,\n"
            "        [2700, 2701, 2702,  ..., 2797, 2798, 2799],\n"
            "        [2800, 2801, 2802,  ..., 2897, 2898, 2899],\n"
            "        [2900, 2901, 2902,  ..., 2997, 2998, 2999]], shape=[30,100])");
  EXPECT_EQ(show(arange(0, 2000, 1, f32)),
            "tensor([0.0000e+00, 1.0000e+00, 2.0000e+00,  ..., 1.9970e+03, 1.9980e+03,\n"
            "        1.9990e+03], shape=[2000])");
}

TEST(Print, SummarizedThreeDims) {
  EXPECT_EQ(show(arange(2400).reshape({2, 3, 400})),
            "tensor([[[   0,    1,    2,  ...,  397,  398,  399],\n"
            "         [ 400,  401,  402,  ...,  797,  798,  799],\n"
            "         [ 800,  801,  802,  ..., 1197, 1198, 1199]],\n\n"
            "        [[1200, 1201, 1202,  ..., 1597, 1598, 1599],\n"
            "         [1600, 1601, 1602,  ..., 1997, 1998, 1999],\n"
            "         [2000, 2001, 2002,  ..., 2397, 2398, 2399]]], shape=[2,3,400])");
}

TEST(Print, LongRowsWrapAtEightyColumns) {
  // 20 values of width 6 ("0.0000"): 9 per line after the 8-column indent.
  std::string s = show(full({20}, 0.5));
  EXPECT_EQ(s.substr(0, s.find('\n')),
            "tensor([0.5000, 0.5000, 0.5000, 0.5000, 0.5000, 0.5000, 0.5000, 0.5000, 0.5000,");
  EXPECT_EQ(std::count(s.begin(), s.end(), '\n'), 2);
}

TEST(Print, AutogradState) {
  Tensor w = tensor({1.f, 2.f}).requires_grad_();
  EXPECT_EQ(show(w), "tensor([1., 2.], requires_grad=True)");
  EXPECT_EQ(show(w * 2.0f), "tensor([2., 4.], grad_fn=<MulBackward>)");
}

}  // namespace
}  // namespace baton
