// Elementwise fusion: a chain or tree of element-wise ops becomes one fused_elementwise node
// whose kernel reads each operand and writes the result once, intermediates staying in L1
// (src/ops/fused_elementwise.cpp). A group grows backwards from its last node (the root)
// through producers whose result only the group reads, all of the root's shape and
// computing in its type, so every register holds one value per output element and nothing
// is computed twice. Comparisons (whose bool result a register holds as 1 or 0), where,
// and casts to the root's type join too: a cast adds no instruction, its input is read
// converted (a bool mask as 0 and 1, bf16 values exactly). A root may be a comparison or a
// cast of any dtype: the result is then converted as it is stored. The fused node takes
// the root's place; the other members run later than they did, which is why none of them
// may read state an effect writes.
#include <algorithm>
#include <optional>
#include <queue>

#include "kernels/cpu/ewise_program.h"
#include "passes/analysis.h"
#include "passes/fusion.h"
#include "passes/report.h"

namespace baton::passes {
namespace {

bool all_ones(const graph::SymShape& s) {
  return std::all_of(s.begin(), s.end(), [](const graph::Dim& d) { return !d.is_symbolic() && d.raw() == 1; });
}

// Whether n's operands and result have the dtypes its instruction reads and writes in
// the program's type t (kernels::operand_dtype, kernels::result_dtype).
bool typed_as_program(const graph::Node& n, kernels::EwOp op, DType t) {
  if (!is_floating(t) || n.output()->dtype() != kernels::result_dtype(op, t)) return false;
  for (size_t i = 0; i < n.num_inputs(); ++i)
    if (n.input(i)->dtype() != kernels::operand_dtype(op, int(i), t)) return false;
  return true;
}

bool is_cast(const graph::Node& n) {
  return n.op_name() == "cast" && n.num_inputs() == 1 && n.num_outputs() == 1 && !has_effects(n) &&
         n.input(0)->dtype() != DType::string && n.output()->dtype() != DType::string;
}

// A cast to a floating dtype: a group of that type takes it in without an instruction.
bool is_float_cast(const graph::Node& n) { return is_cast(n) && is_floating(n.output()->dtype()); }

// The dtype a group whose root is `root` computes in: its program's (a comparison's
// operands'); for a cast, its input's when that is f32 or f64, or the type of the
// comparison its bool input comes from (cast(x > 0, f32) as a mask); nullopt when no group
// ends at `root`.
std::optional<DType> group_type(const graph::Node& root) {
  if (is_cast(root)) {
    const graph::Value& in = *root.input(0);
    if (is_floating(in.dtype())) return in.dtype();
    const graph::Node* p = in.producer();
    if (p && elementwise_program(*p) && is_floating(program_type(*p))) return program_type(*p);
    return std::nullopt;
  }
  if (!elementwise_program(root)) return std::nullopt;
  return program_type(root);
}

// The one instruction computing `n` (reading in0, in1 for its inputs), when the program
// can compute exactly what its op does: parameters present, and for pow an exponent of
// one element (the kernel reads it once).
std::optional<kernels::EwProgram> instruction_for(const graph::Node& n) {
  const kernels::EwOpInfo* info = kernels::find_ew_op(n.op_name());
  if (!info || n.num_inputs() != size_t(info->arity)) return std::nullopt;
  if (info->op == kernels::EwOp::pow && !all_ones(n.input(1)->shape())) return std::nullopt;
  kernels::EwInstr ins{.op = info->op, .args = {kernels::EwOperand{true, 0}, kernels::EwOperand{true, 1},
                                                kernels::EwOperand{true, 2}}};
  for (int p = 0; p < info->num_params(); ++p) {
    const char* name = info->params[size_t(p)];
    if (!n.attrs.has(name)) return std::nullopt;
    ins.params[size_t(p)] = n.attrs.f(name);
  }
  return kernels::EwProgram{{ins}};
}

}  // namespace

std::optional<kernels::EwProgram> elementwise_program(const graph::Node& n) {
  if (!n.op() || n.num_outputs() != 1 || !n.subgraphs.empty() || has_effects(n)) return std::nullopt;
  const ops::Fusion kind = n.op()->fusion_kind;
  if (kind != ops::Fusion::Elementwise && kind != ops::Fusion::Broadcast) return std::nullopt;
  if (n.op_name() == "fused_elementwise") {  // (one converting its result holds no register of it)
    if (!n.attrs.has("program") || n.attrs.has("to") || !is_floating(program_type(n))) return std::nullopt;
    kernels::ParsedProgram parsed = kernels::parse_program(n.attrs.s("program"));
    if (!parsed.error.empty()) return std::nullopt;
    return std::move(parsed.program);
  }
  const kernels::EwOpInfo* info = kernels::find_ew_op(n.op_name());
  if (!info || !typed_as_program(n, info->op, program_type(n))) return std::nullopt;
  return instruction_for(n);
}

DType program_type(const graph::Node& n) {
  if (n.op_name() == "fused_elementwise" && n.attrs.has("dtype")) return n.attrs.dtype("dtype");
  const kernels::EwOpInfo* info = kernels::find_ew_op(n.op_name());
  const bool operands_type = n.op_name() == "fused_elementwise" || (info && kernels::is_comparison(info->op));
  return operands_type && n.num_inputs() > 0 ? n.input(0)->dtype() : n.output()->dtype();
}

ops::Attrs program_attrs(const kernels::EwProgram& program, DType type, const std::vector<graph::Value*>& inputs) {
  ops::Attrs attrs{{"program", kernels::to_string(program)}};
  if (inputs.empty() || inputs.front()->dtype() != type) attrs.set("dtype", type);
  return attrs;
}

namespace {

// Whether `u` reads its value as a pow exponent, which must stay an input of the program.
bool is_pow_exponent(const graph::Use& u) {
  std::optional<kernels::EwProgram> p = elementwise_program(*u.user);
  return p && std::any_of(p->code.begin(), p->code.end(), [&](const kernels::EwInstr& ins) {
           return ins.op == kernels::EwOp::pow && ins.args[1] == kernels::EwOperand{true, u.index};
         });
}

class ElementwiseFuser {
 public:
  ElementwiseFuser(graph::Graph& g, Effect& effect) : g_(g), effect_(effect), vol_(g), describe_(g) {}

  // Roots are tried from the last node back, so each group is as large as it can be.
  bool run() {
    std::vector<graph::Node*> nodes = node_list(g_);
    for (size_t i = 0; i < nodes.size(); ++i) position_[nodes[i]] = i;
    bool changed = false;
    for (size_t i = nodes.size(); i-- > 0;) {
      graph::Node* root = nodes[i];
      if (taken_.count(root)) continue;  // erased: fused into a group
      const std::optional<DType> type = group_type(*root);
      if (!type || !is_floating(*type) || vol_.contains(root->output())) continue;
      std::vector<graph::Node*> group = grow(root, *type);
      if (group.size() < 2) continue;
      std::optional<Built> built = build(group);
      if (!built) continue;  // casts alone: no instruction computes the root's value
      on_node(*root, [&] { fuse(group, *built, *type); });
      changed = true;
    }
    return changed;
  }

 private:
  // The root and every producer it may absorb, in graph order. Producers are visited from
  // the last back, so each one's readers have all been decided when it is. (A node this
  // pass made sits after every root still to come, so it is never a producer here.)
  std::vector<graph::Node*> grow(graph::Node* root, DType type) {
    std::unordered_set<graph::Node*> members{root}, seen;
    std::priority_queue<std::pair<size_t, graph::Node*>> queue;
    auto push_producers = [&](const graph::Node& n) {
      for (graph::Value* in : n.inputs()) {
        graph::Node* p = in->producer();
        auto at = p ? position_.find(p) : position_.end();
        if (at != position_.end() && seen.insert(p).second) queue.push({at->second, p});
      }
    };
    push_producers(*root);
    while (!queue.empty()) {
      graph::Node* p = queue.top().second;
      queue.pop();
      if (!absorbable(*p, *root, type, members)) continue;
      members.insert(p);
      push_producers(*p);
    }
    std::vector<graph::Node*> group(members.begin(), members.end());
    std::sort(group.begin(), group.end(), [&](auto* a, auto* b) { return position_.at(a) < position_.at(b); });
    return group;
  }

  // A producer joins when a program can compute it in the group's type with a result of
  // the root's shape, or it is a cast to that type (of any shape: its input is read
  // converted, broadcast as the cast's result was); when only the group reads its result
  // (not as pow's exponent, which must stay an input); and when nothing it reads or writes
  // is state an effect changes (it will run later).
  bool absorbable(const graph::Node& p, const graph::Node& root, DType type,
                  const std::unordered_set<graph::Node*>& members) const {
    if (taken_.count(&p)) return false;
    const bool joins = is_float_cast(p) ? p.output()->dtype() == type
                                        : elementwise_program(p) && program_type(p) == type &&
                                              p.output()->type.shape == root.output()->type.shape;
    if (!joins || g_.is_output(p.output()) || vol_.touches(p)) return false;
    return std::all_of(p.output()->uses().begin(), p.output()->uses().end(),
                       [&](const graph::Use& u) { return members.count(u.user) && !is_pow_exponent(u); });
  }

  struct Built {
    kernels::EwProgram program;
    std::vector<graph::Value*> inputs;  // the group's operands from outside, in first-use order
  };

  // The members' programs one after another, each member's inputs read from the register
  // that computed them or from the group's inputs. A cast is its input's operand. nullopt
  // when the root's value is no register the program computes last (casts of an input).
  static std::optional<Built> build(const std::vector<graph::Node*>& group) {
    Built b;
    std::unordered_map<const graph::Value*, kernels::EwOperand> operand;
    for (const graph::Node* n : group) {
      if (is_cast(*n)) {
        operand[n->output()] = outer(*n->input(0), operand, b);
        continue;
      }
      const kernels::EwProgram own = *elementwise_program(*n);
      const int base = int(b.program.code.size());
      for (kernels::EwInstr ins : own.code) {
        for (int i = 0; i < kernels::ew_op_info(ins.op).arity; ++i) {
          kernels::EwOperand& a = ins.args[size_t(i)];
          a = a.is_input ? outer(*n->input(size_t(a.index)), operand, b) : kernels::EwOperand{false, base + a.index};
        }
        b.program.code.push_back(ins);
      }
      operand[n->output()] = kernels::EwOperand{false, int(b.program.code.size()) - 1};
    }
    const kernels::EwOperand last{false, int(b.program.code.size()) - 1};
    if (b.program.code.empty() || operand.at(group.back()->output()) != last) return std::nullopt;
    return b;
  }

  // What a member's input `v` is in the group's program: the register of the member that
  // computed it, or an input of the group (added on first use).
  static kernels::EwOperand outer(graph::Value& v, std::unordered_map<const graph::Value*, kernels::EwOperand>& operand,
                                  Built& b) {
    auto [it, added] = operand.try_emplace(&v, kernels::EwOperand{true, int(b.inputs.size())});
    if (added) b.inputs.push_back(&v);
    return it->second;
  }

  // The group as one node computing in `type`, its result converted to the root's dtype
  // where that is another (`to`).
  void fuse(const std::vector<graph::Node*>& group, const Built& b, DType type) {
    graph::Node* root = group.back();
    note(group, b.inputs);
    ops::Attrs attrs = program_attrs(b.program, type, b.inputs);
    if (root->output()->dtype() != type) attrs.set("to", root->output()->dtype());
    graph::Node* fused =
        g_.add_node("fused_elementwise", b.inputs, {root->output()->type}, std::move(attrs), root->loc);
    for (const graph::Node* n : group) fused->fused_from += (fused->fused_from.empty() ? "" : " + ") + fused_ops(*n);
    g_.move_before(fused, root);
    g_.replace_all_uses(root->output(), fused->output());
    const std::string name = root->output()->name();
    for (auto it = group.rbegin(); it != group.rend(); ++it) {  // readers before producers
      describe_.forget(**it);
      taken_.insert(*it);
      g_.erase_node(*it);
    }
    fused->output()->set_name(name);
  }

  // "fused %3 = mul(%x, %a) (m.cpp:2), %4 = tanh(%3) (m.cpp:3) into %4 = fused_elementwise(%x, %a)"
  void note(const std::vector<graph::Node*>& group, const std::vector<graph::Value*>& inputs) {
    std::string s = "fused ";
    for (size_t k = 0; k < group.size(); ++k) s += str(k ? ", " : "", describe_.node(*group[k]));
    s += str(" into ", describe_.value(group.back()->output()), " = fused_elementwise(");
    for (size_t i = 0; i < inputs.size(); ++i) s += str(i ? ", " : "", describe_.value(inputs[i]));
    effect_.details.push_back(s + ")");
  }

  graph::Graph& g_;
  Effect& effect_;
  VolatileValues vol_;
  Describer describe_;
  std::unordered_map<const graph::Node*, size_t> position_;
  std::unordered_set<const graph::Node*> taken_;
};

}  // namespace

bool fuse_elementwise(graph::Graph& g, Context&, Effect& effect) { return ElementwiseFuser(g, effect).run(); }

}  // namespace baton::passes
