// The ONNX backend tests' layout and their way of comparing outputs (include/baton/onnx.h),
// shared by baton-conformance and `baton run --test-data`.
#include <cmath>
#include <filesystem>

#include "baton/onnx.h"
#include "baton/ops.h"
#include "io/onnx/proto.h"

namespace baton::onnx {
namespace {

// input_0.pb, input_1.pb, ...: each read as the kind `kinds` gives for it (a tensor past
// its end).
std::vector<Value> numbered(const std::filesystem::path& dir, const std::string& prefix,
                            const std::vector<ValueInfo>& kinds, SourceLoc loc) {
  std::vector<Value> out;
  for (size_t k = 0;; ++k) {
    const std::filesystem::path file = dir / (prefix + "_" + std::to_string(k) + ".pb");
    std::error_code ec;
    if (!std::filesystem::is_regular_file(file, ec)) return out;
    const bool plain = k >= kinds.size() || (!kinds[k].sequence && !kinds[k].optional);
    if (!plain) {
      out.push_back(detail::load_value(file.string(), kinds[k], loc));
      continue;
    }
    Tensor t = load_tensor(file.string(), loc);
    // The suites store bfloat16 data as UINT16 (numpy has no bfloat16): the bits of a model's
    // bf16 input or output.
    if (k < kinds.size() && kinds[k].dtype == DType::bf16 && t.dtype() == DType::u16) t = from_buffer(t.raw_data(), DType::bf16, t.shape());  // contiguous as read
    out.push_back(t);
  }
}

std::string describe(const Tensor& t) { return str(t.dtype(), t.shape()); }

// Strings compare exactly (max_abs_err stays 0).
Comparison compare_strings(const Tensor& got, const Tensor& expected) {
  Comparison c;
  const std::vector<std::string> g = got.to_vector<std::string>(), e = expected.to_vector<std::string>();
  size_t first = 0;
  for (size_t i = 0; i < g.size(); ++i)
    if (g[i] != e[i] && c.mismatched++ == 0) first = i;
  if (c.mismatched)
    c.problem = str(c.mismatched, " of ", g.size(), " strings differ (first: element ", first, " is \"", g[first],
                    "\", expected \"", e[first], "\")");
  return c;
}

}  // namespace

TestDataSet load_test_data_set(const std::string& dir, SourceLoc loc) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) throw IOError("onnx.load_test_data_set", str(dir, ": not a folder"), loc);
  return {numbered(dir, "input", {}, loc), numbered(dir, "output", {}, loc)};
}

TestDataSet load_test_data_set(const std::string& dir, const Model& model, SourceLoc loc) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) throw IOError("onnx.load_test_data_set", str(dir, ": not a folder"), loc);
  return {numbered(dir, "input", model.inputs(), loc), numbered(dir, "output", model.outputs(), loc)};
}

Comparison compare(const Value& got, const Value& expected, const Tolerance& tol) {
  if (got.is_tensor() && expected.is_tensor()) return compare(got.tensor(), expected.tensor(), tol);
  Comparison c;
  if (got.kind() != expected.kind() ||
      (got.kind() == Value::Kind::sequence && got.items().size() != expected.items().size())) {
    c.problem = str("is ", got.describe(), ", expected ", expected.describe());
    return c;
  }
  if (got.kind() == Value::Kind::none) return c;
  for (size_t i = 0; i < got.items().size(); ++i) {
    Comparison one = compare(got.items()[i], expected.items()[i], tol);
    c.max_abs_err = std::max(c.max_abs_err, one.max_abs_err);
    c.mismatched += one.mismatched;
    if (!one.ok() && c.problem.empty()) c.problem = str("item ", i, " ", one.problem);
  }
  return c;
}

Comparison compare(const Tensor& got, const Tensor& expected, const Tolerance& tol) {
  Comparison c;
  if (got.dtype() != expected.dtype() || got.shape() != expected.shape()) {
    c.problem = str("is ", describe(got), ", expected ", describe(expected));
    return c;
  }
  if (got.dtype() == DType::string) return compare_strings(got, expected);
  const bool floats = is_floating(compute_dtype(got.dtype()));
  double scale = 0;
  int64_t first = -1;
  std::string first_text;
  // Integers compare as int64 (exactly, beyond 2^53 too), floats as double.
  auto scan = [&]<class T>(const std::vector<T>& g, const std::vector<T>& e) {
    for (size_t i = 0; i < g.size(); ++i) {
      scale = std::max(scale, std::abs(double(e[i])));
      if (g[i] == e[i] || (std::isnan(double(g[i])) && std::isnan(double(e[i])))) continue;
      const double err = std::isnan(double(g[i]) - double(e[i])) ? INFINITY : std::abs(double(g[i]) - double(e[i]));
      c.max_abs_err = std::max(c.max_abs_err, err);
      if (!floats || tol.of_scale > 0 || !(err <= tol.atol + tol.rtol * std::abs(double(e[i])))) {
        ++c.mismatched;
        if (first < 0) first = int64_t(i), first_text = str(g[i], ", expected ", e[i]);
      }
    }
  };
  if (floats)
    scan(cast(got, DType::f64).contiguous().to_vector<double>(), cast(expected, DType::f64).contiguous().to_vector<double>());
  else
    scan(cast(got, DType::i64).contiguous().to_vector<int64_t>(), cast(expected, DType::i64).contiguous().to_vector<int64_t>());
  if (floats && tol.of_scale > 0) {
    c.mismatched = c.max_abs_err <= tol.of_scale * scale ? 0 : c.mismatched;
    if (c.mismatched)
      c.problem = str("max abs err ", c.max_abs_err, " exceeds ", tol.of_scale, " of the output's scale ", scale);
  } else if (c.mismatched) {
    c.problem = str(c.mismatched, " of ", got.numel(), " elements differ", floats ? " beyond the tolerance" : "",
                    " (first: element ", first, " is ", first_text, "; max abs err ", c.max_abs_err, ")");
  }
  return c;
}

}  // namespace baton::onnx
