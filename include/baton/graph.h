// Static graphs (define-and-run), Session, control flow and compile(): the second mode of
// the one API (docs/graph-mode.md).
//
//   Graph g;
//   Tensor a = g.placeholder(f32, {-1, 3}, "a");  // -1: any size, kept symbolic
//   Tensor c = relu(a + 1.0f) * 2.0f;              // builds nodes, infers shapes now
//   Session sess(g);
//   std::vector<Tensor> out = sess.run({c}, {{a, ta}});
//
//   auto f = compile([](Tensor x, Tensor w) { return relu(matmul(x, w)); });
//   Tensor y = f(x, w);  // the first call traces and plans; later calls replay
#pragma once
#include <functional>
#include <iosfwd>
#include <memory>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "baton/tensor.h"

namespace baton {

namespace trace { class Builder; }

// A dim of a placeholder: a size, -1 (any size, a new symbol), or a symbol name ("batch";
// placeholders that share a name must agree on its size in each run).
class SymDim {
 public:
  SymDim(int size) : SymDim(int64_t(size)) {}
  SymDim(int64_t size) : raw_(size) {}
  SymDim(const char* symbol);
  SymDim(const std::string& symbol) : SymDim(symbol.c_str()) {}
  int64_t raw() const { return raw_; }  // a size, -1, or a symbol as Shape stores it

 private:
  int64_t raw_;
};

// How much a static graph is optimized before it runs: O0 runs it as built, O1 cleans it
// up (dead code, common subexpressions, constant folding, algebraic simplification), O2
// adds fusion and layout passes.
enum class OptLevel { O0, O1, O2 };

class Graph {
 public:
  explicit Graph(std::string name = "main");

  // A tensor fed at Session::run. Names must be unique in the graph.
  Tensor placeholder(DType dtype, const std::vector<SymDim>& shape, std::string name = "",
                     SourceLoc loc = SourceLoc::current());
  // State that lives across runs, initialised with a copy of `init`; update it with assign().
  Tensor variable(const Tensor& init, std::string name = "", SourceLoc loc = SourceLoc::current());
  // The current value of a variable (a concrete tensor).
  Tensor value_of(const Tensor& variable) const;

  // A graph read from its text form; every input becomes a placeholder. Throws ValueError
  // naming the line and column of a syntax error, and for an op the registry lacks.
  static Graph from_text(std::string_view text);

  // The graph's inputs (placeholders, constants, variables) and declared outputs as
  // symbolic tensors, e.g. to feed and fetch a graph read from text.
  std::vector<Tensor> inputs() const;
  std::vector<Tensor> outputs() const;
  // Names the inputs bound to these tensors (e.g. model->named_parameters()), each name
  // after `prefix`, so the text form shows %mlp.1.weight instead of %c0. Names already
  // taken are skipped.
  void name_inputs(const std::vector<std::pair<std::string, Tensor>>& named, const std::string& prefix = "");
  // Declares what the graph returns (for its text form, and for saving it).
  void set_outputs(const std::vector<Tensor>& outputs, SourceLoc loc = SourceLoc::current());

  size_t num_nodes() const;
  std::string to_text() const;  // the text form (docs/graph-ir.md)
  std::string to_dot() const;   // Graphviz (fused nodes drawn as groups of what they fused)
  // The graph a plan at `level` runs for the declared outputs (and every in-place update):
  // a copy with the passes applied, so fused steps appear as their fused ops and folded
  // constants as inputs; every input of the copy is a placeholder. `freeze` as
  // SessionOptions::freeze. `baton graph --optimized` shows it.
  Graph optimized(OptLevel level = OptLevel::O2, bool freeze = false) const;

 private:
  friend struct GraphAccess;  // the library's way to the graph being built (trace/builder.h)
  explicit Graph(std::shared_ptr<trace::Builder> builder) : b_(std::move(builder)) {}
  std::shared_ptr<trace::Builder> b_;
};
std::ostream& operator<<(std::ostream& os, const Graph& g);

// Writes `value` into `target` (a Graph::variable, or a concrete tensor inside a compiled
// function) when the returned tensor is computed; returns the new value. Eagerly it is
// an immediate in-place copy.
Tensor assign(const Tensor& target, const Tensor& value, SourceLoc loc = SourceLoc::current());

struct SessionOptions {
  OptLevel level = OptLevel::O2;
  // Threads that may run independent steps of the graph side by side (inter-op
  // parallelism); 1 runs them one after another. The plan spreads its steps over at most
  // this many workers where its cost model expects a gain, and each step's kernel then uses
  // get_num_threads() / workers OpenMP threads (at least 1), so the two kinds together stay
  // within set_num_threads(). Results are the same bits either way (docs/graph-mode.md).
  size_t inter_op_threads = 1;
  // OpenMP threads each step's kernel uses (intra-op parallelism), per worker when steps
  // run side by side; 0 takes the split of get_num_threads() above. The calling thread's
  // setting is back when a run returns.
  int intra_op_threads = 0;
  // For inference: the passes may treat the tensors the graph captured (parameters,
  // buffers such as batch norm's running statistics) as constants, so batch norm folds
  // into the preceding convolution and constant subexpressions fold. A plan notes the
  // version of each tensor it folded; a run after one was written in place (an optimizer
  // step, load_state_dict) makes a new plan, so results stay right. Writes through a raw
  // data pointer are not seen.
  bool freeze = false;
};

// The memory plan of a plan run with some binding of its dims: the intermediate values
// share one arena; `naive_bytes` is what one buffer each would take and
// `lower_bound_bytes` the most bytes alive at one step (no layout of this order needs less).
// `constant_bytes`: what the plan keeps between runs besides the arena, in the allocator's
// size classes: the constants it made (folded batch norm weights, folded subexpressions)
// and its steps' own copies of constant inputs (weights packed in a kernel's layout). Like
// parameters, they do not grow with the batch.
struct MemoryPlan {
  size_t arena_bytes = 0, naive_bytes = 0, lower_bound_bytes = 0;
  size_t steps = 0;
  size_t constant_bytes = 0;
};

struct RunOptions {
  // Also run the graph's in-place updates that nothing fetched needs (the optimizer steps
  // of a training graph built with loss.backward() and opt.step()).
  bool run_updates = false;
};

// Runs a static graph. Each distinct set of fetches is planned once (order, liveness)
// and the plan is reused; only what the fetches need runs (like TensorFlow: fetch an
// assign() to run it, or pass run_updates).
class Session {
 public:
  using Feeds = std::vector<std::pair<Tensor, Tensor>>;  // {placeholder, value}
  explicit Session(const Graph& g, SessionOptions options = {});
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;
  // A missing, unknown or mis-shaped feed is an error naming the placeholder.
  std::vector<Tensor> run(const std::vector<Tensor>& fetches, const Feeds& feeds = {},
                          RunOptions options = {}, SourceLoc loc = SourceLoc::current());
  // The plan of the last run: what each pass did, then each step with the user's source
  // line, its kernel, where its output lives (arena offset and bytes). Empty before a run.
  std::string explain() const;
  // The memory plan of the last run (zeros before a run).
  MemoryPlan memory_plan() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// --- control flow ---
// Eagerly (pred concrete) runs one branch. With a symbolic pred it records an If node
// whose branches are subgraphs (ONNX If): both are traced, and must return tensors of the
// same dtypes and ranks. Gradients flow through the taken branch.
Tensor cond(const Tensor& pred, const std::function<Tensor()>& then_fn,
            const std::function<Tensor()>& else_fn, SourceLoc loc = SourceLoc::current());
std::vector<Tensor> cond(const Tensor& pred, const std::function<std::vector<Tensor>()>& then_fn,
                         const std::function<std::vector<Tensor>()>& else_fn,
                         SourceLoc loc = SourceLoc::current());

using LoopCondFn = std::function<Tensor(const std::vector<Tensor>&)>;
using LoopBodyFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;
// while cond_fn(vars) is true: vars = body_fn(vars). Eager when every var is concrete; a
// Loop node with a body subgraph otherwise (the vars keep their dtypes and shapes).
std::vector<Tensor> while_loop(const LoopCondFn& cond_fn, const LoopBodyFn& body_fn,
                               std::vector<Tensor> loop_vars, SourceLoc loc = SourceLoc::current());

// --- compile() ---
// Keeps dim `dim` of input `input` symbolic, so calls that differ there share one plan.
struct DynamicDim {
  size_t input;
  int64_t dim;
  std::string name = "";  // default: s<input>_<dim>
};
struct CompileOptions {
  std::vector<DynamicDim> dynamic_dims;
  size_t max_plans = 8;       // cached plans; the least recently used is evicted
  bool log_retraces = false;  // print each retrace explanation to stderr
  std::string name = "compiled";
  OptLevel level = OptLevel::O2;
  size_t inter_op_threads = 1;  // as SessionOptions::inter_op_threads
  int intra_op_threads = 0;     // as SessionOptions::intra_op_threads
  bool freeze = false;          // as SessionOptions::freeze
};

// The type-erased core of compile(): see Compiled below.
class CompiledFunction {
 public:
  using Fn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;
  explicit CompiledFunction(CompileOptions options);
  ~CompiledFunction();
  CompiledFunction(CompiledFunction&&) noexcept;
  std::vector<Tensor> call(const std::vector<Tensor>& inputs, const Fn& fn, SourceLoc loc);
  // Why the most recent trace happened: "first call", or which input and dim changed
  // (old and new value); then the plan the last call ran (see Session::explain()).
  // Empty before the first call.
  std::string explain() const;
  MemoryPlan memory_plan() const;  // of the last call
  // The graph of the plan the last call used (throws GraphError before any call).
  Graph graph() const;
  size_t num_traces() const;
  size_t num_cached_plans() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The first argument of a compiled call, holding the caller's file:line for errors (a
// variadic call cannot take a defaulted source_location after its arguments).
struct CallArg {
  CallArg(const Tensor& t, SourceLoc loc = SourceLoc::current()) : tensor(t), loc(loc) {}
  const Tensor& tensor;
  SourceLoc loc;
};

template <class F>
class Compiled {
 public:
  Compiled(F fn, CompileOptions options) : fn_(std::move(fn)), core_(std::move(options)) {}

  template <class... Rest>
  auto operator()(CallArg first, const Rest&... rest) {
    using R = std::invoke_result_t<F&, const Tensor&, const Rest&...>;
    CompiledFunction::Fn erased = [this](const std::vector<Tensor>& in) {
      return to_list(invoke_with(in, std::make_index_sequence<1 + sizeof...(Rest)>{}));
    };
    std::vector<Tensor> out = core_.call({first.tensor, Tensor(rest)...}, erased, first.loc);
    if constexpr (std::is_void_v<R>) return;
    else if constexpr (std::is_same_v<R, Tensor>) return out.at(0);
    else return R(out.begin(), out.end());
  }

  std::string explain() const { return core_.explain(); }
  MemoryPlan memory_plan() const { return core_.memory_plan(); }
  Graph graph() const { return core_.graph(); }
  size_t num_traces() const { return core_.num_traces(); }
  size_t num_cached_plans() const { return core_.num_cached_plans(); }

 private:
  template <size_t... I>
  decltype(auto) invoke_with(const std::vector<Tensor>& in, std::index_sequence<I...>) {
    if constexpr (std::is_void_v<decltype(fn_(in[I]...))>) {
      fn_(in[I]...);
      return std::vector<Tensor>{};
    } else {
      return fn_(in[I]...);
    }
  }
  static std::vector<Tensor> to_list(const Tensor& t) { return {t}; }
  static std::vector<Tensor> to_list(std::vector<Tensor> v) { return v; }

  F fn_;
  CompiledFunction core_;
};

// Traces fn (taking and returning Tensors) into a static graph on its first call per
// input signature (dtype, rank, shape; dims in options.dynamic_dims stay symbolic) and
// replays the optimized plan afterwards. Concrete tensors fn reads (parameters,
// optimizer state) are bound by reference; in-place updates and gradients are written
// back after each call.
template <class F>
Compiled<F> compile(F fn, CompileOptions options = {}) {
  return Compiled<F>(std::move(fn), std::move(options));
}

}  // namespace baton
