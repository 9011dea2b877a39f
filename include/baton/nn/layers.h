// The standard layers. Each holds its parameters as members registered with Module.
#pragma once
#include <array>
#include <functional>
#include <memory>
#include <string_view>
#include <vector>

#include "baton/nn/module.h"
#include "baton/ops/nn.h"

namespace baton::nn {

// y = x W^T + b. Weight [out, in] and bias initialised like PyTorch (uniform in
// +-1/sqrt(in), kaiming-uniform with a = sqrt(5)).
class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true);
  Tensor forward(const Tensor& x) override;
  std::string describe() const override;
  Tensor weight, bias;
};

// Weight [out, in / groups, kh, kw]; initialised like PyTorch (kaiming-uniform, a = sqrt(5)).
class Conv2d : public Module {
 public:
  Conv2d(int64_t in_channels, int64_t out_channels, std::array<int64_t, 2> kernel,
         Conv2dOptions options = {}, bool bias = true);
  Conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel, Conv2dOptions options = {},
         bool bias = true)
      : Conv2d(in_channels, out_channels, {kernel, kernel}, options, bias) {}
  Tensor forward(const Tensor& x) override;
  std::string describe() const override;
  Tensor weight, bias;

 private:
  int64_t in_, out_;
  std::array<int64_t, 2> kernel_;
  Conv2dOptions options_;
};

// Batch normalisation over the channel dim (1) of [N, C] / [N, C, L] (1d) or [N, C, H, W] (2d).
class BatchNorm : public Module {
 public:
  explicit BatchNorm(int64_t num_features, double eps = 1e-5, double momentum = 0.1,
                     int expected_rank = 0);
  Tensor forward(const Tensor& x) override;
  std::string describe() const override;
  Tensor weight, bias, running_mean, running_var;

 private:
  int64_t features_;
  double eps_, momentum_;
  int expected_rank_;  // 0: any
};
class BatchNorm1d : public BatchNorm {
 public:
  explicit BatchNorm1d(int64_t n, double eps = 1e-5, double momentum = 0.1) : BatchNorm(n, eps, momentum) {}
};
class BatchNorm2d : public BatchNorm {
 public:
  explicit BatchNorm2d(int64_t n, double eps = 1e-5, double momentum = 0.1) : BatchNorm(n, eps, momentum, 4) {}
};

class LayerNorm : public Module {
 public:
  explicit LayerNorm(Shape normalized_shape, double eps = 1e-5);
  Tensor forward(const Tensor& x) override;
  std::string describe() const override;
  Tensor weight, bias;

 private:
  Shape shape_;
  double eps_;
};

class Embedding : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t dim);
  Tensor forward(const Tensor& indices) override;
  std::string describe() const override;
  Tensor weight;
};

class Dropout : public Module {
 public:
  explicit Dropout(double p = 0.5) : p_(p) {}
  Tensor forward(const Tensor& x) override;
  std::string describe() const override;

 private:
  double p_;
};

// A module made of a function of its input, no parameters (activations, flatten...).
class Lambda : public Module {
 public:
  Lambda(std::string name, std::function<Tensor(const Tensor&)> fn)
      : name_(std::move(name)), fn_(std::move(fn)) {}
  Tensor forward(const Tensor& x) override { return fn_(x); }
  std::string describe() const override { return name_; }

 private:
  std::string name_;
  std::function<Tensor(const Tensor&)> fn_;
};

std::shared_ptr<Module> ReLU();
// approximate: "none" (the exact erf form) or "tanh" (gelu_tanh), as PyTorch's nn.GELU.
std::shared_ptr<Module> GELU(std::string_view approximate = "none");
std::shared_ptr<Module> SiLU();
std::shared_ptr<Module> Sigmoid();
std::shared_ptr<Module> Tanh();
std::shared_ptr<Module> Softmax(int64_t dim);
std::shared_ptr<Module> Flatten(int64_t start = 1, int64_t end = -1);
std::shared_ptr<Module> MaxPool2d(int64_t kernel, int64_t stride = 0, int64_t padding = 0);
std::shared_ptr<Module> AvgPool2d(int64_t kernel, int64_t stride = 0, int64_t padding = 0);
std::shared_ptr<Module> AdaptiveAvgPool2d(std::array<int64_t, 2> output_size);

// Runs its children in order; children are named "0", "1", ...
class Sequential : public Module {
 public:
  Sequential() = default;
  Sequential(std::initializer_list<std::shared_ptr<Module>> modules);
  void push_back(std::shared_ptr<Module> m);
  Tensor forward(const Tensor& x) override;
  std::string describe() const override { return "Sequential"; }
  size_t size() const { return modules_.size(); }
  const std::shared_ptr<Module>& operator[](size_t i) const { return modules_[i]; }

 private:
  std::vector<std::shared_ptr<Module>> modules_;
};
using ModuleList = std::initializer_list<std::shared_ptr<Module>>;
inline std::shared_ptr<Sequential> sequential(ModuleList modules) {
  return std::make_shared<Sequential>(modules);
}

}  // namespace baton::nn
