#include "passes/analysis.h"

#include <algorithm>

namespace baton::passes {
namespace {

bool subgraphs_have_effects(const graph::Node& n) {
  for (const auto& sub : n.subgraphs) {
    if (!sub) continue;
    for (const auto& inner : sub->nodes())
      if (has_effects(*inner)) return true;
  }
  return false;
}

}  // namespace

bool has_effects(const graph::Node& n) {
  if (!n.op()) return true;
  return !n.op()->mutated_inputs.empty() || subgraphs_have_effects(n);
}

bool is_random(const graph::Node& n) { return n.op() && n.op()->draws_random; }

bool is_fetched_storage(const graph::Graph& g, const graph::Value* v) {
  const graph::Value* root = storage_root(v);
  return std::any_of(g.outputs().begin(), g.outputs().end(),
                     [&](const graph::Value* out) { return storage_root(out) == root; });
}

VolatileValues::VolatileValues(const graph::Graph& g) {
  for (const auto& n : g.nodes()) {
    if (!has_effects(*n)) continue;
    if (n->op() && n->subgraphs.empty()) {
      for (int i : n->op()->mutated_inputs)
        if (size_t(i) < n->num_inputs()) written_roots_.insert(storage_root(n->input(size_t(i))));
    } else {  // an unknown op or control flow may write any operand
      for (const graph::Value* in : n->inputs()) written_roots_.insert(storage_root(in));
    }
  }
}

bool VolatileValues::contains(const graph::Value* v) const {
  return !written_roots_.empty() && written_roots_.count(storage_root(v)) > 0;
}

bool VolatileValues::touches(const graph::Node& n) const {
  auto is_volatile = [&](const graph::Value* v) { return contains(v); };
  return std::any_of(n.inputs().begin(), n.inputs().end(), is_volatile) ||
         std::ranges::any_of(n.outputs(), is_volatile);
}

bool can_forward(const graph::Graph& g, const VolatileValues& vol, const graph::Value* from,
                 const graph::Value* to) {
  const graph::Value* from_root = storage_root(from);
  const graph::Value* to_root = storage_root(to);
  if (from_root == to_root) return true;  // the same storage either way
  if (vol.contains(from) || vol.contains(to)) return false;
  if (!is_fetched_storage(g, from)) return true;
  return to_root->producer() != nullptr && !is_fetched_storage(g, to);
}

const Tensor* fixed_value(const Context& ctx, const VolatileValues& vol, const graph::Value* v) {
  if (v->producer() || !ctx.inputs.fixed_value || vol.contains(v)) return nullptr;
  return ctx.inputs.fixed_value(v);
}

bool private_value(const graph::Graph& g, const VolatileValues& vol, const graph::Value* v) {
  return !g.is_output(v) && !vol.contains(v);
}

std::optional<double> fixed_scalar(const Context& ctx, const VolatileValues& vol, const graph::Value* v) {
  const Tensor* t = v ? fixed_value(ctx, vol, v) : nullptr;
  if (!t || t->numel() != 1 || !is_floating(t->dtype())) return std::nullopt;
  const double x = t->to_vector<double>()[0];
  return x == x ? std::optional<double>(x) : std::nullopt;
}

graph::Value* other_operand(const graph::Node& n, const graph::Value* v) {
  if (n.num_inputs() != 2 || n.num_outputs() != 1) return nullptr;
  if (n.input(0) == v && n.input(1) != v) return n.input(1);
  if (n.input(1) == v && n.input(0) != v) return n.input(0);
  return nullptr;
}

std::optional<size_t> static_bytes(const graph::Value& v) {
  size_t bytes = dtype_size(v.dtype());
  for (const graph::Dim& d : v.shape()) {
    if (d.is_symbolic() || __builtin_mul_overflow(bytes, size_t(d.raw()), &bytes)) return std::nullopt;
  }
  return bytes;
}

std::optional<size_t> static_output_bytes(const graph::Node& n) {
  size_t total = 0;
  for (const graph::Value* out : n.outputs()) {
    const std::optional<size_t> bytes = static_bytes(*out);
    if (!bytes || __builtin_add_overflow(total, *bytes, &total)) return std::nullopt;
  }
  return total;
}

std::vector<graph::Node*> node_list(const graph::Graph& g) {
  std::vector<graph::Node*> nodes;
  nodes.reserve(g.num_nodes());
  for (const auto& n : g.nodes()) nodes.push_back(n.get());
  return nodes;
}

}  // namespace baton::passes
