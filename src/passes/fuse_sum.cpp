// Reduction fusion: an element-wise group (a fused_elementwise, or one element-wise op)
// whose result only a `sum` reads becomes one fused_elementwise_sum, whose kernel sums the
// elements as it computes them, so they are never written nor read back. Its summation
// order is sum's own on a contiguous tensor, so the values are the same bit for bit.
//
// Where it pays (measured, docs/passes.md): from 4096 elements on, summing rows of at
// least 16 (the last dims, or everything) or columns at least 128 wide (the leading dims,
// as a bias gradient sums over the batch). Narrower columns cost one evaluation per row of
// a few elements, which is slower than writing them and summing in place.
#include <algorithm>
#include <numeric>

#include "kernels/cpu/reduce.h"
#include "passes/analysis.h"
#include "passes/fusion.h"
#include "passes/report.h"

namespace baton::passes {
namespace {

constexpr int64_t kMinElements = 4096;
constexpr int64_t kMinRow = 16;
constexpr int64_t kMinColumns = 128;

// The summed dims of a static `shape`, normalised and sorted (all for empty `dims`);
// nullopt for a dim out of range.
std::optional<std::vector<int64_t>> normalised_dims(std::vector<int64_t> dims, int64_t rank) {
  if (dims.empty()) {
    dims.resize(size_t(rank));
    std::iota(dims.begin(), dims.end(), 0);
  }
  for (int64_t& d : dims) {
    if (d < -rank || d >= rank) return std::nullopt;
    d = d < 0 ? d + rank : d;
  }
  std::sort(dims.begin(), dims.end());
  return dims;
}

// Whether summing a shape seen as this strip (nullopt: its summed dims are not one run of
// adjacent dims, which the kernel cannot read) in one pass pays, as measured.
bool pays(const std::optional<kernels::Strip>& s) {
  if (!s || s->outer * s->n * s->inner < kMinElements) return false;
  return s->inner == 1 ? (s->n >= kMinRow || s->outer == 1) : s->inner >= kMinColumns;
}

// The group `sum` can absorb: its input's producer, when that is element-wise, read by
// nothing else, of sum's dtype (a float sum keeps it), and touches no written state (it
// will run where the sum does, later than before).
graph::Node* absorbable_group(const graph::Graph& g, const VolatileValues& vol, const graph::Node& sum) {
  if (sum.op_name() != "sum" || sum.num_inputs() != 1) return nullptr;
  graph::Node* p = sum.input(0)->producer();
  if (!p || only_reader(g, vol, *p) != &sum || vol.touches(*p) || !elementwise_program(*p)) return nullptr;
  if (sum.output()->dtype() != p->output()->dtype()) return nullptr;
  return p;
}

}  // namespace

bool fuse_sum(graph::Graph& g, Context&, Effect& effect) {
  const VolatileValues vol(g);
  const Describer describe(g);
  bool changed = false;
  for (graph::Node* sum : node_list(g)) {
    graph::Node* group = absorbable_group(g, vol, *sum);
    if (!group || !group->output()->type.shape.is_static()) continue;
    const Shape shape = group->output()->type.shape.raw();
    const auto dims = normalised_dims(sum->attrs.ints("dims"), int64_t(shape.size()));
    if (shape.empty() || !dims || !pays(kernels::strip_of(shape, *dims))) continue;
    on_node(*sum, [&] {
      const kernels::EwProgram program = *elementwise_program(*group);
      effect.details.push_back(str("fused ", describe.node(*group), " into ", describe.node(*sum)));
      const std::string name = sum->output()->name();
      ops::Attrs attrs{{"program", kernels::to_string(program)}, {"dims", *dims}, {"keepdim", sum->attrs.i("keepdim")}};
      std::vector<graph::Value*> inputs(group->inputs().begin(), group->inputs().end());
      graph::Node* fused = replace_with_fused(g, "fused_elementwise_sum", sum, inputs, attrs, {group});
      fused->output()->set_name(name);
    });
    changed = true;
  }
  return changed;
}

}  // namespace baton::passes
