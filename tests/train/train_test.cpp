// Short training runs: the whole stack (data, model, loss, autograd, optimizer) must
// reduce the loss.
#include <baton/data.h>
#include <baton/nn.h>
#include <baton/optim.h>

#include <filesystem>

#include "harness/op_harness.h"

namespace baton::testing {
namespace {

std::shared_ptr<data::TensorDataset> small_slice() {
  if (!std::filesystem::exists(data::kFashionMnistDir)) return nullptr;
  auto train = data::FashionMNIST::load(data::kFashionMnistDir, /*train=*/true);
  return std::make_shared<data::TensorDataset>(train->head(512));
}

double mean_loss(nn::Module& model, const std::shared_ptr<data::TensorDataset>& ds) {
  NoGradGuard no_grad;
  return cross_entropy(model.forward(ds->inputs()), ds->targets()).item<double>();
}

double train_and_report(const std::shared_ptr<nn::Module>& model, optim::Optimizer& opt,
                        const std::shared_ptr<data::TensorDataset>& ds, int epochs) {
  data::DataLoader loader(ds, {.batch_size = 64, .shuffle = true, .seed = 0});
  for (int e = 0; e < epochs; ++e) {
    loader.set_epoch(e);
    for (const data::Batch& b : loader) {
      opt.zero_grad();
      cross_entropy(model->forward(b.input), b.target).backward();
      opt.step();
    }
  }
  return mean_loss(*model, ds);
}

TEST(Training, MlpWithSgdReducesTheLoss) {
  auto ds = small_slice();
  if (!ds) GTEST_SKIP() << "dataset-fashion-mnist not installed";
  manual_seed(0);
  auto model = nn::mnist_mlp();
  double before = mean_loss(*model, ds);
  optim::SGD opt(model->parameters(), {.lr = 0.01, .momentum = 0.9});
  double after = train_and_report(model, opt, ds, 3);
  EXPECT_LT(after, 0.6 * before) << "before " << before << " after " << after;
}

TEST(Training, CnnWithAdamReducesTheLoss) {
  auto ds = small_slice();
  if (!ds) GTEST_SKIP() << "dataset-fashion-mnist not installed";
  manual_seed(0);
  auto model = nn::mnist_cnn();
  double before = mean_loss(*model, ds);
  optim::Adam opt(model->parameters(), {.lr = 1e-3});
  double after = train_and_report(model, opt, ds, 2);
  EXPECT_LT(after, 0.6 * before) << "before " << before << " after " << after;
}

}  // namespace
}  // namespace baton::testing
