// Two identical MNIST MLPs, each with its SGD optimizer, and the training step for either:
// for tests that run the same steps two ways (eager and compiled, one or two threads).
#pragma once
#include <memory>
#include <utility>

#include <baton/baton.h>

namespace baton::testing {

struct TwinMlps {
  TwinMlps();
  // zero_grad, forward, cross-entropy, backward, SGD step on model `which` (0 or 1); the loss.
  Tensor step(int which, const Tensor& x, const Tensor& y);
  // Batch i of such a comparison: 16 seeded random images and labels.
  static std::pair<Tensor, Tensor> batch(int i);

  std::shared_ptr<nn::Module> model[2];
  std::unique_ptr<optim::SGD> opt[2];
};

}  // namespace baton::testing
