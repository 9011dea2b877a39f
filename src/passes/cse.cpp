// Common-subexpression elimination: a node computing what an earlier node computes (same
// op, same input values, equal attributes; the two inputs of a commutative op in either
// order) reads the earlier node's results instead and is erased. Nodes that may compute
// something else on the same inputs are left alone: effects, random ops, control flow,
// and readers of values an effect writes (an assign between two reads of a variable makes
// them differ).
#include <bit>
#include <unordered_map>

#include "passes/analysis.h"
#include "passes/cleanup.h"
#include "passes/report.h"

namespace baton::passes {
namespace {

bool may_merge(const graph::Node& n, const VolatileValues& vol) {
  return n.op() && !has_effects(n) && !is_random(n) && n.subgraphs.empty() && !vol.touches(n);
}

// Its input values, in an order that does not matter where the op commutes: sorted by id.
std::vector<const graph::Value*> operands(const graph::Node& n) {
  std::vector<const graph::Value*> in(n.inputs().begin(), n.inputs().end());
  if (n.op()->commutative && in.size() == 2 && in[1]->id() < in[0]->id()) std::swap(in[0], in[1]);
  return in;
}

// Op and input values: nodes with the same key are candidates, compared in full by
// same_computation.
std::string key_of(const graph::Node& n) {
  std::string key = n.op_name();
  for (const graph::Value* in : operands(n)) key += str(" ", in->id());
  return key;
}

// Attrs::operator== compares doubles with ==, which finds 0.0 and -0.0 equal: as a fill
// value they differ (1 / x), so floats are compared bit for bit here.
bool identical(const ops::AttrValue& a, const ops::AttrValue& b) {
  const double* x = std::get_if<double>(&a);
  const double* y = std::get_if<double>(&b);
  if (x && y) return std::bit_cast<uint64_t>(*x) == std::bit_cast<uint64_t>(*y);
  return a == b;
}

bool identical(const ops::Attrs& a, const ops::Attrs& b) {
  const auto &x = a.items(), &y = b.items();
  if (x.size() != y.size()) return false;
  for (size_t i = 0; i < x.size(); ++i)
    if (x[i].first != y[i].first || !identical(x[i].second, y[i].second)) return false;
  return true;
}

bool same_computation(const graph::Node& a, const graph::Node& b) {
  if (a.op() != b.op() || operands(a) != operands(b) || !identical(a.attrs, b.attrs)) return false;
  if (a.num_outputs() != b.num_outputs()) return false;
  for (size_t i = 0; i < a.num_outputs(); ++i)
    if (!(a.output(i)->type == b.output(i)->type)) return false;
  return true;
}

// Whether later's readers may all read earlier's results instead.
bool can_merge_into(const graph::Graph& g, const VolatileValues& vol, const graph::Node& later,
                    const graph::Node& earlier) {
  for (size_t i = 0; i < later.num_outputs(); ++i)
    if (!can_forward(g, vol, later.output(i), earlier.output(i))) return false;
  return true;
}

}  // namespace

bool eliminate_common_subexpressions(graph::Graph& g, Context&, Effect& effect) {
  const VolatileValues vol(g);
  Describer describe(g);
  std::unordered_map<std::string, std::vector<graph::Node*>> earlier_by_key;
  bool changed = false;
  for (graph::Node* n : node_list(g)) {
    if (!may_merge(*n, vol)) continue;
    // The key reads the inputs as they are now: merges above have redirected them.
    std::vector<graph::Node*>& earlier = earlier_by_key[key_of(*n)];
    graph::Node* twin = nullptr;
    for (graph::Node* e : earlier) {
      if (same_computation(*e, *n) && can_merge_into(g, vol, *n, *e)) {
        twin = e;  // the earliest match
        break;
      }
    }
    if (!twin) {
      earlier.push_back(n);
      continue;
    }
    effect.details.push_back(str("merged ", describe.node(*n), " into ", describe.node(*twin)));
    on_node(*n, [&] {
      for (size_t i = 0; i < n->num_outputs(); ++i) g.replace_all_uses(n->output(i), twin->output(i));
      describe.forget(*n);
      g.erase_node(n);
    });
    changed = true;
  }
  return changed;
}

}  // namespace baton::passes
