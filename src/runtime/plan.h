// A static graph becomes a plan, and the plan is what runs (DESIGN.md idea 5).
//
// make_plan copies the graph (passes never touch the user's), optimizes the copy, keeps
// the nodes the fetches and effects need in program order, or in an order that lowers the
// peak memory where one does (runtime/step_order.h: in-place updates, random draws and
// control flow keep their places), and gives every value a slot. Everything that
// depends on sizes is done once per concrete binding of the symbolic dims, in a
// Specialization: each step's resolved attributes, its kernel's parameters made from them
// (OpDef::params) and output types (its infer rule run once, on metadata), where each
// output lives (its offset in one arena, a fresh buffer for fetched values, or a view), and
// the arena's layout. Running a specialization binds the feeds and calls each step's kernel
// on buffers that already exist: no shape inference, no allocation of intermediates, no
// attribute read by name.
//
// Stages. A step whose output sizes depend on its inputs' values (OpDef::sized_by_values:
// nonzero) ends a stage: its outputs' dims are fresh symbols no feed binds. A run
// specializes and runs the steps up to it, binds those symbols from what it produced, and
// then takes the specialization of the next stage for the bindings so far (cached like
// any other). Values a later stage reads get buffers of their own, not arena bytes.
#pragma once
#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string_view>
#include <vector>

#include "baton/graph.h"
#include "baton/shape.h"
#include "passes/pass.h"
#include "runtime/memory_plan.h"
#include "runtime/parallel.h"
#include "trace/builder.h"

namespace baton::runtime {

struct Plan;
struct Specialization;

struct Step {
  const graph::Node* node;  // in the plan's own graph
  std::vector<int> inputs, outputs;  // slots
  std::vector<std::shared_ptr<const Plan>> subplans;  // one per subgraph (If, Loop)
};

struct PlanOptions {
  passes::Level level = passes::Level::O2;
  // Graph inputs whose value cannot change between runs (constants only the graph holds):
  // constant folding may read them. nullptr for the others.
  std::function<const Tensor*(const graph::Value*)> fixed_value;
  // Threads that run independent steps side by side (1: one step after another). Subplans
  // of control flow always run sequentially.
  size_t inter_op_threads = 1;
  // OpenMP threads of each step's kernel (per worker); 0: get_num_threads() / workers.
  int intra_op_threads = 0;
  // Let folded constants go once the steps reading them hold their own form of them
  // (Specialization::adopted_constants): a convolution's folded weights then live only in
  // oneDNN's layout. For plans that run, not for saving the graph (which needs the values).
  bool release_adopted_constants = false;
};

// Where a value lives while a specialization runs.
enum class Placement : uint8_t {
  Input,   // a graph input or a folded constant: bound per run / owned by the plan
  Arena,   // an intermediate at its offset in the arena
  Fresh,   // a buffer of its own per run: fetched values (returned to the caller, so never
           // reused) and the results of control flow
  View,    // aliases another value (reshape, transpose...): made per run by the view rule
};

struct ValueInfo {
  DType dtype = DType::f32;
  Shape shape, strides;
  Placement placement = Placement::Input;
  size_t offset = 0, bytes = 0;  // in the arena
  // Channels per block when stored channel-blocked (nChw8c: 8), else 0 (as `strides` say).
  int64_t channel_block = 0;
  int64_t numel() const { return shape.numel(); }
};

struct SpecializedStep {
  const ops::OpDef* op = nullptr;  // the node's, at hand without reading the node
  ops::Attrs attrs;  // symbolic dims resolved
  // Sized: its kernel runs on outputs sized from the values (the end of a stage).
  enum class Kind : uint8_t { Kernel, View, ControlFlow, Sized } kind = Kind::Kernel;
  std::vector<int> release;  // Fresh and View slots no later step reads
  // The op's parameters (OpDef::params), made from the resolved attributes once: each run
  // hands them to the kernel or view rule (CallContext::made_params), which then reads no
  // attribute by name.
  std::shared_ptr<const ops::ParamsStorage> params;
  const void* made_params() const { return params ? params->get() : nullptr; }
  ops::Prepared prepared;    // the op's prepare hook's work (OpDef::prepare), if it has one
  // Where the step's scratchpad (prepared.scratch_bytes) lies in the arena; -1 when the
  // kernel allocates its own (none asked, or steps running side by side).
  int64_t scratch_offset = -1;
  // Whether some output is Placement::Fresh (allocated per run): a step of a kernel whose
  // outputs all lie in the arena hands them over without looking at their placements.
  bool fresh_outputs = false;
};

// One binding of the symbolic dims: everything a run needs, computed once.
struct Specialization {
  // The first step, then the bound size of each of the plan's symbols (-1: not yet bound,
  // a size a later stage's values decide).
  std::vector<int64_t> key;
  sym::Bindings bindings;
  // The steps [begin, end) it runs: all of them, unless the plan has stages (see above).
  size_t begin = 0, end = 0;
  std::vector<SpecializedStep> steps;  // per plan step; those outside [begin, end) unused
  // Slots computed by this stage or an earlier one that a later stage reads or the caller
  // fetches: a run hands them on (empty in the last stage).
  std::vector<int> handed_on;
  std::vector<ValueInfo> values;  // per slot
  std::vector<int> root;          // per slot: the slot whose storage it uses (itself unless a view)
  // Constant slots whose every reader's prepared state holds the value in a form of its own
  // (PreparedKernel::adopted), so that its runs never read their data; with a way to get
  // the plain value back from one of those states.
  std::vector<std::pair<int, std::function<Tensor()>>> adopted_constants;
  // Constants the plan released (Plan::constant_value) that a step of this specialization
  // reads as data after all: bound over the plan's metadata on each run.
  std::vector<std::pair<Tensor, int>> bound_constants;
  ArenaLayout arena;
  // Set when the plan runs steps side by side (inter_op_threads > 1 and some stage holds
  // more than one step): the arena is then laid out over stages, not steps.
  std::unique_ptr<const ParallelSchedule> parallel;
  // The same binding laid out for steps in plan order, made the first time a run cannot
  // use the schedule (inputs that share storage with one the plan writes in place).
  std::shared_ptr<const Specialization> in_plan_order() const;
  mutable std::atomic<uint64_t> runs_in_plan_order{0};  // runs that used it
  mutable std::atomic<uint64_t> last_used{0};           // on the plan's clock (Plan::specialize)
  // Runs reuse executors (an arena and its tensors); one idle one is kept.
  struct Executor;
  mutable std::atomic<Executor*> idle{nullptr};
  ~Specialization();

 private:
  friend std::shared_ptr<const Specialization> build_specialization(const Plan&, const sym::Bindings&, bool,
                                                                    const Specialization*);
  const Plan* plan_ = nullptr;
  mutable std::once_flag in_plan_order_once_;
  mutable std::shared_ptr<const Specialization> in_plan_order_;
};

struct Plan {
  Plan();
  Plan(Plan&&) noexcept;
  Plan& operator=(Plan&&) noexcept;
  ~Plan();

  std::shared_ptr<graph::Graph> graph;  // the optimized copy the steps point into
  std::vector<passes::Effect> pass_log;
  std::vector<Step> steps;
  // Original graph inputs the steps read (the caller binds them), and plan-owned
  // constants (results of constant folding), each with its slot.
  std::vector<std::pair<const graph::Value*, int>> inputs;
  // Mutable: with release_adopted_constants, the first specialization replaces the values
  // its steps adopted by their metadata (before any run binds them; constant_value()).
  mutable std::vector<std::pair<Tensor, int>> constants;
  bool release_adopted_constants = false;  // PlanOptions::release_adopted_constants
  // The value of the constant in `slot` for preparing a step: the tensor, or, once released,
  // the plain value made again from the state that adopted it.
  Tensor constant_value(int slot) const;
  // The estimated peak bytes of the steps' values in program order and in the steps'
  // order (lower where the plan reordered them for memory: runtime/step_order.h).
  int64_t program_peak_bytes = 0, ordered_peak_bytes = 0;
  std::vector<int> fetches;  // slot of each fetched value
  int num_slots = 0;
  std::vector<int64_t> symbols;  // the symbolic dims the steps depend on
  bool staged = false;           // some step is sized by values (see "Stages" above)
  size_t inter_op_threads = 1;   // PlanOptions::inter_op_threads
  int intra_op_threads = 0;      // PlanOptions::intra_op_threads
  // The OpenMP threads `workers` workers share: intra_op_threads each, or get_num_threads().
  int kernel_threads(size_t workers) const;
  bool plan_layouts = false;     // keep channels-last activations between the ops that take them (O2)
  // The fixed inputs the passes read while optimizing, with their storage and its version
  // then: what they folded holds only while these are unchanged. Not owning handles (one
  // would make a constant look shared to the next plan's fixed_constants): the graph's
  // bindings, which outlive the plan, hold them.
  struct FixedRead {
    const TensorImpl* tensor;
    const Storage* storage;
    uint64_t version;
  };
  std::vector<FixedRead> fixed_reads;
  // Why the plan no longer holds ("" while it does): a fixed input it folded was written
  // in place (an optimizer step, load_state_dict) or given other storage since.
  std::string stale_reason() const;
  bool is_stale() const { return !stale_reason().empty(); }

  // The specialization for these bindings, made on first use; at most kMaxSpecializations
  // are kept (least recently used evicted). A fully static plan has one, made with the plan.
  // A staged plan's later stages: the one after `before`, whose run bound the symbols its
  // last step sized.
  std::shared_ptr<const Specialization> specialize(const sym::Bindings& bindings,
                                                   const Specialization* before = nullptr) const;
  // The specialization the last run used (nullptr before one).
  std::shared_ptr<const Specialization> last_specialization() const;
  static constexpr size_t kMaxSpecializations = 8;

 private:
  struct Cache;
  std::unique_ptr<Cache> cache_;
};

// The steps that compute `fetches`, plus every node in `effects` (in-place updates).
Plan make_plan(const graph::Graph& g, std::span<graph::Value* const> fetches,
               std::span<graph::Node* const> effects = {}, const PlanOptions& options = {});

// Binds the symbols of an input's declared shape to the sizes of `value` (concrete: the
// callers, Session::run and compiled calls, reject undefined and symbolic values first); throws
// ShapeError "[op] <what()> expects ..., got ...: why (at <loc>)" naming what() (e.g.
// "placeholder 'x'", made only then) on a dtype, rank or size mismatch: `op` is what the
// user called ("Session.run", a compiled function's name), `loc` where.
void bind_input(const graph::Value& input, const Tensor& value, const std::function<std::string()>& what,
                sym::Bindings& bindings, SourceLoc loc, std::string_view op = "Session.run");

// Runs a plan. `inputs` holds one tensor per plan.inputs entry, in that order.
std::vector<Tensor> execute(const Plan& plan, std::vector<Tensor> inputs,
                            const sym::Bindings& bindings);
// Runs a plan of a whole (sub)graph given a value for each graph input, in graph order.
std::vector<Tensor> execute_graph(const Plan& plan, std::span<const Tensor> graph_inputs,
                                  const sym::Bindings& bindings);

// "graph node 'matmul' built at mlp.cpp:12": where a failing node came from.
std::string describe(const graph::Node& n);
// Rethrows e with the node's origin appended, keeping its kind.
[[noreturn]] void rethrow_with_node(const Error& e, const graph::Node& n);

// What the passes did and, per step, the user's line, kernel and where its output lives
// in the last specialization (runtime/explain.cpp).
std::string explain(const Plan& plan);
// The arena figures of the last specialization (zeros before a run).
MemoryPlan memory_plan(const Plan& plan);

passes::Level to_pass_level(OptLevel level);
// Which inputs of a builder's graph the passes may read as fixed: constants that only the
// graph holds (tensors created while building it) and, with `freeze`, every captured
// tensor (parameters, buffers); never one a node of the graph updates in place.
std::function<const Tensor*(const graph::Value*)> fixed_constants(const trace::Builder& b, bool freeze = false);

// Builds the specialization of `plan` for `bindings` (runtime/specialize.cpp), for steps
// side by side when the plan asks for it and `side_by_side` allows it; of the stage after
// `before` when given.
std::shared_ptr<const Specialization> build_specialization(const Plan& plan, const sym::Bindings& bindings,
                                                           bool side_by_side = true,
                                                           const Specialization* before = nullptr);
// The key of the specialization of the stage starting at step `begin` for `bindings`.
std::vector<int64_t> specialization_key(const Plan& plan, const sym::Bindings& bindings, size_t begin);

}  // namespace baton::runtime
