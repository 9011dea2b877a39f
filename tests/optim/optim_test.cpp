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

TEST(SGD, MomentumOverThreeSteps) {
  Tensor p = param_with_grad();
  optim::SGD opt({p}, {.lr = 0.1, .momentum = 0.9});
  opt.step();  // buf = 0.5
  opt.step();  // buf = 0.95
  opt.step();  // buf = 0.9 * 0.95 + 0.5 = 1.355
  EXPECT_NEAR(value(p), 1 - 0.1 * (0.5 + 0.95 + 1.355), 1e-15);
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

TEST(Adam, ThirdStepUsesBiasCorrectionOfStepThree) {
  Tensor p = param_with_grad();
  optim::Adam opt({p}, {.lr = 0.1});
  for (int i = 0; i < 3; ++i) opt.step();  // corrected at steps 1, 2, 3: the same move each time
  EXPECT_NEAR(value(p), 1 - 3 * 0.1 * 0.5 / (0.5 + 1e-8), 1e-12);
}

TEST(Optimizer, SetLrIsSeenByTheNextStep) {
  Tensor p = param_with_grad();
  optim::SGD opt({p}, {.lr = 0.1, .momentum = 0.9});
  opt.step();  // buf = 0.5, p = 0.95
  opt.set_lr(0.2);
  EXPECT_DOUBLE_EQ(opt.lr(), 0.2);
  opt.step();  // buf = 0.95, p = 0.95 - 0.2 * 0.95
  EXPECT_NEAR(value(p), 0.95 - 0.19, 1e-15);
}

TEST(Optimizer, SchedulerLrReachesAdam) {
  Tensor p = param_with_grad();
  optim::Adam opt({p}, {.lr = 0.1});
  optim::StepLR sched(opt, /*step_size=*/1, /*gamma=*/0.5);
  opt.step();  // moves by 0.1 * 0.5 / (0.5 + 1e-8)
  sched.step();
  opt.step();  // moves by 0.05 * ...
  EXPECT_NEAR(value(p), 1 - 0.15 * 0.5 / (0.5 + 1e-8), 1e-12);
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
  ASSERT_EQ(state.size(), 3u);
  EXPECT_EQ(state[0].first, "step");
  EXPECT_EQ(state[1].first, "0.step");
  EXPECT_EQ(state[2].first, "0.momentum_buffer");

  Tensor q = tensor({0.95}).requires_grad_();
  (q * 0.5).sum().backward();
  optim::SGD restored({q}, {.lr = 0.1, .momentum = 0.9});
  restored.load_state_dict(state);
  restored.step();  // continues with buf = 0.5: same as a second step of the original
  EXPECT_NEAR(value(q), 0.855, 1e-15);
}

TEST(Optimizer, StepCountersAreStateAndTheTopLevelStepFollowsThem) {
  Tensor p = param_with_grad(), unused = tensor({1.0}).requires_grad_();
  optim::Adam opt({p, unused}, {.lr = 0.1});
  for (int i = 0; i < 3; ++i) opt.step();
  nn::NamedTensors state = opt.state_dict();
  ASSERT_EQ(state.size(), 4u);  // "step", then p's step, exp_avg, exp_avg_sq
  EXPECT_EQ(state[0].first, "step");
  EXPECT_EQ(state[0].second.item<int64_t>(), 3);
  EXPECT_EQ(state[1].first, "0.step");
  EXPECT_EQ(state[1].second.dtype(), i64);
  EXPECT_EQ(state[1].second.dim(), 0);
  EXPECT_EQ(state[1].second.item<int64_t>(), 3);
}

// A state dict from before per-parameter step counters: only the top-level "step".
TEST(Optimizer, LoadsAStateWithOnlyTheTopLevelStep) {
  Tensor q = tensor({0.95}).requires_grad_();
  (q * 0.5).sum().backward();
  optim::SGD sgd({q}, {.lr = 0.1, .momentum = 0.9});
  sgd.load_state_dict({{"step", scalar_tensor<int64_t>(1)}, {"0.momentum_buffer", tensor({0.5})}});
  EXPECT_EQ(sgd.state_dict()[0].second.item<int64_t>(), 1);
  sgd.step();  // continues with buf = 0.5: the second step of MomentumBufferStartsAtTheGradient
  EXPECT_NEAR(value(q), 0.855, 1e-15);

  // Adam after two steps of gradient 0.5: m = 0.095, v = 0.0004975 (uncorrected).
  Tensor p = tensor({0.9}).requires_grad_();
  (p * 0.5).sum().backward();
  optim::Adam adam({p}, {.lr = 0.1});
  adam.load_state_dict({{"step", scalar_tensor<int64_t>(2)},
                        {"0.exp_avg", tensor({0.5 * (1 - 0.81)})},
                        {"0.exp_avg_sq", tensor({0.25 * (1 - 0.999 * 0.999)})}});
  adam.step();  // bias-corrected at step 3: m_hat = 0.5, v_hat = 0.25
  EXPECT_NEAR(value(p), 0.9 - 0.1 * 0.5 / (0.5 + 1e-8), 1e-12);
  EXPECT_EQ(adam.state_dict()[0].second.item<int64_t>(), 3);

  // SGD without momentum has no per-parameter state to tell: every parameter took the steps.
  optim::SGD plain({q}, {.lr = 0.1});
  plain.load_state_dict({{"step", scalar_tensor<int64_t>(7)}});
  EXPECT_EQ(plain.state_dict()[0].second.item<int64_t>(), 7);
}

TEST(Optimizer, LoadStateDictRejectsMismatch) {
  Tensor p = param_with_grad();
  optim::SGD opt({p}, {.lr = 0.1, .momentum = 0.9});
  EXPECT_THROWS_WITH(ValueError, opt.load_state_dict({{"step", scalar_tensor<int64_t>(1)},
                                                      {"0.momentum_buffer", zeros({3}, f64)}}),
                     "0.momentum_buffer", "matches no parameter");
  EXPECT_THROWS_WITH(ValueError, opt.load_state_dict({{"step", scalar_tensor<int64_t>(1)},
                                                      {"0.step", tensor<int64_t>({1})}}),
                     "0.step", "matches no parameter");
  EXPECT_THROWS_WITH(ValueError, opt.load_state_dict({{"step", scalar_tensor<int64_t>(1)},
                                                      {"x.momentum_buffer", zeros({1}, f64)}}),
                     "x.momentum_buffer", "matches no parameter");
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
