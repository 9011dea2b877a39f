// Running a specialized plan: every intermediate already has its place in the arena, so a
// step is its kernel called on tensors that exist; only fetched values, views and the
// results of control flow get per-run handles.
#include <chrono>

#include "baton/autograd.h"
#include "core/runtime_internal.h"
#include "core/tensor_impl.h"
#include "dispatch/anomaly.h"
#include "dispatch/hooks.h"
#include "runtime/plan.h"

namespace baton::runtime {

// The per-run state of a specialization: the arena and a tensor per slot (the arena's
// ones made once). Runs take one from the specialization (or make one) and give it back.
struct Specialization::Executor {
  std::shared_ptr<Storage> arena;
  std::vector<Tensor> slots;
  std::vector<Tensor> in, out;  // the current step's operands
};

Specialization::~Specialization() { delete idle.load(); }

namespace {

Tensor arena_tensor(const std::shared_ptr<Storage>& arena, const ValueInfo& v) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = arena;
  impl->offset = int64_t(v.offset / dtype_size(v.dtype));
  impl->shape = v.shape;
  impl->strides = v.strides;
  impl->dtype = v.dtype;
  return Tensor(std::move(impl));
}

std::unique_ptr<Specialization::Executor> acquire(const Specialization& spec) {
  if (Specialization::Executor* e = spec.idle.exchange(nullptr, std::memory_order_acquire))
    return std::unique_ptr<Specialization::Executor>(e);
  auto e = std::make_unique<Specialization::Executor>();
  e->arena = std::make_shared<Storage>(std::max<size_t>(spec.arena.arena_bytes, kArenaAlignment));
  e->slots.resize(spec.values.size());
  for (size_t s = 0; s < spec.values.size(); ++s)
    if (spec.values[s].placement == Placement::Arena) e->slots[s] = arena_tensor(e->arena, spec.values[s]);
  return e;
}

// Keeps the executor for the next run unless another one is already kept.
void give_back(const Specialization& spec, std::unique_ptr<Specialization::Executor> e) {
  for (size_t s = 0; s < spec.values.size(); ++s)  // hold no tensor of the caller's
    if (spec.values[s].placement != Placement::Arena) e->slots[s] = Tensor{};
  e->in.clear();
  e->out.clear();
  Specialization::Executor* expected = nullptr;
  if (spec.idle.compare_exchange_strong(expected, e.get(), std::memory_order_release)) e.release();
}

void check_control_flow_result(const graph::Node& n, const std::vector<Tensor>& out, const Specialization& spec,
                               const Step& step) {
  for (size_t i = 0; i < out.size(); ++i) {
    const ValueInfo& v = spec.values[size_t(step.outputs[i])];
    if (!(out[i].shape() == v.shape) || out[i].dtype() != v.dtype)
      throw ShapeError(str("[", n.op_name(), "] produced ", out[i].dtype(), out[i].shape(), " where the plan expects ",
                           v.dtype, v.shape, "; in ", describe(n)));
  }
}

class Run {
 public:
  Run(const Plan& plan, const Specialization& spec, Specialization::Executor& e)
      : plan_(plan), spec_(spec), e_(e), observer_(dispatch::op_observer()) {}

  void step(size_t i) {
    const Step& step = plan_.steps[i];
    const SpecializedStep& s = spec_.steps[i];
    const ops::OpDef& op = *step.node->op();
    e_.in.clear();
    for (int slot : step.inputs) e_.in.push_back(e_.slots[size_t(slot)]);
    ops::CallContext ctx{op, e_.in, s.attrs, SourceLoc::current()};
    auto start = observer_ ? dispatch::Clock::now() : dispatch::Clock::time_point{};
    try {
      run_step(step, s, ctx);
      if (ops::anomaly_mode.load(std::memory_order_relaxed)) [[unlikely]]
        ops::check_finite(op, e_.in, e_.out, ctx.loc);
    } catch (const Error& e) {
      rethrow_with_node(e, *step.node);
    }
    for (int m : op.mutated_inputs)  // an optional trailing input may be absent
      if (size_t(m) < e_.in.size()) e_.in[size_t(m)].impl()->storage->bump_version();
    if (observer_) [[unlikely]]  // the user's line that built the node, and which step this is
      observer_(op, e_.in, s.attrs, e_.out, {step.node->op_name(), step.node->loc.file, step.node->loc.line, &plan_, i},
                start, dispatch::Clock::now());
    for (int r : s.release) e_.slots[size_t(r)] = Tensor{};
  }

 private:
  void run_step(const Step& step, const SpecializedStep& s, const ops::CallContext& ctx) {
    e_.out.clear();
    switch (s.kind) {
      case SpecializedStep::Kind::Kernel:
        for (int o : step.outputs) {
          const ValueInfo& v = spec_.values[size_t(o)];
          if (v.placement == Placement::Fresh) e_.slots[size_t(o)] = empty(v.shape, v.dtype);
          e_.out.push_back(e_.slots[size_t(o)]);
        }
        ctx.op.kernel(ops::KernelContext{ctx, e_.out});
        return;
      case SpecializedStep::Kind::View:
        e_.out.push_back(ctx.op.view_rule(ctx));
        break;
      case SpecializedStep::Kind::ControlFlow:
        e_.out = ctx.op.control_flow(ctx, [&](size_t index, std::vector<Tensor> args) {
          return execute_graph(*step.subplans[index], args, spec_.bindings);
        });
        check_control_flow_result(*step.node, e_.out, spec_, step);
        break;
    }
    for (size_t k = 0; k < step.outputs.size(); ++k) e_.slots[size_t(step.outputs[k])] = e_.out[k];
  }

  const Plan& plan_;
  const Specialization& spec_;
  Specialization::Executor& e_;
  dispatch::OpTimedFn observer_;
};

}  // namespace

std::vector<Tensor> execute(const Plan& plan, std::vector<Tensor> inputs, const sym::Bindings& bindings) {
  NoGradGuard no_grad;      // a plan computes values; gradients are nodes of their own
  trace::NoTrace no_trace;  // kernels run even when called from inside a trace
  detail::ensure_threads_started();
  std::shared_ptr<const Specialization> spec = plan.specialize(bindings);
  std::unique_ptr<Specialization::Executor> e = acquire(*spec);
  for (size_t i = 0; i < plan.inputs.size(); ++i) e->slots[size_t(plan.inputs[i].second)] = std::move(inputs[i]);
  for (auto& [tensor, slot] : plan.constants) e->slots[size_t(slot)] = tensor;
  Run run(plan, *spec, *e);
  for (size_t i = 0; i < plan.steps.size(); ++i) run.step(i);
  std::vector<Tensor> fetched;
  for (int f : plan.fetches) fetched.push_back(e->slots[size_t(f)]);
  give_back(*spec, std::move(e));
  return fetched;
}

std::vector<Tensor> execute_graph(const Plan& plan, std::span<const Tensor> graph_inputs,
                                  const sym::Bindings& bindings) {
  std::vector<Tensor> inputs;
  for (auto& [value, slot] : plan.inputs) inputs.push_back(graph_inputs[size_t(value->output_index())]);
  return execute(plan, std::move(inputs), bindings);
}

}  // namespace baton::runtime
