// Reduction fusion: an element-wise group (a fused_elementwise, or one element-wise op)
// whose result only a `sum` reads becomes one fused_elementwise_sum, whose kernel sums the
// elements as it computes them, so they are never written nor read back. Its summation
// order is sum's own on a contiguous tensor, so the values are the same bit for bit. The
// same for `max`, `min` and `prod` (fused_elementwise_max, _min, _prod: fold's order,
// which decides between -0 and +0, between NaNs, and a product's rounding).
// A group that other nodes read too (or that is fetched) becomes one
// fused_elementwise_and_sum (_and_max, ...), which writes the elements and sums each
// block of them while it is in L1, in the order `sum` reads them: a bias gradient, the sum
// over the batch of a gradient the weight's product reads too, is no longer a pass of its
// own; nor is the max a softmax written out takes of the scores its exponentials read.
//
// Where it pays (measured, docs/passes.md): from 4096 elements on, summing rows of at
// least 16 (the last dims, or everything) or columns at least 128 wide (the leading dims,
// as a bias gradient sums over the batch). Narrower columns are no faster fused than
// written and summed in place. Dims in several runs (a [N, C, H, W] summed over N, H and
// W) count by their innermost run, which the kernel sums first. Kept elements are
// written either way, so there only the shape of the pieces counts (pays_keeping).
#include <algorithm>
#include <numeric>
#include <optional>
#include <utility>

#include "kernels/cpu/reduce.h"
#include "passes/analysis.h"
#include "passes/fusion.h"
#include "passes/report.h"

namespace baton::passes {
namespace {

// Forced on by a FuseEveryReduction.
kernels::ForcedChoice fuse_every_reduction;

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

// Whether summing a shape seen as this strip in one pass pays, as measured.
bool pays(const kernels::Strip& s) {
  if (s.outer * s.n * s.inner < kMinElements) return false;
  return s.inner == 1 ? (s.n >= kMinRow || s.outer == 1) : s.inner >= kMinColumns;
}

// Elements the fused node writes anyway cost it nothing more to sum, but where the kernel
// would read them in short pieces: columns narrower than kMinColumns, rows shorter than
// kMinRow. Only the dims that decide that must be known, so a symbolic batch is fine
// where it is the summed rows of a bias gradient ([batch, 512] summed over dim 0).
bool pays_keeping(const graph::SymShape& shape, const std::vector<int64_t>& dims) {
  const auto known_product = [&](int64_t begin, int64_t end) -> std::optional<int64_t> {
    int64_t product = 1;
    for (int64_t d = begin; d < end; ++d) {
      if (!shape[size_t(d)].is_static()) return std::nullopt;
      product *= shape[size_t(d)].value();
    }
    return product;
  };
  // The pieces are the innermost run's (dims in several runs sum it first).
  const int64_t rank = int64_t(shape.rank()), first = dims[kernels::innermost_run(dims)], last = dims.back();
  if (last + 1 < rank) {  // columns: the dims after the run
    const std::optional<int64_t> width = known_product(last + 1, rank);
    return width && *width >= kMinColumns;
  }
  if (first == 0) return true;  // everything
  const std::optional<int64_t> row = known_product(first, rank);
  return row && *row >= kMinRow;
}

// The group `sum` (or `max`, `min`, `prod`) can take: its input's producer, when that is
// element-wise, of sum's dtype (a float sum keeps it), and touches no written state (it
// will run where the sum does, later than before, or the sum where it does); and whether
// its elements must be kept (another node reads them, or they are fetched).
struct Group {
  graph::Node* node;
  bool keep_elements;
};
std::optional<Group> summed_group(const graph::Graph& g, const VolatileValues& vol, const graph::Node& sum) {
  const std::string& op = sum.op_name();
  if ((op != "sum" && op != "max" && op != "min" && op != "prod") || sum.num_inputs() != 1) return std::nullopt;
  graph::Node* p = sum.input(0)->producer();
  if (!p || vol.touches(*p) || !elementwise_program(*p)) return std::nullopt;
  if (program_type(*p) != p->output()->dtype()) return std::nullopt;  // a comparison's bool
  if (sum.output()->dtype() != p->output()->dtype()) return std::nullopt;
  return Group{p, only_reader(g, vol, *p) != &sum};
}

// One node computing the group's elements and their sum (max, ...), where the group was:
// the group's readers read its first result, the sum's its second. Later details name its
// results as the values they replace.
void fuse_keeping_elements(graph::Graph& g, Describer& describe, graph::Node* group, graph::Node* sum,
                           std::vector<graph::Value*> inputs, ops::Attrs attrs) {
  graph::Node* fused = g.add_node("fused_elementwise_and_" + sum->op_name(), std::move(inputs),
                                  {group->output()->type, sum->output()->type}, std::move(attrs), sum->loc);
  fused->fused_from = fused_ops(*group) + " + " + fused_ops(*sum);
  g.move_before(fused, group);
  for (auto [old, now] : {std::pair{group->output(), fused->output(0)}, std::pair{sum->output(), fused->output(1)}}) {
    now->set_name(old->name());
    describe.name(now, describe.value(old));
    g.replace_all_uses(old, now);
  }
  for (graph::Node* gone : {sum, group}) {
    describe.forget(*gone);
    g.erase_node(gone);
  }
}

}  // namespace

FuseEveryReduction::FuseEveryReduction() : Scope(fuse_every_reduction, true) {}

bool fuse_sum(graph::Graph& g, Context&, Effect& effect) {
  const VolatileValues vol(g);
  Describer describe(g);
  bool changed = false;
  for (graph::Node* sum : node_list(g)) {
    const std::optional<Group> found = summed_group(g, vol, *sum);
    if (!found) continue;
    graph::Node* group = found->node;
    const graph::SymShape& shape = group->output()->type.shape;
    const auto dims = normalised_dims(sum->attrs.ints("dims"), int64_t(shape.rank()));
    if (shape.rank() == 0 || !dims) continue;
    const bool pays_here = found->keep_elements ? pays_keeping(shape, *dims)
                                                : shape.is_static() && pays(kernels::evaluated_strip(shape.raw(), *dims));
    if (!pays_here && !fuse_every_reduction.forced().value_or(false)) continue;
    on_node(*sum, [&] {
      const kernels::EwProgram program = *elementwise_program(*group);
      effect.details.push_back(str(found->keep_elements ? "fused (keeping its elements) " : "fused ",
                                   describe.node(*group), " into ", describe.node(*sum)));
      std::vector<graph::Value*> inputs(group->inputs().begin(), group->inputs().end());
      ops::Attrs attrs = program_attrs(program, group->output()->dtype(), inputs);
      attrs.set("dims", *dims);
      attrs.set("keepdim", sum->attrs.i("keepdim"));
      if (found->keep_elements)
        return fuse_keeping_elements(g, describe, group, sum, std::move(inputs), std::move(attrs));
      const std::string name = sum->output()->name(), description = describe.value(sum->output());
      describe.forget(*sum);
      describe.forget(*group);
      graph::Node* fused = replace_with_fused(g, "fused_elementwise_" + sum->op_name(), sum, inputs, attrs, {group});
      fused->output()->set_name(name);
      describe.name(fused->output(), description);
    });
    changed = true;
  }
  return changed;
}

}  // namespace baton::passes
