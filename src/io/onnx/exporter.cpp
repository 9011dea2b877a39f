#include "io/onnx/exporter.h"

#include <algorithm>
#include <map>
#include <unordered_map>
#include <variant>
#include <set>

#include "baton/onnx.h"
#include "core/atomic_file.h"
#include "dispatch/registry.h"
#include "runtime/plan.h"
#include "trace/builder.h"

namespace baton::onnx::detail {
namespace {

std::map<std::string, ExportFn, std::less<>>& exporters() {
  static std::map<std::string, ExportFn, std::less<>> table;
  return table;
}

::onnx::AttributeProto* new_attr(::onnx::NodeProto* n, const std::string& name, ::onnx::AttributeProto::AttributeType t) {
  ::onnx::AttributeProto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(t);
  return a;
}

}  // namespace

void set_value_type(::onnx::ValueInfoProto& info, const graph::TensorType& type) {
  ::onnx::TypeProto::Tensor* t = info.mutable_type()->mutable_tensor_type();
  t->set_elem_type(to_onnx_type(type.dtype));
  ::onnx::TensorShapeProto* shape = t->mutable_shape();
  for (int64_t d : type.shape.raw()) {
    ::onnx::TensorShapeProto::Dimension* dim = shape->add_dim();
    if (sym::is_symbol(d)) dim->set_dim_param(sym::to_string(d));
    else dim->set_dim_value(d);
  }
}

OnnxNode& OnnxNode::attr(const std::string& name, int64_t v) {
  new_attr(n_, name, ::onnx::AttributeProto::INT)->set_i(v);
  return *this;
}
OnnxNode& OnnxNode::attr(const std::string& name, double v) {
  new_attr(n_, name, ::onnx::AttributeProto::FLOAT)->set_f(float(v));
  return *this;
}
OnnxNode& OnnxNode::attr(const std::string& name, const std::vector<int64_t>& v) {
  ::onnx::AttributeProto* a = new_attr(n_, name, ::onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
  return *this;
}
OnnxNode& OnnxNode::attr(const std::string& name, const std::vector<float>& v) {
  ::onnx::AttributeProto* a = new_attr(n_, name, ::onnx::AttributeProto::FLOATS);
  for (float x : v) a->add_floats(x);
  return *this;
}
OnnxNode& OnnxNode::attr(const std::string& name, const std::string& v) {
  new_attr(n_, name, ::onnx::AttributeProto::STRING)->set_s(v);
  return *this;
}
OnnxNode& OnnxNode::attr(const std::string& name, const std::vector<std::string>& v) {
  ::onnx::AttributeProto* a = new_attr(n_, name, ::onnx::AttributeProto::STRINGS);
  for (const std::string& x : v) a->add_strings(x);
  return *this;
}
OnnxNode& OnnxNode::attr(const std::string& name, const Tensor& v) {
  to_proto(v, *new_attr(n_, name, ::onnx::AttributeProto::TENSOR)->mutable_t());
  return *this;
}
::onnx::GraphProto& OnnxNode::graph_attr(const std::string& name) {
  return *new_attr(n_, name, ::onnx::AttributeProto::GRAPH)->mutable_g();
}

const Tensor* ExportContext::constant_input(size_t i) const { return writer_.constant(inputs_.at(i)); }

bool ExportContext::output_used(size_t i) const {
  const graph::Value* v = node.output(i);
  return !v->uses().empty();
}

OnnxNode ExportContext::add(const std::string& op_type, const std::vector<std::string>& inputs,
                            const std::vector<std::string>& outputs) {
  ::onnx::NodeProto* n = graph_.add_node();
  n->set_op_type(op_type);
  n->set_name(str(op_type, "_", writer_.next_id()));
  for (const std::string& i : inputs) n->add_input(i);
  for (const std::string& o : outputs) n->add_output(o);
  return OnnxNode(n);
}

std::string ExportContext::fresh(const std::string& hint) { return str("_", hint, "_", writer_.next_id()); }

std::string ExportContext::constant(const Tensor& t, const std::string& hint) {
  const std::string name = fresh(hint);
  ::onnx::TensorProto* init = graph_.add_initializer();
  to_proto(t, *init);
  init->set_name(name);
  return name;
}

std::string ExportContext::ints(const std::vector<int64_t>& values, const std::string& hint) {
  return constant(tensor(values, Shape{int64_t(values.size())}), hint);
}

std::vector<int64_t> ExportContext::static_dims(const graph::SymShape& shape, const char* what) const {
  if (!shape.is_static()) fail(str(what, " has symbolic dims (", shape, "); ONNX needs them as sizes here"));
  return shape.to_shape().vec();
}

void ExportContext::fail(const std::string& message) const {
  throw GraphError("onnx.save", str(node.op_name(), " (", node.loc.file, ":", node.loc.line, "): ", message),
                   SourceLoc::current());
}

void register_exporter(std::string op_name, ExportFn fn) { exporters()[std::move(op_name)] = std::move(fn); }

const ExportFn* find_exporter(std::string_view op_name) {
  auto it = exporters().find(op_name);
  return it == exporters().end() ? nullptr : &it->second;
}

// An attribute of a baton op as the ai.baton domain writes it: a dtype as its ONNX element
// type, a float as a double scalar tensor (ONNX's float attributes have 32 bits), a
// symbolic dim as its text (kBatonDomain).
void set_baton_attr(OnnxNode& n, const std::string& name, const ops::AttrValue& value) {
  std::visit([&](const auto& v) {
    using V = std::decay_t<decltype(v)>;
    if constexpr (std::is_same_v<V, DType>) {
      n.attr(name, int64_t(to_onnx_type(v)));
    } else if constexpr (std::is_same_v<V, double>) {
      n.attr(name, scalar_tensor<double>(v));
    } else if constexpr (std::is_same_v<V, int64_t>) {
      if (sym::is_symbol(v)) n.attr(name, sym::to_string(v));
      else n.attr(name, v);
    } else if constexpr (std::is_same_v<V, std::vector<int64_t>>) {
      if (std::none_of(v.begin(), v.end(), sym::is_symbol)) {
        n.attr(name, v);
        return;
      }
      std::vector<std::string> texts;
      for (int64_t d : v) texts.push_back(sym::to_string(d));
      n.attr(name, texts);
    } else {
      n.attr(name, v);
    }
  }, value);
}

// A node of an op with no ONNX form, in the domain "ai.baton": the op's name and its
// attributes.
void export_baton_op(ExportContext& c, const std::vector<std::string>& ins, const std::vector<std::string>& outs) {
  if (!c.node.op()) c.fail("is not a registered op");
  OnnxNode n = c.add(c.node.op_name(), ins, outs);
  n.proto()->set_domain(kBatonDomain);
  for (const auto& [name, value] : c.attrs().items()) set_baton_attr(n, name, value);
}

bool export_in_baton_domain(ExportContext& c) {
  if (!c.writer().baton_ops() || !c.node.subgraphs.empty()) return false;
  std::vector<std::string> ins, outs;
  for (size_t i = 0; i < c.num_inputs(); ++i) ins.push_back(c.input(i));
  for (size_t i = 0; i < c.node.num_outputs(); ++i) outs.push_back(c.output(i));
  export_baton_op(c, ins, outs);
  return true;
}

namespace {

// One node, by the exporter registered for its op, else directly as the ONNX op its OpDef
// names, else (optimized saves) in the ai.baton domain.
void export_node(ExportContext& c, const std::vector<std::string>& ins, const std::vector<std::string>& outs,
                 bool baton_ops) {
  const graph::Node& node = c.node;
  if (const ExportFn* fn = find_exporter(node.op_name())) {
    (*fn)(c);
  } else if (node.op() && !node.op()->onnx_name.empty() && node.attrs.items().empty() && node.num_outputs() == 1 &&
             node.subgraphs.empty()) {
    c.add(node.op()->onnx_name, ins, outs);
  } else if (baton_ops && node.subgraphs.empty()) {
    export_baton_op(c, ins, outs);
  } else {
    c.fail("has no ONNX form yet (an optimized save writes it in the ai.baton domain)");
  }
}

// True when a node of g or of its subgraphs is of `domain`.
bool uses_domain(const ::onnx::GraphProto& g, std::string_view domain) {
  for (const ::onnx::NodeProto& n : g.node()) {
    if (n.domain() == domain) return true;
    for (const ::onnx::AttributeProto& a : n.attribute())
      if (a.has_g() && uses_domain(a.g(), domain)) return true;
  }
  return false;
}

}  // namespace

void GraphWriter::write_nodes(const graph::Graph& g, ::onnx::GraphProto& out,
                              std::unordered_map<const graph::Value*, std::string>& names, const std::string& prefix) {
  const graph::ValueNames text_names(g);
  for (const std::unique_ptr<graph::Node>& node : g.nodes()) {
    std::vector<std::string> ins, outs;
    for (const graph::Value* v : node->inputs()) ins.push_back(names.at(v));
    for (const graph::Value* v : node->outputs())
      outs.push_back(names.emplace(v, prefix + text_names(v).substr(1)).first->second);  // without the '%'
    ExportContext c(*node, out, ins, outs, *this);
    export_node(c, ins, outs, baton_ops_);
  }
}

std::vector<std::string> ExportContext::write_subgraph(const graph::Graph& g, const std::vector<std::string>& inputs) {
  if (inputs.size() != g.inputs().size())
    fail(str("subgraph ", g.name(), " takes ", g.inputs().size(), " inputs, the node gives it ", inputs.size()));
  std::unordered_map<const graph::Value*, std::string> names;
  for (size_t i = 0; i < inputs.size(); ++i) names[g.input(i)] = inputs[i];
  writer_.write_nodes(g, graph_, names, fresh(g.name()) + ".");
  std::vector<std::string> out;
  for (const graph::Value* v : g.outputs()) out.push_back(names.at(v));
  return out;
}

void add_graph_outputs(::onnx::GraphProto& g, const std::vector<std::string>& names,
                       const std::vector<graph::TensorType>& types, GraphWriter& writer) {
  std::set<std::string> made, seen;
  for (const ::onnx::NodeProto& n : g.node()) made.insert(n.output().begin(), n.output().end());
  for (size_t i = 0; i < names.size(); ++i) {
    std::string name = names[i];
    if (!made.count(name) || !seen.insert(name).second) {  // ONNX outputs must be distinct node outputs
      const int id = writer.next_id();
      name = str("_output_", id);
      ::onnx::NodeProto* n = g.add_node();
      n->set_op_type("Identity");
      n->set_name(str("Identity_", id));
      n->add_input(names[i]);
      n->add_output(name);
      seen.insert(name);
    }
    ::onnx::ValueInfoProto* info = g.add_output();
    info->set_name(name);
    set_value_type(*info, types.at(i));
  }
}

// The model of IR graph g. `initializer_of` gives the tensor of a graph input that is a
// constant (nullptr: a placeholder, written as a graph input); `baton_ops` lets ops with
// no ONNX form go to the "ai.baton" domain.
::onnx::ModelProto to_model(const graph::Graph& g, const std::function<const Tensor*(const graph::Value*)>& initializer_of,
                            bool baton_ops, SourceLoc loc) {
  if (g.outputs().empty())
    throw GraphError("onnx.save", "the graph declares no outputs; call Graph::set_outputs first", loc);
  ::onnx::ModelProto m;
  m.set_ir_version(8);
  m.set_producer_name("baton");
  m.set_producer_version("0.1");
  ::onnx::OperatorSetIdProto* opset = m.add_opset_import();
  opset->set_domain("");
  opset->set_version(kExportOpset);
  ::onnx::GraphProto& out = *m.mutable_graph();
  out.set_name(g.name());
  const graph::ValueNames text_names(g);
  // Unnamed graph outputs are called output (output_0, output_1... for several) rather than
  // by their number in the text form.
  std::set<std::string> taken;
  for (const graph::Value* v : g.inputs()) taken.insert(v->name());
  for (const auto& n : g.nodes())
    for (const graph::Value* v : n->outputs()) taken.insert(v->name());
  std::unordered_map<const graph::Value*, std::string> names;
  for (size_t i = 0; i < g.outputs().size(); ++i) {
    const graph::Value* v = g.outputs()[i];
    const std::string name = g.outputs().size() == 1 ? "output" : str("output_", i);
    if (v->name().empty() && v->producer() && !names.count(v) && taken.insert(name).second) names[v] = name;
  }
  GraphWriter writer(baton_ops);
  for (graph::Value* in : g.inputs()) {
    // An optimized graph keeps the inputs its folds replaced (a convolution's weight before
    // batch norm folded into it): nothing reads them.
    if (baton_ops && in->uses().empty() && !g.is_output(in)) continue;
    const std::string name = names[in] = text_names(in).substr(1);
    if (const Tensor* t = initializer_of(in)) {
      ::onnx::TensorProto* init = out.add_initializer();
      to_proto(*t, *init);
      init->set_name(name);
      writer.add_constant(name, *t);
    } else {
      ::onnx::ValueInfoProto* info = out.add_input();
      info->set_name(name);
      set_value_type(*info, in->type);
      writer.add_shape_source(name, in->type.shape.raw());
    }
  }
  writer.write_nodes(g, out, names, "");
  if (uses_domain(out, kBatonDomain)) {
    ::onnx::OperatorSetIdProto* baton = m.add_opset_import();
    baton->set_domain(kBatonDomain);
    baton->set_version(1);
  }
  if (uses_domain(out, kMlDomain)) {  // LabelEncoder's form with keys_* and values_*
    ::onnx::OperatorSetIdProto* ml = m.add_opset_import();
    ml->set_domain(kMlDomain);
    ml->set_version(2);
  }
  std::vector<std::string> output_names;
  std::vector<graph::TensorType> output_types;
  for (const graph::Value* v : g.outputs()) {
    output_names.push_back(names.at(v));
    output_types.push_back(v->type);
  }
  add_graph_outputs(out, output_names, output_types, writer);
  return m;
}

}  // namespace baton::onnx::detail

namespace baton::onnx {

namespace detail {

// The tensor each input of a plan's graph holds: a folded constant, or the original
// input's binding when that is a constant or a variable (nullptr for a placeholder).
std::unordered_map<const graph::Value*, const Tensor*> plan_initializers(const runtime::Plan& plan, const trace::Builder& b) {
  std::unordered_map<int, const Tensor*> by_slot;
  for (const auto& [tensor, slot] : plan.constants) by_slot[slot] = &tensor;
  for (const auto& [original, slot] : plan.inputs)
    if (b.kind(original) != trace::InputKind::Placeholder) by_slot[slot] = &b.binding(original).tensor;
  std::unordered_map<const graph::Value*, const Tensor*> out;
  auto note = [&](const graph::Value* v, int slot) {
    if (auto it = by_slot.find(slot); it != by_slot.end() && !v->producer()) out[v] = it->second;
  };
  for (const runtime::Step& step : plan.steps)
    for (size_t k = 0; k < step.inputs.size(); ++k) note(step.node->input(k), step.inputs[k]);
  for (size_t k = 0; k < plan.fetches.size(); ++k) note(plan.graph->outputs()[k], plan.fetches[k]);
  return out;
}

}  // namespace detail

std::string save_bytes(const Graph& graph, SaveOptions options, SourceLoc loc) {
  const trace::Builder& b = GraphAccess::builder(graph);
  if (!options.optimized) {
    auto initializer = [&](const graph::Value* v) {
      return b.kind(v) == trace::InputKind::Placeholder ? nullptr : &b.binding(v).tensor;
    };
    return detail::to_model(b.ir(), initializer, false, loc).SerializeAsString();
  }
  // The file holds the captured tensors' values as they are now, so the passes may fold
  // them (frozen): batch norm into the convolutions, constant subexpressions.
  const runtime::Plan plan = runtime::make_plan(b.ir(), b.ir().outputs(), {},
                                                {.level = runtime::to_pass_level(options.level),
                                                 .fixed_value = runtime::fixed_constants(b, /*freeze=*/true)});
  const auto initializers = detail::plan_initializers(plan, b);
  auto initializer = [&](const graph::Value* v) -> const Tensor* {
    auto it = initializers.find(v);
    return it == initializers.end() ? nullptr : it->second;
  };
  return detail::to_model(*plan.graph, initializer, true, loc).SerializeAsString();
}

void save(const Graph& graph, const std::string& path, SaveOptions options, SourceLoc loc) {
  std::string bytes = save_bytes(graph, options, loc);  // everything is checked before the file is touched
  baton::detail::write_file_atomically(path, bytes, "onnx.save");
}

}  // namespace baton::onnx
