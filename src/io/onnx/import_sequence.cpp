// ONNX sequences and optionals. A sequence is known in length while the model loads (its
// items are symbolic or known tensors: Composite in importer.h), so the sequence ops unroll
// into ordinary tensor ops: SequenceAt is an item, ConcatFromSequence a cat, SequenceMap its
// body imported once per item. A model whose inputs are sequences or optionals imports once
// per value of them (model.cpp). An optional holding a tensor is that tensor; an empty one is
// Composite{.none = true}.
#include "baton/ops.h"
#include "io/onnx/importer.h"

namespace baton::onnx::detail {
namespace {

// A position in a sequence of n items (negative counts from the end); `end_ok` allows n
// (an insert at the back).
size_t position(const NodeContext& c, size_t input, size_t n, bool end_ok) {
  const std::vector<int64_t> v = c.ints_input(input);
  if (v.size() != 1) c.fail(str("the position must hold one integer, not ", v.size()));
  const int64_t p = v[0] < 0 ? v[0] + int64_t(n) : v[0];
  if (p < 0 || p > int64_t(n) || (p == int64_t(n) && !end_ok))
    c.fail(str("position ", v[0], " is out of range for a sequence of ", n));
  return size_t(p);
}

Outputs sequence_output(NodeContext& c, std::vector<Tensor> items) {
  c.set_composite_output(0, Composite{false, std::move(items)});
  return {Tensor()};
}

Outputs sequence_construct(NodeContext& c) {
  std::vector<Tensor> items;
  for (size_t i = 0; i < c.num_inputs(); ++i) items.push_back(c.input(i));
  return sequence_output(c, std::move(items));
}

Outputs sequence_insert(NodeContext& c) {
  std::vector<Tensor> items = c.sequence_input(0);
  const size_t at = c.has_input(2) ? position(c, 2, items.size(), true) : items.size();
  items.insert(items.begin() + long(at), c.input(1));
  return sequence_output(c, std::move(items));
}

Outputs sequence_erase(NodeContext& c) {
  std::vector<Tensor> items = c.sequence_input(0);
  if (items.empty()) c.fail("erases from an empty sequence");
  const size_t at = c.has_input(1) ? position(c, 1, items.size(), false) : items.size() - 1;
  items.erase(items.begin() + long(at));
  return sequence_output(c, std::move(items));
}

Outputs sequence_at(NodeContext& c) {
  const std::vector<Tensor>& items = c.sequence_input(0);
  return {items[position(c, 1, items.size(), false)]};
}

// ConcatFromSequence {axis, new_axis}: cat along axis, or stack along a new one.
Outputs concat_from_sequence(NodeContext& c) {
  const std::vector<Tensor>& items = c.sequence_input(0);
  if (items.empty()) c.fail("concatenates an empty sequence");
  const bool new_axis = c.attr_int("new_axis", 0) != 0;
  const int64_t axis = normalize_axis(c, c.attr_int("axis"), items[0].dim() + (new_axis ? 1 : 0));
  return {new_axis ? stack(items, axis) : cat(items, axis)};
}

// SplitToSequence(x, split) {axis, keepdims}: pieces of the given sizes, of one size, or
// of 1 along axis, squeezed unless keepdims (only when split is absent).
Outputs split_to_sequence(NodeContext& c) {
  const Tensor& x = c.input(0);
  const int64_t axis = axis_attr(c, "axis", 0, x.dim());
  // The number of items must be known: a length given by a model input's shape makes the
  // model import per value of that input.
  if (sym::is_symbol(x.shape()[size_t(axis)]) && x.is_symbolic()) c.importer.check_needs_input_values(x);
  const int64_t n = c.static_dim(x, axis, "the split axis");
  std::vector<int64_t> sizes;
  if (!c.has_input(1)) {
    sizes.assign(size_t(n), 1);
  } else if (c.known_input(1).dim() == 0) {
    const int64_t chunk = c.ints_input(1).at(0);
    if (chunk <= 0) c.fail(str("the split size must be positive, not ", chunk));
    for (int64_t start = 0; start < n; start += chunk) sizes.push_back(std::min(chunk, n - start));
  } else {
    sizes = c.ints_input(1);
  }
  std::vector<Tensor> items;
  int64_t start = 0;
  for (int64_t s : sizes) {
    if (s < 0) c.fail(str("split sizes must not be negative, got ", s));
    items.push_back(slice(x, axis, start, start + s));
    start += s;
  }
  if (start != n) c.fail(str("split sizes add up to ", start, ", not ", n));
  if (!c.has_input(1) && c.attr_int("keepdims", 1) == 0)
    for (Tensor& t : items) t = squeeze(t, axis);
  return sequence_output(c, std::move(items));
}

// SequenceMap(seq, more...) {body}: the body once per item of the first sequence, reading
// the i-th item of every sequence input and the tensor inputs whole; each body output
// becomes a sequence.
Outputs sequence_map(NodeContext& c) {
  const size_t n = c.sequence_input(0).size();
  const ::onnx::GraphProto& body = c.attr_graph("body");
  std::vector<std::vector<Tensor>> outputs(size_t(body.output_size()));
  for (size_t i = 0; i < n; ++i) {
    std::vector<Tensor> args;
    for (size_t k = 0; k < c.num_inputs(); ++k) {
      if (!c.composite_input(k)) {
        args.push_back(c.input(k));
        continue;
      }
      const std::vector<Tensor>& items = c.sequence_input(k);
      if (items.size() != n) c.fail(str("input ", k, " holds ", items.size(), " items, input 0 ", n));
      args.push_back(items[i]);
    }
    std::vector<Tensor> results = c.importer.import_subgraph(body, args);
    for (size_t o = 0; o < results.size(); ++o) outputs[o].push_back(results[o]);
  }
  for (size_t o = 0; o < outputs.size(); ++o) c.set_composite_output(o, Composite{false, outputs[o]});
  return Outputs(outputs.size());
}

// Identity, Optional and OptionalGetElement pass a sequence or a tensor through.
Outputs pass_through(NodeContext& c) {
  if (const Composite* v = c.composite_input(0)) {
    if (v->none && c.node.op_type() == "OptionalGetElement") c.fail("the optional is empty");
    c.set_composite_output(0, *v);
    return {Tensor()};
  }
  return {c.input(0)};
}

Outputs optional(NodeContext& c) {
  if (c.has_input(0) || c.composite_input(0)) return pass_through(c);
  c.set_composite_output(0, Composite{true, {}});
  return {Tensor()};
}

Outputs optional_has_element(NodeContext& c) {
  const Composite* v = c.composite_input(0);
  const bool has = v ? !v->none : c.has_input(0);
  return {scalar_tensor<bool>(has)};
}

}  // namespace

BATON_ONNX_IMPORTER("SequenceEmpty", [](NodeContext& c) { return sequence_output(c, {}); });
BATON_ONNX_IMPORTER("SequenceConstruct", sequence_construct);
BATON_ONNX_IMPORTER("SequenceInsert", sequence_insert);
BATON_ONNX_IMPORTER("SequenceErase", sequence_erase);
BATON_ONNX_IMPORTER("SequenceAt", sequence_at);
BATON_ONNX_IMPORTER("SequenceLength", [](NodeContext& c) -> Outputs {
  return {scalar_tensor<int64_t>(int64_t(c.sequence_input(0).size()))};
});
BATON_ONNX_IMPORTER("ConcatFromSequence", concat_from_sequence);
BATON_ONNX_IMPORTER("SplitToSequence", split_to_sequence);
BATON_ONNX_IMPORTER("SequenceMap", sequence_map);
BATON_ONNX_IMPORTER("Identity", pass_through);
BATON_ONNX_IMPORTER("Optional", optional);
BATON_ONNX_IMPORTER("OptionalGetElement", pass_through);
BATON_ONNX_IMPORTER("OptionalHasElement", optional_has_element);

}  // namespace baton::onnx::detail
