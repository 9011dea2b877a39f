#include "harness/twin_models.h"

namespace baton::testing {

TwinMlps::TwinMlps() {
  for (int i = 0; i < 2; ++i) {
    manual_seed(3);
    model[i] = nn::mnist_mlp();
    opt[i] = std::make_unique<optim::SGD>(model[i]->parameters(), optim::SGDOptions{.lr = 0.1, .momentum = 0.9});
  }
}

Tensor TwinMlps::step(int which, const Tensor& x, const Tensor& y) {
  opt[which]->zero_grad();
  Tensor loss = cross_entropy(model[which]->forward(x), y);
  loss.backward();
  opt[which]->step();
  return loss;
}

std::pair<Tensor, Tensor> TwinMlps::batch(int i) {
  manual_seed(uint64_t(10 + i));
  Tensor x = randn({16, 784});
  return {x, randint(0, 10, {16})};
}

}  // namespace baton::testing
