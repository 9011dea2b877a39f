// Constant folding: a node whose inputs are all fixed (constants only the graph holds, or
// results folded before it) is computed now, through the same kernels a run would call,
// and its results become constants of the plan. Only small results are kept
// (ctx.fold_limit_bytes): a big one costs more memory than recomputing it costs time.
#include <unordered_map>

#include "baton/autograd.h"
#include "passes/analysis.h"
#include "passes/cleanup.h"
#include "passes/report.h"
#include "trace/builder.h"

namespace baton::passes {
namespace {

using Folded = std::unordered_map<const graph::Value*, Tensor>;

class Folder {
 public:
  Folder(graph::Graph& g, Context& ctx, Effect& effect)
      : g_(g), ctx_(ctx), effect_(effect), vol_(g), describe_(g) {}

  bool run() {
    bool changed = false;
    for (graph::Node* n : node_list(g_)) {
      std::vector<Tensor> inputs;
      if (!foldable(*n, inputs)) continue;
      on_node(*n, [&] { fold(n, compute(*n, inputs)); });
      changed = true;
    }
    return changed;
  }

 private:
  // The fixed value of v: a constant folded in this pass, or a fixed graph input.
  const Tensor* fixed(const graph::Value* v) const {
    if (auto it = folded_.find(v); it != folded_.end()) return &it->second;
    return fixed_value(ctx_, vol_, v);
  }

  // Whether n can be computed now; if so, `inputs` holds its operands' values.
  bool foldable(const graph::Node& n, std::vector<Tensor>& inputs) const {
    if (!n.op() || has_effects(n) || is_random(n) || !n.subgraphs.empty() || n.attrs.holds_symbols())
      return false;
    std::optional<size_t> bytes = static_output_bytes(n);
    if (!bytes || *bytes > ctx_.fold_limit_bytes || !results_may_become_constants(n)) return false;
    for (const graph::Value* in : n.inputs()) {
      const Tensor* value = fixed(in);
      if (!value) return false;
      inputs.push_back(*value);
    }
    return true;
  }

  // Something reads the results (dead nodes are dead code's), nothing writes them, and no
  // result is handed back to the caller, who could write into the plan's constant.
  bool results_may_become_constants(const graph::Node& n) const {
    bool read = false;
    for (const graph::Value* out : n.outputs()) {
      if (vol_.contains(out) || is_fetched_storage(g_, out)) return false;
      read = read || !out->uses().empty();
    }
    return read;
  }

  // Runs the node's op on concrete tensors, exactly as the executor would.
  static std::vector<Tensor> compute(const graph::Node& n, const std::vector<Tensor>& inputs) {
    NoGradGuard no_grad;
    trace::NoTrace no_trace;  // optimize() may run while a compile() trace is active
    std::vector<Tensor> out(n.num_outputs());
    ops::call(*n.op(), inputs, n.attrs, out, SourceLoc::current());
    for (size_t i = 0; i < out.size(); ++i) {
      const graph::TensorType& declared = n.output(i)->type;
      if (out[i].dtype() != declared.dtype || !(graph::SymShape(out[i].shape()) == declared.shape))
        throw ShapeError(str("[", n.op_name(), "] computed ", out[i].dtype(), out[i].shape(), " for result ",
                             i, " where the graph says ", declared));
      // The plan lays constants out as contiguous tensors that own their storage.
      if (!out[i].is_contiguous() || n.op()->view_rule) out[i] = out[i].clone();
    }
    return out;
  }

  void fold(graph::Node* n, std::vector<Tensor> results) {
    std::string detail = str("folded ", describe_.node(*n), " into ");
    for (size_t i = 0; i < results.size(); ++i) {
      graph::Value* out = n->output(i);
      const std::string& name_hint = out->name().empty() ? n->op_name() : out->name();
      graph::Value* constant = ctx_.inputs.add_constant(results[i], name_hint);
      folded_.emplace(constant, std::move(results[i]));
      g_.replace_all_uses(out, constant);
      detail += str(i ? ", " : "", "a constant ", constant->type);
    }
    describe_.forget(*n);
    g_.erase_node(n);
    effect_.details.push_back(std::move(detail));
  }

  graph::Graph& g_;
  Context& ctx_;
  Effect& effect_;
  const VolatileValues vol_;
  Describer describe_;
  Folded folded_;
};

}  // namespace

bool fold_constants(graph::Graph& g, Context& ctx, Effect& effect) {
  if (!ctx.inputs.add_constant) return false;
  return Folder(g, ctx, effect).run();
}

}  // namespace baton::passes
