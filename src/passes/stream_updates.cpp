// Streaming stores for optimizer updates: an sgd_update or adam_update whose parameter two
// or more other steps read (a layer's weight, read by its forward product and by the
// product for its input's gradient) may write the parameter with non-temporal stores (the
// `streaming` attribute; kernels/cpu/streaming.h says why).
// In a plan the step times plain and streaming stores as it runs and takes the faster
// (kernels/cpu/measured_choice.h): streaming wins when the machine's cores share no cache,
// loses when they do.
//
// Those readers split the parameter among threads each in its own way, so its lines end up
// in both cores' caches, and a plain store must first take each line from the other core.
// A weight with one reader (the first layer's, whose input needs no gradient) is in no
// other core's cache: it is left out. Below kMinBytes a parameter's update is too short for
// either way to matter (docs/passes.md, "Streaming stores for optimizer updates").
#include <unordered_set>

#include "passes/analysis.h"
#include "passes/fusion.h"
#include "passes/report.h"

namespace baton::passes {
namespace {

constexpr size_t kMinBytes = size_t(256) << 10;

bool is_update(const graph::Node& n) { return n.op_name() == "sgd_update" || n.op_name() == "adam_update"; }

// The nodes other than `update` that read `v`'s data: its readers, and through views
// (a transposed weight) their readers.
void collect_readers(const graph::Value* v, const graph::Node* update, std::unordered_set<const graph::Node*>& into) {
  for (const graph::Use& use : v->uses()) {
    if (use.user == update) continue;
    if (!is_view(*use.user)) {
      into.insert(use.user);
      continue;
    }
    for (const graph::Value* out : use.user->outputs()) collect_readers(out, update, into);
  }
}

}  // namespace

bool stream_updates(graph::Graph& g, Context&, Effect& effect) {
  const Describer describe(g);
  bool changed = false;
  for (graph::Node* n : node_list(g)) {
    if (!is_update(*n) || (n->attrs.has("streaming") && n->attrs.i("streaming") != 0)) continue;
    const graph::Value* param = n->input(0);
    const std::optional<size_t> bytes = static_bytes(*param);
    if (!bytes || *bytes < kMinBytes) continue;
    std::unordered_set<const graph::Node*> readers;
    collect_readers(param, n, readers);
    if (readers.size() < 2) continue;
    n->attrs.set("streaming", int64_t(1));
    effect.details.push_back(
        str(describe.node(*n), " may stream ", describe.value(param), " (", readers.size(), " other steps read it)"));
    changed = true;
  }
  return changed;
}

}  // namespace baton::passes
