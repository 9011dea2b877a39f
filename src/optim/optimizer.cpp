#include <algorithm>
#include <charconv>
#include <cmath>

#include "baton/autograd.h"
#include "baton/ops.h"
#include "baton/optim.h"

namespace baton::optim {

namespace {

// "<index>.<name>" -> (index, name); the index is num_params (no parameter) when malformed.
std::pair<size_t, std::string> split_entry(const std::string& entry, size_t num_params) {
  const size_t dot = entry.find('.');
  if (dot == std::string::npos) return {num_params, entry};
  size_t index = num_params;
  auto [end, err] = std::from_chars(entry.data(), entry.data() + dot, index);
  if (err != std::errc() || end != entry.data() + dot) index = num_params;
  return {index, entry.substr(dot + 1)};
}

// A state written before per-parameter step counters: the parameters shared one counter.
// Those with state took `steps` steps; when none has state (SGD without momentum), all did.
void add_shared_step_counters(std::vector<std::deque<std::pair<std::string, Tensor>>>& state,
                              int64_t steps) {
  const bool any = std::any_of(state.begin(), state.end(), [](auto& s) { return !s.empty(); });
  for (auto& s : state)
    if (!any || !s.empty()) s.emplace_front("step", scalar_tensor<int64_t>(steps));
}

}  // namespace

Optimizer::Optimizer(std::vector<Tensor> params, double lr)
    : params_(std::move(params)), lr_(scalar_tensor<double>(lr)), buffers_(params_.size()) {
  for (size_t i = 0; i < params_.size(); ++i)
    if (!params_[i].defined())
      throw ValueError("optimizer", str("parameter ", i, " is an undefined tensor"), SourceLoc::current());
    else if (!params_[i].requires_grad())
      throw ValueError("optimizer", str("parameter ", i, " (", params_[i].dtype(),
                                        params_[i].shape(), ") does not require grad"),
                       SourceLoc::current());
  if (!(lr >= 0)) throw ValueError("optimizer", str("invalid learning rate ", lr), SourceLoc::current());
}

void Optimizer::zero_grad(SourceLoc loc) {
  for (Tensor& p : params_) p.zero_grad(loc);
}

Tensor& Optimizer::find_or_add(size_t param, const char* name, const Shape& shape, DType dtype) {
  for (auto& [n, t] : buffers_[param])
    if (n == name) return t;
  buffers_[param].emplace_back(name, zeros(shape, dtype));
  return buffers_[param].back().second;
}

Tensor& Optimizer::buffer(size_t param, const char* name) {
  return find_or_add(param, name, params_[param].shape(), params_[param].dtype());
}

Tensor& Optimizer::step_counter(size_t param) { return find_or_add(param, "step", {}, i64); }

nn::NamedTensors Optimizer::state_dict() const {
  int64_t steps = 0;
  for (const State& s : buffers_)
    for (auto& [name, t] : s)
      if (name == "step") steps = std::max(steps, t.item<int64_t>());
  nn::NamedTensors out{{"step", scalar_tensor<int64_t>(steps)}};
  for (size_t i = 0; i < buffers_.size(); ++i)
    for (auto& [name, t] : buffers_[i]) out.emplace_back(str(i, ".", name), t);
  return out;
}

void Optimizer::parse_state(const nn::NamedTensors& state, std::vector<State>* out) const {
  auto fail = [](const std::string& message) {
    throw ValueError("optimizer.load_state_dict", message, SourceLoc::current());
  };
  const std::vector<std::string_view> wanted = buffer_names();
  const Tensor* steps = nullptr;
  bool has_step_counters = false;
  std::vector<std::vector<std::string>> names(params_.size());
  std::vector<State> loaded(out ? params_.size() : 0);
  for (auto& [entry, t] : state) {
    if (!t.defined()) fail(str("entry '", entry, "' is an undefined tensor"));
    if (entry == "step") {
      if (steps) fail("duplicate entry 'step'");
      if (t.dim() != 0 || !is_integral(t.dtype()))
        fail(str("entry 'step' is ", t.dtype(), t.shape(), ", not a 0-d integer"));
      steps = &t;
      continue;
    }
    auto [index, name] = split_entry(entry, params_.size());
    const bool counter = name == "step";
    if (index >= params_.size() || !(t.shape() == (counter ? Shape{} : params_[index].shape())))
      fail(str("entry '", entry, "' (", t.dtype(), t.shape(), ") matches no parameter of "
               "this optimizer (", params_.size(), " parameters)"));
    if (counter ? !is_integral(t.dtype()) : !is_floating(t.dtype()))
      fail(str("entry '", entry, "' has dtype ", t.dtype(), ", expected ", counter ? "an integer" : "a float"));
    if (!counter && std::find(wanted.begin(), wanted.end(), name) == wanted.end()) {
      std::string kept;
      for (auto w : wanted) kept += str(kept.empty() ? "" : ", ", w);
      fail(str("entry '", entry, "' is not state of ", kind(), " (its per-parameter state: step",
               kept.empty() ? "" : ", ", kept, ")"));
    }
    if (std::find(names[index].begin(), names[index].end(), name) != names[index].end())
      fail(str("duplicate entry '", entry, "' (parameter ", index, "'s ", name, ")"));
    names[index].push_back(name);
    if (out) loaded[index].emplace_back(name, t.to(counter ? i64 : params_[index].dtype()).clone());
    has_step_counters = has_step_counters || counter;
  }
  if (!steps) fail("missing entry 'step'");
  // A parameter that has stepped has all of the buffers; one with only some is not this
  // optimizer's state.
  for (size_t i = 0; i < names.size(); ++i) {
    const size_t buffers = size_t(std::count_if(names[i].begin(), names[i].end(),
                                                [](const std::string& n) { return n != "step"; }));
    if (buffers != 0 && buffers != wanted.size())
      fail(str("parameter ", i, " has ", buffers, " of the ", wanted.size(), " state buffers of ", kind()));
  }
  if (!out) return;
  if (!has_step_counters) add_shared_step_counters(loaded, steps->item<int64_t>());
  *out = std::move(loaded);
}

void Optimizer::check_state_dict(const nn::NamedTensors& state) const { parse_state(state, nullptr); }

void Optimizer::load_state_dict(const nn::NamedTensors& state) {
  std::vector<State> loaded;
  parse_state(state, &loaded);  // throws before anything changes
  buffers_ = std::move(loaded);
}

SGD::SGD(std::vector<Tensor> params, SGDOptions options)
    : Optimizer(std::move(params), options.lr), options_(options) {
  if (options.nesterov && (options.momentum <= 0 || options.dampening != 0))
    throw ValueError("SGD", "nesterov needs momentum > 0 and dampening 0", SourceLoc::current());
}

void SGD::step() {
  NoGradGuard no_grad;
  const SgdHyper h{options_.momentum, options_.dampening, options_.weight_decay, options_.nesterov};
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor g = params_[i].grad();
    if (!g.defined()) continue;
    Tensor& step = step_counter(i);
    Tensor none;
    Tensor& buf = options_.momentum != 0 ? buffer(i, "momentum_buffer") : none;
    sgd_update_(params_[i], g.contiguous(), lr_, step, buf, h);
  }
}

std::vector<std::string_view> SGD::buffer_names() const {
  if (options_.momentum != 0) return {"momentum_buffer"};
  return {};
}

Adam::Adam(std::vector<Tensor> params, AdamOptions options, bool decoupled)
    : Optimizer(std::move(params), options.lr), options_(options), decoupled_(decoupled) {}

void Adam::step() {
  NoGradGuard no_grad;
  const AdamHyper h{options_.beta1, options_.beta2, options_.eps, options_.weight_decay, decoupled_};
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor g = params_[i].grad();
    if (!g.defined()) continue;
    // One at a time, so the state is always listed in this order.
    Tensor& step = step_counter(i);
    Tensor& exp_avg = buffer(i, "exp_avg");
    Tensor& exp_avg_sq = buffer(i, "exp_avg_sq");
    adam_update_(params_[i], g.contiguous(), lr_, step, exp_avg, exp_avg_sq, h);
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
