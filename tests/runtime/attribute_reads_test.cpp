// A plan's runs read no attribute by name: each step's kernel (or view rule) takes the
// parameters its plan made once (OpDef::params). Checked on the benchmark's plans (the MLP
// and CNN training steps, ResNet-18's forward) and on the ONNX models of ../shared/models:
// a first run specializes the plan, the second must read nothing (sequential executor).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "baton/baton.h"
#include "baton/nn.h"
#include "baton/onnx.h"
#include "baton/optim.h"
#include "harness/attribute_reads.h"

namespace baton {
namespace {

using testing::AttributeReadWatch;

// Runs `run` once, then again watched: the second run must read no attribute.
template <class F>
void expect_second_run_reads_none(const std::string& what, F run) {
  AttributeReadWatch watch;
  run();
  watch.reset();
  run();
  EXPECT_EQ(watch.reads(), 0u) << what << ": a second run read attributes by name, in the steps of "
                               << watch.describe();
}

// The benchmark's training step (bench/baton_bench.cpp): zero_grad, forward, cross entropy,
// backward, SGD with momentum, compiled for any batch.
void check_training_step(const std::string& what, std::shared_ptr<nn::Module> model, const Tensor& x) {
  optim::SGD opt(model->parameters(), {.lr = 0.01, .momentum = 0.9});
  const Tensor y = randint(0, 10, {x.size(0)});
  CompiledFunction step({.dynamic_dims = {{0, 0, "batch"}, {1, 0, "batch"}}, .name = what});
  CompiledFunction::Fn fn = [&](const std::vector<Tensor>& in) {
    opt.zero_grad();
    Tensor loss = cross_entropy(model->forward(in[0]), in[1]);
    loss.backward();
    opt.step();
    return std::vector<Tensor>{loss};
  };
  expect_second_run_reads_none(what, [&] { step.call({x, y}, fn, SourceLoc::current()); });
  EXPECT_EQ(step.num_traces(), 1u);
}

TEST(PlanAttributeReads, MlpTrainingStep) {
  manual_seed(1);
  check_training_step("mlp_training_step", nn::mnist_mlp(), randn({16, 1, 28, 28}));
}

TEST(PlanAttributeReads, CnnTrainingStep) {
  manual_seed(2);
  check_training_step("cnn_training_step", nn::mnist_cnn(), randn({16, 1, 28, 28}));
}

void check_resnet18_forward(const std::string& what, const CompileOptions& options, int64_t batch) {
  std::shared_ptr<nn::Module> model = nn::resnet18(10);
  model->eval();
  NoGradGuard no_grad;
  const Tensor x = randn({batch, 3, 32, 32});
  CompiledFunction forward(options);
  CompiledFunction::Fn fn = [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{model->forward(in[0])}; };
  expect_second_run_reads_none(what, [&] { forward.call({x}, fn, SourceLoc::current()); });
}

// Eval, frozen (batch norm folds into the convolutions), as resnet18_bs*_ms_compiled runs.
TEST(PlanAttributeReads, ResNet18Forward) {
  manual_seed(3);
  check_resnet18_forward("resnet18", {.dynamic_dims = {{0, 0, "batch"}}, .name = "resnet18", .freeze = true}, 2);
}

// Also unfrozen, where batch norm runs as its own step.
TEST(PlanAttributeReads, ResNet18ForwardUnfrozen) {
  manual_seed(4);
  check_resnet18_forward("resnet18_unfrozen", {.name = "resnet18"}, 1);
}

// ../shared/models (or $BATON_MODELS), as the onnx.shared_models conformance test runs them.
std::filesystem::path shared_models() {
  const char* dir = std::getenv("BATON_MODELS");
  return dir ? dir : BATON_SHARED_MODELS;
}

class SharedModelAttributeReads : public ::testing::TestWithParam<std::string> {};

TEST_P(SharedModelAttributeReads, SecondRunReadsNone) {
  const std::filesystem::path dir = shared_models() / GetParam();
  if (!std::filesystem::exists(dir / "model.onnx")) GTEST_SKIP() << dir << " is missing";
  onnx::Model model = onnx::load((dir / "model.onnx").string());
  const onnx::TestDataSet data = onnx::load_test_data_set((dir / "test_data_set_0").string(), model);
  expect_second_run_reads_none(GetParam(), [&] { model.run_values(data.inputs); });
}

INSTANTIATE_TEST_SUITE_P(Models, SharedModelAttributeReads,
                         ::testing::Values("lenet", "mlp", "mobilenet_v2", "resnet18", "transformer_encoder", "lstm"));

}  // namespace
}  // namespace baton
