// ops::call: every op call of every mode goes through here (DESIGN.md idea 1). Eagerly it
// infers the outputs, allocates them, runs the kernel (a value-sized op makes its outputs
// itself) and hands the call to the autograd hook; while a graph is being built it hands
// the call to the graph-capture hook instead.
#include <algorithm>
#include <atomic>
#include <chrono>

#include "core/runtime_internal.h"
#include "core/tensor_impl.h"
#include "dispatch/anomaly.h"
#include "dispatch/hooks.h"
#include "kernels/cpu/dispatch.h"

namespace baton::dispatch {
namespace {

// Set once at start-up by the layers that provide them (static registrars), read on every
// call; the observer is switched on and off while running, hence atomic.
GraphCapture capture_hooks;
OpCallFn autograd_recorder = nullptr;
std::atomic<OpTimedFn> observer_hook{nullptr};

}  // namespace

void set_graph_capture(const GraphCapture& hooks) { capture_hooks = hooks; }
const GraphCapture& graph_capture() { return capture_hooks; }
bool capturing() { return capture_hooks.active && capture_hooks.active(); }
void set_autograd_recorder(OpCallFn record) { autograd_recorder = record; }
void set_op_observer(OpTimedFn observer) { observer_hook.store(observer, std::memory_order_release); }
OpTimedFn op_observer() { return observer_hook.load(std::memory_order_acquire); }

}  // namespace baton::dispatch

namespace baton::ops {
namespace {

void check_inputs_defined(const OpDef& op, std::span<const Tensor> inputs, SourceLoc loc) {
  for (size_t i = 0; i < inputs.size(); ++i)
    if (!inputs[i].defined())
      throw ValueError(op.name, str("input ", i, " is an undefined tensor"), loc);
}

[[noreturn]] void throw_bad_arity(const OpDef& op, size_t got, SourceLoc loc) {
  throw ValueError(op.name, str("takes ",
                                op.max_inputs == op.min_inputs       ? str(op.min_inputs)
                                : op.max_inputs == OpDef::kAnyNumber ? str("at least ", op.min_inputs)
                                                                     : str(op.min_inputs, " to ", op.max_inputs),
                                " operand(s), got ", got), loc);
}

// Storage dtypes (u8, f16...) reach only the ops made for them: a DTypeError before the
// op runs or joins a graph, rather than deep inside a kernel.
void check_storage_dtypes(const OpDef& op, std::span<const Tensor> inputs, SourceLoc loc) {
  if (op.accepts_storage_dtypes || op.view_rule) return;
  for (const Tensor& t : inputs)
    if (t.defined() && is_storage_only(t.dtype()) && !(t.dtype() == DType::string && op.accepts_strings)) [[unlikely]]
      throw DTypeError(op.name, kernels::storage_only_message(t.dtype()), loc);
}

bool any_symbolic(std::span<const Tensor> inputs) {
  for (const Tensor& t : inputs)
    if (t.defined() && t.is_symbolic()) return true;
  return false;
}

void run(const OpDef& op, std::span<const Tensor> inputs, const Attrs& attrs, std::span<Tensor> outputs,
         SourceLoc loc) {
  check_inputs_defined(op, inputs, loc);
  detail::ensure_threads_started();
  CallContext ctx{op, inputs, attrs, loc};
  if (op.make_outputs) {
    std::vector<Tensor> made = op.make_outputs(ctx);
    std::move(made.begin(), made.end(), outputs.begin());
  } else if (op.view_rule) {
    outputs[0] = op.view_rule(ctx);
  } else if (op.infer_one) {
    TensorMeta m = op.infer_one(ctx);
    outputs[0] = empty(m.shape, m.dtype);
    op.kernel(KernelContext{ctx, outputs});
  } else {
    std::vector<TensorMeta> metas = op.infer_many(ctx);
    for (size_t i = 0; i < metas.size(); ++i) outputs[i] = empty(metas[i].shape, metas[i].dtype);
    op.kernel(KernelContext{ctx, outputs});
  }
  for (int i : op.mutated_inputs)  // an optional trailing input may be absent
    if (size_t(i) < inputs.size()) inputs[size_t(i)].impl()->storage->bump_version();
  if (anomaly_mode.load(std::memory_order_relaxed)) [[unlikely]]
    check_finite(op, inputs, outputs, loc);
  if (op.grad_rule && dispatch::autograd_recorder) dispatch::autograd_recorder(op, inputs, attrs, outputs, loc);
}

}  // namespace

void call(const OpDef& op, std::span<const Tensor> inputs, const Attrs& attrs,
          std::span<Tensor> outputs, SourceLoc loc) {
  if (!op.accepts_input_count(inputs.size())) [[unlikely]]
    throw_bad_arity(op, inputs.size(), loc);
  check_storage_dtypes(op, inputs, loc);
  // A symbolic input, or a trace in progress: append a node instead (DESIGN.md idea 3).
  const dispatch::GraphCapture& capture = dispatch::capture_hooks;
  if (capture.record && (any_symbolic(inputs) || capture.active())) [[unlikely]]
    return capture.record(op, inputs, attrs, outputs, loc);
  if (attrs.holds_symbols()) [[unlikely]]
    throw GraphError(op.name, str("attributes {", attrs, "} hold symbolic dims but no input is symbolic: "
                                  "a size taken from a graph can only be used in that graph"), loc);
  dispatch::OpTimedFn observer = dispatch::observer_hook.load(std::memory_order_acquire);
  if (!observer) return run(op, inputs, attrs, outputs, loc);
  auto start = dispatch::Clock::now();
  run(op, inputs, attrs, outputs, loc);
  auto end = dispatch::Clock::now();
  observer(op, inputs, attrs, outputs, {op.name, loc.file_name(), int(loc.line())}, start, end);
}

std::vector<Tensor> call_many(const OpDef& op, std::span<const Tensor> inputs, const Attrs& attrs,
                              SourceLoc loc) {
  std::vector<Tensor> outputs(size_t(op.num_outputs));
  call(op, inputs, attrs, outputs, loc);
  return outputs;
}

}  // namespace baton::ops
