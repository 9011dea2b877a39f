// The fused update ops, through the harness: values against closed forms.
#include <cmath>

#include "harness/op_harness.h"

namespace baton::testing {
namespace {

Inputs three_tensors() {
  return {uniform({7}, -1, 1, 1), uniform({7}, -1, 1, 2), uniform({7}, 0, 1, 3), uniform({7}, 0, 1, 4)};
}

BATON_OP_CASES {
  return {
      OpCase{
          .name = "optim.sgd_update/momentum_nesterov_decay",
          .make_inputs = three_tensors,
          .fn =
              [](const Inputs& in) {
                Tensor p = in[0].clone(), buf = in[2].clone();
                sgd_update_(p, in[1], buf, {.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01, .nesterov = true},
                            /*first_step=*/false);
                return p;
              },
          .reference =
              [](const Inputs& in) {
                auto p = in[0].to_vector<double>(), g = in[1].to_vector<double>(), b = in[2].to_vector<double>();
                for (size_t i = 0; i < p.size(); ++i) {
                  double d = g[i] + 0.01 * p[i];
                  double buf = 0.9 * b[i] + d;
                  p[i] -= 0.1 * (d + 0.9 * buf);
                }
                return tensor(p, {7});
              },
          .check_grad = false,
          .atol = 1e-15,
      },
      OpCase{
          .name = "optim.adam_update/step3",
          .make_inputs = three_tensors,
          .fn =
              [](const Inputs& in) {
                Tensor p = in[0].clone(), m = in[2].clone(), v = in[3].clone();
                adam_update_(p, in[1], m, v, {.lr = 0.01, .weight_decay = 0.1}, /*step=*/3);
                return p;
              },
          .reference =
              [](const Inputs& in) {
                auto p = in[0].to_vector<double>(), g = in[1].to_vector<double>();
                auto m = in[2].to_vector<double>(), v = in[3].to_vector<double>();
                for (size_t i = 0; i < p.size(); ++i) {
                  double gi = g[i] + 0.1 * p[i];
                  double mi = 0.9 * m[i] + 0.1 * gi, vi = 0.999 * v[i] + 0.001 * gi * gi;
                  double mh = mi / (1 - std::pow(0.9, 3)), vh = vi / (1 - std::pow(0.999, 3));
                  p[i] -= 0.01 * mh / (std::sqrt(vh) + 1e-8);
                }
                return tensor(p, {7});
              },
          .check_grad = false,
          .atol = 1e-12,
      },
  };
}

TEST(UpdateOps, ShapeMismatchIsAnError) {
  Tensor p = zeros({3}), g = zeros({4}), buf;
  EXPECT_THROWS_WITH(ShapeError, sgd_update_(p, g, buf, {}, true), "[sgd_update]", "[4]", "[3]",
                     "optim_update_test.cpp");
}

TEST(UpdateOps, BumpTheVersionOfWhatTheyWrite) {
  Tensor w = tensor({1.0, 2.0}).requires_grad_();
  Tensor y = (w * w).sum();
  Tensor p = w.detach(), g = ones({2}, f64), buf;
  sgd_update_(p, g, buf, {.lr = 0.1}, true);  // writes w's storage: its saved value is stale
  EXPECT_THROWS_WITH(AutogradError, y.backward(), "modified in place");
}

}  // namespace
}  // namespace baton::testing
