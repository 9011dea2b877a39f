// Every error baton throws derives from baton::Error and names the op, the shapes and
// dtypes involved, and the caller's file:line.
#pragma once
#include <source_location>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>

namespace baton {

using SourceLoc = std::source_location;

class Error : public std::runtime_error {
 public:
  // Message becomes "[op] message (at file:line)".
  Error(std::string_view op, const std::string& message, SourceLoc loc);
  explicit Error(const std::string& message) : std::runtime_error(message) {}
  const std::string& op() const { return op_; }
  const std::string& where() const { return where_; }

 private:
  std::string op_, where_;
};

#define BATON_ERROR_KIND(Name)          \
  class Name : public Error {           \
   public:                              \
    using Error::Error;                 \
  };
BATON_ERROR_KIND(ShapeError)     // incompatible or invalid shapes
BATON_ERROR_KIND(DTypeError)     // unsupported or mismatched element types
BATON_ERROR_KIND(ValueError)     // a bad argument value (dim out of range, negative size...)
BATON_ERROR_KIND(IndexError)     // an index outside its range
BATON_ERROR_KIND(IOError)        // unreadable, corrupt or unwritable files
BATON_ERROR_KIND(AutogradError)  // misuse of backward(), grad(), requires_grad
BATON_ERROR_KIND(RuntimeError)   // a failure inside a kernel or library
BATON_ERROR_KIND(GraphError)     // misuse of static graphs and traces (item() on a symbolic tensor...)
BATON_ERROR_KIND(OutOfMemoryError)  // an allocation the machine cannot make (says how many bytes)
#undef BATON_ERROR_KIND

// "file:line" with the directory stripped to keep messages short.
std::string format_loc(SourceLoc loc);

// Concatenates anything printable: str("got ", shape, " and ", dtype).
template <class... Args>
std::string str(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

}  // namespace baton
