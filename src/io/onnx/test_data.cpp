// The ONNX backend tests' layout and their way of comparing outputs (include/baton/onnx.h),
// shared by baton-conformance and `baton run --test-data`.
#include <cmath>
#include <filesystem>

#include "baton/onnx.h"
#include "baton/ops.h"

namespace baton::onnx {
namespace {

std::vector<Tensor> numbered(const std::filesystem::path& dir, const std::string& prefix, SourceLoc loc) {
  std::vector<Tensor> out;
  for (size_t k = 0;; ++k) {
    const std::filesystem::path file = dir / (prefix + "_" + std::to_string(k) + ".pb");
    std::error_code ec;
    if (!std::filesystem::is_regular_file(file, ec)) return out;
    out.push_back(load_tensor(file.string(), loc));
  }
}

std::string describe(const Tensor& t) { return str(t.dtype(), t.shape()); }

}  // namespace

TestDataSet load_test_data_set(const std::string& dir, SourceLoc loc) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) throw IOError("onnx.load_test_data_set", str(dir, ": not a folder"), loc);
  return {numbered(dir, "input", loc), numbered(dir, "output", loc)};
}

Comparison compare(const Tensor& got, const Tensor& expected, const Tolerance& tol) {
  Comparison c;
  if (got.dtype() != expected.dtype() || got.shape() != expected.shape()) {
    c.problem = str("is ", describe(got), ", expected ", describe(expected));
    return c;
  }
  const bool floats = is_floating(got.dtype());
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
