#include <cmath>

#include "harness/op_harness.h"

namespace baton::testing {
namespace {

TEST(Autograd, IssueExample) {
  Tensor x = tensor({1.0f, 2.0f});
  Tensor w = tensor({0.5f, 0.5f}).requires_grad_();
  Tensor z = (x * w).sum();
  z.backward();
  EXPECT_EQ(w.grad().to_vector<float>(), (std::vector<float>{1.0f, 2.0f}));
  EXPECT_EQ(z.grad_fn_name(), "SumBackward");
}

TEST(Autograd, AccumulatesAcrossBackwardCalls) {
  Tensor w = tensor({1.0, 2.0}).requires_grad_();
  (w * w).sum().backward();
  (w * 3.0).sum().backward();
  EXPECT_EQ(w.grad().to_vector<double>(), (std::vector<double>{5.0, 7.0}));
  w.zero_grad();
  EXPECT_FALSE(w.grad().defined());
}

TEST(Autograd, SecondBackwardWithoutRetainGraphIsAnError) {
  Tensor w = tensor({1.0, 2.0}).requires_grad_();
  Tensor y = (w * w).sum();
  y.backward({}, /*retain_graph=*/true);
  y.backward();  // allowed: the first retained the graph
  EXPECT_EQ(w.grad().to_vector<double>(), (std::vector<double>{4.0, 8.0}));
  EXPECT_THROWS_WITH(AutogradError, y.backward(), "second time", "retain_graph");
}

TEST(Autograd, BackwardOnTensorWithoutGradIsAnError) {
  Tensor x = tensor({1.0, 2.0});
  EXPECT_THROWS_WITH(AutogradError, x.sum().backward(), "does not require grad");
}

TEST(Autograd, NonScalarNeedsExplicitGradient) {
  Tensor w = tensor({1.0, 2.0}).requires_grad_();
  Tensor y = w * 3.0;
  EXPECT_THROWS_WITH(AutogradError, y.backward(), "one element");
  y.backward(tensor({1.0, 10.0}));
  EXPECT_EQ(w.grad().to_vector<double>(), (std::vector<double>{3.0, 30.0}));
}

TEST(Autograd, NoGradGuardStopsRecording) {
  Tensor w = tensor({1.0}).requires_grad_();
  {
    NoGradGuard guard;
    Tensor y = w * 2.0;
    EXPECT_FALSE(y.requires_grad());
  }
  EXPECT_TRUE((w * 2.0).requires_grad());
}

TEST(Autograd, DetachCutsHistory) {
  Tensor w = tensor({2.0}).requires_grad_();
  Tensor y = (w * w).detach() * w;  // d/dw = w^2 (detached part is a constant)
  y.sum().backward();
  EXPECT_EQ(w.grad().item<double>(), 4.0);
}

TEST(Autograd, HigherOrderGradients) {
  Tensor x = tensor({3.0}).requires_grad_();
  Tensor y = x * x * x;  // y' = 3x^2 = 27, y'' = 6x = 18
  auto g = grad({y.sum()}, {x}, {}, /*retain_graph=*/true, /*create_graph=*/true);
  EXPECT_EQ(g[0].item<double>(), 27.0);
  auto gg = grad({g[0].sum()}, {x});
  EXPECT_EQ(gg[0].item<double>(), 18.0);
}

TEST(Autograd, CreateGraphThroughBackward) {
  Tensor x = tensor({2.0}).requires_grad_();
  Tensor y = exp(x * x);  // y' = 2x e^{x^2}
  y.sum().backward({}, false, /*create_graph=*/true);
  Tensor g = x.grad();
  EXPECT_TRUE(g.requires_grad());
  EXPECT_NEAR(g.item<double>(), 4 * std::exp(4.0), 1e-9);
  x.zero_grad();  // a gradient with history refers back to x: drop it to free both
}

TEST(Autograd, InPlaceChangeOfSavedTensorIsDetected) {
  Tensor w = tensor({1.0, 2.0}).requires_grad_();
  Tensor a = tensor({3.0, 4.0});
  Tensor y = (w * a).sum();
  a.fill_(0.0);
  EXPECT_THROWS_WITH(AutogradError, y.backward(), "modified in place");
}

TEST(Autograd, GradsOfSharedInputsDoNotAlias) {
  Tensor a = tensor({1.0}).requires_grad_();
  Tensor b = tensor({1.0}).requires_grad_();
  (a + b).sum().backward();
  {
    NoGradGuard guard;
    a.grad().fill_(5.0);
  }
  EXPECT_EQ(b.grad().item<double>(), 1.0);
}

TEST(Autograd, RequiresGradOnlyForFloatLeaves) {
  Tensor i = tensor({1, 2});
  EXPECT_THROWS_WITH(DTypeError, i.requires_grad_(), "floating");
  Tensor w = tensor({1.0}).requires_grad_();
  Tensor y = w * 2.0;
  EXPECT_THROWS_WITH(AutogradError, y.requires_grad_(false), "leaf");
}

}  // namespace
}  // namespace baton::testing

namespace baton::testing {
namespace {

// Two outputs of one node as roots (split gives views of one input): the node runs once
// with both gradients, and the shared input gets each gradient once.
TEST(Autograd, SeveralRootsFromOneNode) {
  Tensor x = tensor({1.0, 2.0, 3.0, 4.0}).requires_grad_();
  Tensor y = x * 2.0;
  std::vector<Tensor> parts = split(y, 2);
  auto g = grad({parts[0].sum(), parts[1].sum() * 3.0}, {x}, {}, /*retain_graph=*/true);
  EXPECT_EQ(g[0].to_vector<double>(), (std::vector<double>{2, 2, 6, 6}));
  Tensor z = exp(y);  // the same root twice: exp runs once with both gradients summed
  auto gz = grad({z, z}, {x}, {ones({4}, f64), ones({4}, f64)});
  EXPECT_TRUE(all_close(gz[0], exp(x.detach() * 2.0) * 4.0, 1e-12, 0));
}

}  // namespace
}  // namespace baton::testing
