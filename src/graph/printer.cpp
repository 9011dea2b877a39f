// The text printer. Each node is one line; a node's `# file:line` comments line up in
// one column per graph body; subgraphs follow their node, indented, inside { }.
#include <charconv>
#include <cmath>
#include <ostream>

#include "graph/text.h"

#if defined(__SSE__)
#include <xmmintrin.h>
#endif

namespace baton::graph {
namespace {

std::string format_float(double x) {
  ExactFloatScope exact;
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x < 0 ? "-inf" : "inf";
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, x);  // shortest exact round trip
  std::string s(buf, end);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";  // keep it apart from ints
  return s;
}

std::string quote(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') out += str('\\', char(c));
    else if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (c < 0x20 || c == 0x7f) {
      const char* hex = "0123456789abcdef";
      out += str("\\x", hex[c >> 4], hex[c & 15]);
    } else out += char(c);
  }
  return out + "\"";
}

struct AttrFormatter {
  // Ints that hold symbolic dims (a reshape to [batch,784]) print as the dims' names.
  std::string operator()(int64_t v) const { return sym::is_symbol(v) ? sym::to_string(v) : std::to_string(v); }
  std::string operator()(double v) const { return format_float(v); }
  std::string operator()(const std::string& v) const { return quote(v); }
  std::string operator()(DType v) const { return std::string(dtype_name(v)); }
  std::string operator()(const std::vector<int64_t>& v) const {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); ++i) s += str(i ? "," : "", (*this)(v[i]));
    return s + "]";
  }
};

// "%0, %1 = max_pool2d(%x) {kernel=[2,2]} : f32[1,3,2,2], i64[1,3,2,2]"
std::string node_code(const Node& n, const ValueNames& names) {
  std::string s;
  for (size_t i = 0; i < n.num_outputs(); ++i) s += str(i ? ", " : "", names(n.output(i)));
  s += str(n.num_outputs() ? " = " : "", n.op_name(), "(");
  for (size_t i = 0; i < n.num_inputs(); ++i) s += str(i ? ", " : "", names(n.input(i)));
  s += ")";
  if (!n.attrs.items().empty()) {
    s += " {";
    bool first = true;
    for (auto& [name, value] : n.attrs.items()) {
      s += str(first ? "" : ", ", name, "=", format_attr_value(value));
      first = false;
    }
    s += "}";
  }
  for (size_t i = 0; i < n.num_outputs(); ++i) s += str(i ? ", " : " : ", n.output(i)->type);
  if (!n.subgraphs.empty()) s += " {";
  return s;
}

void print_graph(const Graph& g, const std::string& indent, std::string& out) {
  ValueNames names(g);
  out += str(indent, "graph @", g.name(), "(");
  for (size_t i = 0; i < g.input_values().size(); ++i)
    out += str(i ? ", " : "", names(g.input(i)), ": ", g.input(i)->type);
  out += ") {\n";

  const std::string body = indent + "  ";
  std::vector<std::string> code;
  size_t column = 0;
  for (auto& n : g.nodes()) {
    code.push_back(body + node_code(*n, names));
    if (n->loc.known()) column = std::max(column, code.back().size() + 3);
  }
  for (size_t k = 0; k < g.num_nodes(); ++k) {
    const Node& n = *g.nodes()[k];
    out += code[k];
    if (n.loc.known()) out += str(std::string(column - code[k].size(), ' '), "# ", n.loc.file, ":", n.loc.line);
    out += "\n";
    if (n.subgraphs.empty()) continue;
    for (auto& sub : n.subgraphs) {
      if (sub) print_graph(*sub, body + "  ", out);
      else out += body + "  <null subgraph>\n";
    }
    out += body + "}\n";
  }
  out += body + "return";
  for (size_t i = 0; i < g.outputs().size(); ++i) out += str(i ? ", " : " ", names(g.outputs()[i]));
  out += str("\n", indent, "}\n");
}

}  // namespace

#if defined(__SSE__)
ExactFloatScope::ExactFloatScope() : saved_(_mm_getcsr()) { _mm_setcsr(saved_ & ~0x8040u); }  // FTZ, DAZ off
ExactFloatScope::~ExactFloatScope() { _mm_setcsr(saved_); }
#else
ExactFloatScope::ExactFloatScope() = default;
ExactFloatScope::~ExactFloatScope() = default;
#endif

std::string format_attr_value(const ops::AttrValue& v) { return std::visit(AttrFormatter{}, v); }

std::string to_text(const Graph& g) {
  std::string out;
  print_graph(g, "", out);
  return out;
}

std::ostream& operator<<(std::ostream& os, const Graph& g) { return os << to_text(g); }

}  // namespace baton::graph
