// Ready-made models.
#pragma once
#include <memory>

#include "baton/nn/layers.h"

namespace baton::nn {

// torchvision's ResNet-18 (BasicBlock x [2, 2, 2, 2], 3-channel input), initialised as
// torchvision does: kaiming-normal (fan_out) convs, BN weight 1 bias 0. Parameter names
// match torchvision's state_dict ("layer1.0.conv1.weight", "fc.bias", ...).
std::shared_ptr<Module> resnet18(int64_t num_classes = 1000, int64_t in_channels = 3);

// The CNN of shared/bench/README.md for 1x28x28 images:
// Conv(1,32,3) ReLU MaxPool(2) Conv(32,64,3) ReLU MaxPool(2) Flatten Linear(1600,128) ReLU Linear(128,10).
std::shared_ptr<Sequential> mnist_cnn(int64_t num_classes = 10);
// MLP 784-512-256-10 with ReLU, on flattened images.
std::shared_ptr<Sequential> mnist_mlp(int64_t num_classes = 10);

}  // namespace baton::nn
