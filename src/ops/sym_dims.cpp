#include "ops/sym_dims.h"

namespace baton::ops {

int64_t symbolic_dim_add(int64_t a, int64_t b, const CallContext& c) {
  try {
    return sym::add(a, b);
  } catch (const ShapeError&) {  // reported with the op and its inputs instead
    if (a >= 0 && b >= 0) c.fail("the size ", a, " + ", b, " does not fit in an int64");
    c.fail("the size ", sym::to_string(a), " + ", sym::to_string(b),
           " is not a dim a symbol can express (only multiples of one symbolic product add up); "
           "make these dims static");
  }
}

void fail_symbolic_dim(const CallContext& c, const Shape& shape, size_t d, std::string_view what,
                       std::string_view why) {
  c.fail(what, " (dim ", d, " of ", shape, ") is symbolic (", sym::to_string(shape[d]),
         ") but must be static: ", why);
}

}  // namespace baton::ops
