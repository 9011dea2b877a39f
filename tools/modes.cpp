#include "modes.h"

#include <baton/baton.h>

using namespace baton;

std::optional<Mode> parse_mode(const std::string& name) {
  if (name == "eager") return Mode::Eager;
  if (name == "graph") return Mode::Graph;
  if (name == "compiled") return Mode::Compiled;
  return std::nullopt;
}

const char* mode_name(Mode mode) {
  switch (mode) {
    case Mode::Graph: return "graph";
    case Mode::Compiled: return "compiled";
    case Mode::Eager: break;
  }
  return "eager";
}

// On the heap, so that moving a ModeFunction leaves the Graph the Session runs in place.
struct ModeFunction::Static {
  Graph graph{"mode_function"};
  std::vector<Tensor> placeholders;
  Tensor output;
  std::unique_ptr<Session> session;
};

namespace {

// Placeholders shaped like the examples, with dim 0 the shared symbol "batch".
std::vector<Tensor> batch_placeholders(Graph& g, const std::vector<Tensor>& examples) {
  std::vector<Tensor> out;
  for (size_t i = 0; i < examples.size(); ++i) {
    std::vector<SymDim> dims{"batch"};
    for (size_t d = 1; d < examples[i].shape().size(); ++d) dims.emplace_back(examples[i].shape()[d]);
    out.push_back(g.placeholder(examples[i].dtype(), dims, str("input", i)));
  }
  return out;
}

CompileOptions batch_dynamic(size_t num_inputs, bool freeze) {
  CompileOptions options{.name = "mode_function", .freeze = freeze};
  for (size_t i = 0; i < num_inputs; ++i) options.dynamic_dims.push_back({i, 0, "batch"});
  return options;
}

}  // namespace

ModeFunction::ModeFunction(Mode mode, Fn fn, const std::vector<Tensor>& examples, bool freeze)
    : mode_(mode), fn_(std::move(fn)) {
  if (mode_ == Mode::Compiled) {
    compiled_ = std::make_unique<CompiledFunction>(batch_dynamic(examples.size(), freeze));
    traced_ = [fn = fn_](const std::vector<Tensor>& in) { return std::vector<Tensor>{fn(in)}; };
  }
  if (mode_ != Mode::Graph) return;
  static_ = std::make_unique<Static>();
  static_->placeholders = batch_placeholders(static_->graph, examples);
  static_->output = fn_(static_->placeholders);
  static_->session = std::make_unique<Session>(static_->graph, SessionOptions{.freeze = freeze});
}

ModeFunction::~ModeFunction() = default;
ModeFunction::ModeFunction(ModeFunction&&) noexcept = default;

Tensor ModeFunction::operator()(const std::vector<Tensor>& inputs) {
  if (mode_ == Mode::Compiled) return compiled_->call(inputs, traced_, SourceLoc::current()).at(0);
  if (mode_ == Mode::Eager) return fn_(inputs);
  Session::Feeds feeds;
  for (size_t i = 0; i < inputs.size(); ++i) feeds.emplace_back(static_->placeholders.at(i), inputs[i]);
  // run_updates: the in-place writes nothing fetched needs (optimizer steps) run too.
  return static_->session->run({static_->output}, feeds, RunOptions{.run_updates = true}).at(0);
}

MemoryPlan ModeFunction::memory_plan() const {
  if (compiled_) return compiled_->memory_plan();
  return static_ ? static_->session->memory_plan() : MemoryPlan{};
}

ModeFunction make_train_step(Mode mode, nn::Module& model, optim::Optimizer& opt, const Tensor& x_example,
                             const Tensor& y_example) {
  auto step = [&model, &opt](const std::vector<Tensor>& in) {
    opt.zero_grad();
    Tensor loss = cross_entropy(model.forward(in[0]), in[1]);
    loss.backward();  // on a symbolic loss: the backward graph; grads become symbolic
    opt.step();       // on symbolic grads: the in-place update nodes
    return loss;
  };
  ModeFunction f(mode, step, {x_example, y_example});
  if (mode == Mode::Graph) opt.zero_grad();  // drop the symbolic grads building left behind
  return f;
}

ModeFunction make_forward(Mode mode, nn::Module& model, const Tensor& x_example) {
  return ModeFunction(mode, [&model](const std::vector<Tensor>& in) { return model.forward(in[0]); },
                      {x_example}, !model.is_training());
}
