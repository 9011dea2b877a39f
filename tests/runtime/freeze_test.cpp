// freeze: parameters and buffers become constants the passes may fold (batch norm into
// the convolution), and a plan whose folded tensors change is made again.
#include <gtest/gtest.h>

#include "baton/baton.h"
#include "harness/op_harness.h"

namespace baton {
namespace {

struct ConvBnRelu {
  nn::Conv2d conv{3, 8, 3, Conv2dOptions{.padding = {1, 1}}};
  nn::BatchNorm2d bn{8};
  ConvBnRelu() {
    // Running statistics other than 0 and 1, so the fold has something to do.
    bn.running_mean.copy_(testing::uniform({8}, -0.5, 0.5, 3).to(f32));
    bn.running_var.copy_(testing::uniform({8}, 0.5, 2, 4).to(f32));
    bn.eval();
  }
  Tensor operator()(const Tensor& x) { return relu(bn.forward(conv.forward(x))); }
};

Tensor image(uint64_t seed) { return testing::uniform({2, 3, 6, 6}, -1, 1, seed).to(f32); }

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(Freeze, FoldsBatchNormOfParametersIntoTheConvolution) {
  ConvBnRelu model;
  auto plain = compile([&](const Tensor& x) { return model(x); });
  auto frozen = compile([&](const Tensor& x) { return model(x); }, {.freeze = true});
  Tensor x = image(1);
  Tensor want = model(x);
  // Folding changes the order of float operations: equal within f32 rounding.
  EXPECT_ALL_CLOSE(plain(x), want, 1e-5, 1e-5);
  EXPECT_ALL_CLOSE(frozen(x), want, 1e-5, 1e-5);
  EXPECT_FALSE(contains(plain.explain(), "fold_batch_norm"));
  EXPECT_TRUE(contains(frozen.explain(), "fold_batch_norm")) << frozen.explain();
}

TEST(Freeze, AParameterWrittenInPlaceMakesANewPlan) {
  ConvBnRelu model;
  auto frozen = compile([&](const Tensor& x) { return model(x); }, {.freeze = true});
  Tensor x = image(2);
  frozen(x);
  {
    NoGradGuard no_grad;
    model.conv.weight.copy_(model.conv.weight * 0.5);  // as an optimizer step would
    model.bn.running_mean.copy_(model.bn.running_mean + 0.25);
  }
  EXPECT_ALL_CLOSE(frozen(x), model(x), 1e-5, 1e-5);
  EXPECT_EQ(frozen.num_traces(), 1u);  // planned again, not traced again
  EXPECT_TRUE(contains(frozen.explain(), "replanned without a retrace: a frozen tensor")) << frozen.explain();
}

TEST(Freeze, SessionReplansToo) {
  ConvBnRelu model;
  Graph g("frozen");
  Tensor x = g.placeholder(f32, {"batch", 3, 6, 6}, "x");
  Tensor y = model(x);
  Session sess(g, {.freeze = true});
  Tensor value = image(3);
  EXPECT_ALL_CLOSE(sess.run({y}, {{x, value}}).at(0), model(value), 1e-5, 1e-5);
  EXPECT_TRUE(contains(sess.explain(), "fold_batch_norm"));
  {
    NoGradGuard no_grad;
    model.bn.weight.copy_(-model.bn.weight);
  }
  EXPECT_ALL_CLOSE(sess.run({y}, {{x, value}}).at(0), model(value), 1e-5, 1e-5);
  EXPECT_TRUE(contains(sess.explain(), "replanned: a frozen tensor f32[8] was written in place")) << sess.explain();
}

}  // namespace
}  // namespace baton
