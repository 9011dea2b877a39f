#include "baton/shape.h"

#include <ostream>

#include "baton/error.h"

namespace baton {

void Shape::resize(size_t n) {
  if (n > capacity_) {
    size_t cap = std::max(n, capacity_ * 2);
    auto* grown = new int64_t[cap];
    std::copy(begin(), end(), grown);
    delete[] heap_;
    heap_ = grown;
    capacity_ = cap;
  }
  size_ = n;
}

void Shape::insert(size_t pos, int64_t v) {
  resize(size_ + 1);
  int64_t* d = data();
  std::copy_backward(d + pos, d + size_ - 1, d + size_);
  d[pos] = v;
}

void Shape::erase(size_t pos) {
  int64_t* d = data();
  std::copy(d + pos + 1, d + size_, d + pos);
  --size_;
}

int64_t Shape::numel() const {
  int64_t n = 1;
  bool overflow = false;
  for (int64_t d : *this) {
    if (d < 0) [[unlikely]] return symbolic_numel();
    overflow |= __builtin_mul_overflow(n, d, &n);
  }
  // A zero dim makes the product 0 whatever overflowed before it.
  if (overflow) [[unlikely]] {
    if (std::find(begin(), end(), 0) != end()) return 0;
    throw ShapeError("shape", str("shape ", *this, " has more elements than an int64 can count"),
                     SourceLoc::current());
  }
  return n;
}

int64_t Shape::symbolic_numel() const {
  int64_t n = 1;
  for (int64_t d : *this) n = sym::mul(n, d);
  return n;
}

std::ostream& operator<<(std::ostream& os, const Shape& s) {
  os << '[';
  for (size_t i = 0; i < s.size(); ++i) {
    os << (i ? "," : "");
    if (sym::is_symbol(s[i])) os << sym::to_string(s[i]);
    else os << s[i];
  }
  return os << ']';
}

Shape contiguous_strides(const Shape& shape) {
  Shape strides(shape.size());
  int64_t step = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = step;
    const int64_t size = shape[i] < 0 ? shape[i] : std::max<int64_t>(shape[i], 1);
    step = step < 0 || size < 0 ? sym::mul(step, size) : step * size;
  }
  return strides;
}

}  // namespace baton
