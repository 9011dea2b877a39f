#include "graph/ir.h"

#include <algorithm>
#include <ostream>
#include <unordered_set>

namespace baton::graph {

static bool is_digit(char c) { return c >= '0' && c <= '9'; }
static bool is_word_char(char c) {
  return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '.';
}

bool is_view(const Node& n) { return n.op() && n.op()->view_rule; }

const Value* storage_root(const Value* v) {
  while (v->producer() && is_view(*v->producer()) && v->producer()->num_inputs() > 0) v = v->producer()->input(0);
  return v;
}

bool is_value_name(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), is_word_char) &&
         !std::all_of(s.begin(), s.end(), is_digit);
}

bool is_op_name(std::string_view s) {
  return !s.empty() && !is_digit(s[0]) && s[0] != '.' &&
         std::all_of(s.begin(), s.end(), is_word_char);
}

Location::Location(SourceLoc loc) : line(int(loc.line())) {
  std::string_view f = loc.file_name();
  if (auto slash = f.rfind('/'); slash != std::string_view::npos) f.remove_prefix(slash + 1);
  file = std::string(f);
}

std::ostream& operator<<(std::ostream& os, const TensorType& t) { return os << t.dtype << t.shape; }

// --- Value ---
void Value::set_name(std::string name) {
  if (!name.empty() && !is_value_name(name))
    throw ValueError(str("graph: invalid value name '", name,
                         "' (letters, digits, '_' and '.', not all digits)"));
  name_ = std::move(name);
}

void Value::remove_use(Use u) {
  auto it = std::find(uses_.begin(), uses_.end(), u);
  if (it != uses_.end()) uses_.erase(it);
}

// --- Node ---
void Node::set_input(size_t i, Value* v) {
  Value*& slot = inputs_.at(i);
  if (slot) slot->remove_use({this, int(i)});
  slot = v;
  if (v) v->uses_.push_back({this, int(i)});
}

std::vector<Value*> Node::outputs() const {
  std::vector<Value*> out;
  for (auto& v : outputs_) out.push_back(v.get());
  return out;
}

// --- Graph ---
Graph::Graph(std::string name) { set_name(std::move(name)); }
Graph::~Graph() = default;

void Graph::set_name(std::string name) {
  if (!is_op_name(name)) throw ValueError(str("graph: invalid graph name '", name, "'"));
  name_ = std::move(name);
}

Value* Graph::add_input(std::string name, TensorType type) {
  auto v = std::unique_ptr<Value>(new Value(next_id_++, std::move(type), nullptr, int(inputs_.size())));
  v->set_name(std::move(name));
  inputs_.push_back(std::move(v));
  return inputs_.back().get();
}

Node* Graph::add_node(std::string_view op_name, std::vector<Value*> inputs,
                      std::vector<TensorType> output_types, ops::Attrs attrs, Location loc) {
  if (!is_op_name(op_name) || op_name == "return")  // "return" would read as the keyword
    throw ValueError(str("graph: invalid op name '", op_name, "'"));
  auto node = std::unique_ptr<Node>(new Node(std::string(op_name), ops::find_op(op_name)));
  node->attrs = std::move(attrs);
  node->loc = std::move(loc);
  node->inputs_.resize(inputs.size(), nullptr);
  for (size_t i = 0; i < inputs.size(); ++i) node->set_input(i, inputs[i]);
  for (size_t i = 0; i < output_types.size(); ++i)
    node->outputs_.emplace_back(new Value(next_id_++, std::move(output_types[i]), node.get(), int(i)));
  nodes_.push_back(std::move(node));
  return nodes_.back().get();
}

void Graph::set_outputs(std::vector<Value*> outputs) { outputs_ = std::move(outputs); }

void Graph::move_before(Node* node, const Node* position) {
  auto find = [&](const Node* n) {
    auto it = std::find_if(nodes_.begin(), nodes_.end(), [&](auto& p) { return p.get() == n; });
    if (it == nodes_.end()) throw ValueError(str("graph @", name_, ": move_before: the node is not in this graph"));
    return it;
  };
  auto from = find(node);
  find(position);  // both must be here before anything moves
  std::unique_ptr<Node> moving = std::move(*from);
  nodes_.erase(from);
  nodes_.insert(find(position), std::move(moving));
}

bool Graph::is_output(const Value* v) const {
  return std::find(outputs_.begin(), outputs_.end(), v) != outputs_.end();
}

void Graph::erase_node(Node* node) {
  auto it = std::find_if(nodes_.begin(), nodes_.end(), [&](auto& n) { return n.get() == node; });
  if (it == nodes_.end()) throw ValueError(str("graph @", name_, ": erase_node: the node is not in this graph"));
  for (auto& out : node->outputs_)
    if (!out->uses().empty() || is_output(out.get()))
      throw ValueError(str("graph @", name_, ": cannot erase node '", node->op_name(),
                           "': output ", out->output_index(), " is still used"));
  for (size_t i = 0; i < node->inputs_.size(); ++i) node->set_input(i, nullptr);
  nodes_.erase(it);
}

void Graph::replace_all_uses(Value* from, Value* to) {
  if (from == to) return;
  for (Use u : std::vector<Use>(from->uses())) u.user->set_input(size_t(u.index), to);
  std::replace(outputs_.begin(), outputs_.end(), from, to);
}

bool Graph::is_topologically_sorted() const {
  std::unordered_set<const Value*> defined;
  for (auto& v : inputs_) defined.insert(v.get());
  for (auto& n : nodes_) {
    for (Value* in : n->inputs_)
      if (!defined.count(in)) return false;
    for (auto& out : n->outputs_) defined.insert(out.get());
  }
  return true;
}

std::vector<Value*> Graph::inputs() const {
  std::vector<Value*> out;
  for (auto& v : inputs_) out.push_back(v.get());
  return out;
}

// Two passes, so that even an invalid graph (a node reading a later value) copies
// faithfully; a value from outside the graph is kept as is, without a use entry.
Graph Graph::clone() const {
  Graph g(name_);
  std::unordered_map<const Value*, Value*> map;
  auto copy_value = [&](const Value& v, Value* copy) {
    copy->id_ = v.id_;
    copy->name_ = v.name_;
    map[&v] = copy;
  };
  for (auto& v : inputs_) copy_value(*v, g.add_input("", v->type));
  for (auto& n : nodes_) {
    std::vector<TensorType> types;
    for (auto& out : n->outputs_) types.push_back(out->type);
    Node* c = g.add_node(n->op_name_, {}, std::move(types), n->attrs, n->loc);
    c->fused_from = n->fused_from;
    for (auto& sub : n->subgraphs)
      c->subgraphs.push_back(sub ? std::make_shared<Graph>(sub->clone()) : nullptr);
    for (size_t i = 0; i < n->outputs_.size(); ++i) copy_value(*n->outputs_[i], c->output(i));
  }
  for (size_t k = 0; k < nodes_.size(); ++k) {
    Node& c = *g.nodes_[k];
    c.inputs_.resize(nodes_[k]->inputs_.size(), nullptr);
    for (size_t i = 0; i < c.inputs_.size(); ++i) {
      Value* in = nodes_[k]->inputs_[i];
      if (auto it = map.find(in); it != map.end()) c.set_input(i, it->second);
      else c.inputs_[i] = in;
    }
  }
  for (Value* out : outputs_) g.outputs_.push_back(map.count(out) ? map[out] : out);
  g.next_id_ = next_id_;
  return g;
}

// --- ValueNames ---
ValueNames::ValueNames(const Graph& g) {
  int64_t number = 0;
  auto name = [&](const Value* v) {
    names_.emplace(v, v->name().empty() ? str("%", number++) : str("%", v->name()));
  };
  for (auto& v : g.input_values()) name(v.get());
  for (auto& n : g.nodes())
    for (size_t i = 0; i < n->num_outputs(); ++i) name(n->output(i));
}

std::string ValueNames::operator()(const Value* v) const {
  if (!v) return "%<null>";
  auto it = names_.find(v);
  return it != names_.end() ? it->second : str("%?", v->id());
}

}  // namespace baton::graph
