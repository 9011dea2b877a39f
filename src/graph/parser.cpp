// The text parser: recursive descent over characters, one function per grammar rule
// (docs/graph-ir.md). Every mistake is a ValueError naming line:column, what was
// expected and what was found; nothing in the input can crash it.
#include <charconv>
#include <cmath>
#include <cctype>
#include <limits>
#include <optional>
#include <unordered_map>

#include "graph/text.h"

namespace baton::graph {
namespace {

constexpr int kMaxDepth = 32;  // nesting of subgraphs; deeper input is an error, not a stack overflow

bool is_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_word_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.';
}
bool all_digits(std::string_view s) {
  return !s.empty() && s.find_first_not_of("0123456789") == std::string_view::npos;
}

class Parser {
 public:
  explicit Parser(std::string_view text) : s_(text) {}

  Graph parse() {
    Graph g = graph(0);
    skip();
    if (!eof()) fail("end of input after the graph");
    return g;
  }

 private:
  struct Pos {
    size_t at = 0;
    int line = 1, col = 1;
  };
  using Scope = std::unordered_map<std::string, Value*>;

  // --- characters ---
  bool eof() const { return p_.at >= s_.size(); }
  char peek() const { return eof() ? '\0' : s_[p_.at]; }
  void advance() {
    if (s_[p_.at] == '\n') p_.line++, p_.col = 1;
    else p_.col++;
    p_.at++;
  }
  void skip() {  // white space and comments
    while (!eof()) {
      if (peek() == '#') {
        while (!eof() && peek() != '\n') advance();
      } else if (peek() == ' ' || peek() == '\t' || peek() == '\n' || peek() == '\r') {
        advance();
      } else {
        return;
      }
    }
  }
  std::string found() const {
    if (eof()) return "end of input";
    if (is_word_char(peek())) {
      size_t end = p_.at;
      while (end < s_.size() && is_word_char(s_[end]) && end - p_.at < 24) ++end;
      return str("'", s_.substr(p_.at, end - p_.at), "'");
    }
    unsigned char c = static_cast<unsigned char>(peek());
    if (c < 0x20 || c >= 0x7f) return str("byte ", int(c));
    return str("'", char(c), "'");
  }
  [[noreturn]] void fail_at(const Pos& at, const std::string& message) const {
    throw ValueError(str("graph text ", at.line, ":", at.col, ": ", message));
  }
  [[noreturn]] void fail(std::string_view expected) const {
    fail_at(p_, str("expected ", expected, ", found ", found()));
  }
  // Consumes white space and c, or nothing (so a trailing "# file:line" stays unread).
  bool accept(char c) {
    Pos saved = p_;
    skip();
    if (!eof() && peek() == c) {
      advance();
      return true;
    }
    p_ = saved;
    return false;
  }
  void expect(char c) {
    if (accept(c)) return;
    skip();
    fail(str("'", c, "'"));
  }
  std::string word() {  // no skip: callers decide whether space may come before
    size_t start = p_.at;
    while (!eof() && is_word_char(peek())) advance();
    return std::string(s_.substr(start, p_.at - start));
  }
  // A word after white space that passes `ok`; else an error pointing at its start.
  template <class Ok>
  std::string expect_word(Ok ok, std::string_view expected) {
    skip();
    Pos at = p_;
    std::string w = word();
    if (!ok(w)) {
      p_ = at;
      fail(expected);
    }
    return w;
  }
  // The next word after white space, without consuming anything.
  std::string peek_word() {
    Pos saved = p_;
    skip();
    std::string w = word();
    p_ = saved;
    return w;
  }
  bool peek_char(char c) {
    Pos saved = p_;
    skip();
    bool yes = !eof() && peek() == c;
    p_ = saved;
    return yes;
  }
  bool block_of_graphs_follows() {  // "{ graph" rather than "{attr=..."
    Pos saved = p_;
    bool yes = accept('{') && peek_word() == "graph";
    p_ = saved;
    return yes;
  }

  // --- grammar ---
  Graph graph(int depth) {
    if (depth > kMaxDepth) fail_at(p_, str("subgraphs nested deeper than ", kMaxDepth, " levels"));
    expect_word([](std::string_view w) { return w == "graph"; }, "'graph'");
    expect('@');
    std::string name = expect_word(is_op_name, "a graph name after '@'");
    Graph g(name);
    Scope scope;
    expect('(');
    if (!accept(')')) {
      do {
        auto [label, at] = label_token();
        expect(':');
        define(scope, label, at, g.add_input(all_digits(label) ? "" : label, type()));
      } while (accept(','));
      expect(')');
    }
    expect('{');
    while (peek_word() != "return") node(g, scope, depth);
    skip();
    word();  // "return"
    std::vector<Value*> outputs;
    if (peek_char('%')) {
      do outputs.push_back(use(scope));
      while (accept(','));
    }
    g.set_outputs(std::move(outputs));
    expect('}');
    return g;
  }

  void node(Graph& g, Scope& scope, int depth) {
    std::vector<std::pair<std::string, Pos>> labels;
    if (peek_char('%')) {
      do labels.push_back(label_token());
      while (accept(','));
      expect('=');
    }
    skip();
    Pos op_at = p_;
    std::string op = expect_word(is_op_name, "an op name or 'return'");
    std::vector<Value*> inputs;
    expect('(');
    if (!accept(')')) {
      do inputs.push_back(use(scope));
      while (accept(','));
      expect(')');
    }
    ops::Attrs attrs;
    if (peek_char('{') && !block_of_graphs_follows()) attrs = attributes();
    std::vector<TensorType> types;
    if (accept(':')) {
      do types.push_back(type());
      while (accept(','));
    }
    if (types.size() != labels.size())
      fail_at(op_at, str("'", op, "' names ", labels.size(), " results but gives ", types.size(), " result types"));
    Location loc = trailing_location();
    Node* n = g.add_node(op, std::move(inputs), std::move(types), std::move(attrs), loc);
    for (size_t i = 0; i < labels.size(); ++i) {
      auto& [label, at] = labels[i];
      if (!all_digits(label)) n->output(i)->set_name(label);
      define(scope, label, at, n->output(i));
    }
    if (peek_char('{')) subgraphs(*n, depth);
  }

  void subgraphs(Node& n, int depth) {
    expect('{');
    if (!n.loc.known()) n.loc = trailing_location();
    do n.subgraphs.push_back(std::make_shared<Graph>(graph(depth + 1)));
    while (peek_word() == "graph");
    expect('}');
  }

  ops::Attrs attributes() {
    ops::Attrs attrs;
    expect('{');
    do {
      skip();
      Pos at = p_;
      std::string name = expect_word(is_op_name, "an attribute name");
      if (attrs.has(name)) fail_at(at, str("attribute '", name, "' is given twice"));
      expect('=');
      attrs.set(name, attr_value());
    } while (accept(','));
    expect('}');
    return attrs;
  }

  ops::AttrValue attr_value() {
    skip();
    if (peek() == '"') return string_literal();
    if (accept('[')) {
      std::vector<int64_t> v;
      if (accept(']')) return v;
      do v.push_back(int_or_dim());
      while (accept(','));
      expect(']');
      return v;
    }
    Pos at = p_;
    std::string tok = number_token();
    if (tok.empty()) fail("an attribute value (number, [ints], \"string\" or dtype)");
    if (auto t = dtype_named(tok)) return *t;
    if (is_letter(tok[0]) && tok != "inf" && tok != "nan") {  // a symbolic dim: batch, 784*batch
      p_ = at;
      return dim().raw();
    }
    if (tok.find_first_of(".eEin") == std::string::npos) return to_int(tok, at);
    double x = 0;
    ExactFloatScope exact;
    auto [end, ec] = std::from_chars(tok.data(), tok.data() + tok.size(), x);
    if (ec != std::errc() || end != tok.data() + tok.size()) fail_at(at, str("expected a number, found '", tok, "'"));
    return x;
  }

  std::string number_token() {
    size_t start = p_.at;
    while (!eof() && (is_word_char(peek()) || peek() == '-' || peek() == '+')) advance();
    return std::string(s_.substr(start, p_.at - start));
  }

  int64_t to_int(const std::string& tok, const Pos& at) const {
    int64_t v = 0;
    auto [end, ec] = std::from_chars(tok.data(), tok.data() + tok.size(), v);
    if (ec == std::errc::result_out_of_range) fail_at(at, str("integer '", tok, "' is out of range"));
    if (ec != std::errc() || end != tok.data() + tok.size()) fail_at(at, str("expected an integer, found '", tok, "'"));
    return v;
  }
  // An integer, or a symbolic dim where attributes hold sizes.
  int64_t int_or_dim() {
    skip();
    if (!eof() && peek() != '-') return dim().raw();
    return integer();
  }
  int64_t integer() {
    skip();
    Pos at = p_;
    std::string tok = number_token();
    if (tok.empty()) fail("an integer");
    return to_int(tok, at);
  }

  std::string string_literal() {
    expect('"');
    std::string out;
    while (true) {
      if (eof() || peek() == '\n') fail("'\"' closing the string");
      char c = peek();
      advance();
      if (c == '"') return out;
      if (c != '\\') { out += c; continue; }
      if (eof()) fail("an escape sequence");
      char e = peek();
      advance();
      if (e == 'n') out += '\n';
      else if (e == 't') out += '\t';
      else if (e == '"' || e == '\\') out += e;
      else if (e == 'x') out += char(hex_digit() * 16 + hex_digit());
      else fail_at(p_, str("unknown escape '\\", e, "' in a string"));
    }
  }
  int hex_digit() {
    char c = peek();
    if (eof() || !std::isxdigit(static_cast<unsigned char>(c))) fail("a hex digit");
    advance();
    return c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10;
  }

  static std::optional<DType> dtype_named(std::string_view name) {
    for (DType t : {DType::b8, DType::i32, DType::i64, DType::f32, DType::f64})
      if (dtype_name(t) == name) return t;
    return std::nullopt;
  }

  TensorType type() {
    TensorType t;
    t.dtype = *dtype_named(expect_word([](std::string_view w) { return dtype_named(w).has_value(); },
                                       "a dtype (bool, i32, i64, f32, f64)"));
    expect('[');
    if (accept(']')) return t;
    do t.shape.push_back(dim());
    while (accept(','));
    expect(']');
    return t;
  }

  Dim dim() {
    skip();
    Pos at = p_;
    auto is_part = [](std::string_view w) { return all_digits(w) || is_symbol_name(w); };
    std::string w = expect_word(is_part, "a dim (a size or a symbol)");
    if (all_digits(w) && !peek_char('*')) return Dim(to_int(w, at));
    // A product: its numeric factors must multiply without overflow (checked here, as
    // the symbol table would wrap around).
    int64_t coefficient = all_digits(w) ? to_int(w, at) : 1;
    while (accept('*')) {
      skip();
      Pos part_at = p_;
      std::string part = expect_word(is_part, "a size or a symbol after '*'");
      if (all_digits(part) && __builtin_mul_overflow(coefficient, to_int(part, part_at), &coefficient))
        fail_at(at, str("dim '", w, "*", part, "...' is out of range"));
      w += "*" + part;
    }
    return Dim(w);
  }

  std::pair<std::string, Pos> label_token() {
    skip();
    Pos at = p_;
    expect('%');
    std::string label = word();
    if (label.empty()) fail("a value name or number after '%'");
    return {label, at};
  }
  void define(Scope& scope, const std::string& label, const Pos& at, Value* v) {
    if (!scope.emplace(label, v).second) fail_at(at, str("value %", label, " is already defined"));
  }
  Value* use(const Scope& scope) {
    auto [label, at] = label_token();
    auto it = scope.find(label);
    if (it == scope.end()) fail_at(at, str("undefined value %", label));
    return it->second;
  }

  // "   # mlp.cpp:12" on the rest of this line, if present.
  Location trailing_location() {
    while (!eof() && (peek() == ' ' || peek() == '\t')) advance();
    if (eof() || peek() != '#') return {};
    advance();
    size_t start = p_.at;
    while (!eof() && peek() != '\n') advance();
    std::string_view c = s_.substr(start, p_.at - start);
    while (!c.empty() && (c.front() == ' ' || c.front() == '\t')) c.remove_prefix(1);
    while (!c.empty() && (c.back() == ' ' || c.back() == '\t' || c.back() == '\r')) c.remove_suffix(1);
    size_t colon = c.rfind(':');
    if (colon == std::string_view::npos || colon == 0) return {};
    std::string_view digits = c.substr(colon + 1);
    int line = 0;
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), line);
    if (!all_digits(digits) || ec != std::errc() || end != digits.data() + digits.size()) return {};
    return Location(std::string(c.substr(0, colon)), line);
  }

  std::string_view s_;
  Pos p_;
};

}  // namespace

Graph parse_graph(std::string_view text) { return Parser(text).parse(); }

}  // namespace baton::graph
