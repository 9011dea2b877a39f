#include "io/onnx/importer.h"

#include <algorithm>
#include <map>
#include <set>

#include "baton/ops.h"
#include "dispatch/registry.h"
#include "core/tensor_impl.h"
#include "trace/builder.h"

namespace baton::onnx::detail {
namespace {

using ::onnx::AttributeProto;

std::map<std::string, ImportFn, std::less<>>& importers() {
  static std::map<std::string, ImportFn, std::less<>> table;
  return table;
}

// ONNX ops that map one to one onto a registered op with no attributes (Add -> add,
// Relu -> relu): the OpDef's onnx name says so (DESIGN.md idea 1).
const ops::OpDef* direct_op(std::string_view op_type, const ::onnx::NodeProto& node) {
  if (node.attribute_size() > 0) return nullptr;
  for (const ops::OpDef* op : ops::all_ops()) {
    if (op->onnx_name != op_type || !op->accepts_input_count(size_t(node.input_size()))) continue;
    if (op->num_outputs != 1 || op->num_subgraphs != 0) continue;
    if (std::any_of(op->attr_specs.begin(), op->attr_specs.end(),
                    [](const ops::OpDef::AttrSpec& a) { return a.presence == ops::OpDef::required; }))
      continue;
    return op;
  }
  return nullptr;
}

template <class E>
void rethrow_if(const Error& e, const std::string& message, SourceLoc loc) {
  if (dynamic_cast<const E*>(&e)) throw E("onnx", message, loc);
}

// Rethrows e with the node named, keeping its kind (ShapeError stays a ShapeError).
[[noreturn]] void rethrow_in_node(const Error& e, const std::string& node, SourceLoc loc) {
  const std::string message = str(node, ": ", e.what());
  rethrow_if<ShapeError>(e, message, loc);
  rethrow_if<DTypeError>(e, message, loc);
  rethrow_if<ValueError>(e, message, loc);
  rethrow_if<IndexError>(e, message, loc);
  rethrow_if<IOError>(e, message, loc);
  rethrow_if<RuntimeError>(e, message, loc);
  rethrow_if<OutOfMemoryError>(e, message, loc);
  throw GraphError("onnx", message, loc);
}

// A symbol name for an ONNX dim_param ("batch_size", "N", "unk__3").
std::string symbol_name(const std::string& dim_param) {
  std::string s = value_name_for(dim_param);
  std::replace(s.begin(), s.end(), '.', '_');
  if (!std::isalpha(static_cast<unsigned char>(s[0]))) s = "d" + s;
  return s;
}

}  // namespace

int64_t parse_dim(const NodeContext& c, const std::string& text) {
  const sym::Factors f = sym::factors(sym::parse(text));
  int64_t d = f.coefficient;
  for (int64_t s : f.symbols) d = sym::mul(d, c.importer.dim_named(sym::to_string(s)));
  return d;
}

namespace {

// A node of the domain "ai.baton": the registered op of that name, its attributes read as
// the OpDef declares them (a dtype as an ONNX element type).
std::vector<Tensor> import_baton_op(const NodeContext& c) {
  const ops::OpDef* op = ops::find_op(c.node.op_type());
  if (!op) c.fail("baton has no op of this name");
  // What an optimized export writes: pure computations, never updates or control flow.
  if (op->num_subgraphs != 0 || !op->mutated_inputs.empty() || op->num_outputs < 0)
    c.fail("this op does not come from an optimized export (it updates state or runs subgraphs)");
  ops::Attrs attrs;
  for (const AttributeProto& a : c.node.attribute()) {
    const ops::OpDef::AttrSpec* spec = op->attr_spec(a.name());
    if (!spec) c.fail(str("the op has no attribute '", a.name(), "'"));
    switch (spec->kind) {
      case ops::OpDef::AttrKind::Int:  // a symbolic dim is its text (exporter.h)
        attrs.set(a.name(), a.type() == AttributeProto::STRING ? parse_dim(c, a.s()) : int64_t(a.i()));
        break;
      case ops::OpDef::AttrKind::Float:  // written as a double scalar tensor, read either way
        attrs.set(a.name(), a.has_t() ? c.attr_tensor(a.name()).to(DType::f64).item<double>() : double(a.f()));
        break;
      case ops::OpDef::AttrKind::Ints: {
        std::vector<int64_t> values(a.ints().begin(), a.ints().end());
        for (const std::string& text : a.strings()) values.push_back(parse_dim(c, text));
        attrs.set(a.name(), values);
        break;
      }
      case ops::OpDef::AttrKind::String: attrs.set(a.name(), a.s()); break;
      case ops::OpDef::AttrKind::DType: {
        std::optional<DType> t = to_dtype(int32_t(a.i()));
        if (!t) c.fail(str("attribute '", a.name(), "' names ", onnx_type_name(int32_t(a.i())), ", not a baton dtype"));
        attrs.set(a.name(), *t);
        break;
      }
    }
  }
  if (!op->accepts_input_count(c.num_inputs())) c.fail(str("takes a different number of inputs than ", c.num_inputs()));
  for (size_t i = 0; i < c.num_inputs(); ++i)
    if (!c.has_input(i)) c.fail(str("input ", i, " is missing"));
  return ops::call_many(*op, c.inputs(), attrs, c.importer.loc());
}

}  // namespace

// --- NodeContext -----------------------------------------------------------------------

std::string NodeContext::describe() const {
  return str("node '", node.name().empty() ? "(unnamed)" : node.name(), "' (", node.op_type(), ")");
}

void NodeContext::fail(const std::string& message) const {
  throw GraphError("onnx", str(importer.model_name(), ": ", describe(), ": ", message), importer.loc());
}

const Tensor& NodeContext::input(size_t i) const {
  if (const Composite* v = composite_input(i))
    fail(str("input ", i, " ('", node.input(int(i)), "') is ", v->none ? "an empty optional" : "a sequence",
             "; this op takes a tensor"));
  if (!has_input(i)) fail(str("needs input ", i, ", which the node leaves out"));
  return inputs_[i];
}

const Composite* NodeContext::composite_input(size_t i) const {
  if (i >= size_t(node.input_size()) || node.input(int(i)).empty()) return nullptr;
  return importer.composite(node.input(int(i)));
}

const std::vector<Tensor>& NodeContext::sequence_input(size_t i) const {
  const Composite* v = composite_input(i);
  if (!v || v->none)
    fail(str("input ", i, " must be a sequence, not ", v ? "an empty optional" : has_input(i) ? "a tensor" : "absent"));
  return v->items;
}

void NodeContext::set_composite_output(size_t i, Composite value) {
  if (composite_outputs_.size() <= i) composite_outputs_.resize(i + 1);
  composite_outputs_[i] = std::move(value);
}

const std::optional<Composite>& NodeContext::composite_output(size_t i) const {
  static const std::optional<Composite> kNone;
  return i < composite_outputs_.size() ? composite_outputs_[i] : kNone;
}

Value NodeContext::value_input(size_t i) const {
  if (const Composite* v = composite_input(i)) return v->none ? Value() : Value::sequence(v->items);
  return has_input(i) ? Value(inputs_[i]) : Value();
}

Outputs NodeContext::outputs_of(const std::vector<Value>& values) {
  Outputs out;
  for (size_t i = 0; i < values.size(); ++i) {
    const Value& v = values[i];
    if (v.is_tensor()) {
      out.push_back(v.tensor());
      continue;
    }
    set_composite_output(i, v.kind() == Value::Kind::none ? Composite{true, {}} : Composite{false, v.items()});
    out.emplace_back();
  }
  return out;
}

DType NodeContext::onnx_dtype(size_t i) const {
  const Tensor& t = input(i);
  return importer.storage_type(node.input(int(i))).value_or(t.dtype());
}

const Tensor& NodeContext::known_input(size_t i) const {
  const Tensor& t = input(i);
  if (!t.is_symbolic()) return t;
  importer.check_needs_input_values(t);
  fail(str("input ", i, " ('", node.input(int(i)), "') is computed when the model runs; baton needs it when the "
           "model loads (a constant, an initializer or a shape of a static tensor)"));
}

bool NodeContext::computed_from_input_values(size_t i) const {
  if (!has_input(i) || composite_input(i) || importer.in_subgraph()) return false;
  const Tensor& t = input(i);
  return t.is_symbolic() && !importer.known_dims(t) && !importer.model_inputs_behind(t).empty();
}

bool NodeContext::list_computed_from_input_values(size_t i) const {
  if (!computed_from_input_values(i)) return false;
  const Shape& s = input(i).shape();
  return s.size() == 1 && !sym::is_symbol(s[0]) && s[0] > 0;
}

std::vector<int64_t> NodeContext::ints_input(size_t i) const {
  if (const std::vector<int64_t>* dims = importer.known_dims(input(i))) return *dims;
  if (input(i).shape() == Shape{0} && is_integral(input(i).dtype())) return {};  // no values to read
  const Tensor& t = known_input(i);
  if (t.dtype() != DType::i64 && t.dtype() != DType::i32)
    fail(str("input ", i, " must hold integers, not ", t.dtype()));
  if (t.dim() > 1) fail(str("input ", i, " must be a list of integers, not a tensor of shape ", t.shape()));
  trace::NoTrace no_trace;  // inside a subgraph's trace the cast would record a node
  return cast(t, DType::i64).contiguous().to_vector<int64_t>();
}

double NodeContext::scalar_input(size_t i) const {
  const Tensor& t = known_input(i);
  if (t.numel() != 1) fail(str("input ", i, " must hold one value, not ", t.shape()));
  trace::NoTrace no_trace;
  return cast(t, DType::f64).contiguous().to_vector<double>()[0];
}

int64_t NodeContext::static_dim(const Tensor& x, int64_t d, const std::string& what) const {
  const int64_t n = x.shape()[size_t(d)];
  if (sym::is_symbol(n)) fail(str(what, ": dim ", d, " of ", x.shape(), " must be static"));
  return n;
}

const AttributeProto* NodeContext::find_attr(std::string_view name) const {
  for (const AttributeProto& a : node.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

const AttributeProto& NodeContext::attr(std::string_view name, AttributeProto::AttributeType type) const {
  const AttributeProto* a = find_attr(name);
  if (!a) fail(str("needs attribute '", name, "'"));
  // Old exporters leave `type` unset; then trust the field that is present.
  if (a->type() != AttributeProto::UNDEFINED && a->type() != type)
    fail(str("attribute '", name, "' is ", AttributeProto::AttributeType_Name(a->type()), ", expected ",
             AttributeProto::AttributeType_Name(type)));
  return *a;
}

int64_t NodeContext::attr_int(std::string_view name) const { return attr(name, AttributeProto::INT).i(); }
int64_t NodeContext::attr_int(std::string_view name, int64_t fallback) const {
  return has_attr(name) ? attr_int(name) : fallback;
}
double NodeContext::attr_float(std::string_view name, double fallback) const {
  return has_attr(name) ? double(attr(name, AttributeProto::FLOAT).f()) : fallback;
}
std::string NodeContext::attr_string(std::string_view name, std::string fallback) const {
  return has_attr(name) ? attr(name, AttributeProto::STRING).s() : fallback;
}
std::vector<int64_t> NodeContext::attr_ints(std::string_view name, std::vector<int64_t> fallback) const {
  if (!has_attr(name)) return fallback;
  const AttributeProto& a = attr(name, AttributeProto::INTS);
  return {a.ints().begin(), a.ints().end()};
}
std::vector<double> NodeContext::attr_floats(std::string_view name) const {
  const AttributeProto& a = attr(name, AttributeProto::FLOATS);
  return {a.floats().begin(), a.floats().end()};
}
std::vector<std::string> NodeContext::attr_strings(std::string_view name) const {
  if (!has_attr(name)) return {};
  const AttributeProto& a = attr(name, AttributeProto::STRINGS);
  return {a.strings().begin(), a.strings().end()};
}
Tensor NodeContext::attr_tensor(std::string_view name) const {
  return to_tensor(attr(name, AttributeProto::TENSOR).t(), str(describe(), " attribute '", name, "'"));
}
const ::onnx::GraphProto& NodeContext::attr_graph(std::string_view name) const {
  return attr(name, AttributeProto::GRAPH).g();
}

int64_t normalize_axis(const NodeContext& c, int64_t axis, int64_t rank) {
  if (axis < -std::max<int64_t>(rank, 1) || axis >= std::max<int64_t>(rank, 1))
    c.fail(str("axis ", axis, " is out of range for rank ", rank));
  return axis < 0 ? axis + rank : axis;
}

int64_t axis_attr(const NodeContext& c, std::string_view name, int64_t fallback, int64_t rank) {
  return normalize_axis(c, c.attr_int(name, fallback), rank);
}

Tensor per_channel(const Tensor& v, int64_t rank) {
  Shape s(size_t(rank - 1), 1);
  s[0] = v.shape()[0];
  return reshape(v, s);
}

Shape flattened_at(const Shape& x, int64_t axis) {
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < int64_t(x.size()); ++d) {
    int64_t& part = d < axis ? outer : inner;
    part = sym::mul(part, x[size_t(d)]);
  }
  return Shape{outer, inner};
}

// --- registry --------------------------------------------------------------------------

void register_importer(std::string op_type, ImportFn fn) { importers()[std::move(op_type)] = std::move(fn); }

const ImportFn* find_importer(std::string_view op_type) {
  auto it = importers().find(op_type);
  return it == importers().end() ? nullptr : &it->second;
}

std::vector<std::string> importer_names() {
  std::vector<std::string> names;
  for (auto& [name, fn] : importers()) names.push_back(name);
  return names;
}

const ::onnx::TypeProto& element_type(const ::onnx::TypeProto& type, ValueInfo& info) {
  const ::onnx::TypeProto* t = &type;
  if (t->has_optional_type()) {
    info.optional = true;
    t = &t->optional_type().elem_type();
  }
  if (t->has_sequence_type()) {
    info.sequence = true;
    t = &t->sequence_type().elem_type();
  }
  return *t;
}

std::string value_name_for(std::string_view onnx_name) {
  std::string s;
  for (char ch : onnx_name)
    s += (std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '.') ? ch : '_';
  if (s.empty() || std::all_of(s.begin(), s.end(), [](char ch) { return std::isdigit(static_cast<unsigned char>(ch)); }))
    s = "v" + s;
  return s;
}

// --- Importer --------------------------------------------------------------------------

void Importer::bind(const std::string& name, const Tensor& t, const std::string& what,
                    std::optional<DType> storage) {
  if (name.empty()) return;
  const bool narrow = held_widened(t.dtype());
  if (narrow) storage = t.dtype();
  check_fits_compute_dtype(t, str(model_name_, ": ", what, " '", name, "'"), loc_);
  Scope& scope = scopes_.back();
  const bool inserted = !scope.composites.count(name) &&
                        scope.tensors.emplace(name, narrow ? cast(t, compute_dtype(t.dtype())) : t).second;
  if (!inserted) throw GraphError("onnx", str(model_name_, ": ", what, " defines '", name, "' a second time"), loc_);
  if (storage) storage_types_[name] = *storage;
}

void Importer::bind_composite(const std::string& name, Composite value, const std::string& what) {
  if (name.empty()) return;
  Scope& scope = scopes_.back();
  if (scope.tensors.count(name) || !scope.composites.emplace(name, std::move(value)).second)
    throw GraphError("onnx", str(model_name_, ": ", what, " defines '", name, "' a second time"), loc_);
}

const Composite* Importer::composite(const std::string& name) const {
  for (auto scope = scopes_.rbegin(); scope != scopes_.rend(); ++scope)
    if (auto it = scope->composites.find(name); it != scope->composites.end()) return &it->second;
  return nullptr;
}

std::optional<DType> Importer::storage_type(const std::string& name) const {
  auto it = storage_types_.find(name);
  return it == storage_types_.end() ? std::nullopt : std::optional<DType>(it->second);
}

void Importer::declare_types(const ::onnx::GraphProto& graph) {
  auto declare = [&](const ::onnx::ValueInfoProto& v) {
    if (v.type().has_tensor_type()) declared_types_[v.name()] = v.type().tensor_type().elem_type();
  };
  for (const ::onnx::ValueInfoProto& v : graph.input()) declare(v);
  for (const ::onnx::ValueInfoProto& v : graph.value_info()) declare(v);
  for (const ::onnx::ValueInfoProto& v : graph.output()) declare(v);
}

// Output i of a node as it is bound: with the storage dtype it has in the model when baton
// computed it in a wider dtype (implied by the op's inputs, or else declared by the model),
// rounded back into that dtype unless the op only moves values (250 + 10 in u8 is 4).
std::pair<Tensor, std::optional<DType>> Importer::output_value(const NodeContext& c, size_t i, Tensor t) const {
  if (held_widened(t.dtype())) return {t, std::nullopt};  // bind widens it
  std::optional<DType> storage = implied_storage(c, i, t);
  if (auto d = declared_types_.find(c.node.output(int(i))); !storage && d != declared_types_.end()) {
    std::optional<DType> declared = to_dtype(d->second);
    if (declared && held_widened(*declared) && compute_dtype(*declared) == t.dtype()) storage = declared;
  }
  if (!storage) return {t, std::nullopt};
  if (keeps_values(c.node.op_type())) return {t, storage};
  return {cast(t, *storage), std::nullopt};
}

const Tensor* Importer::lookup(const std::string& name) const {
  for (auto scope = scopes_.rbegin(); scope != scopes_.rend(); ++scope)
    if (auto it = scope->tensors.find(name); it != scope->tensors.end()) return &it->second;
  return nullptr;
}

void Importer::import_initializers(const ::onnx::GraphProto& graph) {
  for (const ::onnx::TensorProto& init : graph.initializer())
    bind(init.name(), to_tensor(init, str(model_name_, ": initializer '", init.name(), "'")), "an initializer");
}

void Importer::import_nodes(const ::onnx::GraphProto& graph) {
  declare_types(graph);
  for (const ::onnx::NodeProto& node : graph.node()) {
    const int index = node_counter_++;
    // Unrolled loops import their bodies again per iteration: a hostile model of nested
    // loops would never finish loading.
    if (node_counter_ > kMaxImportedNodes)
      throw GraphError("onnx", str(model_name_, ": the model expands to more than ", kMaxImportedNodes,
                                   " nodes (loops unrolled while loading)"), loc_);
    std::vector<Tensor> inputs;
    for (const std::string& name : node.input()) {
      if (name.empty()) {
        inputs.emplace_back();
        continue;
      }
      const Tensor* t = lookup(name);
      if (!t && composite(name)) {  // a sequence or an empty optional: composite_input reads it
        inputs.emplace_back();
        continue;
      }
      if (!t)
        throw GraphError("onnx", str(model_name_, ": node '", node.name(), "' (", node.op_type(), ") reads '", name,
                                     "', which no earlier node, input or initializer defines"), loc_);
      inputs.push_back(*t);
    }
    NodeContext c(node, opset_, std::move(inputs), *this);
    std::vector<Tensor> outputs;
    try {
      // A node reading symbolic sizes records into their graph even what it computes from
      // constants (an Expand of a constant row to [batch, 3]).
      std::optional<trace::ActiveTrace> in_graph;
      if (trace::Builder* b = graph_of_symbolic_dims(c)) in_graph.emplace(*b);
      // Nodes built here show the model file and the node's number as their location.
      const graph::Location location(model_name_, index + 1);
      trace::LocationScope where(location);
      if (node.domain() == "ai.baton") {  // an optimized export's fused step (onnx::SaveOptions)
        outputs = import_baton_op(c);
      } else if (node.domain() == "ai.onnx.ml") {  // registered as "ai.onnx.ml.<op>"
        const ImportFn* fn = find_importer("ai.onnx.ml." + node.op_type());
        if (!fn) c.fail(str("baton has no importer for ai.onnx.ml's ", node.op_type()));
        outputs = (*fn)(c);
      } else if (!node.domain().empty() && node.domain() != "ai.onnx") {
        c.fail(str("ops of domain '", node.domain(), "' are not supported"));
      }
      if (!outputs.empty()) {
      } else if (const ImportFn* fn = find_importer(node.op_type())) {
        outputs = (*fn)(c);
      } else if (const ops::OpDef* op = direct_op(node.op_type(), node)) {
        for (size_t i = 0; i < c.num_inputs(); ++i)
          if (c.composite_input(i)) c.input(i);  // fails: a sequence where the op takes a tensor
        outputs.emplace_back();
        ops::call(*op, c.inputs(), {}, {&outputs[0], 1}, loc_);
      } else {
        c.fail("baton has no importer for this op");
      }
    } catch (const Error& e) {
      if (e.op() == "onnx") throw;
      rethrow_in_node(e, str(model_name_, ": ", c.describe()), loc_);
    }
    for (int i = 0; i < node.output_size(); ++i) {
      if (node.output(i).empty()) continue;
      if (const std::optional<Composite>& v = c.composite_output(size_t(i))) {
        bind_composite(node.output(i), *v, c.describe());
        continue;
      }
      if (size_t(i) >= outputs.size() || !outputs[size_t(i)].defined())
        c.fail(str("output ", i, " ('", node.output(i), "') is not produced by baton's importer"));
      auto [value, storage] = output_value(c, size_t(i), outputs[size_t(i)]);
      if (i == 0 && value.is_symbolic() && (value.dtype() == DType::i64 || value.dtype() == DType::i32))
        if (std::optional<std::vector<int64_t>> dims = known_dims_after(c)) note_known_dims(value, std::move(*dims));
      bind(node.output(i), value, c.describe(), storage);
    }
  }
}

trace::Builder* Importer::graph_of_symbolic_dims(const NodeContext& c) const {
  if (trace::active()) return nullptr;  // a subgraph's trace records everything already
  for (size_t i = 0; i < c.num_inputs(); ++i) {
    const std::vector<int64_t>* dims = c.has_input(i) && !c.composite_input(i) ? known_dims(c.input(i)) : nullptr;
    if (dims && std::any_of(dims->begin(), dims->end(), sym::is_symbol)) return trace::builder_of(c.input(i));
  }
  return nullptr;
}

int64_t Importer::dim_named(const std::string& dim_param) const {
  const std::string name = symbol_name(dim_param);
  auto it = given_dims_.find(name);
  return it != given_dims_.end() ? it->second : sym::named(name);
}

int64_t Importer::declared_dim(const std::string& dim_param) const {
  if (dim_param.find('*') != std::string::npos) {
    try {
      const int64_t product = sym::parse(dim_param);
      if (sym::to_string(product) == dim_param) {  // baton's own text, not a name with a '*'
        const sym::Factors f = sym::factors(product);
        int64_t d = f.coefficient;
        for (int64_t s : f.symbols) d = sym::mul(d, dim_named(sym::to_string(s)));
        return d;
      }
    } catch (const Error&) {  // a name that only looks like a product
    }
  }
  return dim_named(dim_param);
}

void Importer::note_known_dims(const Tensor& t, std::vector<int64_t> values) {
  known_dims_[t.impl()] = {t, std::move(values)};
}

const std::vector<int64_t>* Importer::known_dims(const Tensor& t) const {
  auto it = t.defined() ? known_dims_.find(t.impl()) : known_dims_.end();
  return it == known_dims_.end() ? nullptr : &it->second.second;
}

Tensor Importer::graph_output(const std::string& name, const std::string& graph_name) const {
  const Tensor* t = lookup(name);
  if (!t)
    throw GraphError("onnx", str(model_name_, ": graph '", graph_name, "' returns '", name, "', which nothing defines"),
                     loc_);
  return *t;
}

void Importer::check_needs_input_values(const Tensor& t) const {
  std::set<std::string> needed = model_inputs_behind(t);
  if (!needed.empty()) throw NeedsInputValues{{needed.begin(), needed.end()}};
}

std::set<std::string> Importer::model_inputs_behind(const Tensor& t) const {
  std::set<std::string> needed;
  std::vector<const graph::Value*> stack{t.impl()->symbolic->value};
  std::set<const graph::Value*> seen;
  while (!stack.empty()) {
    const graph::Value* v = stack.back();
    stack.pop_back();
    if (!seen.insert(v).second) continue;
    if (!v->producer()) {
      if (auto it = placeholder_names_.find(v); it != placeholder_names_.end()) needed.insert(it->second);
      continue;
    }
    for (const graph::Value* in : v->producer()->inputs()) stack.push_back(in);
  }
  return needed;
}

// The element type and dims of an input as declared: of the tensor, of a sequence's
// items, or of what an optional holds. Sets info's dtype and kind flags.
void Importer::describe_input(const ::onnx::ValueInfoProto& in, ValueInfo& info, std::vector<SymDim>& dims) {
  const std::string what = str(model_name_, ": input '", in.name(), "'");
  const ::onnx::TypeProto* type = &element_type(in.type(), info);
  if (!type->has_tensor_type())
    throw GraphError("onnx", str(what, ": only tensors, sequences of tensors and optionals are supported (not maps "
                                       "or nested sequences)"), loc_);
  const ::onnx::TypeProto::Tensor& tensor = type->tensor_type();
  std::optional<DType> dtype = to_dtype(tensor.elem_type());
  if (!dtype) throw DTypeError("onnx", str(what, ": baton has no ", onnx_type_name(tensor.elem_type()), " tensors"), loc_);
  info.dtype = *dtype;
  info.any_shape = (info.sequence || info.optional) && !tensor.has_shape();
  for (const ::onnx::TensorShapeProto::Dimension& d : tensor.shape().dim()) {
    if (d.has_dim_value() && d.dim_value() >= 0) dims.emplace_back(d.dim_value());
    else if (d.has_dim_param() && !d.dim_param().empty()) dims.emplace_back(declared_dim(d.dim_param()));
    else dims.emplace_back(-1);
  }
  for (const auto& [name, shape] : shapes_)
    if (name == in.name()) {
      if (shape.size() != dims.size())
        throw ShapeError("onnx", str(what, ": the model declares rank ", dims.size(), ", the shape given has rank ",
                                     shape.size()), loc_);
      for (size_t k = 0; k < dims.size(); ++k) {  // what the dim_params now stand for (dim_named)
        const ::onnx::TensorShapeProto::Dimension& declared = tensor.shape().dim(int(k));
        if (declared.has_dim_param() && !declared.dim_param().empty() && shape[k].raw() != -1)
          given_dims_[symbol_name(declared.dim_param())] = shape[k].raw();
      }
      dims = shape;
    }
}

// The dims of a sequence's items as ValueInfo shows them: open dims as the symbol "?".
static Shape item_shape(const std::vector<SymDim>& dims) {
  Shape s;
  for (const SymDim& d : dims) s.push_back(d.raw() >= 0 || sym::is_symbol(d.raw()) ? d.raw() : sym::named("unk"));
  return s;
}

std::vector<Value> Importer::import_main(const ::onnx::GraphProto& graph, Graph& g, std::vector<ValueInfo>& inputs,
                                         std::vector<Tensor>& placeholders,
                                         const std::unordered_map<std::string, Value>& bound) {
  scopes_.assign(1, {});
  storage_types_.clear();
  declared_types_.clear();
  import_initializers(graph);
  std::vector<std::string> taken, unbound;
  for (const ::onnx::ValueInfoProto& in : graph.input()) {
    if (lookup(in.name())) continue;  // an initializer listed as an input (IR version < 4)
    ValueInfo info{in.name(), DType::f32, {}};
    std::vector<SymDim> dims;
    describe_input(in, info, dims);
    if (auto b = bound.find(in.name()); b != bound.end()) {
      const Value& v = b->second;
      if (v.is_tensor()) {
        info.shape = v.tensor().shape();
        bind(in.name(), v.tensor(), "an input");
      } else {
        info.shape = item_shape(dims);
        bind_composite(in.name(), v.kind() == Value::Kind::none ? Composite{true, {}} : Composite{false, v.items()},
                       "an input");
      }
      inputs.push_back(info);
      placeholders.emplace_back();
      continue;
    }
    if (info.sequence || info.optional) {  // imported per value: the sequence ops unroll over the items
      info.shape = item_shape(dims);
      inputs.push_back(info);
      placeholders.emplace_back();
      unbound.push_back(in.name());
      continue;
    }
    std::string name = value_name_for(in.name());
    while (std::find(taken.begin(), taken.end(), name) != taken.end()) name += "_";
    taken.push_back(name);
    Tensor p = g.placeholder(info.dtype, dims, name, loc_);
    info.shape = p.shape();
    inputs.push_back(info);
    placeholders.push_back(p);
    placeholder_names_[p.impl()->symbolic->value] = in.name();
    bind(in.name(), p, "an input");
  }
  if (!unbound.empty()) throw NeedsInputValues{unbound};
  import_nodes(graph);
  std::vector<Value> outputs;
  for (const ::onnx::ValueInfoProto& out : graph.output()) {
    if (const Composite* v = composite(out.name())) {
      outputs.push_back(v->none ? Value() : Value::sequence(v->items));
      continue;
    }
    Tensor t = graph_output(out.name(), graph.name());
    // Values kept in a wider dtype leave the model in the element type it declares.
    if (std::optional<DType> storage = storage_type(out.name())) t = cast(t, *storage);
    outputs.emplace_back(t);
  }
  // Constants take their initializers' names in the graph's text form.
  std::vector<std::pair<std::string, Tensor>> named;
  for (const ::onnx::TensorProto& init : graph.initializer())
    if (const Tensor* t = lookup(init.name())) named.emplace_back(value_name_for(init.name()), *t);
  g.name_inputs(named);
  scopes_.clear();
  return outputs;
}

std::vector<Tensor> Importer::import_subgraph(const ::onnx::GraphProto& graph, const std::vector<Tensor>& args) {
  std::vector<Tensor> outputs;
  for (const Value& v : import_subgraph_values(graph, std::vector<Value>(args.begin(), args.end()))) {
    if (!v.is_tensor())
      throw GraphError("onnx", str(model_name_, ": subgraph '", graph.name(), "' returns ", v.describe(),
                                   "; this op carries tensors only"), loc_);
    outputs.push_back(v.tensor());
  }
  return outputs;
}

std::vector<Value> Importer::import_subgraph_values(const ::onnx::GraphProto& graph, const std::vector<Value>& args) {
  if (size_t(graph.input_size()) != args.size())
    throw GraphError("onnx", str(model_name_, ": subgraph '", graph.name(), "' takes ", graph.input_size(),
                                 " inputs, given ", args.size()), loc_);
  scopes_.emplace_back();
  struct Pop {
    std::vector<Scope>& s;
    ~Pop() { s.pop_back(); }
  } pop{scopes_};
  import_initializers(graph);
  for (int i = 0; i < graph.input_size(); ++i) {
    const ::onnx::ValueInfoProto& in = graph.input(i);
    const Value& arg = args[size_t(i)];
    if (!arg.is_tensor()) {
      bind_composite(in.name(), arg.kind() == Value::Kind::none ? Composite{true, {}} : Composite{false, arg.items()},
                     "a subgraph input");
      continue;
    }
    // A subgraph input declared of a storage type (a u8 loop state) keeps rounding into it.
    const Tensor& t = arg.tensor();
    std::optional<DType> declared = in.type().has_tensor_type() ? to_dtype(in.type().tensor_type().elem_type())
                                                                 : std::nullopt;
    const bool narrow = declared && held_widened(*declared) && t.defined() && compute_dtype(*declared) == t.dtype();
    bind(in.name(), t, "a subgraph input", narrow ? declared : std::nullopt);
  }
  import_nodes(graph);
  std::vector<Value> outputs;
  for (const ::onnx::ValueInfoProto& out : graph.output()) {
    if (const Composite* v = composite(out.name())) outputs.push_back(v->none ? Value() : Value::sequence(v->items));
    else outputs.emplace_back(graph_output(out.name(), graph.name()));
  }
  return outputs;
}

}  // namespace baton::onnx::detail
