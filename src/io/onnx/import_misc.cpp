// ONNX ops composed from baton's public ops that fit no other family: Einsum (permute,
// reshape, matmul and sum; diagonals by index_select), LRN, TopK (topk),
// MeanVarianceNormalization, GlobalLpPool, LpPool, Det (cofactor expansion up to 4x4),
// and NonZero / Unique, whose output sizes depend on the data (symbols bound while running).
#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <optional>

#include "baton/ops.h"
#include "io/onnx/importer.h"

namespace baton::onnx::detail {
namespace {


// ---- Einsum ----------------------------------------------------------------------------

// An operand with one label per dim: letters are their char codes, the dims of the
// ellipsis 256 + k (k counted so that the ellipsis dims of all operands align on the right).
struct Term {
  Tensor t;
  std::vector<int> labels;
};

constexpr int kEllipsis = 256;

// Parses one term ("ij", "...ii", "b...") into labels; the ellipsis is -1.
std::vector<int> parse_term(const NodeContext& c, const std::string& s) {
  std::vector<int> labels;
  bool ellipsis = false;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '.') {
      if (ellipsis || s.compare(i, 3, "...") != 0) c.fail(str("bad ellipsis in the equation term '", s, "'"));
      ellipsis = true;
      labels.push_back(-1);
      i += 2;
    } else if (std::isalpha(static_cast<unsigned char>(s[i]))) {
      labels.push_back(s[i]);
    } else {
      c.fail(str("unexpected character '", s[i], "' in the equation term '", s, "'"));
    }
  }
  return labels;
}

// Labels that occur more than once in t: their diagonal (one dim, the label kept once).
// The two dims move last, are flattened, and index_select picks i * (n + 1).
void take_diagonals(const NodeContext& c, Term& term) {
  for (;;) {
    size_t a = 0, b = 0;
    bool found = false;
    for (size_t i = 0; i < term.labels.size() && !found; ++i)
      for (size_t j = i + 1; j < term.labels.size() && !found; ++j)
        if (term.labels[i] == term.labels[j]) a = i, b = j, found = true;
    if (!found) return;
    const int64_t n = c.static_dim(term.t, int64_t(a), "a repeated equation label");
    if (term.t.shape()[b] != n) c.fail(str("a repeated label has sizes ", n, " and ", term.t.shape()[b]));
    Shape order;
    std::vector<int> labels;
    for (size_t d = 0; d < term.labels.size(); ++d)
      if (d != a && d != b) order.push_back(int64_t(d)), labels.push_back(term.labels[d]);
    order.push_back(int64_t(a));
    order.push_back(int64_t(b));
    Shape flat;
    for (size_t i = 0; i + 2 < order.size() + 0; ++i) flat.push_back(term.t.shape()[size_t(order[i])]);
    flat.push_back(n * n);
    Tensor x = reshape(permute(term.t, order), flat);
    term.t = index_select(x, int64_t(flat.size()) - 1, arange(0, double(n * n), double(n + 1), DType::i64));
    labels.push_back(term.labels[a]);
    term.labels = labels;
  }
}

// Sums away the labels of t not in keep.
void sum_unneeded(Term& term, const std::vector<int>& keep) {
  Dims dims;
  std::vector<int> labels;
  for (size_t d = 0; d < term.labels.size(); ++d) {
    if (std::find(keep.begin(), keep.end(), term.labels[d]) == keep.end()) dims.push_back(int64_t(d));
    else labels.push_back(term.labels[d]);
  }
  if (dims.empty()) return;
  Tensor s = sum(term.t, dims);
  term.t = s.dtype() == term.t.dtype() ? s : cast(s, term.t.dtype());
  term.labels = labels;
}

std::optional<int64_t> label_size(const Term& t, int label) {
  for (size_t d = 0; d < t.labels.size(); ++d)
    if (t.labels[d] == label) return t.t.shape()[d];
  return std::nullopt;
}

// Expands the dims of t whose size is 1 where the other operand's is not (broadcast
// ellipsis dims) to that size.
void broadcast_shared(const NodeContext& c, Term& t, const Term& other) {
  Shape target = t.t.shape();
  bool changed = false;
  for (size_t d = 0; d < t.labels.size(); ++d) {
    const std::optional<int64_t> size = label_size(other, t.labels[d]);
    if (!size) continue;
    const int64_t m = *size;
    if (target[d] == m) continue;
    if (target[d] == 1) target[d] = m, changed = true;
    else if (m != 1) c.fail(str("operands disagree on the size of an equation label: ", target[d], " and ", m));
  }
  if (changed) t.t = expand(t.t, target);
}

// Contracts a and b, keeping the labels in keep: [batch, free a, free b].
Term contract(const NodeContext& c, Term a, Term b, const std::vector<int>& keep) {
  auto in = [](const std::vector<int>& v, int l) { return std::find(v.begin(), v.end(), l) != v.end(); };
  std::vector<int> keep_a = keep, keep_b = keep;
  keep_a.insert(keep_a.end(), b.labels.begin(), b.labels.end());
  keep_b.insert(keep_b.end(), a.labels.begin(), a.labels.end());
  sum_unneeded(a, keep_a);
  sum_unneeded(b, keep_b);
  broadcast_shared(c, a, b);
  broadcast_shared(c, b, a);
  std::vector<int> batch, free_a, free_b, summed;
  for (int l : a.labels) {
    if (in(b.labels, l)) (in(keep, l) ? batch : summed).push_back(l);
    else free_a.push_back(l);
  }
  for (int l : b.labels)
    if (!in(a.labels, l)) free_b.push_back(l);
  auto arrange = [&](const Term& t, std::vector<std::vector<int>> groups) {
    Shape order, shape;
    for (const auto& g : groups) {
      int64_t size = 1;
      for (int l : g) {
        const auto d = int64_t(std::find(t.labels.begin(), t.labels.end(), l) - t.labels.begin());
        order.push_back(d);
        size = sym::mul(size, t.t.shape()[size_t(d)]);
      }
      shape.push_back(size);
    }
    return reshape(permute(t.t, order), shape);
  };
  const Tensor lhs = arrange(a, {batch, free_a, summed});
  const Tensor rhs = arrange(b, {batch, summed, free_b});
  Tensor y = matmul(lhs, rhs);
  Term out;
  Shape shape;
  for (int l : batch) out.labels.push_back(l), shape.push_back(*label_size(a, l));
  for (int l : free_a) out.labels.push_back(l), shape.push_back(*label_size(a, l));
  for (int l : free_b) out.labels.push_back(l), shape.push_back(*label_size(b, l));
  out.t = reshape(y, shape);
  return out;
}

// The equation's operand terms ("ij,jk" -> "ij", "jk").
std::vector<std::string> operand_terms(const std::string& lhs) {
  std::vector<std::string> parts;
  for (size_t start = 0;;) {
    const size_t comma = lhs.find(',', start);
    parts.push_back(lhs.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) return parts;
    start = comma + 1;
  }
}

// The operands with their labels, an ellipsis spelled out as the dims it stands for
// (aligned on the right across operands: kEllipsis + k for the k-th of `ellipsis_dims`).
std::vector<Term> labelled_operands(NodeContext& c, const std::vector<std::string>& parts, int64_t& ellipsis_dims) {
  std::vector<Term> terms;
  ellipsis_dims = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    Term t{c.input(i), parse_term(c, parts[i])};
    const auto has_ellipsis = std::find(t.labels.begin(), t.labels.end(), -1) != t.labels.end();
    const int64_t letters = int64_t(t.labels.size()) - (has_ellipsis ? 1 : 0);
    const int64_t rank = t.t.dim();
    if (has_ellipsis ? rank < letters : rank != letters)
      c.fail(str("operand ", i, " has shape ", t.t.shape(), " but the equation term '", parts[i], "'"));
    if (has_ellipsis) {
      const int64_t e = rank - letters;
      ellipsis_dims = std::max(ellipsis_dims, e);
      std::vector<int> labels;
      for (int l : t.labels) {
        if (l != -1) labels.push_back(l);
        else for (int64_t k = 0; k < e; ++k) labels.push_back(-2 - int(e - 1 - k));  // fixed below
      }
      t.labels = labels;
    }
    terms.push_back(t);
  }
  // Ellipsis dims, aligned on the right: -2 is the last, -3 the one before, ...
  for (Term& t : terms)
    for (int& l : t.labels)
      if (l <= -2) l = kEllipsis + int(ellipsis_dims) - 1 - (-2 - l);
  return terms;
}

// The output's labels: as the equation spells them after "->", else the ellipsis dims and
// then the labels found in one operand only, in order. Each once, each in some operand.
std::vector<int> output_labels(NodeContext& c, const std::string& eq, const std::vector<Term>& terms,
                               int64_t ellipsis_dims) {
  std::vector<int> output;
  const size_t arrow = eq.find("->");
  if (arrow != std::string::npos) {
    for (int l : parse_term(c, eq.substr(arrow + 2))) {
      if (l == -1) for (int64_t k = 0; k < ellipsis_dims; ++k) output.push_back(kEllipsis + int(k));
      else output.push_back(l);
    }
  } else {
    for (int64_t k = 0; k < ellipsis_dims; ++k) output.push_back(kEllipsis + int(k));
    std::map<int, int> counts;
    for (const Term& t : terms)
      for (int l : t.labels) counts[l] += 1;
    for (auto [l, n] : counts)
      if (l < kEllipsis && n == 1) output.push_back(l);
  }
  for (size_t i = 0; i < output.size(); ++i) {
    if (std::count(output.begin(), output.end(), output[i]) > 1) c.fail("the output repeats an equation label");
    bool found = false;
    for (const Term& t : terms) found = found || std::count(t.labels.begin(), t.labels.end(), output[i]) > 0;
    if (!found) c.fail(str("the output label '", char(output[i]), "' is in no operand"));
  }
  return output;
}

// The contracted result's dims in the output's order.
Tensor in_output_order(NodeContext& c, const Term& result, const std::vector<int>& output) {
  Shape order;
  for (int l : output) {
    const auto it = std::find(result.labels.begin(), result.labels.end(), l);
    if (it == result.labels.end()) c.fail("internal: a label of the output was lost");
    order.push_back(int64_t(it - result.labels.begin()));
  }
  if (order.size() != result.labels.size()) c.fail("internal: the result has labels the output does not");
  bool identity = true;
  for (size_t i = 0; i < order.size(); ++i) identity = identity && order[i] == int64_t(i);
  return identity ? result.t : permute(result.t, order);
}

Outputs einsum(NodeContext& c) {
  std::string eq;
  for (char ch : c.attr_string("equation", "")) if (ch != ' ') eq += ch;
  const std::vector<std::string> parts = operand_terms(eq.substr(0, eq.find("->")));
  if (parts.size() != c.num_inputs())
    c.fail(str("the equation '", eq, "' has ", parts.size(), " operands but the node ", c.num_inputs(), " inputs"));
  int64_t ellipsis_dims = 0;
  std::vector<Term> terms = labelled_operands(c, parts, ellipsis_dims);
  const std::vector<int> output = output_labels(c, eq, terms, ellipsis_dims);
  for (Term& t : terms) take_diagonals(c, t);
  // Labels each operand must keep: the output's and those of the other operands.
  auto needed_besides = [&](size_t skip, size_t from) {
    std::vector<int> keep = output;
    for (size_t j = from; j < terms.size(); ++j)
      if (j != skip) keep.insert(keep.end(), terms[j].labels.begin(), terms[j].labels.end());
    return keep;
  };
  Term acc = terms[0];
  if (terms.size() == 1) sum_unneeded(acc, output);
  for (size_t i = 1; i < terms.size(); ++i) acc = contract(c, acc, terms[i], needed_besides(i, i + 1));
  // A label both in the result and in the output only once remains; permute to the output.
  return {in_output_order(c, acc, output)};
}

// ---- TopK ------------------------------------------------------------------------------

// TopK onto topk (sorted, ties to the lower index, as ONNX's reference); a K computed from
// the model inputs onto topk with k in a tensor.
Outputs top_k(NodeContext& c) {
  const Tensor& x = c.input(0);
  if (x.dim() == 0) c.fail("needs an input of rank 1 or more");
  const int64_t axis = axis_attr(c, "axis", -1, x.dim());
  const bool largest = c.attr_int("largest", 1) != 0;
  if (c.opset >= 10 && c.computed_from_input_values(1)) {  // K read when the model runs
    const TopK top = topk(x, c.input(1), axis, largest);
    return {top.values, top.indices};
  }
  std::vector<int64_t> ks = c.opset >= 10 ? c.ints_input(1) : std::vector<int64_t>{c.attr_int("k")};
  if (ks.size() != 1) c.fail(str("K must hold one value, not ", ks.size()));
  const TopK top = topk(x, ks[0], axis, largest);
  return {top.values, top.indices};
}

// ---- LRN -------------------------------------------------------------------------------

// y = x / (bias + alpha / size * sum of x^2 over the channel window)^beta; the window of
// channel c is [c - floor((size - 1) / 2), c + ceil((size - 1) / 2)].
Outputs lrn(NodeContext& c) {
  const Tensor& x = c.input(0);
  if (x.dim() < 2) c.fail(str("needs an input [N, C, ...], not ", x.shape()));
  const int64_t size = c.attr_int("size");
  if (size < 1) c.fail(str("size must be positive, got ", size));
  const double alpha = c.attr_float("alpha", 1e-4), beta = c.attr_float("beta", 0.75), bias = c.attr_float("bias", 1.0);
  const int64_t channels = c.static_dim(x, 1, "the channels");
  const int64_t before = (size - 1) / 2, after = size - 1 - before;
  std::vector<int64_t> pads(size_t(2 * (x.dim() - 1)), 0);  // last dim first
  pads[size_t(2 * (x.dim() - 2))] = before;
  pads[size_t(2 * (x.dim() - 2) + 1)] = after;
  const Tensor padded = pad(x * x, pads, 0.0);
  Tensor window;
  for (int64_t i = 0; i < size; ++i) {
    Tensor part = slice(padded, 1, i, i + channels);
    window = window.defined() ? window + part : part;
  }
  return {x / pow(bias + (alpha / double(size)) * window, beta)};
}

// ---- Normalization and Lp pooling ------------------------------------------------------

// As ONNX's function body: (x - E[x]) / (sqrt(E[x^2] - E[x]^2) + 1e-9).
Outputs mean_variance_normalization(NodeContext& c) {
  const Tensor& x = c.input(0);
  std::vector<int64_t> axes = c.attr_ints("axes", {0, 2, 3});
  Dims dims;
  for (int64_t a : axes) dims.push_back(normalize_axis(c, a, x.dim()));
  const Tensor m = mean(x, dims, true);
  const Tensor variance = mean(x * x, dims, true) - m * m;
  return {(x - m) / (sqrt(variance) + 1e-9)};
}

Tensor lp_power(const Tensor& x, double p) {
  if (p == 1) return abs(x);
  if (p == 2) return x * x;
  return pow(abs(x), p);
}

Tensor lp_root(const Tensor& s, double p) {
  if (p == 1) return s;
  if (p == 2) return sqrt(s);
  return pow(s, 1.0 / p);
}

Outputs global_lp_pool(NodeContext& c) {
  const Tensor& x = c.input(0);
  if (x.dim() < 3) c.fail(str("needs an input [N, C, spatial...], not ", x.shape()));
  const auto p = double(c.attr_int("p", 2));
  Dims dims;
  for (int64_t d = 2; d < x.dim(); ++d) dims.push_back(d);
  return {lp_root(sum(lp_power(x, p), dims, true), p)};
}

// 2-D LpPool: zero padding (|0|^p adds nothing), then the window sums as average pooling
// times the window's size.
Outputs lp_pool(NodeContext& c) {
  const Tensor& x = c.input(0);
  if (x.dim() != 4) c.fail(str("only 2-D LpPool ([N, C, H, W]) is supported, not ", x.shape()));
  const std::string auto_pad = c.attr_string("auto_pad", "NOTSET");
  if (auto_pad != "NOTSET" && auto_pad != "VALID") c.fail(str("auto_pad '", auto_pad, "' is not supported"));
  const std::vector<int64_t> kernel = c.attr_ints("kernel_shape");
  if (kernel.size() != 2) c.fail("kernel_shape must have two values");
  const std::vector<int64_t> strides = c.attr_ints("strides", {1, 1});
  std::vector<int64_t> pads = c.attr_ints("pads", {0, 0, 0, 0});
  if (auto_pad == "VALID") pads = {0, 0, 0, 0};
  if (strides.size() != 2 || pads.size() != 4) c.fail("strides and pads must have 2 and 4 values");
  if (c.attr_ints("dilations", {1, 1}) != std::vector<int64_t>{1, 1}) c.fail("dilations are not supported");
  if (c.attr_int("ceil_mode", 0) != 0) c.fail("ceil_mode is not supported");
  const auto p = double(c.attr_int("p", 2));
  Tensor powered = lp_power(x, p);
  if (pads != std::vector<int64_t>{0, 0, 0, 0}) powered = pad(powered, {pads[1], pads[3], pads[0], pads[2]}, 0.0);
  Pool2dOptions o;
  o.kernel = {kernel[0], kernel[1]};
  o.stride = {strides[0], strides[1]};
  const Tensor sums = avg_pool2d(powered, o) * double(kernel[0] * kernel[1]);
  return {lp_root(sums, p)};
}

// ---- Det -------------------------------------------------------------------------------

// Cofactor expansion along the first row (exact products and sums; up to 4x4).
Tensor det_of(const Tensor& m, int64_t n) {
  const int64_t r = m.dim();
  auto at = [&](int64_t i, int64_t j) {
    return squeeze(squeeze(slice(slice(m, r - 2, i, i + 1), r - 1, j, j + 1), r - 1), r - 2);
  };
  if (n == 1) return at(0, 0);
  if (n == 2) return at(0, 0) * at(1, 1) - at(0, 1) * at(1, 0);
  Tensor total;
  const Tensor rows = arange(1, double(n), 1, DType::i64);
  for (int64_t j = 0; j < n; ++j) {
    std::vector<int64_t> keep;
    for (int64_t q = 0; q < n; ++q)
      if (q != j) keep.push_back(q);
    const Tensor minor = index_select(index_select(m, r - 2, rows), r - 1, tensor(keep, Shape{n - 1}));
    Tensor term = at(0, j) * det_of(minor, n - 1);
    total = !total.defined() ? term : (j % 2 == 0 ? total + term : total - term);
  }
  return total;
}

Outputs det(NodeContext& c) {
  const Tensor& x = c.input(0);
  if (x.dim() < 2) c.fail(str("needs matrices [..., M, M], not ", x.shape()));
  const int64_t n = c.static_dim(x, x.dim() - 1, "the matrix size");
  if (x.shape()[size_t(x.dim() - 2)] != n) c.fail(str("needs square matrices, not ", x.shape()));
  if (!is_floating(x.dtype())) c.fail(str("needs floating-point matrices, not ", x.dtype()));
  if (n > 4) c.fail(str("matrices of size ", n, " need an LU decomposition, which baton lacks (up to 4x4 only)"));
  return {det_of(x, n)};
}

// ---- NonZero and Unique ----------------------------------------------------------------

// NonZero is baton's nonzero transposed, Unique baton's unique. Their counts depend on the
// values: from a known input they are computed while loading; from a computed one they
// are fresh symbols that a plan binds when the step runs (runtime/plan.h, "Stages").

Outputs non_zero(NodeContext& c) { return {transpose(nonzero(c.input(0)), 0, 1)}; }

// Unique slices along axis (or elements of the flattened input), as baton's unique.
Outputs unique_import(NodeContext& c) {
  std::optional<int64_t> axis;
  if (c.has_attr("axis")) axis = c.attr_int("axis");
  const UniqueResult r = unique(c.input(0), axis, c.attr_int("sorted", 1) != 0, c.importer.loc());
  return {r.values, r.first_indices, r.inverse, r.counts};
}

}  // namespace

BATON_ONNX_IMPORTER("Einsum", einsum);
BATON_ONNX_IMPORTER("TopK", top_k);
BATON_ONNX_IMPORTER("LRN", lrn);
BATON_ONNX_IMPORTER("MeanVarianceNormalization", mean_variance_normalization);
BATON_ONNX_IMPORTER("GlobalLpPool", global_lp_pool);
BATON_ONNX_IMPORTER("LpPool", lp_pool);
BATON_ONNX_IMPORTER("Det", det);
BATON_ONNX_IMPORTER("NonZero", non_zero);
BATON_ONNX_IMPORTER("Unique", unique_import);

}  // namespace baton::onnx::detail
