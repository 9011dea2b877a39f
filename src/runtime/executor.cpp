// Running a specialized plan: every intermediate already has its place in the arena, so a
// step is its kernel called on tensors that exist; only fetched values, views and the
// results of control flow get per-run handles. With inter_op_threads > 1 independent steps
// run side by side (runtime/parallel.h).
#include <algorithm>
#include <chrono>
#include <optional>

#include "baton/autograd.h"
#include "baton/runtime.h"
#include "core/runtime_internal.h"
#include "core/tensor_impl.h"
#include "dispatch/anomaly.h"
#include "dispatch/hooks.h"
#include "kernels/cpu/step_scratch.h"
#include "kernels/cpu/threads.h"
#include "runtime/plan.h"

namespace baton::runtime {

// A step's operands while it runs. A cache line each: the workers of a run write theirs on
// every step, and sharing a line would move it between their cores each time.
struct alignas(64) Operands {
  std::vector<Tensor> in, out;
};

// The per-run state of a specialization: the arena and a tensor per slot (the arena's
// ones made once). Runs take one from the specialization (or make one) and give it back.
struct Specialization::Executor {
  std::shared_ptr<Storage> arena;
  std::vector<Tensor> slots;
  Operands operands;  // of the current step, when steps run one at a time
  // When they run side by side: the operands of the step each worker runs (one set per
  // worker rather than per step, so they stay in that worker's cache), the scheduler's
  // counters, and per slot the steps left before its handle is dropped.
  std::vector<Operands> worker_operands;
  std::unique_ptr<StepCounters> counters;
  std::unique_ptr<std::atomic<uint32_t>[]> uses_left;
  std::vector<Tensor> dropped;  // give_back()'s, kept for its capacity
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
  if (spec.parallel) {
    e->worker_operands.resize(spec.parallel->workers);
    e->counters = std::make_unique<StepCounters>(spec.parallel->lists);
    e->uses_left.reset(new std::atomic<uint32_t>[spec.values.size()]);
  }
  return e;
}

// Keeps the executor for the next run unless another one is already kept.
void give_back(const Specialization& spec, std::unique_ptr<Specialization::Executor> e) {
  // Holds no tensor of the caller's. The handles are moved out first and dropped after:
  // dropping one is an atomic decrement, which waits until every earlier store is done,
  // and after a run side by side each slot's line was read by another core, so a store
  // to it waits for that copy to go. Stores issued back to back wait together
  // (docs/graph-mode.md, "Running").
  for (size_t s = 0; s < spec.values.size(); ++s)
    if (spec.values[s].placement != Placement::Arena && e->slots[s].defined()) e->dropped.push_back(std::move(e->slots[s]));
  e->dropped.clear();
  e->operands.in.clear();
  e->operands.out.clear();
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

// A handle on t's tensor that does not count as a reference: copying and dropping it
// touch no reference count. A kernel step's operands are borrowed from the slots, which
// hold them while the step runs. (Steps running side by side read the same tensors, a
// graph input most often; counting each copy made the count's cache line bounce between
// the cores, which cost as much as a small kernel.)
Tensor borrowed(const Tensor& t) { return Tensor(std::shared_ptr<TensorImpl>(std::shared_ptr<TensorImpl>(), t.impl())); }

class Run final : public StepRunner {
 public:
  Run(const Plan& plan, const Specialization& spec, Specialization::Executor& e)
      : plan_(plan), spec_(spec), e_(e), observer_(dispatch::op_observer()) {}

  void all_steps_in_order() {
    for (size_t i = spec_.begin; i < spec_.end; ++i) {
      step(i, e_.operands);
      for (int r : spec_.steps[i].release) e_.slots[size_t(r)] = Tensor{};
    }
  }

  // The buffers of the values kernel steps return to the caller (fetched), made by the
  // calling thread before a run side by side rather than by whichever worker runs the
  // step: the caller hands them to the user, who frees them there, and a buffer, handle
  // and allocator state made on another core would cross back (docs/graph-mode.md,
  // "Running").
  void make_fresh_outputs() {
    fresh_made_ = true;
    for (size_t i = spec_.begin; i < spec_.end; ++i) {
      if (!spec_.steps[i].fresh_outputs || spec_.steps[i].kind != SpecializedStep::Kind::Kernel) continue;
      for (int o : plan_.steps[i].outputs)
        if (const ValueInfo& v = spec_.values[size_t(o)]; v.placement == Placement::Fresh)
          e_.slots[size_t(o)] = empty(v.shape, v.dtype);
    }
  }

  void all_steps_side_by_side() {
    const ParallelSchedule& p = *spec_.parallel;
    for (size_t s = 0; s < p.uses.size(); ++s) e_.uses_left[s].store(p.uses[s], std::memory_order_relaxed);
    make_fresh_outputs();
    run_steps(p.lists, *e_.counters, plan_.kernel_threads(p.workers), *this);
  }

  // One step on its worker's operands; drops the handles it was the last to use.
  void run_step(size_t i, size_t worker) override {
    Operands& operands = e_.worker_operands[worker];
    step(i, operands);
    operands.in.clear();
    operands.out.clear();
    for (int s : spec_.parallel->touched_by(i))
      if (e_.uses_left[size_t(s)].fetch_sub(1, std::memory_order_acq_rel) == 1) e_.slots[size_t(s)] = Tensor{};
  }

 private:
  void step(size_t i, Operands& operands) {
    const Step& step = plan_.steps[i];
    const SpecializedStep& s = spec_.steps[i];
    const ops::OpDef& op = *s.op;
    std::vector<Tensor>& in = operands.in;
    in.clear();
    if (s.kind == SpecializedStep::Kind::Kernel)
      for (int slot : step.inputs) in.push_back(borrowed(e_.slots[size_t(slot)]));
    else
      for (int slot : step.inputs) in.push_back(e_.slots[size_t(slot)]);
    ops::CallContext ctx{op, in, s.attrs, SourceLoc::current(), {}, {}, s.made_params()};
    auto start = observer_ ? dispatch::Clock::now() : dispatch::Clock::time_point{};
    try {
      run_step(step, s, ctx, operands.out);
      if (ops::anomaly_mode.load(std::memory_order_relaxed)) [[unlikely]]
        ops::check_finite(op, in, operands.out, ctx.loc);
    } catch (const Error& e) {
      rethrow_with_node(e, *step.node);
    }
    for (int m : op.mutated_inputs)  // an optional trailing input may be absent
      if (size_t(m) < in.size()) in[size_t(m)].impl()->storage->bump_version();
    if (observer_) [[unlikely]]  // the user's line that built the node, and which step this is
      observer_(op, in, s.attrs, operands.out, {step.node->op_name(), step.node->loc.file, step.node->loc.line, &plan_, i},
                start, dispatch::Clock::now());
  }

  void run_step(const Step& step, const SpecializedStep& s, const ops::CallContext& ctx, std::vector<Tensor>& out) {
    out.clear();
    switch (s.kind) {
      case SpecializedStep::Kind::Kernel: {
        for (int o : step.outputs) {
          if (s.fresh_outputs && !fresh_made_) [[unlikely]] {
            const ValueInfo& v = spec_.values[size_t(o)];
            if (v.placement == Placement::Fresh) e_.slots[size_t(o)] = empty(v.shape, v.dtype);
          }
          out.push_back(borrowed(e_.slots[size_t(o)]));
        }
        std::optional<kernels::StepScratch> scratch;  // the step's scratchpad bytes, lent
        if (s.scratch_offset >= 0)
          scratch.emplace(static_cast<char*>(e_.arena->data()) + s.scratch_offset, s.prepared.scratch_bytes);
        ctx.op.kernel(ops::KernelContext{ctx, out, s.prepared.state.get()});
        return;
      }
      case SpecializedStep::Kind::View:
        out.push_back(ctx.op.view_rule(ctx));
        break;
      case SpecializedStep::Kind::Sized:  // sized from the values
        out = ctx.op.make_outputs(ctx);
        break;
      case SpecializedStep::Kind::ControlFlow:
        out = ctx.op.control_flow(ctx, [&](size_t index, std::vector<Tensor> args) {
          return execute_graph(*step.subplans[index], args, spec_.bindings);
        });
        check_control_flow_result(*step.node, out, spec_, step);
        break;
    }
    for (size_t k = 0; k < step.outputs.size(); ++k) e_.slots[size_t(step.outputs[k])] = out[k];
  }

  const Plan& plan_;
  const Specialization& spec_;
  Specialization::Executor& e_;
  dispatch::OpTimedFn observer_;
  bool fresh_made_ = false;  // make_fresh_outputs() ran
};

// Whether an input the plan writes in place shares its storage with another input in this
// run: the schedule orders steps by slot, so such a run keeps plan order. (Constants the
// plan owns are never written.)
bool written_input_shares_storage(const ParallelSchedule& p, const std::vector<Tensor>& inputs,
                                  const std::vector<std::pair<const graph::Value*, int>>& slots) {
  if (p.written_inputs.empty()) return false;
  std::vector<std::pair<const Storage*, int>> storages;
  for (size_t i = 0; i < inputs.size(); ++i) storages.emplace_back(inputs[i].impl()->storage.get(), slots[i].second);
  std::sort(storages.begin(), storages.end());
  auto written = [&](int slot) { return std::binary_search(p.written_inputs.begin(), p.written_inputs.end(), slot); };
  for (size_t k = 1; k < storages.size(); ++k)
    if (storages[k].first == storages[k - 1].first && (written(storages[k].second) || written(storages[k - 1].second)))
      return true;
  return false;
}

}  // namespace

namespace {

// Gives a run's executor the plan's constants and the ones this specialization binds.
void bind_constants(const Plan& plan, const Specialization& spec, Specialization::Executor& e) {
  for (auto& [tensor, slot] : plan.constants) e.slots[size_t(slot)] = tensor;
  for (auto& [tensor, slot] : spec.bound_constants) e.slots[size_t(slot)] = tensor;
}

// Runs a staged plan (plan.h, "Stages"): each stage on an executor of its own, handing on
// what later stages read; after each, the symbols its last step sized are bound from what
// that step made, and they choose the next stage's specialization.
std::vector<Tensor> execute_in_stages(const Plan& plan, std::shared_ptr<const Specialization> spec,
                                      const std::vector<Tensor>& inputs, sym::Bindings bindings) {
  std::vector<Tensor> handed(size_t(plan.num_slots));
  for (;;) {
    std::unique_ptr<Specialization::Executor> e = acquire(*spec);
    for (size_t i = 0; i < plan.inputs.size(); ++i) e->slots[size_t(plan.inputs[i].second)] = inputs[i];
    bind_constants(plan, *spec, *e);
    for (size_t s = 0; s < handed.size(); ++s)
      if (handed[s].defined()) e->slots[s] = std::move(handed[s]);
    const kernels::ThreadsScope threads(plan.intra_op_threads);
    Run(plan, *spec, *e).all_steps_in_order();
    if (spec->end == plan.steps.size()) {
      std::vector<Tensor> fetched;
      for (int f : plan.fetches) fetched.push_back(e->slots[size_t(f)]);
      give_back(*spec, std::move(e));
      return fetched;
    }
    for (int s : spec->handed_on) handed[size_t(s)] = e->slots[size_t(s)];
    give_back(*spec, std::move(e));
    const Step& sized = plan.steps[spec->end - 1];
    for (size_t k = 0; k < sized.outputs.size(); ++k) {
      const graph::Node& n = *sized.node;
      bind_input(*n.output(k), handed[size_t(sized.outputs[k])],
                 [&] { return str("output ", k, " of ", describe(n)); }, bindings, SourceLoc::current());
    }
    spec = plan.specialize(bindings, spec.get());
  }
}

}  // namespace

std::vector<Tensor> execute(const Plan& plan, std::vector<Tensor> inputs, const sym::Bindings& bindings) {
  NoGradGuard no_grad;      // a plan computes values; gradients are nodes of their own
  trace::NoTrace no_trace;  // kernels run even when called from inside a trace
  detail::ensure_threads_started();
  std::shared_ptr<const Specialization> spec = plan.specialize(bindings);
  if (plan.staged) return execute_in_stages(plan, std::move(spec), inputs, bindings);
  if (spec->parallel && written_input_shares_storage(*spec->parallel, inputs, plan.inputs)) {
    spec->runs_in_plan_order.fetch_add(1, std::memory_order_relaxed);
    spec = spec->in_plan_order();
  }
  std::unique_ptr<Specialization::Executor> e = acquire(*spec);
  for (size_t i = 0; i < plan.inputs.size(); ++i) e->slots[size_t(plan.inputs[i].second)] = std::move(inputs[i]);
  bind_constants(plan, *spec, *e);
  Run run(plan, *spec, *e);
  if (spec->parallel) {
    run.all_steps_side_by_side();
  } else {
    const kernels::ThreadsScope threads(plan.intra_op_threads);
    run.all_steps_in_order();
  }
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
