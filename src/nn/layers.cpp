#include "baton/nn/layers.h"

#include <cmath>

#include "baton/nn/init.h"
#include "baton/ops.h"

namespace baton::nn {

Linear::Linear(int64_t in, int64_t out, bool with_bias) {
  register_parameter("weight", weight, empty({out, in}));
  init::kaiming_uniform_default_(weight);
  if (with_bias) {
    register_parameter("bias", bias, empty({out}));
    double bound = 1.0 / std::sqrt(double(in));
    init::uniform_(bias, -bound, bound);
  }
}

Tensor Linear::forward(const Tensor& x) { return linear(x, weight, bias); }

std::string Linear::describe() const {
  return str("Linear(in_features=", weight.shape()[1], ", out_features=", weight.shape()[0],
             ", bias=", bias.defined() ? "true" : "false", ")");
}

Conv2d::Conv2d(int64_t in, int64_t out, std::array<int64_t, 2> kernel, Conv2dOptions options,
               bool with_bias)
    : in_(in), out_(out), kernel_(kernel), options_(options) {
  if (options.groups < 1 || in % options.groups || out % options.groups)
    throw ValueError("Conv2d", str("channels in=", in, " out=", out, " are not divisible by groups=",
                                   options.groups), SourceLoc::current());
  register_parameter("weight", weight, empty({out, in / options.groups, kernel[0], kernel[1]}));
  init::kaiming_uniform_default_(weight);
  if (with_bias) {
    register_parameter("bias", bias, empty({out}));
    double bound = 1.0 / std::sqrt(double(init::fan_in(weight)));
    init::uniform_(bias, -bound, bound);
  }
}

Tensor Conv2d::forward(const Tensor& x) { return conv2d(x, weight, bias, options_); }

std::string Conv2d::describe() const {
  return str("Conv2d(", in_, ", ", out_, ", kernel_size=", Shape{kernel_[0], kernel_[1]},
             ", stride=", Shape{options_.stride[0], options_.stride[1]},
             ", padding=", Shape{options_.padding[0], options_.padding[1]},
             options_.groups > 1 ? str(", groups=", options_.groups) : "",
             bias.defined() ? "" : ", bias=false", ")");
}

BatchNorm::BatchNorm(int64_t n, double eps, double momentum, int expected_rank)
    : features_(n), eps_(eps), momentum_(momentum), expected_rank_(expected_rank) {
  register_parameter("weight", weight, ones({n}));
  register_parameter("bias", bias, zeros({n}));
  register_buffer("running_mean", running_mean, zeros({n}));
  register_buffer("running_var", running_var, ones({n}));
}

Tensor BatchNorm::forward(const Tensor& x) {
  if (expected_rank_ && x.dim() != expected_rank_)
    throw ShapeError(describe(), str("expects a rank-", expected_rank_, " input, got ", x.shape()),
                     SourceLoc::current());
  return batch_norm(x, running_mean, running_var, weight, bias, is_training(), momentum_, eps_);
}

std::string BatchNorm::describe() const {
  return str(expected_rank_ == 4 ? "BatchNorm2d(" : "BatchNorm1d(", features_, ", eps=", eps_,
             ", momentum=", momentum_, ")");
}

LayerNorm::LayerNorm(Shape normalized_shape, double eps) : shape_(normalized_shape), eps_(eps) {
  register_parameter("weight", weight, ones(shape_));
  register_parameter("bias", bias, zeros(shape_));
}

Tensor LayerNorm::forward(const Tensor& x) { return layer_norm(x, shape_, weight, bias, eps_); }

std::string LayerNorm::describe() const { return str("LayerNorm(", shape_, ", eps=", eps_, ")"); }

Embedding::Embedding(int64_t num, int64_t dim) {
  register_parameter("weight", weight, empty({num, dim}));
  init::normal_(weight);
}

Tensor Embedding::forward(const Tensor& indices) { return embedding(weight, indices); }

std::string Embedding::describe() const {
  return str("Embedding(", weight.shape()[0], ", ", weight.shape()[1], ")");
}

Tensor Dropout::forward(const Tensor& x) { return dropout(x, p_, is_training()); }
std::string Dropout::describe() const { return str("Dropout(p=", p_, ")"); }

std::shared_ptr<Module> ReLU() {
  return std::make_shared<Lambda>("ReLU()", [](const Tensor& x) { return relu(x); });
}
std::shared_ptr<Module> GELU(std::string_view approximate) {
  if (approximate == "tanh")
    return std::make_shared<Lambda>("GELU(approximate='tanh')", [](const Tensor& x) { return gelu_tanh(x); });
  if (approximate != "none")
    throw ValueError("GELU", str("approximate must be \"none\" or \"tanh\", not \"", approximate, "\""),
                     SourceLoc::current());
  return std::make_shared<Lambda>("GELU()", [](const Tensor& x) { return gelu(x); });
}
std::shared_ptr<Module> SiLU() {
  return std::make_shared<Lambda>("SiLU()", [](const Tensor& x) { return silu(x); });
}
std::shared_ptr<Module> Sigmoid() {
  return std::make_shared<Lambda>("Sigmoid()", [](const Tensor& x) { return sigmoid(x); });
}
std::shared_ptr<Module> Tanh() {
  return std::make_shared<Lambda>("Tanh()", [](const Tensor& x) { return tanh(x); });
}
std::shared_ptr<Module> Softmax(int64_t dim) {
  return std::make_shared<Lambda>(str("Softmax(dim=", dim, ")"),
                                  [dim](const Tensor& x) { return softmax(x, dim); });
}
std::shared_ptr<Module> Flatten(int64_t start, int64_t end) {
  return std::make_shared<Lambda>(str("Flatten(start_dim=", start, ", end_dim=", end, ")"),
                                  [=](const Tensor& x) { return flatten(x, start, end); });
}

static std::shared_ptr<Module> pool(const char* name, int64_t k, int64_t s, int64_t p, bool max) {
  Pool2dOptions o{{k, k}, {s ? s : k, s ? s : k}, {p, p}};
  return std::make_shared<Lambda>(
      str(name, "(kernel_size=", k, ", stride=", o.stride[0], ", padding=", p, ")"),
      [o, max](const Tensor& x) { return max ? max_pool2d(x, o) : avg_pool2d(x, o); });
}
std::shared_ptr<Module> MaxPool2d(int64_t k, int64_t s, int64_t p) { return pool("MaxPool2d", k, s, p, true); }
std::shared_ptr<Module> AvgPool2d(int64_t k, int64_t s, int64_t p) { return pool("AvgPool2d", k, s, p, false); }
std::shared_ptr<Module> AdaptiveAvgPool2d(std::array<int64_t, 2> size) {
  return std::make_shared<Lambda>(str("AdaptiveAvgPool2d(output_size=", Shape{size[0], size[1]}, ")"),
                                  [size](const Tensor& x) { return adaptive_avg_pool2d(x, size); });
}

Sequential::Sequential(std::initializer_list<std::shared_ptr<Module>> modules) {
  for (auto& m : modules) push_back(m);
}

void Sequential::push_back(std::shared_ptr<Module> m) {
  register_module(std::to_string(modules_.size()), m);
  modules_.push_back(std::move(m));
}

Tensor Sequential::forward(const Tensor& x) {
  Tensor h = x;
  for (auto& m : modules_) h = m->forward(h);
  return h;
}

}  // namespace baton::nn
