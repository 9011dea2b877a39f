#include <baton/nn.h>

#include "harness/op_harness.h"

namespace baton::testing {
namespace {

struct TwoLayer : nn::Module {
  std::shared_ptr<nn::Linear> fc1 = register_module("fc1", std::make_shared<nn::Linear>(4, 3));
  std::shared_ptr<nn::BatchNorm1d> bn = register_module("bn", std::make_shared<nn::BatchNorm1d>(3));
  std::shared_ptr<nn::Linear> fc2 = register_module("fc2", std::make_shared<nn::Linear>(3, 2, false));
  Tensor forward(const Tensor& x) override { return fc2->forward(relu(bn->forward(fc1->forward(x)))); }
};

std::vector<std::string> names(const nn::NamedTensors& t) {
  std::vector<std::string> out;
  for (auto& [n, v] : t) out.push_back(n);
  return out;
}

TEST(Module, NamesParametersAndBuffersRecursively) {
  TwoLayer m;
  EXPECT_EQ(names(m.named_parameters()),
            (std::vector<std::string>{"fc1.weight", "fc1.bias", "bn.weight", "bn.bias", "fc2.weight"}));
  EXPECT_EQ(names(m.named_buffers()), (std::vector<std::string>{"bn.running_mean", "bn.running_var"}));
  EXPECT_EQ(m.state_dict().size(), 7u);
  for (const Tensor& p : m.parameters()) EXPECT_TRUE(p.requires_grad());
}

TEST(Module, TrainAndEvalReachChildren) {
  TwoLayer m;
  m.eval();
  EXPECT_FALSE(m.bn->is_training());
  m.train();
  EXPECT_TRUE(m.bn->is_training());
}

TEST(Module, StateDictRoundTrip) {
  manual_seed(1);
  TwoLayer a;
  manual_seed(2);
  TwoLayer b;
  Tensor x = randn({5, 4});
  a.eval();
  b.eval();
  EXPECT_FALSE(all_close(a.forward(x), b.forward(x), 1e-6, 0));
  b.load_state_dict(a.state_dict());
  EXPECT_TRUE(all_close(a.forward(x), b.forward(x), 0, 0));
}

TEST(Module, LoadStateDictListsEveryProblem) {
  TwoLayer m;
  nn::NamedTensors state = m.state_dict();
  state.erase(state.begin());                     // missing fc1.weight
  state.emplace_back("extra.weight", zeros({1}));  // unexpected
  state[0].second = zeros({7});                    // fc1.bias mis-shaped
  EXPECT_THROWS_WITH(ValueError, m.load_state_dict(state), "missing entry 'fc1.weight'",
                     "unexpected entry 'extra.weight'", "'fc1.bias' is f32[7]");
  EXPECT_NO_THROW(m.load_state_dict(TwoLayer().state_dict()));
}

TEST(Module, ToDtypeConvertsParametersAndKeepsGrad) {
  TwoLayer m;
  m.to(f64);
  for (auto& [name, t] : m.state_dict()) EXPECT_EQ(t.dtype(), f64) << name;
  EXPECT_TRUE(m.fc1->weight.requires_grad());
  EXPECT_EQ(m.forward(randn({2, 4}, f64)).dtype(), f64);
}

TEST(Module, LinearInitialisationLikePyTorch) {
  manual_seed(0);
  nn::Linear fc(100, 50);
  auto w = fc.weight.to_vector<float>();
  float bound = 1.0f / 10.0f;
  float lo = *std::min_element(w.begin(), w.end()), hi = *std::max_element(w.begin(), w.end());
  EXPECT_GE(lo, -bound);
  EXPECT_LE(hi, bound);
  EXPECT_LT(lo, -0.9f * bound);  // the whole range is used
  EXPECT_GT(hi, 0.9f * bound);
}

TEST(Module, ResNet18HasTorchvisionParameters) {
  auto m = nn::resnet18(1000);
  int64_t count = 0;
  for (const Tensor& p : m->parameters()) count += p.numel();
  EXPECT_EQ(count, 11689512);  // torchvision's resnet18
  auto state = m->state_dict();
  EXPECT_EQ(state.front().first, "conv1.weight");
  bool has_downsample = false;
  for (auto& [n, t] : state) has_downsample |= n == "layer2.0.downsample.0.weight";
  EXPECT_TRUE(has_downsample);
}

TEST(Module, ResNet18RunsForwardAndBackward) {
  auto m = nn::resnet18(10, 1);
  Tensor x = randn({2, 1, 28, 28});
  Tensor y = m->forward(x);
  EXPECT_EQ(y.shape(), (Shape{2, 10}));
  y.sum().backward();
  for (auto& [name, p] : m->named_parameters()) EXPECT_TRUE(p.grad().defined()) << name;
}

TEST(Module, PrintsTheTree) {
  auto m = nn::mnist_cnn();
  std::ostringstream os;
  os << *m;
  EXPECT_NE(os.str().find("(0): Conv2d(1, 32, kernel_size=[3,3]"), std::string::npos) << os.str();
  EXPECT_NE(os.str().find("(7): Linear(in_features=1600, out_features=128, bias=true)"), std::string::npos);
}

}  // namespace
}  // namespace baton::testing

namespace baton::testing {
namespace {

TEST(Layers, ForwardShapesAndModes) {
  manual_seed(0);
  Tensor img = randn({2, 3, 8, 8});
  nn::Conv2d conv(3, 4, 3, {.padding = {1, 1}});
  EXPECT_EQ(conv.forward(img).shape(), (Shape{2, 4, 8, 8}));
  nn::BatchNorm2d bn(3);
  Tensor y = bn.forward(img);  // training: batch statistics, running stats move
  EXPECT_NEAR(mean(y).item<double>(), 0.0, 1e-5);
  EXPECT_GT(abs(bn.running_mean).sum().item<double>(), 0.0);
  bn.eval();
  EXPECT_TRUE(all_close(bn.forward(img),
                        (img - bn.running_mean.reshape({1, 3, 1, 1})) /
                            sqrt(bn.running_var.reshape({1, 3, 1, 1}) + 1e-5),
                        1e-5, 1e-5));
  EXPECT_THROWS_WITH(ShapeError, bn.forward(randn({2, 3})), "BatchNorm2d", "rank-4");

  nn::LayerNorm ln({8});
  EXPECT_NEAR(max(abs(mean(ln.forward(img), {-1}))).item<double>(), 0.0, 1e-5);
  nn::Embedding emb(10, 5);
  EXPECT_EQ(emb.forward(tensor<int64_t>({{1, 2, 3}})).shape(), (Shape{1, 3, 5}));

  nn::Dropout drop(0.5);
  drop.eval();
  EXPECT_TRUE(all_close(drop.forward(img), img, 0, 0));
  drop.train();
  Tensor d = drop.forward(ones({1000}));
  double kept = (d > 0).to(f32).mean().item<double>();
  EXPECT_NEAR(kept, 0.5, 0.08);
  EXPECT_NEAR(max(d).item<double>(), 2.0, 1e-6);  // survivors scaled by 1/(1-p)

  auto head = nn::sequential({nn::AdaptiveAvgPool2d({1, 1}), nn::Flatten(), nn::Softmax(1)});
  Tensor probs = head->forward(img);
  EXPECT_EQ(probs.shape(), (Shape{2, 3}));
  EXPECT_TRUE(all_close(sum(probs, {1}), ones({2}), 1e-6, 0));
  EXPECT_EQ(nn::MaxPool2d(2)->forward(img).shape(), (Shape{2, 3, 4, 4}));
  EXPECT_EQ(nn::AvgPool2d(2)->forward(img).shape(), (Shape{2, 3, 4, 4}));
  for (auto& act : {nn::ReLU(), nn::GELU(), nn::SiLU(), nn::Sigmoid(), nn::Tanh()})
    EXPECT_EQ(act->forward(img).shape(), img.shape()) << act->describe();
}

// nn.GELU's two forms, as PyTorch names them; another name is an error naming it.
TEST(Layers, GeluTakesItsApproximation) {
  Tensor x = uniform({3, 5}, -3, 3, 7).to(f32);
  EXPECT_ALL_CLOSE(nn::GELU()->forward(x), gelu(x), 0, 0);
  EXPECT_ALL_CLOSE(nn::GELU("tanh")->forward(x), gelu_tanh(x), 0, 0);
  EXPECT_EQ(nn::GELU("tanh")->describe(), "GELU(approximate='tanh')");
  EXPECT_THROWS_WITH(ValueError, nn::GELU("cubic"), "GELU", "approximate", "cubic");
}

TEST(Layers, ConvRejectsChannelsNotDivisibleByGroups) {
  EXPECT_THROWS_WITH(ValueError, nn::Conv2d(3, 4, 3, {.groups = 2}), "groups=2");
}

}  // namespace
}  // namespace baton::testing
