// The fused update ops, through the harness: values against closed forms. The learning
// rate and the step counter are tensors the kernels read (and, for the step, write) when
// they run, so one recorded call replayed gives the right values at every step.
#include <cmath>

#include "harness/op_harness.h"
#include "dispatch/registry.h"
#include "kernels/cpu/measured_choice.h"

namespace baton::testing {
namespace {

Inputs three_tensors() {
  return {uniform({7}, -1, 1, 1), uniform({7}, -1, 1, 2), uniform({7}, 0, 1, 3), uniform({7}, 0, 1, 4)};
}

Tensor lr_tensor(double lr) { return scalar_tensor(lr); }
Tensor step_tensor(int64_t step) { return scalar_tensor<int64_t>(step); }

// Adam's update of p from moments m, v at 1-based step t (lr 0.01, L2 weight decay 0.1).
std::vector<double> adam_reference(const Inputs& in, int t) {
  auto p = in[0].to_vector<double>(), g = in[1].to_vector<double>();
  auto m = in[2].to_vector<double>(), v = in[3].to_vector<double>();
  for (size_t i = 0; i < p.size(); ++i) {
    double gi = g[i] + 0.1 * p[i];
    double mi = 0.9 * m[i] + 0.1 * gi, vi = 0.999 * v[i] + 0.001 * gi * gi;
    double mh = mi / (1 - std::pow(0.9, t)), vh = vi / (1 - std::pow(0.999, t));
    p[i] -= 0.01 * mh / (std::sqrt(vh) + 1e-8);
  }
  return p;
}

BATON_OP_CASES {
  return {
      OpCase{
          .name = "optim.sgd_update/momentum_nesterov_decay",
          .make_inputs = three_tensors,
          .fn =
              [](const Inputs& in) {
                Tensor p = in[0].clone(), buf = in[2].clone(), step = step_tensor(1);
                sgd_update_(p, in[1], lr_tensor(0.1), step, buf,
                            {.momentum = 0.9, .weight_decay = 0.01, .nesterov = true});
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
          // step 0: the buffer starts at d (its old contents and dampening are ignored)
          .name = "optim.sgd_update/first_step_sets_the_buffer",
          .make_inputs = three_tensors,
          .fn =
              [](const Inputs& in) {
                Tensor p = in[0].clone(), buf = in[2].clone(), step = step_tensor(0);
                sgd_update_(p, in[1], lr_tensor(0.1), step, buf, {.momentum = 0.9, .dampening = 0.5});
                return buf;
              },
          .reference = [](const Inputs& in) { return in[1].clone(); },
          .check_grad = false,
          .atol = 0,
      },
      OpCase{
          .name = "optim.sgd_update/no_momentum",
          .make_inputs = three_tensors,
          .fn =
              [](const Inputs& in) {
                Tensor p = in[0].clone(), none, step = step_tensor(5);
                sgd_update_(p, in[1], lr_tensor(0.25), step, none, {});
                return p;
              },
          .reference = [](const Inputs& in) { return in[0] - 0.25 * in[1]; },
          .check_grad = false,
          .atol = 1e-15,
      },
      OpCase{
          .name = "optim.adam_update/step3",
          .make_inputs = three_tensors,
          .fn =
              [](const Inputs& in) {
                Tensor p = in[0].clone(), m = in[2].clone(), v = in[3].clone();
                Tensor step = step_tensor(2);  // the update makes it step 3
                adam_update_(p, in[1], lr_tensor(0.01), step, m, v, {.weight_decay = 0.1});
                return p;
              },
          .reference = [](const Inputs& in) { return tensor(adam_reference(in, 3), {7}); },
          .check_grad = false,
          .atol = 1e-12,
      },
  };
}

TEST(UpdateOps, ShapeMismatchIsAnError) {
  Tensor p = zeros({3}), g = zeros({4}), buf, step = step_tensor(0);
  EXPECT_THROWS_WITH(ShapeError, sgd_update_(p, g, lr_tensor(0.1), step, buf, {}), "[sgd_update]", "[4]",
                     "[3]", "optim_update_test.cpp");
}

TEST(UpdateOps, LrAndStepMustBe0dTensorsOfTheirDtype) {
  Tensor p = zeros({3}), g = zeros({3}), buf, step = step_tensor(0), f32_step = scalar_tensor(0.f);
  EXPECT_THROWS_WITH(DTypeError, sgd_update_(p, g, scalar_tensor(0.1f), step, buf, {}), "[sgd_update]",
                     "lr must be a 0-d f64 tensor");
  EXPECT_THROWS_WITH(DTypeError, sgd_update_(p, g, lr_tensor(0.1), f32_step, buf, {}), "[sgd_update]",
                     "step must be a 0-d i64 tensor");
  Tensor m = zeros({3}), v = zeros({3});
  EXPECT_THROWS_WITH(DTypeError, adam_update_(p, g, full({1}, 0.1, f64), step, m, v, {}), "[adam_update]",
                     "lr must be a 0-d f64 tensor");
}

TEST(UpdateOps, BumpTheVersionOfWhatTheyWrite) {
  Tensor w = tensor({1.0, 2.0}).requires_grad_();
  Tensor y = (w * w).sum();
  Tensor p = w.detach(), g = ones({2}, f64), buf, step = step_tensor(0);
  sgd_update_(p, g, lr_tensor(0.1), step, buf, {});  // writes w's storage: its saved value is stale
  EXPECT_THROWS_WITH(AutogradError, y.backward(), "modified in place");
}

// What a static graph does: one op call with fixed attributes, run again and again on the
// same tensors. The kernel reads lr and step when it runs and increments step.
TEST(UpdateOps, AReplayedCallReadsLrAndStepFromTensors) {
  const ops::OpDef& sgd = *ops::find_op("sgd_update");
  const ops::Attrs attrs{{"momentum", 0.9}, {"dampening", 0.0}, {"weight_decay", 0.0}, {"nesterov", int64_t(0)}};
  Tensor p = tensor({1.0}), g = tensor({0.5}), lr = lr_tensor(0.1), step = step_tensor(0), buf = zeros({1}, f64);
  const std::vector<Tensor> inputs{p, g, lr, step, buf};
  auto run = [&] { ops::call(sgd, inputs, attrs, {}, SourceLoc::current()); };
  run();  // buf = 0.5, p = 1 - 0.1 * 0.5
  EXPECT_EQ(step.item<int64_t>(), 1);
  EXPECT_DOUBLE_EQ(p.item<double>(), 0.95);
  lr.fill_(0.2);
  run();  // buf = 0.9 * 0.5 + 0.5 = 0.95, p = 0.95 - 0.2 * 0.95
  EXPECT_EQ(step.item<int64_t>(), 2);
  EXPECT_DOUBLE_EQ(buf.item<double>(), 0.95);
  EXPECT_NEAR(p.item<double>(), 0.95 - 0.19, 1e-15);
}

TEST(UpdateOps, AdamTakesItsBiasCorrectionFromTheStepTensor) {
  Inputs in = three_tensors();
  Tensor p = in[0].clone(), m = in[2].clone(), v = in[3].clone(), lr = lr_tensor(0.01), step = step_tensor(0);
  const AdamHyper h{.weight_decay = 0.1};
  for (int t = 1; t <= 3; ++t) {
    Inputs before{p.clone(), in[1], m.clone(), v.clone()};
    adam_update_(p, in[1], lr, step, m, v, h);
    EXPECT_EQ(step.item<int64_t>(), t);
    EXPECT_ALL_CLOSE(p, tensor(adam_reference(before, t), {7}), 1e-12, 0);
  }
}

// The `streaming` attribute (set by the stream_updates pass) changes how the kernels store
// the parameter, not the values: the same bits for every update variant and dtype, on
// sizes that run on several threads and ones that do not, with the parameter starting
// off a cache line (a slice) and ending in a partial line.
TEST(UpdateOps, StreamingStoresWriteTheSameValues) {
  struct Variant {
    const char* op;
    ops::Attrs attrs;
    int buffers;
    int64_t step;
  };
  const Variant variants[] = {
      {"sgd_update", {{"momentum", 0.0}, {"dampening", 0.0}, {"weight_decay", 0.01}, {"nesterov", int64_t(0)}}, 0, 3},
      {"sgd_update", {{"momentum", 0.9}, {"dampening", 0.1}, {"weight_decay", 0.0}, {"nesterov", int64_t(0)}}, 1, 0},
      {"sgd_update", {{"momentum", 0.9}, {"dampening", 0.0}, {"weight_decay", 0.0}, {"nesterov", int64_t(0)}}, 1, 4},
      {"sgd_update", {{"momentum", 0.9}, {"dampening", 0.0}, {"weight_decay", 0.1}, {"nesterov", int64_t(1)}}, 1, 4},
      {"adam_update",
       {{"beta1", 0.9}, {"beta2", 0.999}, {"eps", 1e-8}, {"weight_decay", 0.1}, {"decoupled", int64_t(1)}}, 2, 2},
  };
  for (const Variant& v : variants) {
    for (DType dtype : {f32, f64}) {
      for (int64_t n : {int64_t(5), int64_t(1000), int64_t(2 * 32768 + 37)}) {
        // Each run gets fresh copies of the same values; the parameter is a slice starting 3 elements in.
        auto run = [&](bool streaming) {
          Tensor whole = cast(uniform({n + 3}, -1, 1, 7), dtype);
          Tensor p = slice(whole, 0, 3, n + 3);
          std::vector<Tensor> inputs{p, cast(uniform({n}, -1, 1, 8), dtype), lr_tensor(0.05), step_tensor(v.step)};
          for (int b = 0; b < v.buffers; ++b) inputs.push_back(cast(uniform({n}, 0, 1, uint64_t(9 + b)), dtype));
          ops::Attrs attrs = v.attrs;
          attrs.set("streaming", int64_t(streaming));
          ops::call(*ops::find_op(v.op), inputs, attrs, {}, SourceLoc::current());
          inputs.erase(inputs.begin() + 1, inputs.begin() + 4);  // the parameter and the buffers
          return inputs;
        };
        const std::vector<Tensor> plain = run(false), streamed = run(true);
        for (size_t i = 0; i < plain.size(); ++i)
          EXPECT_EQ(streamed[i].to_vector<double>(), plain[i].to_vector<double>())
              << v.op << " " << dtype << " n=" << n << " tensor " << i;
      }
    }
  }
}

// A plan step with `streaming` set picks its stores by timing both ways (the times are
// given here, so nothing depends on this machine's speed).
TEST(MeasuredChoice, TakesTheFasterWayAndProbesTheOther) {
  kernels::MeasuredChoice choice;
  EXPECT_EQ(choice.pick(), 0);  // no times yet: each way runs once
  choice.record(0, 60e-6);
  EXPECT_EQ(choice.pick(), 1);
  choice.record(1, 25e-6);
  int probes = 0;
  for (uint64_t run = 0; run < 4 * kernels::MeasuredChoice::kProbeEvery; ++run) {
    const int way = choice.pick();
    probes += way == 0;
    choice.record(way, way == 0 ? 60e-6 : 25e-6);
  }
  EXPECT_EQ(probes, 4) << "the slower way runs once every kProbeEvery runs";
  // The machine changes: plain stores get fast. The next probe of them switches over.
  for (uint64_t run = 0; run < kernels::MeasuredChoice::kProbeEvery; ++run) {
    const int way = choice.pick();
    choice.record(way, way == 0 ? 15e-6 : 25e-6);
  }
  EXPECT_EQ(choice.estimate(0), 15e-6);
  EXPECT_EQ(choice.pick(), 0);
  // A longer time moves the estimate a quarter of the way: one slow run does not switch.
  choice.record(0, 39e-6);
  EXPECT_DOUBLE_EQ(choice.estimate(0), 21e-6);
  EXPECT_EQ(choice.pick(), 0);
}

}  // namespace
}  // namespace baton::testing
