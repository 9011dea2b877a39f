// ONNX control flow: If and Loop over baton::cond and baton::while_loop (include/baton/graph.h),
// whose subgraphs are imported inside the trace of the control-flow op, so names of the
// enclosing graphs are captured. A condition or trip count known while the model loads
// needs no control-flow node at all: If imports the taken branch, Loop unrolls. Scan always
// unrolls (its trip count is the static length of its scan axis).
#include <algorithm>
#include <functional>
#include <limits>
#include <optional>

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
  if (!pred.is_symbolic())  // the taken branch only, which may return sequences too
    return c.outputs_of(c.importer.import_subgraph_values(truthy(pred) ? then_graph : else_graph, {}));
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
namespace {

class LoopImport {
 public:
  explicit LoopImport(NodeContext& c) : c_(c), body_(c.attr_graph("body")) {
    n_ = c.num_inputs() > 2 ? c.num_inputs() - 2 : 0;
    if (size_t(body_.input_size()) != n_ + 2)
      c.fail(str("the body takes ", body_.input_size(), " inputs; with ", n_, " loop-carried values it must take ",
                 n_ + 2));
    if (size_t(body_.output_size()) < n_ + 1)
      c.fail(str("the body returns ", body_.output_size(), " values; it must return at least ", n_ + 1));
    scans_ = size_t(body_.output_size()) - 1 - n_;
    for (size_t i = 0; i < n_; ++i) v_.push_back(c.value_input(i + 2));
    trip_ = c.has_input(0) ? reshape(cast(c.input(0), DType::i64), Shape{}) : Tensor{};
    has_cond_ = c.has_input(1);
    if (!trip_.defined() && !has_cond_) c.fail("has neither a trip count nor a condition, so it never ends");
    cond_now_ = has_cond_ ? bool_scalar(c, c.input(1), "the condition") : scalar_tensor<bool>(true);
    if (trip_.defined() && sym::is_static(c.input(0).shape()) && c.input(0).numel() != 1)
      c.fail(str("the trip count must hold one value, not ", c.input(0).shape()));
    if (scans_ > 0 && !control_known()) {
      ask_for_trip_and_condition();
      c.fail("has scan outputs, which baton supports only when the trip count and the condition are known when "
             "the model loads");
    }
  }

  // Iterations imported one at a time while the trip count and the condition are known;
  // the loop's outputs where they ran it to its end.
  std::optional<Outputs> unrolled() {
    if (!control_known()) return std::nullopt;
    const int64_t last = trip_.defined() ? trip_.item<int64_t>() : std::numeric_limits<int64_t>::max();
    const int64_t max_unrolled = scans_ > 0 ? 4096 : 64;
    std::vector<std::vector<Tensor>> scanned(scans_);
    bool go = truthy(cond_now_);
    while (iter_ < last && go) {
      if (iter_ >= max_unrolled) {
        if (scans_ > 0) c_.fail(str("has scan outputs and runs more than ", max_unrolled, " iterations"));
        return std::nullopt;  // the rest runs as a loop node
      }
      std::vector<Value> args{scalar_tensor<int64_t>(iter_), cond_now_};
      args.insert(args.end(), v_.begin(), v_.end());
      std::vector<Value> outs = c_.importer.import_subgraph_values(body_, args);
      ++iter_;
      v_.assign(outs.begin() + 1, outs.begin() + 1 + std::ptrdiff_t(n_));
      for (size_t k = 0; k < scans_; ++k) scanned[k].push_back(outs[1 + n_ + k].tensor());
      if (!has_cond_) continue;  // cond_out is ignored then
      cond_now_ = bool_scalar(c_, outs[0].tensor(), "the body's condition");
      if (cond_now_.is_symbolic()) {
        if (scans_ > 0) {
          ask_for_values(c_, cond_now_);
          c_.fail("has scan outputs and a condition computed when the model runs");
        }
        if (iter_ < last) return std::nullopt;  // the rest runs as a loop node
        break;                                  // the trip count ends it whatever the condition
      }
      go = truthy(cond_now_);
    }
    std::vector<Value> out = v_;
    for (std::vector<Tensor>& scan : scanned) {
      if (scan.empty())
        c_.fail("has scan outputs and runs no iteration (the shapes of the empty scan outputs are unknown)");
      out.emplace_back(stack(scan, 0));
    }
    return c_.outputs_of(out);
  }

  // The remaining iterations as a Loop node: vars [iter, cond, v...].
  Outputs as_loop_node() {
    std::vector<Tensor> vars{scalar_tensor<int64_t>(iter_), cond_now_};
    for (const Value& carried : v_) {
      if (!carried.is_tensor()) {
        ask_for_trip_and_condition();
        c_.fail(str("carries ", carried.describe(), ", which baton supports only when the trip count and the "
                    "condition are known when the model loads (the loop then unrolls)"));
      }
      vars.push_back(carried.tensor());
    }
    // while_loop runs eagerly when every var is known; a trip count computed at run time
    // must still make it a Loop node.
    if (trip_.defined() && trip_.is_symbolic() &&
        std::none_of(vars.begin(), vars.end(), [](const Tensor& t) { return t.is_symbolic(); }))
      vars[0] = vars[0] + trip_ * int64_t(0);
    auto cond_fn = [&](const std::vector<Tensor>& vs) -> Tensor {
      if (!trip_.defined()) return vs[1];
      return where(vs[0] < trip_, vs[1], scalar_tensor<bool>(false));
    };
    std::vector<Tensor> result;
    try {
      result = while_loop(cond_fn, [&](const std::vector<Tensor>& vs) { return next_vars(vs); }, vars);
    } catch (const Error&) {
      // A body baton cannot trace once for every iteration: unrolled, with the trip count
      // and condition known, it may import.
      ask_for_values(c_, trip_);
      if (has_cond_) ask_for_values(c_, c_.input(1));
      throw;
    }
    return Outputs(result.begin() + 2, result.end());
  }

 private:
  bool control_known() const { return (!trip_.defined() || !trip_.is_symbolic()) && !cond_now_.is_symbolic(); }

  void ask_for_trip_and_condition() const {
    ask_for_values(c_, trip_);
    ask_for_values(c_, cond_now_);
  }

  // One iteration of the Loop node's body: the vars it hands to the next.
  std::vector<Tensor> next_vars(const std::vector<Tensor>& vs) const {
    std::vector<Tensor> outs = c_.importer.import_subgraph(body_, vs);
    std::vector<Tensor> next{vs[0] + int64_t(1), has_cond_ ? bool_scalar(c_, outs[0], "the body's condition") : vs[1]};
    for (size_t i = 0; i < n_; ++i) {
      const Tensor& o = outs[1 + i];
      if (o.dtype() != vs[2 + i].dtype() || !(o.shape() == vs[2 + i].shape()))
        c_.fail(str("loop-carried value ", i, " ('", body_.output(int(1 + i)).name(), "') goes in as ",
                    vs[2 + i].dtype(), vs[2 + i].shape(), " and comes out as ", o.dtype(), o.shape(),
                    "; baton's loops keep dtypes and shapes unless the trip count and condition are known at load "
                    "time"));
      next.push_back(o);
    }
    return next;
  }

  NodeContext& c_;
  const ::onnx::GraphProto& body_;
  size_t n_ = 0, scans_ = 0;  // loop-carried values, scan outputs
  std::vector<Value> v_;      // the loop-carried values (sequences and optionals need it unrolled)
  Tensor trip_, cond_now_;
  bool has_cond_ = false;
  int64_t iter_ = 0;          // iterations unrolled
};

}  // namespace

BATON_ONNX_IMPORTER("Loop", [](NodeContext& c) -> Outputs {
  LoopImport loop(c);
  if (std::optional<Outputs> done = loop.unrolled()) return *std::move(done);
  return loop.as_loop_node();
});

// --- Scan ---
// The trip count of a Scan is the static length of its scan axis, so it is always
// unrolled: each step slices the scan inputs, imports the body on the states and those
// slices, and keeps the scan outputs' elements, stacked at the end.
namespace {

constexpr int64_t kMaxScanSteps = 4096;

struct ScanParts {
  const ::onnx::GraphProto& body;
  std::vector<Tensor> states, inputs;  // N initial states, M scan inputs
  size_t num_outputs;                  // K scan outputs
};

ScanParts scan_parts(const NodeContext& c, size_t first) {
  const ::onnx::GraphProto& body = c.attr_graph("body");
  const int64_t m = c.attr_int("num_scan_inputs");
  const size_t given = c.num_inputs() > first ? c.num_inputs() - first : 0;
  if (m < 1 || size_t(m) > given)
    c.fail(str("num_scan_inputs is ", m, "; it must be in [1, ", given, "] (the states and scan inputs given)"));
  const size_t n = given - size_t(m);
  if (size_t(body.input_size()) != given)
    c.fail(str("the body takes ", body.input_size(), " inputs; with ", n, " states and ", m, " scan inputs it must take ",
               given));
  if (size_t(body.output_size()) < n)
    c.fail(str("the body returns ", body.output_size(), " values; it must return at least the ", n, " states"));
  ScanParts p{body, {}, {}, size_t(body.output_size()) - n};
  for (size_t i = 0; i < given; ++i) (i < n ? p.states : p.inputs).push_back(c.input(first + i));
  return p;
}

// An ints attribute with one entry per item (all `fallback` when absent).
std::vector<int64_t> per_item(const NodeContext& c, std::string_view name, size_t count, int64_t fallback) {
  std::vector<int64_t> v = c.attr_ints(name, std::vector<int64_t>(count, fallback));
  if (v.size() != count) c.fail(str(name, " has ", v.size(), " entries for ", count, " tensors"));
  return v;
}

// Element `at` of x along `axis`, without that axis.
Tensor element(const Tensor& x, int64_t axis, int64_t at) { return squeeze(slice(x, axis, at, at + 1), axis); }

// Runs the body `steps` times from `states`; step t reads the scan elements elements_at(t).
// Returns the final states and, per scan output, its elements in step order.
std::vector<Tensor> unroll(const NodeContext& c, const ScanParts& p, std::vector<Tensor> states, int64_t steps,
                           const std::function<std::vector<Tensor>(int64_t)>& elements_at,
                           std::vector<std::vector<Tensor>>& scanned) {
  scanned.assign(p.num_outputs, {});
  for (int64_t t = 0; t < steps; ++t) {
    std::vector<Tensor> args = states;
    for (Tensor& e : elements_at(t)) args.push_back(std::move(e));
    std::vector<Tensor> outs = c.importer.import_subgraph(p.body, args);
    if (outs.size() != states.size() + p.num_outputs)
      c.fail(str("the body returned ", outs.size(), " values, not ", states.size() + p.num_outputs));
    states.assign(outs.begin(), outs.begin() + std::ptrdiff_t(states.size()));
    for (size_t k = 0; k < p.num_outputs; ++k) scanned[k].push_back(outs[states.size() + k]);
  }
  return states;
}

// The common length of the scan inputs along their scan axes (static, at most kMaxScanSteps).
int64_t scan_length(const NodeContext& c, const std::vector<Tensor>& inputs, const std::vector<int64_t>& axes) {
  int64_t steps = -1;
  for (size_t j = 0; j < inputs.size(); ++j) {
    const int64_t len = c.static_dim(inputs[j], axes[j], "the scan axis");
    if (steps >= 0 && len != steps) c.fail(str("scan inputs differ in length along their scan axes: ", steps, " and ", len));
    steps = len;
  }
  if (steps > kMaxScanSteps) c.fail(str("scans ", steps, " steps; baton unrolls Scan up to ", kMaxScanSteps));
  return steps;
}

// Opset 9 on: scan axes and directions per scan input, axes and directions per output.
Outputs scan9(const NodeContext& c) {
  const ScanParts p = scan_parts(c, 0);
  const size_t m = p.inputs.size(), k = p.num_outputs;
  std::vector<int64_t> axes = per_item(c, "scan_input_axes", m, 0);
  const std::vector<int64_t> reversed = per_item(c, "scan_input_directions", m, 0);
  const std::vector<int64_t> out_axes = per_item(c, "scan_output_axes", k, 0);
  const std::vector<int64_t> prepended = per_item(c, "scan_output_directions", k, 0);
  for (size_t j = 0; j < m; ++j) {
    if (p.inputs[j].dim() < 1) c.fail(str("scan input ", j, " is a scalar, which has no axis to scan"));
    axes[j] = normalize_axis(c, axes[j], p.inputs[j].dim());
  }
  const int64_t steps = scan_length(c, p.inputs, axes);
  if (steps == 0 && k > 0) c.fail("scans no step (the shapes of the empty scan outputs are unknown)");
  std::vector<std::vector<Tensor>> scanned;
  Outputs out = unroll(c, p, p.states, steps, [&](int64_t t) {
    std::vector<Tensor> elements;
    for (size_t j = 0; j < m; ++j) elements.push_back(element(p.inputs[j], axes[j], reversed[j] ? steps - 1 - t : t));
    return elements;
  }, scanned);
  for (size_t i = 0; i < k; ++i) {
    if (prepended[i]) std::reverse(scanned[i].begin(), scanned[i].end());
    out.push_back(stack(scanned[i], normalize_axis(c, out_axes[i], scanned[i][0].dim() + 1)));
  }
  return out;
}

// Opset 8: every state and scan input has a batch dim 0, scan inputs scan axis 1, and
// sequence_lens (input 0, known at load time) may shorten each batch entry's scan; the
// scan outputs of a shorter entry are padded with zeros (ONNX leaves them undefined).
Outputs scan8(const NodeContext& c) {
  const ScanParts p = scan_parts(c, 1);
  const size_t m = p.inputs.size(), k = p.num_outputs;
  const std::vector<int64_t> reversed = per_item(c, "directions", m, 0);
  for (const Tensor& x : p.inputs)
    if (x.dim() < 2) c.fail(str("scan inputs must be [batch, sequence, ...], not ", x.shape()));
  const int64_t batch = c.static_dim(p.inputs[0], 0, "the batch");
  const int64_t steps = scan_length(c, p.inputs, std::vector<int64_t>(m, 1));
  for (const Tensor& t : p.inputs)
    if (c.static_dim(t, 0, "the batch") != batch) c.fail("scan inputs differ in batch size");
  for (const Tensor& t : p.states)
    if (t.dim() < 1 || c.static_dim(t, 0, "the batch") != batch) c.fail(str("states must be [", batch, ", ...], not ", t.shape()));
  std::vector<int64_t> lengths(size_t(batch), steps);
  if (c.has_input(0)) lengths = c.ints_input(0);
  if (int64_t(lengths.size()) != batch) c.fail(str("sequence_lens has ", lengths.size(), " entries for a batch of ", batch));
  if (batch * steps > kMaxScanSteps) c.fail(str("scans ", batch * steps, " steps; baton unrolls Scan up to ", kMaxScanSteps));
  std::vector<std::vector<Tensor>> states(p.states.size());
  std::vector<Tensor> padding(k);  // one element of each scan output, for the zeros of short entries
  std::vector<std::vector<std::vector<Tensor>>> scanned(static_cast<size_t>(batch));
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t len = lengths[size_t(b)];
    if (len < 0 || len > steps) c.fail(str("sequence length ", len, " is out of range for ", steps, " steps"));
    std::vector<Tensor> initial;
    for (const Tensor& s : p.states) initial.push_back(element(s, 0, b));
    std::vector<Tensor> final_states = unroll(c, p, initial, len, [&](int64_t t) {
      std::vector<Tensor> elements;
      for (size_t j = 0; j < m; ++j) elements.push_back(element(element(p.inputs[j], 0, b), 0, reversed[j] ? len - 1 - t : t));
      return elements;
    }, scanned[size_t(b)]);
    for (size_t i = 0; i < final_states.size(); ++i) states[i].push_back(final_states[i]);
    for (size_t i = 0; i < k && len > 0; ++i) padding[i] = scanned[size_t(b)][i][0];
  }
  Outputs out;
  for (const auto& s : states) out.push_back(stack(s, 0));
  for (size_t i = 0; i < k; ++i) {
    if (!padding[i].defined()) c.fail("scans no step (the shapes of the empty scan outputs are unknown)");
    std::vector<Tensor> per_batch;
    for (auto& entry : scanned) {
      std::vector<Tensor>& elements = entry[i];
      while (int64_t(elements.size()) < steps) elements.push_back(zeros_like(padding[i]));
      per_batch.push_back(stack(elements, 0));
    }
    out.push_back(stack(per_batch, 0));
  }
  return out;
}

}  // namespace

BATON_ONNX_IMPORTER("Scan", [](NodeContext& c) -> Outputs { return c.opset < 9 ? scan8(c) : scan9(c); });

}  // namespace baton::onnx::detail
