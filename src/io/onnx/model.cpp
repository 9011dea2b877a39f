// baton::onnx::Model: a loaded model, its Session, its description (include/baton/onnx.h).
#include <list>
#include <algorithm>
#include <map>
#include <unordered_map>
#include <sstream>

#include "baton/onnx.h"
#include "core/atomic_file.h"
#include "graph/ir.h"
#include "io/onnx/importer.h"

namespace baton::onnx {

// One import of the model: its graph, what to feed and fetch, its Session.
struct Instance {
  Graph graph;
  std::vector<Tensor> placeholders;  // per model input; undefined for an input bound to a value
  std::vector<Value> results;  // per model output; sequences hold their items
  std::unique_ptr<Session> session;
};

struct Model::Impl {
  std::string name;
  LoadOptions options;
  SourceLoc loc;
  int64_t opset = 0;
  std::vector<ValueInfo> inputs, outputs;
  std::string description;  // the part of info() read from the file
  // Usually one instance serves every run. A model with inputs that shape the graph (a
  // Reshape's shape fed at run time) keeps its proto and one instance per distinct set of
  // those inputs' values, the most recently used first.
  std::unique_ptr<Instance> instance;
  ::onnx::ModelProto proto;
  std::vector<size_t> value_inputs;
  std::list<std::pair<std::string, Instance>> by_values;
  Instance* last = nullptr;

  Instance& instance_for(const std::vector<Value>& inputs);
  void add_value_inputs(const std::vector<std::string>& names);
};

namespace {

// Oldest and newest opsets of the default domain the importers follow.
constexpr int64_t kMinOpset = 1, kMaxOpset = 18;

int64_t default_opset(const ::onnx::ModelProto& m, const std::string& name, SourceLoc loc) {
  for (const ::onnx::OperatorSetIdProto& o : m.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx") {
      if (o.version() < kMinOpset || o.version() > kMaxOpset)
        throw GraphError("onnx", str(name, ": opset ", o.version(), " of the default domain; baton reads opsets ",
                                     kMinOpset, "-", kMaxOpset), loc);
      return o.version();
    }
  if (m.opset_import_size() == 0 && m.ir_version() < 3) return 1;  // before opset_import existed
  throw GraphError("onnx", str(name, ": the model imports no opset of the default domain"), loc);
}

std::string shape_text(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? "," : "") + sym::to_string(s[i]);
  return out + "]";
}

// Producer, opset, node counts by op type and parameter totals: what `baton info` prints
// besides the inputs and outputs. Called once the import has checked every initializer
// (dims not negative, counts that fit, data as long as the dims say).
std::string describe(const ::onnx::ModelProto& m, int64_t opset) {
  std::ostringstream os;
  os << "producer " << (m.producer_name().empty() ? "(unknown)" : m.producer_name() + " " + m.producer_version())
     << "\nir_version " << m.ir_version() << "\nopset " << opset << "\n";
  std::map<std::string, int> counts;
  for (const ::onnx::NodeProto& n : m.graph().node()) ++counts[n.op_type()];
  os << "nodes " << m.graph().node_size() << "\n";
  for (auto& [op, n] : counts) os << "  " << op << " " << n << "\n";
  int64_t elements = 0, bytes = 0;
  for (const ::onnx::TensorProto& t : m.graph().initializer()) {
    int64_t n = 1;
    for (int64_t d : t.dims()) n *= d;
    elements += n;
    bytes += int64_t(t.raw_data().size()) + int64_t(4 * t.float_data_size() + 4 * t.int32_data_size() +
                                                    8 * t.int64_data_size() + 8 * t.double_data_size());
  }
  os << "parameters " << elements << " in " << m.graph().initializer_size() << " initializers, " << bytes << " bytes\n";
  return os.str();
}

std::string basename_of(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

Value Value::sequence(std::vector<Tensor> items) {
  Value v;
  v.kind_ = Kind::sequence;
  v.items_ = std::move(items);
  return v;
}

const Tensor& Value::tensor() const {
  if (kind_ != Kind::tensor)
    throw ValueError("onnx.Value", str("is ", describe(), ", not a tensor"), SourceLoc::current());
  return tensor_;
}

const std::vector<Tensor>& Value::items() const {
  if (kind_ != Kind::sequence)
    throw ValueError("onnx.Value", str("is ", describe(), ", not a sequence"), SourceLoc::current());
  return items_;
}

std::string Value::describe() const {
  if (kind_ == Kind::none) return "none";
  auto one = [](const Tensor& t) { return t.defined() ? str(t.dtype(), t.shape()) : std::string("undefined"); };
  if (kind_ == Kind::tensor) return one(tensor_);
  std::string s = str("sequence of ", items_.size());
  for (size_t i = 0; i < items_.size(); ++i) s += str(i ? ", " : ": ", one(items_[i]));
  return s;
}

bool ValueInfo::accepts(const Value& v) const {
  switch (v.kind()) {
    case Value::Kind::none: return optional;
    case Value::Kind::tensor: return !sequence && accepts(v.tensor());
    case Value::Kind::sequence:
      return sequence && std::all_of(v.items().begin(), v.items().end(), [&](const Tensor& t) {
               return t.defined() && !t.is_symbolic() && t.dtype() == dtype &&
                      (any_shape || t.dim() == int64_t(shape.size()));
             });
  }
  return false;
}

std::string ValueInfo::describe() const {
  return str(optional ? "optional " : "", sequence ? "sequence of " : "", dtype, any_shape ? "[...]" : shape_text(shape));
}

bool ValueInfo::accepts(const Tensor& t) const {
  if (t.dtype() != dtype) return false;
  if (any_shape) return true;
  if (t.dim() != int64_t(shape.size())) return false;
  for (size_t d = 0; d < shape.size(); ++d)
    if (!sym::is_symbol(shape[d]) && shape[d] != t.shape()[d]) return false;
  return true;
}

Model::Model(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Model::Model(Model&&) noexcept = default;
Model& Model::operator=(Model&&) noexcept = default;
Model::~Model() = default;

namespace {

constexpr size_t kMaxValueInstances = 8;

// Every tensor of some values, sequences' items in order.
std::vector<Tensor> tensors_of(const std::vector<Value>& values) {
  std::vector<Tensor> out;
  for (const Value& v : values) {
    if (v.is_tensor()) out.push_back(v.tensor());
    else if (v.kind() == Value::Kind::sequence) out.insert(out.end(), v.items().begin(), v.items().end());
  }
  return out;
}

// A key that tells values apart: their kinds, dtypes, shapes and bytes.
void append_key(std::string& key, const Value& v) {
  key += str(int(v.kind()), ":");
  for (const Tensor& t : tensors_of({v})) {
    const Tensor c = t.contiguous();
    key += str(c.dtype(), c.shape(), ":");
    key.append(static_cast<const char*>(c.raw_data()), c.nbytes());
  }
  key += "|";
}

// A copy that the caller cannot change afterwards (a bound value lives in the instance).
Value frozen(const Value& v) {
  if (v.is_tensor()) return v.tensor().contiguous().clone();
  if (v.kind() == Value::Kind::none) return v;
  std::vector<Tensor> items;
  for (const Tensor& t : v.items()) items.push_back(t.contiguous().clone());
  return Value::sequence(items);
}

// An output as the model declares it (before a run shows its shape).
ValueInfo declared_output(const ::onnx::ValueInfoProto& out) {
  ValueInfo info{out.name(), DType::f32, {}};
  const ::onnx::TypeProto& type = detail::element_type(out.type(), info);
  info.dtype = detail::to_dtype(type.tensor_type().elem_type()).value_or(DType::f32);
  return info;
}

struct ImportSettings {
  const std::string& name;
  int64_t opset;
  SourceLoc loc;
  const LoadOptions& options;
};

// Imports the model with `bound` inputs bound to their values. Throws NeedsInputValues.
std::unique_ptr<Instance> import_instance(const ImportSettings& m, const ::onnx::ModelProto& proto,
                                          const std::unordered_map<std::string, Value>& bound,
                                          std::vector<ValueInfo>* inputs) {
  auto inst = std::make_unique<Instance>();
  const std::string& graph_name = proto.graph().name();
  inst->graph = Graph(graph::is_op_name(graph_name) ? graph_name : "main");
  // The inputs are described before any node is imported, so `inputs` holds them also when
  // a node then asks for input values (NeedsInputValues).
  std::vector<ValueInfo> scratch;
  std::vector<ValueInfo>& infos = inputs ? *inputs : scratch;
  infos.clear();
  detail::Importer importer(m.name, m.opset, m.loc, m.options.input_shapes);
  inst->results = importer.import_main(proto.graph(), inst->graph, infos, inst->placeholders, bound);
  std::vector<Tensor> symbolic;
  for (const Tensor& r : tensors_of(inst->results))
    if (r.is_symbolic()) symbolic.push_back(r);
  if (!symbolic.empty()) inst->graph.set_outputs(symbolic, m.loc);
  return inst;
}

}  // namespace

Instance& Model::Impl::instance_for(const std::vector<Value>& run_inputs) {
  if (instance) return *instance;
  for (;;) {  // each round binds more inputs, so this ends
    std::string key;
    std::unordered_map<std::string, Value> bound;
    for (size_t i : value_inputs) {
      append_key(key, run_inputs[i]);
      bound.emplace(inputs[i].name, frozen(run_inputs[i]));
    }
    for (auto it = by_values.begin(); it != by_values.end(); ++it)
      if (it->first == key) {
        by_values.splice(by_values.begin(), by_values, it);
        return by_values.front().second;
      }
    try {
      std::unique_ptr<Instance> inst = import_instance({name, opset, loc, options}, proto, bound, nullptr);
      by_values.emplace_front(key, std::move(*inst));
      if (by_values.size() > kMaxValueInstances) by_values.pop_back();
      return by_values.front().second;
    } catch (const detail::NeedsInputValues& needs) {
      const size_t before = value_inputs.size();
      add_value_inputs(needs.inputs);
      if (value_inputs.size() == before)
        throw GraphError("onnx.run", str(name, ": the graph needs input values it was already given"), loc);
      by_values.clear();
    }
  }
}

void Model::Impl::add_value_inputs(const std::vector<std::string>& names) {
  for (size_t i = 0; i < inputs.size(); ++i)
    if (std::count(names.begin(), names.end(), inputs[i].name) &&
        !std::count(value_inputs.begin(), value_inputs.end(), i))
      value_inputs.push_back(i);
  std::sort(value_inputs.begin(), value_inputs.end());
}

Model load_bytes(std::string_view bytes, const std::string& name, LoadOptions options, SourceLoc loc) {
  auto impl = std::make_unique<Model::Impl>();
  ::onnx::ModelProto proto = detail::parse_model(bytes, name);
  impl->name = name;
  impl->options = options;
  impl->loc = loc;
  impl->opset = default_opset(proto, name, loc);
  try {
    impl->instance = import_instance({impl->name, impl->opset, loc, impl->options}, proto, {}, &impl->inputs);
    for (int i = 0; i < proto.graph().output_size(); ++i) {
      const Value& r = impl->instance->results[size_t(i)];
      ValueInfo info = declared_output(proto.graph().output(i));
      if (r.is_tensor()) info.dtype = r.tensor().dtype(), info.shape = r.tensor().shape();
      if (r.kind() == Value::Kind::sequence) info.sequence = true;
      impl->outputs.push_back(info);
    }
    impl->description = describe(proto, impl->opset);
  } catch (const detail::NeedsInputValues& needs) {
    // Imported at the first run, per set of values of these inputs (impl->inputs holds the
    // inputs as the first import described them).
    impl->add_value_inputs(needs.inputs);
    for (const ::onnx::ValueInfoProto& out : proto.graph().output()) impl->outputs.push_back(declared_output(out));
    impl->description = describe(proto, impl->opset);
    impl->proto = std::move(proto);
  }
  return Model(std::move(impl));
}

Model load(const std::string& path, LoadOptions options, SourceLoc loc) {
  return load_bytes(baton::detail::read_file(path, "onnx.load", "an ONNX model"), basename_of(path), options, loc);
}

Tensor load_tensor(const std::string& path, SourceLoc loc) {
  ::onnx::TensorProto proto;
  detail::read_message(path, "onnx.load_tensor", proto, loc);
  return detail::to_tensor(proto, str(basename_of(path)));
}

std::vector<Value> Model::run_values(const std::vector<Value>& inputs, SourceLoc loc) {
  Impl& m = *impl_;
  if (inputs.size() != m.inputs.size())
    throw ValueError("onnx.run", str(m.name, " takes ", m.inputs.size(), " inputs, given ", inputs.size()), loc);
  for (size_t i = 0; i < inputs.size(); ++i) {
    const ValueInfo& info = m.inputs[i];
    const std::vector<Tensor> tensors = tensors_of({inputs[i]});
    for (const Tensor& x : tensors)
      if (!x.defined() || x.is_symbolic())
        throw ValueError("onnx.run", str(m.name, ": input '", info.name, "' must hold concrete tensors"), loc);
    if (!info.accepts(inputs[i]))
      throw ShapeError("onnx.run", str(m.name, ": input '", info.name, "' is ", info.describe(), ", given ",
                                       inputs[i].describe()), loc);
    for (const Tensor& x : tensors) detail::check_fits_compute_dtype(x, str(m.name, ": input '", info.name, "'"), loc);
  }
  Instance& inst = m.instance_for(inputs);
  m.last = &inst;
  Session::Feeds feeds;
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inst.placeholders[i].defined()) feeds.emplace_back(inst.placeholders[i], inputs[i].tensor());
  std::vector<Tensor> fetches;
  for (const Tensor& r : tensors_of(inst.results))
    if (r.is_symbolic()) fetches.push_back(r);
  std::vector<Tensor> fetched;
  if (!fetches.empty()) {
    if (!inst.session)
      inst.session = std::make_unique<Session>(inst.graph, SessionOptions{.level = m.options.level,
                                                                          .inter_op_threads = m.options.inter_op_threads,
                                                                          .intra_op_threads = m.options.intra_op_threads});
    fetched = inst.session->run(fetches, feeds, {}, loc);
  }
  size_t next = 0;
  auto result = [&](const Tensor& r) { return r.is_symbolic() ? fetched[next++] : r.clone(); };
  std::vector<Value> out;
  for (const Value& r : inst.results) {
    if (r.is_tensor()) {
      out.emplace_back(result(r.tensor()));
    } else if (r.kind() == Value::Kind::sequence) {
      std::vector<Tensor> items;
      for (const Tensor& t : r.items()) items.push_back(result(t));
      out.push_back(Value::sequence(std::move(items)));
    } else {
      out.emplace_back();
    }
  }
  return out;
}

std::vector<Tensor> Model::run(const std::vector<Tensor>& inputs, SourceLoc loc) {
  std::vector<Tensor> out;
  size_t i = 0;
  for (const Value& v : run_values(std::vector<Value>(inputs.begin(), inputs.end()), loc)) {
    if (!v.is_tensor())
      throw ValueError("onnx.run", str(impl_->name, ": output '", impl_->outputs[i].name, "' is ", v.describe(),
                                       ", not a tensor; run_values returns every kind of output"), loc);
    out.push_back(v.tensor());
    ++i;
  }
  return out;
}

std::vector<Tensor> Model::run(const std::vector<std::pair<std::string, Tensor>>& named_inputs, SourceLoc loc) {
  std::vector<Tensor> ordered(impl_->inputs.size());
  for (auto& [name, t] : named_inputs) {
    size_t i = 0;
    while (i < impl_->inputs.size() && impl_->inputs[i].name != name) ++i;
    if (i == impl_->inputs.size())
      throw ValueError("onnx.run", str(impl_->name, " has no input named '", name, "'"), loc);
    if (ordered[i].defined()) throw ValueError("onnx.run", str("input '", name, "' is given twice"), loc);
    ordered[i] = t;
  }
  for (size_t i = 0; i < ordered.size(); ++i)
    if (!ordered[i].defined())
      throw ValueError("onnx.run", str(impl_->name, ": input '", impl_->inputs[i].name, "' is missing"), loc);
  return run(ordered, loc);
}

const std::vector<ValueInfo>& Model::inputs() const { return impl_->inputs; }
const std::vector<ValueInfo>& Model::outputs() const { return impl_->outputs; }
int64_t Model::opset() const { return impl_->opset; }
const Graph& Model::graph() const {
  const Instance* inst = impl_->instance ? impl_->instance.get() : impl_->last;
  if (!inst)
    throw GraphError("onnx.graph", str(impl_->name, ": the graph depends on input values; run the model first"),
                     SourceLoc::current());
  return inst->graph;
}
std::string Model::explain() const {
  const Instance* inst = impl_->instance ? impl_->instance.get() : impl_->last;
  return inst && inst->session ? inst->session->explain() : "";
}
MemoryPlan Model::memory_plan() const {
  const Instance* inst = impl_->instance ? impl_->instance.get() : impl_->last;
  return inst && inst->session ? inst->session->memory_plan() : MemoryPlan{};
}

std::string Model::info() const {
  std::ostringstream os;
  os << "model " << impl_->name << "\n";
  for (const ValueInfo& v : impl_->inputs) os << "input " << v.name << " " << v.describe() << "\n";
  for (const ValueInfo& v : impl_->outputs) os << "output " << v.name << " " << v.describe() << "\n";
  return os.str() + impl_->description;
}

}  // namespace baton::onnx
