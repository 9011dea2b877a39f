#include "baton/nn/models.h"

#include "baton/nn/init.h"
#include "baton/ops.h"

namespace baton::nn {
namespace {

std::shared_ptr<Conv2d> conv(int64_t in, int64_t out, int64_t k, int64_t stride, int64_t pad) {
  Conv2dOptions o;
  o.stride = {stride, stride};
  o.padding = {pad, pad};
  auto c = std::make_shared<Conv2d>(in, out, k, o, /*bias=*/false);
  init::kaiming_normal_(c->weight, /*fan_out_mode=*/true);
  return c;
}

// torchvision's BasicBlock: two 3x3 convs with batch norm, plus the (projected) input.
class BasicBlock : public Module {
 public:
  BasicBlock(int64_t in, int64_t planes, int64_t stride) {
    conv1 = register_module("conv1", conv(in, planes, 3, stride, 1));
    bn1 = register_module("bn1", std::make_shared<BatchNorm2d>(planes));
    conv2 = register_module("conv2", conv(planes, planes, 3, 1, 1));
    bn2 = register_module("bn2", std::make_shared<BatchNorm2d>(planes));
    if (stride != 1 || in != planes) {
      downsample = register_module(
          "downsample", sequential({conv(in, planes, 1, stride, 0), std::make_shared<BatchNorm2d>(planes)}));
    }
  }
  Tensor forward(const Tensor& x) override {
    Tensor out = relu(bn1->forward(conv1->forward(x)));
    out = bn2->forward(conv2->forward(out));
    return relu(out + (downsample ? downsample->forward(x) : x));
  }
  std::string describe() const override { return "BasicBlock"; }

 private:
  std::shared_ptr<Conv2d> conv1, conv2;
  std::shared_ptr<BatchNorm2d> bn1, bn2;
  std::shared_ptr<Sequential> downsample;
};

class ResNet : public Module {
 public:
  ResNet(int64_t num_classes, int64_t in_channels) {
    conv1 = register_module("conv1", conv(in_channels, 64, 7, 2, 3));
    bn1 = register_module("bn1", std::make_shared<BatchNorm2d>(64));
    int64_t in = 64;
    const int64_t widths[] = {64, 128, 256, 512};
    for (int i = 0; i < 4; ++i) {
      auto layer = std::make_shared<Sequential>();
      layer->push_back(std::make_shared<BasicBlock>(in, widths[i], i == 0 ? 1 : 2));
      layer->push_back(std::make_shared<BasicBlock>(widths[i], widths[i], 1));
      layers[i] = register_module("layer" + std::to_string(i + 1), layer);
      in = widths[i];
    }
    fc = register_module("fc", std::make_shared<Linear>(512, num_classes));
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = relu(bn1->forward(conv1->forward(x)));
    h = max_pool2d(h, Pool2dOptions{{3, 3}, {2, 2}, {1, 1}});
    for (auto& layer : layers) h = layer->forward(h);
    h = flatten(adaptive_avg_pool2d(h, {1, 1}), 1);
    return fc->forward(h);
  }
  std::string describe() const override { return "ResNet18"; }

 private:
  std::shared_ptr<Conv2d> conv1;
  std::shared_ptr<BatchNorm2d> bn1;
  std::shared_ptr<Sequential> layers[4];
  std::shared_ptr<Linear> fc;
};

}  // namespace

std::shared_ptr<Module> resnet18(int64_t num_classes, int64_t in_channels) {
  return std::make_shared<ResNet>(num_classes, in_channels);
}

std::shared_ptr<Sequential> mnist_cnn(int64_t num_classes) {
  return sequential({
      std::make_shared<Conv2d>(1, 32, 3), ReLU(), MaxPool2d(2),
      std::make_shared<Conv2d>(32, 64, 3), ReLU(), MaxPool2d(2),
      Flatten(), std::make_shared<Linear>(1600, 128), ReLU(),
      std::make_shared<Linear>(128, num_classes)});
}

std::shared_ptr<Sequential> mnist_mlp(int64_t num_classes) {
  return sequential({
      Flatten(), std::make_shared<Linear>(784, 512), ReLU(), std::make_shared<Linear>(512, 256),
      ReLU(), std::make_shared<Linear>(256, num_classes)});
}

}  // namespace baton::nn
