// The three ways to run a function of tensors (`--mode` of `baton train` and baton-bench):
// eagerly, compiled (traced on the first call and replayed), or as a static Graph built
// once and run by a Session. Dim 0 of every input is the batch and stays symbolic in the
// compiled and graph modes, so a smaller last batch reuses the same plan.
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <baton/graph.h>
#include <baton/nn.h>
#include <baton/optim.h>

enum class Mode { Eager, Graph, Compiled };

inline constexpr const char* kModeNames = "eager|graph|compiled";
std::optional<Mode> parse_mode(const std::string& name);
const char* mode_name(Mode mode);

class ModeFunction {
 public:
  using Fn = std::function<baton::Tensor(const std::vector<baton::Tensor>&)>;
  // `examples` give each input's dtype and shape past dim 0. Graph mode builds the graph
  // here, calling fn once on placeholders; compiled mode traces fn on the first call.
  // Either way, state fn reads at build time (such as a module's train/eval mode) is
  // baked in. `freeze` (inference): the plan may fold the tensors fn captures, see
  // SessionOptions::freeze.
  ModeFunction(Mode mode, Fn fn, const std::vector<baton::Tensor>& examples, bool freeze = false);
  ~ModeFunction();
  ModeFunction(ModeFunction&&) noexcept;
  baton::Tensor operator()(const std::vector<baton::Tensor>& inputs);
  // The arena figures of the last call's plan (zeros eagerly).
  baton::MemoryPlan memory_plan() const;

 private:
  struct Static;  // the graph mode's Graph, placeholders, output and Session
  Mode mode_;
  Fn fn_;
  std::unique_ptr<baton::CompiledFunction> compiled_;
  baton::CompiledFunction::Fn traced_;  // fn_ as compile() takes it
  std::unique_ptr<Static> static_;
};

// One optimisation step on a batch (zero grads, forward, cross-entropy, backward,
// opt.step()); returns the loss. x_example and y_example: a batch of inputs and targets.
ModeFunction make_train_step(Mode mode, baton::nn::Module& model, baton::optim::Optimizer& opt,
                             const baton::Tensor& x_example, const baton::Tensor& y_example);

// The model's forward in the mode (train or eval) the model is in now; returns the logits.
// In eval mode the plan freezes the parameters and buffers (batch norm folds into the
// convolutions); a later change to them, such as a training step, makes a new plan.
ModeFunction make_forward(Mode mode, baton::nn::Module& model, const baton::Tensor& x_example);
