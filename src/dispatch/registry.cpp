#include "dispatch/registry.h"

#include <map>
#include <mutex>
#include <memory>
#include <ostream>

#include "core/runtime_internal.h"

namespace baton::ops {
namespace {

std::map<std::string, std::unique_ptr<OpDef>, std::less<>>& registry() {
  static auto* ops = new std::map<std::string, std::unique_ptr<OpDef>, std::less<>>;
  return *ops;
}

}  // namespace

// --- Attrs ---
namespace {
// initial-exec: one load from the thread pointer, not a call, in a shared library.
thread_local uint64_t attribute_reads_here __attribute__((tls_model("initial-exec"))) = 0;
}  // namespace

uint64_t attribute_reads() { return attribute_reads_here; }

Attrs& Attrs::set(std::string name, AttrValue v) {
  for (auto& [n, value] : items_)
    if (n == name) {
      value = std::move(v);
      return *this;
    }
  items_.emplace_back(std::move(name), std::move(v));
  return *this;
}

const AttrValue* Attrs::find(std::string_view name) const {
  ++attribute_reads_here;
  for (auto& [n, value] : items_)
    if (n == name) return &value;
  return nullptr;
}

const AttrValue& Attrs::get(std::string_view name) const {
  if (auto* v = find(name)) return *v;
  throw ValueError("attrs", str("missing attribute '", name, "'"), SourceLoc::current());
}

template <class T>
static const T& attr_as(const AttrValue& v, std::string_view name, const char* kind) {
  if (auto* p = std::get_if<T>(&v)) return *p;
  throw ValueError("attrs", str("attribute '", name, "' is not ", kind), SourceLoc::current());
}

int64_t Attrs::i(std::string_view name) const { return attr_as<int64_t>(get(name), name, "an int"); }
double Attrs::f(std::string_view name) const {
  const AttrValue& v = get(name);
  if (auto* p = std::get_if<int64_t>(&v)) return double(*p);
  return attr_as<double>(v, name, "a float");
}
const std::vector<int64_t>& Attrs::ints(std::string_view name) const {
  return attr_as<std::vector<int64_t>>(get(name), name, "a list of ints");
}
const std::string& Attrs::s(std::string_view name) const {
  return attr_as<std::string>(get(name), name, "a string");
}
DType Attrs::dtype(std::string_view name) const { return attr_as<DType>(get(name), name, "a dtype"); }

std::ostream& operator<<(std::ostream& os, const Attrs& a) {
  bool first = true;
  for (auto& [name, value] : a.items()) {
    os << (first ? "" : ", ") << name << "=";
    first = false;
    std::visit([&](const auto& v) {
      using V = std::decay_t<decltype(v)>;
      if constexpr (std::is_same_v<V, std::vector<int64_t>>) os << Shape(v);
      else if constexpr (std::is_same_v<V, std::string>) os << '"' << v << '"';
      else os << v;
    }, value);
  }
  return os;
}

bool Attrs::holds_symbols() const {
  for (auto& [name, value] : items_) {
    if (auto* i = std::get_if<int64_t>(&value); i && sym::is_symbol(*i)) return true;
    if (auto* v = std::get_if<std::vector<int64_t>>(&value))
      for (int64_t d : *v)
        if (sym::is_symbol(d)) return true;
  }
  return false;
}

// --- contexts ---
std::string CallContext::describe_inputs() const {
  std::string s;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (i) s += ", ";
    s += inputs[i].defined() ? str(inputs[i].dtype(), inputs[i].shape()) : "undefined";
  }
  return s;
}

const std::string& CallContext::op_name() const { return op.name; }

const void* CallContext::params_of(const std::type_info& type) const {
  if (!op.params_type || *op.params_type != type) [[unlikely]]
    throw Error(str("[", op.name, "] its kernel asks for parameters of a type the op does not declare (",
                    type.name(), ")"));
  if (!made_params) made_params = op.make_params(*this, owned_params);
  return made_params;
}

// --- registry ---
OpDef& define_op(std::string name) {
  detail::init_runtime();
  auto& ops = registry();
  auto def = std::make_unique<OpDef>();
  def->name = name;
  auto [it, inserted] = ops.emplace(std::move(name), std::move(def));
  if (!inserted) throw Error(str("op '", it->first, "' is defined twice"));
  return *it->second;
}

double rule_flops(const CallContext& c, std::span<const TensorMeta> outputs) {
  if (!c.op.cost_rule || outputs.empty()) return 0;
  try {
    return c.op.cost_rule(c, outputs).flops;
  } catch (...) {
    return 0;
  }
}

const OpDef* find_op(std::string_view name) {
  auto& ops = registry();
  auto it = ops.find(name);
  return it == ops.end() ? nullptr : it->second.get();
}

const OpDef& composite_op(std::string_view name) {
  static std::mutex mutex;
  static auto* names = new std::map<std::string, OpDef, std::less<>>;
  std::lock_guard lock(mutex);
  auto it = names->find(name);
  if (it == names->end()) {
    OpDef def;
    def.name = std::string(name);
    it = names->emplace(def.name, std::move(def)).first;
  }
  return it->second;
}

std::vector<const OpDef*> all_ops() {
  std::vector<const OpDef*> out;
  for (auto& [name, def] : registry()) out.push_back(def.get());
  return out;
}

// --- common rules ---
TensorMeta same_as_input(const InferContext& c) { return {c.input(0).dtype(), c.input(0).shape()}; }

Shape broadcast_shapes(const Shape& a, const Shape& b, const CallContext& c) {
  const size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1) {
      // An unknown size (a symbol) may turn out to be 1 or to match: trust it now, the
      // kernel checks the real sizes when the graph runs. Prefer the known size.
      if (sym::is_symbol(da) || sym::is_symbol(db)) {
        out[i] = sym::is_symbol(da) && !sym::is_symbol(db) ? db : da;
        continue;
      }
      c.fail(str("shapes ", a, " and ", b, " cannot be broadcast (dim ", i, ": ", da, " vs ", db, ")"));
    }
    out[i] = da == 1 ? db : da;
  }
  return out;
}

int64_t normalize_dim(int64_t dim, int64_t rank, const CallContext& c) {
  const int64_t r = std::max<int64_t>(rank, 1);
  if (dim < -r || dim >= r)
    c.fail<IndexError>("dim ", dim, " is out of range for rank ", rank, " (expected [", -r, ", ",
                       r - 1, "])");
  return dim < 0 ? dim + r : dim;
}

}  // namespace baton::ops
