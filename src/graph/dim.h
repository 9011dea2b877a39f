// Symbolic sizes for graph values: a dim is a known size (784) or a named symbol
// ("batch") that stays unknown until the graph runs (DESIGN.md idea 3).
#pragma once
#include <concepts>
#include <cstdint>
#include <initializer_list>
#include <iosfwd>
#include <string>
#include <vector>

#include "baton/shape.h"

namespace baton::graph {

class Dim {
 public:
  Dim() = default;
  // Any integer type, so that Dim(0) is not ambiguous with the const char* overload.
  // A negative value must be a symbol of sym:: (how baton::Shape stores them).
  template <std::integral T>
  Dim(T size) : Dim(int64_t(size), 0) {}
  // A symbol ("batch") or a product of symbols and sizes ("784*batch"); throws ValueError.
  Dim(std::string_view symbol);
  Dim(const std::string& symbol) : Dim(std::string_view(symbol)) {}
  Dim(const char* symbol) : Dim(std::string_view(symbol)) {}

  bool is_static() const { return raw_ >= 0; }
  bool is_symbolic() const { return raw_ < 0; }
  int64_t value() const;  // throws ShapeError for a symbol
  std::string symbol() const;  // "" for a size
  int64_t raw() const { return raw_; }  // the size, or the symbol as Shape stores it

  friend bool operator==(const Dim& a, const Dim& b) = default;

 private:
  Dim(int64_t raw, int);  // throws ValueError for a negative non-symbol
  int64_t raw_ = 0;
};
std::ostream& operator<<(std::ostream& os, const Dim& d);

// True for a valid symbol name: a letter or '_' then letters, digits or '_'.
bool is_symbol_name(std::string_view s);

// A shape whose dims may be symbolic; prints as [batch,784] ([] for rank 0).
class SymShape {
 public:
  SymShape() = default;
  SymShape(std::initializer_list<Dim> dims) : dims_(dims) {}
  SymShape(std::vector<Dim> dims) : dims_(std::move(dims)) {}
  SymShape(const Shape& shape);

  size_t rank() const { return dims_.size(); }
  const Dim& operator[](size_t i) const { return dims_[i]; }
  Dim& operator[](size_t i) { return dims_[i]; }
  const std::vector<Dim>& dims() const { return dims_; }
  auto begin() const { return dims_.begin(); }
  auto end() const { return dims_.end(); }
  void push_back(Dim d) { dims_.push_back(std::move(d)); }

  bool is_static() const;
  Shape to_shape() const;  // throws ShapeError when any dim is symbolic
  Shape raw() const;       // sizes and symbols as baton::Shape stores them

  friend bool operator==(const SymShape& a, const SymShape& b) = default;

 private:
  std::vector<Dim> dims_;
};
std::ostream& operator<<(std::ostream& os, const SymShape& s);

}  // namespace baton::graph
