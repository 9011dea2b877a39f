// operator<< for tensors, in PyTorch's format:
//   tensor([[ 1.5000, -2.2500],
//           [ 3.0000,  4.0000]], grad_fn=<MulBackward>)
// Floats print as integers ("1.") when all are whole, in fixed point with 4 decimals, or
// in scientific notation when the nonzero magnitudes span more than 1000x, exceed 1e8
// or go below 1e-4 -- PyTorch's rules. Rows wrap at 80 columns. Tensors over 1000
// elements show three items at each end of every dim, and their shape.
#include <cmath>
#include <algorithm>
#include <cstdio>
#include <optional>
#include <ostream>

#include "baton/tensor.h"

namespace baton {
namespace {

constexpr int64_t kSummarizeAbove = 1000;
constexpr int64_t kEdgeItems = 3;
constexpr int kLineWidth = 80;

class Formatter {
 public:
  Formatter(const std::vector<double>& shown, DType dtype) : dtype_(compute_dtype(dtype)) {
    if (!is_floating(dtype_)) {
      for (double v : shown) width_ = std::max(width_, int(format(v).size()));
      return;
    }
    double lo = INFINITY, hi = 0;
    bool whole = true;
    for (double v : shown) {
      if (!std::isfinite(v) || v == 0) continue;
      lo = std::min(lo, std::abs(v));
      hi = std::max(hi, std::abs(v));
      whole &= v == std::ceil(v);
    }
    if (hi == 0) return;  // no nonzero finite value: "0.", "nan", "inf"
    kind_ = whole ? Whole : Fixed;
    if (hi / lo > 1000 || hi > 1e8 || (!whole && lo < 1e-4)) kind_ = Scientific;
    for (double v : shown)
      if (std::isfinite(v) && v != 0) width_ = std::max(width_, int(format(v).size()));
  }

  std::string format(double v) const {
    char buf[64];
    if (dtype_ == b8) return v != 0 ? "True" : "False";
    if (!is_floating(dtype_)) {
      std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(v));
    } else if (std::isnan(v)) {
      return "nan";
    } else if (std::isinf(v)) {
      return v > 0 ? "inf" : "-inf";
    } else if (kind_ == Whole) {
      std::snprintf(buf, sizeof buf, "%.0f.", v);
    } else {
      std::snprintf(buf, sizeof buf, kind_ == Fixed ? "%.4f" : "%.4e", v);
    }
    return buf;
  }

  int width() const { return width_; }

 private:
  enum Kind { Whole, Fixed, Scientific };
  DType dtype_;
  Kind kind_ = Whole;
  int width_ = 1;
};

// A string element as Python shows it: in single quotes, a quote or backslash escaped.
std::string quoted(const std::string& text) {
  std::string q = "'";
  for (char c : text) {
    if (c == '\'' || c == '\\') q += '\\';
    q += c;
  }
  return q + "'";
}

class Printer {
 public:
  Printer(const Tensor& t, bool summarize)
      : shape_(t.shape()), strides_(contiguous_strides(t.shape())), summarize_(summarize) {
    std::vector<int64_t> shown;
    collect(0, 0, shown);
    if (t.dtype() == DType::string) {
      texts_ = t.to_vector<std::string>();
      for (std::string& text : texts_) text = quoted(text);
      for (int64_t i : shown) width_ = std::max(width_, int(texts_[size_t(i)].size()));
      return;
    }
    values_ = t.to_vector<double>();
    std::vector<double> shown_values;
    for (int64_t i : shown) shown_values.push_back(values_[size_t(i)]);
    format_.emplace(shown_values, t.dtype());
    width_ = format_->width();
  }

  // The nested brackets; `indent` is the column of the first '['.
  std::string str(int indent) const { return block(0, 0, indent); }

 private:
  bool elided(int64_t n) const { return summarize_ && n > 2 * kEdgeItems; }

  // Element i (row-major), unpadded and padded to the widest shown (numbers only).
  std::string cell(int64_t i) const { return format_ ? format_->format(values_[size_t(i)]) : texts_[size_t(i)]; }
  std::string padded(int64_t i) const {
    std::string s = cell(i);
    if (!format_) return s;  // strings go unpadded, as NumPy shows them
    return s.size() < size_t(width_) ? std::string(size_t(width_) - s.size(), ' ') + s : s;
  }

  // The indices of one dim that are printed (-1 marks the ellipsis).
  std::vector<int64_t> shown_indices(int64_t n) const {
    std::vector<int64_t> idx;
    for (int64_t i = 0; i < n; ++i) {
      if (elided(n) && i == kEdgeItems) {
        idx.push_back(-1);
        i = n - kEdgeItems - 1;
        continue;
      }
      idx.push_back(i);
    }
    return idx;
  }

  // The row-major indices of the elements shown.
  void collect(size_t dim, int64_t base, std::vector<int64_t>& out) const {
    if (dim == shape_.size()) {
      out.push_back(base);
      return;
    }
    for (int64_t i : shown_indices(shape_[dim]))
      if (i >= 0) collect(dim + 1, base + i * strides_[dim], out);
  }

  std::string block(size_t dim, int64_t base, int indent) const {
    if (dim == shape_.size()) return cell(base);
    if (dim + 1 == shape_.size()) return row(base, indent);
    std::string sep = ",";
    sep.append(shape_.size() - dim - 1, '\n').append(size_t(indent) + 1, ' ');
    std::string s = "[";
    bool first = true;
    for (int64_t i : shown_indices(shape_[dim])) {
      if (!first) s += sep;
      first = false;
      s += i < 0 ? "..." : block(dim + 1, base + i * strides_[dim], indent + 1);
    }
    return s + "]";
  }

  // The last dim: elements joined by ", ", wrapped to the line width.
  std::string row(int64_t base, int indent) const {
    const size_t dim = shape_.size() - 1;
    const int per_line = std::max(1, (kLineWidth - indent) / (width_ + 2));
    std::string s = "[";
    int on_line = 0;
    for (int64_t i : shown_indices(shape_[dim])) {
      if (on_line == per_line) {
        s.append(",\n").append(size_t(indent) + 1, ' ');
        on_line = 0;
      } else if (on_line > 0) {
        s += ", ";
      }
      s += i < 0 ? " ..." : padded(base + i * strides_[dim]);
      ++on_line;
    }
    return s + "]";
  }

  Shape shape_, strides_;
  bool summarize_;
  std::vector<double> values_;      // numbers, formatted by format_
  std::vector<std::string> texts_;  // or strings, quoted
  std::optional<Formatter> format_;
  int width_ = 1;
};

}  // namespace

std::ostream& operator<<(std::ostream& os, const Tensor& t) {
  if (!t.defined()) return os << "tensor(undefined)";
  if (t.is_symbolic()) return os << "tensor(symbolic " << t.dtype() << t.shape() << ')';
  const bool summarize = t.numel() > kSummarizeAbove;
  os << "tensor(";
  if (t.numel() == 0) os << "[]";
  else os << Printer(t, summarize).str(7);
  if (summarize || (t.numel() == 0 && t.dim() != 1)) os << ", shape=" << t.shape();
  if (t.dtype() != f32 && t.dtype() != i64 && t.dtype() != b8) os << ", dtype=" << t.dtype();
  if (!t.grad_fn_name().empty()) os << ", grad_fn=<" << t.grad_fn_name() << '>';
  else if (t.requires_grad()) os << ", requires_grad=True";
  return os << ')';
}

}  // namespace baton
