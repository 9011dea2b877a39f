// ONNX control flow: If and Loop over baton::cond and baton::while_loop (include/baton/graph.h),
// whose subgraphs are imported inside the trace of the control-flow op, so names of the
// enclosing graphs are captured. A condition or trip count known while the model loads
// needs no control-flow node at all: If imports the taken branch, Loop unrolls. Scan is not
// supported.
#include <algorithm>
#include <limits>

#include "baton/graph.h"
#include "baton/ops.h"
#include "io/onnx/importer.h"

namespace baton::onnx::detail {
namespace {

// A one-element tensor as the bool scalar baton's cond and while_loop read.
Tensor bool_scalar(const NodeContext& c, const Tensor& t, const std::string& what) {
  if (sym::is_static(t.shape()) && t.numel() != 1) c.fail(str(what, " must hold one value, not ", t.shape()));
  return reshape(cast(t, DType::b8), Shape{});
}

bool truthy(const Tensor& t) { return cast(t, DType::f64).contiguous().to_vector<double>().at(0) != 0; }

// When `t` is computed from model inputs, asks for their values (the model is then
// imported again per value, and `t` is known); returns otherwise.
void ask_for_values(const NodeContext& c, const Tensor& t) {
  if (t.defined() && t.is_symbolic()) c.importer.check_needs_input_values(t);
}

}  // namespace

BATON_ONNX_IMPORTER("If", [](NodeContext& c) -> Outputs {
  const Tensor& x = c.input(0);
  const ::onnx::GraphProto& then_graph = c.attr_graph("then_branch");
  const ::onnx::GraphProto& else_graph = c.attr_graph("else_branch");
  auto branch = [&](const ::onnx::GraphProto& g) { return c.importer.import_subgraph(g, {}); };
  const Tensor pred = bool_scalar(c, x, "the condition");
  if (!pred.is_symbolic()) return branch(truthy(pred) ? then_graph : else_graph);
  try {
    return cond(pred, [&] { return branch(then_graph); }, [&] { return branch(else_graph); });
  } catch (const Error&) {
    // Branches baton cannot join into one If node (results of different shapes, a branch
    // that needs a value known at load time): with the condition known, only the taken
    // branch is imported.
    ask_for_values(c, x);
    throw;
  }
});

// Loop: inputs (M, cond, v_initial...), body (iter_num, cond_in, v_in...) -> (cond_out,
// v_out..., scan_outputs...); runs while iter < M and cond (either may be left out).
// With M and cond known at load time the body is unrolled (imported once per iteration),
// which also serves scan outputs and loop-carried values whose shapes change; the rest
// becomes a while_loop over [iter i64, cond b8, v...] (whose vars keep dtypes and shapes).
BATON_ONNX_IMPORTER("Loop", [](NodeContext& c) -> Outputs {
  const ::onnx::GraphProto& body = c.attr_graph("body");
  const size_t n = c.num_inputs() > 2 ? c.num_inputs() - 2 : 0;
  if (size_t(body.input_size()) != n + 2)
    c.fail(str("the body takes ", body.input_size(), " inputs; with ", n, " loop-carried values it must take ", n + 2));
  if (size_t(body.output_size()) < n + 1)
    c.fail(str("the body returns ", body.output_size(), " values; it must return at least ", n + 1));
  const size_t scans = size_t(body.output_size()) - 1 - n;
  std::vector<Tensor> v;
  for (size_t i = 0; i < n; ++i) v.push_back(c.input(i + 2));
  const Tensor trip = c.has_input(0) ? reshape(cast(c.input(0), DType::i64), Shape{}) : Tensor{};
  const bool has_cond = c.has_input(1);
  if (!trip.defined() && !has_cond) c.fail("has neither a trip count nor a condition, so it never ends");
  Tensor cond_now = has_cond ? bool_scalar(c, c.input(1), "the condition") : scalar_tensor<bool>(true);
  if (trip.defined() && sym::is_static(c.input(0).shape()) && c.input(0).numel() != 1)
    c.fail(str("the trip count must hold one value, not ", c.input(0).shape()));

  const bool control_known = (!trip.defined() || !trip.is_symbolic()) && !cond_now.is_symbolic();
  if (scans > 0 && !control_known) {
    ask_for_values(c, trip);
    ask_for_values(c, cond_now);
    c.fail("has scan outputs, which baton supports only when the trip count and the condition are known when "
           "the model loads");
  }

  // Unrolled iterations, while the trip count and the condition are known.
  int64_t iter = 0;
  std::vector<std::vector<Tensor>> scanned(scans);
  if (control_known) {
    const int64_t last = trip.defined() ? trip.item<int64_t>() : std::numeric_limits<int64_t>::max();
    const int64_t max_unrolled = scans > 0 ? 4096 : 64;
    bool go = truthy(cond_now);
    while (iter < last && go) {
      if (iter >= max_unrolled) {
        if (scans > 0) c.fail(str("has scan outputs and runs more than ", max_unrolled, " iterations"));
        break;  // the rest runs as a loop node
      }
      std::vector<Tensor> args{scalar_tensor<int64_t>(iter), cond_now};
      args.insert(args.end(), v.begin(), v.end());
      std::vector<Tensor> outs = c.importer.import_subgraph(body, args);
      ++iter;
      v.assign(outs.begin() + 1, outs.begin() + 1 + std::ptrdiff_t(n));
      for (size_t k = 0; k < scans; ++k) scanned[k].push_back(outs[1 + n + k]);
      if (!has_cond) continue;  // cond_out is ignored then
      cond_now = bool_scalar(c, outs[0], "the body's condition");
      if (cond_now.is_symbolic()) {
        if (scans == 0) break;  // the rest runs as a loop node
        ask_for_values(c, cond_now);
        c.fail("has scan outputs and a condition computed when the model runs");
      }
      go = truthy(cond_now);
    }
    const bool done = iter >= last || !go;
    if (done) {
      Outputs out = v;
      for (size_t k = 0; k < scans; ++k) {
        if (scanned[k].empty())
          c.fail("has scan outputs and runs no iteration (the shapes of the empty scan outputs are unknown)");
        out.push_back(stack(scanned[k], 0));
      }
      return out;
    }
  }

  // The remaining iterations as a Loop node: vars [iter, cond, v...].
  std::vector<Tensor> vars{scalar_tensor<int64_t>(iter), cond_now};
  vars.insert(vars.end(), v.begin(), v.end());
  // while_loop runs eagerly when every var is known; a trip count computed at run time
  // must still make it a Loop node.
  if (trip.defined() && trip.is_symbolic() && std::none_of(vars.begin(), vars.end(), [](const Tensor& t) {
        return t.is_symbolic();
      }))
    vars[0] = vars[0] + trip * int64_t(0);
  auto cond_fn = [&](const std::vector<Tensor>& vs) -> Tensor {
    if (!trip.defined()) return vs[1];
    return where(vs[0] < trip, vs[1], scalar_tensor<bool>(false));
  };
  auto body_fn = [&](const std::vector<Tensor>& vs) -> std::vector<Tensor> {
    std::vector<Tensor> outs = c.importer.import_subgraph(body, vs);
    std::vector<Tensor> next{vs[0] + int64_t(1),
                             has_cond ? bool_scalar(c, outs[0], "the body's condition") : vs[1]};
    for (size_t i = 0; i < n; ++i) {
      const Tensor& o = outs[1 + i];
      if (o.dtype() != vs[2 + i].dtype() || !(o.shape() == vs[2 + i].shape()))
        c.fail(str("loop-carried value ", i, " ('", body.output(int(1 + i)).name(), "') goes in as ", vs[2 + i].dtype(),
                   vs[2 + i].shape(), " and comes out as ", o.dtype(), o.shape(),
                   "; baton's loops keep dtypes and shapes unless the trip count and condition are known at load time"));
      next.push_back(o);
    }
    return next;
  };
  std::vector<Tensor> result;
  try {
    result = while_loop(cond_fn, body_fn, vars);
  } catch (const Error&) {
    // A body baton cannot trace once for every iteration: unrolled, with the trip count
    // and condition known, it may import.
    ask_for_values(c, trip);
    if (has_cond) ask_for_values(c, c.input(1));
    throw;
  }
  return Outputs(result.begin() + 2, result.end());
});

BATON_ONNX_IMPORTER("Scan", [](NodeContext& c) -> Outputs {
  c.fail("Scan is not supported yet (Loop is)");
});

}  // namespace baton::onnx::detail
