#include "graph/dim.h"

#include <algorithm>
#include <cctype>
#include <ostream>

#include "baton/error.h"

namespace baton::graph {

static bool is_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }

bool is_symbol_name(std::string_view s) {
  if (s.empty() || !is_letter(s[0])) return false;
  for (char c : s)
    if (!is_letter(c) && !(c >= '0' && c <= '9')) return false;
  return true;
}

Dim::Dim(int64_t raw, int) : raw_(raw) {
  if (!sym::is_valid_dim(raw)) throw ValueError(str("graph: a dim must be >= 0 or a symbol, got ", raw));
}

Dim::Dim(std::string_view symbol) {
  bool ok = !symbol.empty();
  size_t start = 0;
  while (ok && start <= symbol.size()) {  // '*'-separated names and sizes
    size_t end = std::min(symbol.find('*', start), symbol.size());
    std::string_view part = symbol.substr(start, end - start);
    ok = is_symbol_name(part) || (!part.empty() && std::all_of(part.begin(), part.end(), ::isdigit));
    start = end + 1;
  }
  if (!ok)
    throw ValueError(str("graph: invalid dim symbol '", symbol,
                         "' (expected a letter or '_' then letters, digits or '_', or a product "
                         "such as 784*batch)"));
  raw_ = sym::parse(symbol);
}

int64_t Dim::value() const {
  if (is_symbolic()) throw ShapeError(str("graph: dim '", symbol(), "' is symbolic, it has no value yet"));
  return raw_;
}

std::string Dim::symbol() const { return is_symbolic() ? sym::to_string(raw_) : ""; }

std::ostream& operator<<(std::ostream& os, const Dim& d) {
  if (d.is_symbolic()) return os << d.symbol();
  return os << d.value();
}

SymShape::SymShape(const Shape& shape) {
  for (int64_t s : shape) dims_.emplace_back(s);
}

bool SymShape::is_static() const {
  for (auto& d : dims_)
    if (d.is_symbolic()) return false;
  return true;
}

Shape SymShape::raw() const {
  Shape s;
  for (auto& d : dims_) s.push_back(d.raw());
  return s;
}

Shape SymShape::to_shape() const {
  if (!is_static()) throw ShapeError(str("graph: shape ", *this, " has symbolic dims"));
  Shape s;
  for (auto& d : dims_) s.push_back(d.value());
  return s;
}

std::ostream& operator<<(std::ostream& os, const SymShape& s) {
  os << '[';
  for (size_t i = 0; i < s.rank(); ++i) os << (i ? "," : "") << s[i];
  return os << ']';
}

}  // namespace baton::graph
