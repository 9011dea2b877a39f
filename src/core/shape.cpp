#include "baton/shape.h"

#include <algorithm>
#include <climits>
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

Shape channels_last_strides(const Shape& shape) {
  if (shape.size() != 4) throw ShapeError(str("channels-last strides need a shape [n, c, h, w], got ", shape));
  const int64_t c = shape[1], h = shape[2], w = shape[3];
  return Shape{h * w * c, 1, w * c, c};
}

Shape contiguous_strides(const Shape& shape) {
  Shape strides(shape.size());
  int64_t step = 1;
  const bool empty = std::find(shape.begin(), shape.end(), 0) != shape.end();
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = step;
    if (i == 0) break;  // the product of all dims is no stride
    const int64_t size = shape[i] < 0 ? shape[i] : std::max<int64_t>(shape[i], 1);
    if (step < 0 || size < 0) {
      step = sym::mul(step, size);
    } else if (__builtin_mul_overflow(step, size, &step)) {
      // No element of an empty tensor is ever addressed: any stride serves.
      if (!empty)
        throw ShapeError("shape", str("shape ", shape, " has more elements than an int64 can count"),
                         SourceLoc::current());
      step = INT64_MAX;
    }
  }
  return strides;
}

}  // namespace baton
