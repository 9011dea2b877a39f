#include "baton/dtype.h"

#include <ostream>

namespace baton {

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::b8: return "bool";
    case DType::i32: return "i32";
    case DType::i64: return "i64";
    case DType::f32: return "f32";
    case DType::f64: return "f64";
  }
  return "?";
}

size_t dtype_size(DType t) {
  switch (t) {
    case DType::b8: return 1;
    case DType::i32: return 4;
    case DType::i64: return 8;
    case DType::f32: return 4;
    case DType::f64: return 8;
  }
  return 0;
}

std::ostream& operator<<(std::ostream& os, DType t) { return os << dtype_name(t); }

}  // namespace baton
