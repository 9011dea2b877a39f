// Optimizers and learning-rate schedules.
//
//   optim::SGD opt(model->parameters(), {.lr = 0.01, .momentum = 0.9});
//   opt.zero_grad(); loss.backward(); opt.step();
#pragma once
#include <deque>
#include <memory>
#include <string_view>
#include <vector>

#include "baton/nn/module.h"
#include "baton/ops/optim_ops.h"

namespace baton::optim {

class Optimizer {
 public:
  Optimizer(std::vector<Tensor> params, double lr);
  virtual ~Optimizer() = default;
  // Updates every parameter that has a gradient.
  virtual void step() = 0;
  // Drops the gradients (the next backward writes fresh ones).
  void zero_grad(SourceLoc loc = SourceLoc::current());
  // The learning rate lives in a 0-d f64 tensor that the update ops read when they run, so
  // a training step compiled once still sees set_lr() (e.g. from a scheduler).
  double lr() const { return lr_.item<double>(); }
  void set_lr(double lr) { lr_.fill_(lr); }
  const std::vector<Tensor>& params() const { return params_; }
  // The state for checkpoints: "step" (the most steps any parameter has taken) and the
  // per-parameter state as "<index>.<name>", including each one's step counter "<index>.step".
  nn::NamedTensors state_dict() const;
  // Restores state_dict(); a missing, duplicated or mis-shaped entry, or per-parameter
  // state this optimizer does not keep (exp_avg for SGD, momentum_buffer for Adam or for
  // SGD without momentum, half of Adam's pair), is a ValueError and changes nothing. A
  // state without per-parameter step counters (written before they existed) gives its
  // "step" to every parameter that has state (to all of them when none has).
  void load_state_dict(const nn::NamedTensors& state);
  // The checks of load_state_dict without loading: throws its ValueError, changes nothing.
  void check_state_dict(const nn::NamedTensors& state) const;
  // What kind of optimizer this is ("sgd", "adam", "adamw"); checkpoints record it, and
  // state of one kind does not load into another.
  virtual std::string_view kind() const = 0;

 protected:
  // The per-parameter buffer `name`, created as zeros on first use.
  Tensor& buffer(size_t param, const char* name);
  // The parameter's step counter (0-d i64 state "step", like PyTorch's state['step']); the
  // update ops increment it in place.
  Tensor& step_counter(size_t param);
  // The per-parameter buffers besides "step" that a parameter has once it has taken a
  // step (all of them or none): a loaded state must have exactly these.
  virtual std::vector<std::string_view> buffer_names() const = 0;
  std::vector<Tensor> params_;
  Tensor lr_;  // 0-d f64

 private:
  using State = std::deque<std::pair<std::string, Tensor>>;
  // Validates `state` (ValueError otherwise); with `out`, also builds the loaded buffers.
  void parse_state(const nn::NamedTensors& state, std::vector<State>* out) const;
  Tensor& find_or_add(size_t param, const char* name, const Shape& shape, DType dtype);
  // Per parameter, its named state; a deque keeps references stable as entries are added.
  std::vector<State> buffers_;
};

struct SGDOptions {
  double lr = 0.01, momentum = 0, dampening = 0, weight_decay = 0;
  bool nesterov = false;
};
class SGD : public Optimizer {
 public:
  SGD(std::vector<Tensor> params, SGDOptions options = {});
  void step() override;
  std::string_view kind() const override { return "sgd"; }

 protected:
  std::vector<std::string_view> buffer_names() const override;

 private:
  SGDOptions options_;
};

struct AdamOptions {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0;
};
class Adam : public Optimizer {
 public:
  Adam(std::vector<Tensor> params, AdamOptions options = {}, bool decoupled = false);
  void step() override;
  std::string_view kind() const override { return decoupled_ ? "adamw" : "adam"; }

 protected:
  std::vector<std::string_view> buffer_names() const override { return {"exp_avg", "exp_avg_sq"}; }

 private:
  AdamOptions options_;
  bool decoupled_;
};
// Adam with decoupled weight decay (Loshchilov & Hutter); weight_decay defaults to 0.01.
class AdamW : public Adam {
 public:
  AdamW(std::vector<Tensor> params, AdamOptions options = {.weight_decay = 0.01})
      : Adam(std::move(params), options, /*decoupled=*/true) {}
};

// Schedules call opt.set_lr() on each step() (once per epoch, as in PyTorch).
class LRScheduler {
 public:
  explicit LRScheduler(Optimizer& opt) : opt_(opt), base_lr_(opt.lr()) {}
  virtual ~LRScheduler() = default;
  void step() { opt_.set_lr(lr_at(++epoch_)); }
  int64_t epoch() const { return epoch_; }
  void set_epoch(int64_t e) { epoch_ = e; opt_.set_lr(lr_at(e)); }
  virtual double lr_at(int64_t epoch) const = 0;

 protected:
  Optimizer& opt_;
  double base_lr_;
  int64_t epoch_ = 0;
};

// lr = base * gamma^(epoch / step_size)
class StepLR : public LRScheduler {
 public:
  StepLR(Optimizer& opt, int64_t step_size, double gamma = 0.1);
  double lr_at(int64_t epoch) const override;

 private:
  int64_t step_size_;
  double gamma_;
};

// lr = eta_min + (base - eta_min) * (1 + cos(pi * epoch / t_max)) / 2
class CosineAnnealingLR : public LRScheduler {
 public:
  CosineAnnealingLR(Optimizer& opt, int64_t t_max, double eta_min = 0);
  double lr_at(int64_t epoch) const override;

 private:
  int64_t t_max_;
  double eta_min_;
};

}  // namespace baton::optim
