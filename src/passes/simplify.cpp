// Algebraic simplification: rewrites that give the same values with less work.
//
//   x * 1, 1 * x, x + 0, 0 + x, x - 0, x / 1 -> x   the constant is fixed and every element
//                                                   is 1 (0), the result has x's type and x
//                                                   comes from a kernel or a view() (so is
//                                                   contiguous)
//   cast(x) to x's dtype -> x                       x comes from a kernel or a view()
//   view / expand / squeeze keeping the shape -> x
//   view(view(x)) -> view(x)                        one reshape of the original
//   permute(permute(x)) -> permute(x), or x when the second undoes the first
//   neg(neg(x)) -> x                                x comes from a kernel or a view()
//   max_pool2d(x) -> max_pool2d_values(x)           nothing reads the indices
//   max_pool2d(x) -> max_pool2d_window(x)           only max_pool2d_backward reads them: it
//                                                   becomes max_pool2d_window_backward
//
// Replacing a result by x obeys can_forward() (analysis.h): never a copy of state that an
// effect writes, never a fetched result that would alias a graph input.
#include <optional>

#include "passes/analysis.h"
#include "passes/cleanup.h"
#include "passes/report.h"

namespace baton::passes {
namespace {

// One rewrite of node n: either every reader of n's result reads `forward_to` instead,
// or n reads `new_input` (as input 0) with `new_attrs`.
struct Rewrite {
  std::string rule;  // "x * 1 -> x"
  graph::Value* forward_to = nullptr;
  graph::Value* new_input = nullptr;
  ops::Attrs new_attrs;
};

graph::Node* producer_named(const graph::Value* v, std::string_view op) {
  graph::Node* p = v->producer();
  return p && p->op_name() == op ? p : nullptr;
}

// Every element of t equals `value` (an empty tensor has none that differ).
bool all_elements_equal(const Tensor& t, double value) {
  for (double x : t.to_vector<double>())
    if (x != value) return false;
  return true;
}

// permute's dims made non-negative; nullopt unless they are a permutation of 0..rank-1.
std::optional<std::vector<int64_t>> permutation(const graph::Node& permute) {
  std::vector<int64_t> dims = permute.attrs.ints("dims");
  const int64_t rank = int64_t(dims.size());
  std::vector<bool> seen(dims.size());
  for (int64_t& d : dims) {
    if (d < 0) d += rank;
    if (d < 0 || d >= rank || seen[size_t(d)]) return std::nullopt;
    seen[size_t(d)] = true;
  }
  return dims;
}

bool is_identity(const std::vector<int64_t>& dims) {
  for (size_t i = 0; i < dims.size(); ++i)
    if (dims[i] != int64_t(i)) return false;
  return true;
}

// An operand that leaves the other unchanged: x op identity (and identity op x when the
// op commutes).
struct IdentityOperand {
  std::string_view op;
  double identity;
  bool commutes;
  const char* symbol;
};
constexpr IdentityOperand kIdentityOperands[] = {
    {"mul", 1, true, "*"}, {"add", 0, true, "+"}, {"sub", 0, false, "-"}, {"div", 1, false, "/"}};

class Simplifier {
 public:
  Simplifier(graph::Graph& g, Context& ctx, Effect& effect)
      : g_(g), ctx_(ctx), effect_(effect), vol_(g), describe_(g) {}

  bool run() {
    bool changed = false;
    for (graph::Node* n : node_list(g_)) {
      if (n->op_name() == "max_pool2d" && n->num_outputs() == 2 && unread(n->output(1))) {
        on_node(*n, [&] { drop_indices(n); });
        changed = true;
        continue;
      }
      if (n->op_name() == "max_pool2d" && n->num_outputs() == 2 && only_backward_reads(n->output(1))) {
        on_node(*n, [&] { use_window_offsets(n); });
        return true;  // nodes further on were erased: the pass manager runs this pass again
      }
      if (!n->op() || has_effects(*n) || n->num_outputs() != 1) continue;
      if (!n->op()->accepts_input_count(n->num_inputs())) continue;  // the verifier's to report
      std::optional<Rewrite> r = on_node(*n, [&] { return find_rewrite(*n); });
      if (!r) continue;
      on_node(*n, [&] { apply(n, *r); });
      changed = true;
    }
    return changed;
  }

 private:
  std::optional<Rewrite> find_rewrite(const graph::Node& n) const {
    const std::string& op = n.op_name();
    for (const IdentityOperand& id : kIdentityOperands)
      if (op == id.op) return identity_operand(n, id);
    if (op == "cast") return same_dtype_cast(n);
    if (op == "view" || op == "expand" || op == "squeeze") {
      if (auto r = same_shape_view(n)) return r;
      if (op == "view") return view_of_view(n);
    }
    if (op == "permute") return permute_rewrite(n);
    if (op == "neg") return double_negation(n);
    return std::nullopt;
  }

  // n's result becomes `to`, when that keeps every run's values and outputs.
  std::optional<Rewrite> forward(const graph::Node& n, graph::Value* to, std::string rule) const {
    if (!(n.output()->type == to->type) || !can_forward(g_, vol_, n.output(), to)) return std::nullopt;
    return Rewrite{std::move(rule), to, nullptr, {}};
  }

  std::optional<Rewrite> identity_operand(const graph::Node& n, const IdentityOperand& id) const {
    const std::string one = id.identity == 0 ? "0" : "1";
    // The operand at `constant` is the identity everywhere: the result is the one at `x`.
    auto rewrite_if_identity = [&](size_t constant, size_t x, std::string rule) -> std::optional<Rewrite> {
      if (!(n.output()->type == n.input(x)->type)) return std::nullopt;  // checked first: it is cheap
      if (!contiguous_by_construction(n.input(x))) return std::nullopt;
      const Tensor* t = fixed_value(ctx_, vol_, n.input(constant));
      if (!t || !all_elements_equal(*t, id.identity)) return std::nullopt;
      return forward(n, n.input(x), std::move(rule));
    };
    if (auto r = rewrite_if_identity(1, 0, str("x ", id.symbol, " ", one, " -> x"))) return r;
    if (id.commutes) return rewrite_if_identity(0, 1, str(one, " ", id.symbol, " x -> x"));
    return std::nullopt;
  }

  // An element-wise op's result is contiguous and a later view() relies on that, so its
  // result becomes x only when x is contiguous too: a kernel's result or a view() (which
  // only takes contiguous input); an expand, a slice, a transpose or a graph input may be
  // strided.
  static bool contiguous_by_construction(const graph::Value* x) {
    const graph::Node* p = x->producer();
    return p && p->op() && (p->op()->kernel || p->op_name() == "view");
  }

  std::optional<Rewrite> same_dtype_cast(const graph::Node& n) const {
    graph::Value* x = n.input(0);
    if (n.attrs.dtype("dtype") != x->dtype() || !contiguous_by_construction(x)) return std::nullopt;
    return forward(n, x, "cast to the same dtype -> x");
  }

  // view, expand and squeeze that keep the shape keep the strides: the result is x.
  std::optional<Rewrite> same_shape_view(const graph::Node& n) const {
    return forward(n, n.input(0), str(n.op_name(), " to the same shape -> x"));
  }

  std::optional<Rewrite> view_of_view(const graph::Node& n) const {
    const graph::Node* inner = producer_named(n.input(0), "view");
    if (!inner) return std::nullopt;
    return Rewrite{"view of a view -> one view of the original", nullptr, inner->input(0), n.attrs};
  }

  std::optional<Rewrite> permute_rewrite(const graph::Node& n) const {
    std::optional<std::vector<int64_t>> outer = permutation(n);
    if (!outer) return std::nullopt;
    if (is_identity(*outer)) return forward(n, n.input(0), "identity permute -> x");
    const graph::Node* inner_node = producer_named(n.input(0), "permute");
    std::optional<std::vector<int64_t>> inner = inner_node ? permutation(*inner_node) : std::nullopt;
    if (!inner || inner->size() != outer->size()) return std::nullopt;
    // permute(permute(x, p), q)[i] takes dim q[i] of permute(x, p), which is dim p[q[i]] of x.
    std::vector<int64_t> composed(outer->size());
    for (size_t i = 0; i < composed.size(); ++i) composed[i] = (*inner)[size_t((*outer)[i])];
    graph::Value* x = inner_node->input(0);
    if (is_identity(composed)) return forward(n, x, "permute undoing a permute -> x");
    ops::Attrs attrs = n.attrs;
    attrs.set("dims", composed);
    return Rewrite{"permute of a permute -> one permute", nullptr, x, std::move(attrs)};
  }

  std::optional<Rewrite> double_negation(const graph::Node& n) const {
    const graph::Node* inner = producer_named(n.input(0), "neg");
    if (!inner || !contiguous_by_construction(inner->input(0))) return std::nullopt;
    return forward(n, inner->input(0), "neg(neg(x)) -> x");
  }

  bool unread(const graph::Value* v) const { return v->uses().empty() && !g_.is_output(v); }

  // Max pooling whose indices nothing reads: the values alone (no argmax to keep).
  void drop_indices(graph::Node* n) {
    const std::string before = describe_.node(*n);
    graph::Node* values =
        g_.add_node("max_pool2d_values", {n->input(0)}, {n->output(0)->type}, n->attrs, n->loc);
    g_.move_before(values, n);
    g_.replace_all_uses(n->output(0), values->output());
    describe_.forget(*n);
    g_.erase_node(n);
    effect_.details.push_back(str("simplified ", before, " to max_pool2d_values (nothing reads the indices)"));
  }

  // Max pooling indices that only the pooling's backward reads.
  bool only_backward_reads(const graph::Value* v) const {
    if (v->uses().empty() || g_.is_output(v)) return false;
    for (const graph::Use& u : v->uses())
      if (u.user->op_name() != "max_pool2d_backward" || u.index != 1) return false;
    return true;
  }

  // Such a pooling keeps each maximum's window offset instead (oneDNN's workspace: nothing
  // decoded into flat indices, half their bytes), and its backward ops scatter through it.
  void use_window_offsets(graph::Node* n) {
    const std::string before = describe_.node(*n);
    const graph::TensorType offsets{DType::i32, n->output(1)->shape()};
    graph::Node* window =
        g_.add_node("max_pool2d_window", {n->input(0)}, {n->output(0)->type, offsets}, n->attrs, n->loc);
    g_.move_before(window, n);
    std::vector<graph::Node*> backward;
    for (const graph::Use& u : n->output(1)->uses()) backward.push_back(u.user);
    for (graph::Node* b : backward) {
      graph::Node* replacement = g_.add_node("max_pool2d_window_backward", {b->input(0), window->output(1)},
                                             {b->output(0)->type}, b->attrs, b->loc);
      g_.move_before(replacement, b);
      g_.replace_all_uses(b->output(0), replacement->output());
      describe_.forget(*b);
      g_.erase_node(b);
    }
    g_.replace_all_uses(n->output(0), window->output(0));
    describe_.forget(*n);
    g_.erase_node(n);
    effect_.details.push_back(str("simplified ", before, " to max_pool2d_window and its ", backward.size(),
                                  " backward op(s) to max_pool2d_window_backward (window offsets, not flat indices)"));
  }

  void apply(graph::Node* n, const Rewrite& r) {
    std::string before = describe_.node(*n), after;
    if (r.forward_to) {
      g_.replace_all_uses(n->output(), r.forward_to);
      after = describe_.value(r.forward_to);
      describe_.forget(*n);
      g_.erase_node(n);
    } else {
      n->set_input(0, r.new_input);
      n->attrs = r.new_attrs;
      after = describe_.node(*n);
    }
    effect_.details.push_back(str("simplified ", before, " to ", after, " (", r.rule, ")"));
  }

  graph::Graph& g_;
  Context& ctx_;
  Effect& effect_;
  const VolatileValues vol_;
  Describer describe_;
};

}  // namespace

bool simplify_algebra(graph::Graph& g, Context& ctx, Effect& effect) {
  return Simplifier(g, ctx, effect).run();
}

}  // namespace baton::passes
