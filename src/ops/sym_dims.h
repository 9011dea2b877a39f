// Dim arithmetic for shape rules that must also hold for symbolic dims (sym:: in
// baton/shape.h): a graph built for `batch` infers [batch,10], never a number baked in.
// Static dims take the plain arithmetic inline, so eager calls pay one comparison.
#pragma once
#include <optional>
#include <string_view>

#include "dispatch/registry.h"

namespace baton::ops {

// Static dims that overflow go to sym::, which throws a ShapeError (sizes from graph text
// can be anything).
inline int64_t dim_mul(int64_t a, int64_t b) {
  int64_t out = 0;
  if (a >= 0 && b >= 0 && !__builtin_mul_overflow(a, b, &out)) return out;
  return sym::mul(a, b);
}

// a + b. A symbolic sum that is no multiple of one product (batch + 3) is a ShapeError
// naming the op.
int64_t symbolic_dim_add(int64_t a, int64_t b, const CallContext& c);
inline int64_t dim_add(int64_t a, int64_t b, const CallContext& c) {
  int64_t out = 0;
  if (a >= 0 && b >= 0 && !__builtin_add_overflow(a, b, &out)) return out;
  return symbolic_dim_add(a, b, c);
}

// a - b when it is a dim (sym::sub); inline for static dims.
inline std::optional<int64_t> dim_sub(int64_t a, int64_t b) {
  if (a >= 0 && b >= 0) return a >= b ? std::optional(a - b) : std::nullopt;
  return sym::sub(a, b);
}

// Throws ShapeError naming the op, the dim and its symbol unless shape[d] is static;
// `why` says what needs the size ("the output size is computed from it").
void fail_symbolic_dim(const CallContext& c, const Shape& shape, size_t d, std::string_view what,
                       std::string_view why);
inline void require_static_dim(const CallContext& c, const Shape& shape, size_t d,
                               std::string_view what, std::string_view why) {
  if (shape[d] < 0) [[unlikely]] fail_symbolic_dim(c, shape, d, what, why);
}

}  // namespace baton::ops
