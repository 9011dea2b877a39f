// Shape: the sizes (or strides) of a tensor, any rank. Small shapes live inline, so
// creating a tensor of rank <= 6 allocates nothing for its shape.
#pragma once
#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>
#include <span>
#include <vector>

namespace baton {

class Shape {
 public:
  static constexpr size_t kInline = 6;

  Shape() = default;
  Shape(std::initializer_list<int64_t> dims) { assign(dims.begin(), dims.size()); }
  Shape(std::span<const int64_t> dims) { assign(dims.data(), dims.size()); }
  Shape(const std::vector<int64_t>& dims) { assign(dims.data(), dims.size()); }
  explicit Shape(size_t rank, int64_t fill = 0) {
    resize(rank);
    std::fill(begin(), end(), fill);
  }
  Shape(const Shape& o) { assign(o.data(), o.size()); }
  Shape(Shape&& o) noexcept { move_from(o); }
  Shape& operator=(const Shape& o) {
    if (this != &o) assign(o.data(), o.size());
    return *this;
  }
  Shape& operator=(Shape&& o) noexcept {
    if (this != &o) { release(); move_from(o); }
    return *this;
  }
  ~Shape() { release(); }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  int64_t* data() { return heap_ ? heap_ : inline_; }
  const int64_t* data() const { return heap_ ? heap_ : inline_; }
  int64_t* begin() { return data(); }
  int64_t* end() { return data() + size_; }
  const int64_t* begin() const { return data(); }
  const int64_t* end() const { return data() + size_; }
  int64_t& operator[](size_t i) { return data()[i]; }
  int64_t operator[](size_t i) const { return data()[i]; }
  int64_t back() const { return data()[size_ - 1]; }
  int64_t& back() { return data()[size_ - 1]; }
  operator std::span<const int64_t>() const { return {data(), size_}; }
  std::vector<int64_t> vec() const { return {begin(), end()}; }

  void resize(size_t n);
  void push_back(int64_t v) {
    resize(size_ + 1);
    data()[size_ - 1] = v;
  }
  void insert(size_t pos, int64_t v);
  void erase(size_t pos);

  // Product of the sizes (1 for rank 0); symbolic when a dim is (see sym:: below).
  int64_t numel() const;

  // A loop rather than std::equal, which calls memcmp: shapes have a few dims, and plan
  // steps compare them on every run (docs/PERF.md, plan_step_overhead_us).
  friend bool operator==(const Shape& a, const Shape& b) {
    if (a.size_ != b.size_) return false;
    for (size_t i = 0; i < a.size_; ++i)
      if (a[i] != b[i]) return false;
    return true;
  }

 private:
  int64_t symbolic_numel() const;
  void assign(const int64_t* src, size_t n) {
    resize(n);
    std::copy(src, src + n, data());
  }
  void move_from(Shape& o) {
    size_ = o.size_;
    capacity_ = o.capacity_;
    heap_ = o.heap_;
    if (!heap_) std::copy(o.inline_, o.inline_ + size_, inline_);
    o.heap_ = nullptr;
    o.size_ = 0;
    o.capacity_ = kInline;
  }
  void release() {
    delete[] heap_;
    heap_ = nullptr;
  }

  int64_t* heap_ = nullptr;
  size_t size_ = 0;
  size_t capacity_ = kInline;
  int64_t inline_[kInline];
};

std::ostream& operator<<(std::ostream& os, const Shape& s);

// Row-major (C order) strides for a shape (symbolic where the shape is).
Shape contiguous_strides(const Shape& shape);
// Strides of a static [n, c, h, w] shape stored channels-last (NHWC in memory, PyTorch's
// channels_last memory format): the plan keeps activations between convolutions so.
Shape channels_last_strides(const Shape& shape);

// Symbolic sizes (DESIGN.md idea 3). In a static graph or a compile() trace a dim may be a
// symbol such as `batch`, or a product of symbols and a number (`784*batch`, what
// flattening [batch,28,28] gives). A symbolic dim lives in the same int64_t as a size,
// as a reserved negative bit pattern, so every shape rule runs unchanged on symbolic
// shapes; the rules that do arithmetic on dims use these functions. Any other
// arithmetic on a symbol yields a value that is_valid_dim() rejects, and graph building
// turns that into an error instead of a wrong shape.
namespace sym {
bool is_symbol(int64_t d);
bool is_valid_dim(int64_t d);             // a size >= 0 or a known symbol
int64_t named(std::string_view name);     // the symbol called `name` (interned)
// A symbol no dim has had yet, `stem`_N: the size of an output that only the values of the
// inputs decide (nonzero's count), bound when the op runs.
int64_t fresh(std::string_view stem);
std::string to_string(int64_t d);         // "784", "batch", "784*batch"
int64_t parse(std::string_view text);     // inverse of to_string; throws ValueError
bool is_static(const Shape& s);           // no symbolic dim
int64_t mul(int64_t a, int64_t b);        // symbolic when either is
int64_t add(int64_t a, int64_t b);        // throws ShapeError unless a symbolic sum is a multiple
                                          // of one product (batch + batch = 2*batch)
// a - b when it is a dim: >= 0, and for symbols a multiple of one product (2*batch -
// batch = batch); nullopt otherwise.
std::optional<int64_t> sub(int64_t a, int64_t b);
// a / b when exact (batch*784 / 784 = batch); nullopt when not.
std::optional<int64_t> div_exact(int64_t a, int64_t b);
// A dim as a number times plain symbols, a symbol repeated for its power (784*batch:
// 784 and {batch}; a size n: n and {}).
struct Factors {
  int64_t coefficient = 1;
  std::vector<int64_t> symbols;
};
Factors factors(int64_t d);
// Sizes of the plain symbols a run binds (batch = 32), by symbol.
class Bindings {
 public:
  // False when `symbol` is already bound to another size.
  bool bind(int64_t symbol, int64_t size);
  std::optional<int64_t> lookup(int64_t symbol) const;
  // The size of a dim: itself when static; throws ShapeError naming an unbound symbol.
  int64_t eval(int64_t d) const;
  Shape eval(const Shape& s) const;
  bool empty() const { return sizes_.empty(); }

 private:
  // Bound symbols, then products evaluated so far (memoized: runs evaluate the same few
  // products, such as 784*batch, at every node).
  mutable std::vector<std::pair<int64_t, int64_t>> sizes_;
};
}  // namespace sym

}  // namespace baton
