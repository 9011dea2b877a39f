// operator<< for tensors, in PyTorch's format:
//   tensor([[1.0000, 2.5000],
//           [3.0000, 4.0000]], grad_fn=<MulBackward>)
// Tensors over 1000 elements show three items at each end of every dim and their shape.
#include <cmath>
#include <iomanip>
#include <ostream>
#include <sstream>

#include "baton/tensor.h"

namespace baton {
namespace {

constexpr int64_t kSummarizeAbove = 1000;
constexpr int64_t kEdgeItems = 3;

struct Format {
  enum Kind { Integer, FloatInt, Fixed, Scientific, Bool } kind;
  int width = 1;
};

std::string format_value(double v, const Format& f) {
  std::ostringstream os;
  switch (f.kind) {
    case Format::Bool: return v != 0 ? "True" : "False";
    case Format::Integer: os << int64_t(v); break;
    case Format::FloatInt:
      if (std::isfinite(v)) os << int64_t(v) << '.';
      else os << v;
      break;
    case Format::Fixed: os << std::fixed << std::setprecision(4) << v; break;
    case Format::Scientific: os << std::scientific << std::setprecision(4) << v; break;
  }
  return os.str();
}

Format choose_format(const std::vector<double>& values, DType dtype) {
  Format f{Format::Integer};
  if (dtype == b8) f.kind = Format::Bool;
  else if (is_floating(dtype)) {
    bool integral = true;
    double max_abs = 0, min_abs = INFINITY;
    for (double v : values) {
      if (!std::isfinite(v)) continue;
      integral &= v == std::round(v);
      max_abs = std::max(max_abs, std::abs(v));
      if (v != 0) min_abs = std::min(min_abs, std::abs(v));
    }
    if (integral && max_abs < 1e8) f.kind = Format::FloatInt;
    else if (max_abs < 1e8 && (min_abs >= 1e-4 || min_abs == INFINITY)) f.kind = Format::Fixed;
    else f.kind = Format::Scientific;
  }
  for (double v : values) f.width = std::max(f.width, int(format_value(v, f).size()));
  return f;
}

class Printer {
 public:
  Printer(const Tensor& t, bool summarize) : t_(t), summarize_(summarize) {
    values_ = t.to_vector<double>();
    strides_ = contiguous_strides(t.shape());
  }

  void print(std::ostream& os, int indent) {
    std::vector<double> shown;
    collect(0, 0, shown);
    format_ = choose_format(shown, t_.dtype());
    write(os, 0, 0, indent);
  }

 private:
  bool skip(int64_t size, int64_t i) const {
    return summarize_ && size > 2 * kEdgeItems && i >= kEdgeItems && i < size - kEdgeItems;
  }

  void collect(size_t dim, int64_t base, std::vector<double>& out) const {
    if (dim == t_.shape().size()) {
      out.push_back(values_[size_t(base)]);
      return;
    }
    for (int64_t i = 0; i < t_.shape()[dim]; ++i)
      if (!skip(t_.shape()[dim], i)) collect(dim + 1, base + i * strides_[dim], out);
  }

  void write(std::ostream& os, size_t dim, int64_t base, int indent) const {
    if (dim == t_.shape().size()) {
      os << std::setw(format_.width) << format_value(values_[size_t(base)], format_);
      return;
    }
    const int64_t n = t_.shape()[dim];
    const bool last = dim + 1 == t_.shape().size();
    os << '[';
    for (int64_t i = 0; i < n; ++i) {
      if (skip(n, i)) {
        if (i == kEdgeItems) separator(os, dim, last, indent, /*ellipsis=*/true);
        continue;
      }
      if (i > 0) separator(os, dim, last, indent, false);
      write(os, dim + 1, base + i * strides_[dim], indent);
    }
    os << ']';
  }

  void separator(std::ostream& os, size_t dim, bool last, int indent, bool ellipsis) const {
    os << ',';
    if (last) {
      os << ' ';
      if (ellipsis) os << "..., ";
      return;
    }
    size_t blank = t_.shape().size() - dim - 1;
    os << std::string(blank, '\n') << std::string(size_t(indent) + dim + 1, ' ');
    if (ellipsis) os << "...," << '\n' << std::string(size_t(indent) + dim + 1, ' ');
  }

  const Tensor& t_;
  bool summarize_;
  std::vector<double> values_;
  Shape strides_;
  Format format_{Format::Integer};
};

}  // namespace

std::ostream& operator<<(std::ostream& os, const Tensor& t) {
  if (!t.defined()) return os << "tensor(undefined)";
  const bool summarize = t.numel() > kSummarizeAbove;
  os << "tensor(";
  if (t.numel() == 0) os << "[]";
  else Printer(t, summarize).print(os, 7);
  if (summarize || t.numel() == 0) os << ", shape=" << t.shape();
  if (t.dtype() != f32 && t.dtype() != i64 && t.dtype() != b8) os << ", dtype=" << t.dtype();
  if (!t.grad_fn_name().empty()) os << ", grad_fn=<" << t.grad_fn_name() << '>';
  else if (t.requires_grad()) os << ", requires_grad=true";
  return os << ')';
}

}  // namespace baton
