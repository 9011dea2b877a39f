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

// The folded weights are a constant of the plan; once the convolution has packed them in
// oneDNN's layout, that pack is their only copy (PlanOptions::release_adopted_constants).
// A later batch size is prepared from the plain weights made again from the pack.
TEST(Freeze, FoldedWeightsLiveOnlyInTheConvolutionsPack) {
  nn::Conv2d conv{64, 64, 3, Conv2dOptions{.padding = {1, 1}}};
  nn::BatchNorm2d bn{64};
  bn.running_var.copy_(testing::uniform({64}, 0.5, 2, 4).to(f32));
  bn.eval();
  Graph g("frozen");
  Tensor x = g.placeholder(f32, {"batch", 64, 6, 6}, "x");
  Tensor y = relu(bn.forward(conv.forward(x)));
  Session sess(g, {.freeze = true});
  auto eager = [&](const Tensor& v) {
    NoGradGuard no_grad;
    return relu(bn.forward(conv.forward(v)));
  };
  Tensor small = testing::uniform({2, 64, 6, 6}, -1, 1, 5).to(f32);
  Tensor large = testing::uniform({3, 64, 6, 6}, -1, 1, 6).to(f32);
  empty_cache();
  const size_t before = memory_stats().bytes_in_use;
  Tensor got = sess.run({y}, {{x, small}}).at(0);
  const size_t kept = memory_stats().bytes_in_use - before;
  const size_t one_copy = [&] {
    const size_t start = memory_stats().bytes_in_use;
    Tensor copy = conv.weight.clone();
    return memory_stats().bytes_in_use - start;
  }();
  // The pack, the folded bias, the result and the small arena: not a second copy.
  EXPECT_LT(kept, one_copy + one_copy / 2) << kept << " bytes kept; one weight copy takes " << one_copy;
  // The plan reports what it keeps for constants: the pack and the folded bias.
  const size_t constants = sess.memory_plan().constant_bytes;
  EXPECT_GE(constants, one_copy);
  EXPECT_LE(constants, kept);
  EXPECT_TRUE(contains(sess.explain(), "; constants ")) << sess.explain();
  EXPECT_ALL_CLOSE(got, eager(small), 1e-5, 1e-5);
  EXPECT_ALL_CLOSE(sess.run({y}, {{x, large}}).at(0), eager(large), 1e-5, 1e-5);
  EXPECT_ALL_CLOSE(sess.run({y}, {{x, small}}).at(0), eager(small), 1e-5, 1e-5);
  // An empty batch: the convolution prepares nothing and adopts nothing, so that
  // specialization binds the weights made again from the pack.
  EXPECT_EQ(sess.run({y}, {{x, zeros({0, 64, 6, 6})}}).at(0).shape(), (Shape{0, 64, 6, 6}));
}

}  // namespace
}  // namespace baton
