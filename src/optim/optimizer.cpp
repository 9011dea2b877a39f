#include <cmath>
#include <map>

#include "baton/autograd.h"
#include "baton/ops.h"
#include "baton/optim.h"

namespace baton::optim {

Optimizer::Optimizer(std::vector<Tensor> params, double lr)
    : params_(std::move(params)), lr_(lr), buffers_(params_.size()) {
  for (size_t i = 0; i < params_.size(); ++i)
    if (!params_[i].requires_grad())
      throw ValueError("optimizer", str("parameter ", i, " (", params_[i].dtype(),
                                        params_[i].shape(), ") does not require grad"),
                       SourceLoc::current());
  if (!(lr >= 0)) throw ValueError("optimizer", str("invalid learning rate ", lr), SourceLoc::current());
}

void Optimizer::zero_grad() {
  for (Tensor& p : params_) p.zero_grad();
}

bool Optimizer::has_buffer(size_t param, const char* name) const {
  for (auto& [n, t] : buffers_[param])
    if (n == name) return true;
  return false;
}

Tensor& Optimizer::buffer(size_t param, const char* name) {
  for (auto& [n, t] : buffers_[param])
    if (n == name) return t;
  buffers_[param].emplace_back(name, zeros(params_[param].shape(), params_[param].dtype()));
  return buffers_[param].back().second;
}

nn::NamedTensors Optimizer::state_dict() const {
  nn::NamedTensors out{{"step", scalar_tensor<int64_t>(steps_)}};
  for (size_t i = 0; i < buffers_.size(); ++i)
    for (auto& [name, t] : buffers_[i]) out.emplace_back(str(i, ".", name), t);
  return out;
}

void Optimizer::load_state_dict(const nn::NamedTensors& state) {
  std::map<std::string, Tensor> by_name(state.begin(), state.end());
  auto step = by_name.find("step");
  if (step == by_name.end())
    throw ValueError("optimizer.load_state_dict", "missing entry 'step'", SourceLoc::current());
  std::vector<std::deque<std::pair<std::string, Tensor>>> loaded(params_.size());
  for (auto& [name, t] : state) {
    if (name == "step") continue;
    size_t dot = name.find('.');
    size_t index = dot == std::string::npos ? params_.size() : std::stoul(name.substr(0, dot));
    if (index >= params_.size() || !(t.shape() == params_[index].shape()))
      throw ValueError("optimizer.load_state_dict",
                       str("entry '", name, "' (", t.dtype(), t.shape(), ") matches no parameter of "
                           "this optimizer (", params_.size(), " parameters)"), SourceLoc::current());
    loaded[index].emplace_back(name.substr(dot + 1), t.to(params_[index].dtype()).clone());
  }
  buffers_ = std::move(loaded);
  steps_ = step->second.item<int64_t>();
}

SGD::SGD(std::vector<Tensor> params, SGDOptions options)
    : Optimizer(std::move(params), options.lr), options_(options) {
  if (options.nesterov && (options.momentum <= 0 || options.dampening != 0))
    throw ValueError("SGD", "nesterov needs momentum > 0 and dampening 0", SourceLoc::current());
}

void SGD::step() {
  NoGradGuard no_grad;
  SgdHyper h{lr_, options_.momentum, options_.dampening, options_.weight_decay, options_.nesterov};
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor g = params_[i].grad();
    if (!g.defined()) continue;
    bool first = options_.momentum != 0 && !has_buffer(i, "momentum_buffer");
    Tensor none;
    Tensor& buf = options_.momentum != 0 ? buffer(i, "momentum_buffer") : none;
    sgd_update_(params_[i], g.contiguous(), buf, h, first);
  }
  ++steps_;
}

Adam::Adam(std::vector<Tensor> params, AdamOptions options, bool decoupled)
    : Optimizer(std::move(params), options.lr), options_(options), decoupled_(decoupled) {}

void Adam::step() {
  NoGradGuard no_grad;
  ++steps_;
  AdamHyper h{lr_, options_.beta1, options_.beta2, options_.eps, options_.weight_decay, decoupled_};
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor g = params_[i].grad();
    if (!g.defined()) continue;
    adam_update_(params_[i], g.contiguous(), buffer(i, "exp_avg"), buffer(i, "exp_avg_sq"), h, steps_);
  }
}

StepLR::StepLR(Optimizer& opt, int64_t step_size, double gamma)
    : LRScheduler(opt), step_size_(step_size), gamma_(gamma) {
  if (step_size < 1) throw ValueError("StepLR", "step_size must be >= 1", SourceLoc::current());
}

double StepLR::lr_at(int64_t epoch) const {
  return base_lr_ * std::pow(gamma_, double(epoch / step_size_));
}

CosineAnnealingLR::CosineAnnealingLR(Optimizer& opt, int64_t t_max, double eta_min)
    : LRScheduler(opt), t_max_(t_max), eta_min_(eta_min) {
  if (t_max < 1) throw ValueError("CosineAnnealingLR", "t_max must be >= 1", SourceLoc::current());
}

double CosineAnnealingLR::lr_at(int64_t epoch) const {
  return eta_min_ + (base_lr_ - eta_min_) * (1 + std::cos(M_PI * double(epoch) / double(t_max_))) / 2;
}

}  // namespace baton::optim
