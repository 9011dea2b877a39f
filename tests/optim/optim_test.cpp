// One step of each optimizer against values computed by hand.
#include <baton/optim.h>

#include <cmath>

#include "harness/op_harness.h"

namespace baton::testing {
namespace {

// A parameter [1.0] whose gradient is 0.5.
Tensor param_with_grad() {
  Tensor p = tensor({1.0}).requires_grad_();
  (p * 0.5).sum().backward();
  return p;
}

double value(const Tensor& p) { return p.item<double>(); }

TEST(SGD, PlainStep) {
  Tensor p = param_with_grad();
  optim::SGD opt({p}, {.lr = 0.1});
  opt.step();
  EXPECT_DOUBLE_EQ(value(p), 0.95);
}

TEST(SGD, MomentumBufferStartsAtTheGradient) {
  Tensor p = param_with_grad();
  optim::SGD opt({p}, {.lr = 0.1, .momentum = 0.9});
  opt.step();  // buf = 0.5, p = 1 - 0.05
  EXPECT_DOUBLE_EQ(value(p), 0.95);
  opt.step();  // buf = 0.9 * 0.5 + 0.5 = 0.95, p = 0.95 - 0.095
  EXPECT_NEAR(value(p), 0.855, 1e-15);
}

TEST(SGD, Nesterov) {
  Tensor p = param_with_grad();
  optim::SGD opt({p}, {.lr = 0.1, .momentum = 0.9, .nesterov = true});
  opt.step();  // d = 0.5 + 0.9 * 0.5
  EXPECT_NEAR(value(p), 1 - 0.1 * 0.95, 1e-15);
}

TEST(SGD, WeightDecay) {
  Tensor p = param_with_grad();
  optim::SGD opt({p}, {.lr = 0.1, .weight_decay = 0.1});
  opt.step();  // d = 0.5 + 0.1 * 1
  EXPECT_NEAR(value(p), 0.94, 1e-15);
}

TEST(SGD, SkipsParametersWithoutGradient) {
  Tensor p = tensor({1.0}).requires_grad_();
  optim::SGD opt({p}, {.lr = 0.1});
  opt.step();
  EXPECT_EQ(value(p), 1.0);
}

TEST(SGD, RejectsTensorsThatDoNotRequireGrad) {
  EXPECT_THROWS_WITH(ValueError, optim::SGD({tensor({1.0})}), "does not require grad");
}

TEST(Adam, FirstStepMovesByLearningRate) {
  Tensor p = param_with_grad();
  optim::Adam opt({p}, {.lr = 0.1});
  opt.step();  // m_hat = 0.5, v_hat = 0.25: p -= 0.1 * 0.5 / (0.5 + 1e-8)
  EXPECT_NEAR(value(p), 1 - 0.1 * 0.5 / (0.5 + 1e-8), 1e-15);
}

TEST(Adam, SecondStepUsesBiasCorrectedMoments) {
  Tensor p = param_with_grad();
  optim::Adam opt({p}, {.lr = 0.1});
  opt.step();
  opt.step();  // same gradient: m_hat = 0.5, v_hat = 0.25 again
  EXPECT_NEAR(value(p), 1 - 2 * 0.1 * 0.5 / (0.5 + 1e-8), 1e-12);
}

TEST(AdamW, DecaysTheWeightsDirectly) {
  Tensor p = param_with_grad();
  optim::AdamW opt({p}, {.lr = 0.1, .weight_decay = 0.01});
  opt.step();  // p = 1 * (1 - 0.1 * 0.01) - 0.1
  EXPECT_NEAR(value(p), 0.999 - 0.1 * 0.5 / (0.5 + 1e-8), 1e-15);
}

TEST(Optimizer, StateDictRoundTrip) {
  Tensor p = param_with_grad();
  optim::SGD opt({p}, {.lr = 0.1, .momentum = 0.9});
  opt.step();
  nn::NamedTensors state = opt.state_dict();
  ASSERT_EQ(state.size(), 2u);
  EXPECT_EQ(state[1].first, "0.momentum_buffer");

  Tensor q = tensor({0.95}).requires_grad_();
  (q * 0.5).sum().backward();
  optim::SGD restored({q}, {.lr = 0.1, .momentum = 0.9});
  restored.load_state_dict(state);
  restored.step();  // continues with buf = 0.5: same as a second step of the original
  EXPECT_NEAR(value(q), 0.855, 1e-15);
}

TEST(Optimizer, LoadStateDictRejectsMismatch) {
  Tensor p = param_with_grad();
  optim::SGD opt({p}, {.lr = 0.1, .momentum = 0.9});
  EXPECT_THROWS_WITH(ValueError, opt.load_state_dict({{"step", scalar_tensor<int64_t>(1)},
                                                      {"0.momentum_buffer", zeros({3}, f64)}}),
                     "0.momentum_buffer", "matches no parameter");
}

TEST(Scheduler, StepLR) {
  Tensor p = param_with_grad();
  optim::SGD opt({p}, {.lr = 1.0});
  optim::StepLR sched(opt, /*step_size=*/2, /*gamma=*/0.1);
  std::vector<double> lrs{opt.lr()};
  for (int e = 0; e < 4; ++e) {
    sched.step();
    lrs.push_back(opt.lr());
  }
  EXPECT_NEAR(lrs[1], 1.0, 1e-15);
  EXPECT_NEAR(lrs[2], 0.1, 1e-15);
  EXPECT_NEAR(lrs[3], 0.1, 1e-15);
  EXPECT_NEAR(lrs[4], 0.01, 1e-15);
}

TEST(Scheduler, CosineAnnealing) {
  Tensor p = param_with_grad();
  optim::SGD opt({p}, {.lr = 1.0});
  optim::CosineAnnealingLR sched(opt, /*t_max=*/4, /*eta_min=*/0.0);
  sched.step();
  EXPECT_NEAR(opt.lr(), (1 + std::cos(M_PI / 4)) / 2, 1e-15);
  sched.step();
  EXPECT_NEAR(opt.lr(), 0.5, 1e-15);
  sched.step();
  sched.step();
  EXPECT_NEAR(opt.lr(), 0.0, 1e-15);
}

}  // namespace
}  // namespace baton::testing
