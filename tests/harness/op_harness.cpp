#include "harness/op_harness.h"

#include <cctype>
#include <cmath>
#include <fstream>
#include <random>
#include <sstream>

namespace baton::testing {

std::vector<OpCase>& mutable_cases() {
  static std::vector<OpCase> cases;
  return cases;
}

int register_cases(std::vector<OpCase> cases) {
  for (auto& c : cases) mutable_cases().push_back(std::move(c));
  return 0;
}

const std::vector<OpCase>& all_cases() { return mutable_cases(); }

::testing::AssertionResult all_close(const Tensor& actual, const Tensor& expected, double atol,
                                     double rtol) {
  if (!(actual.shape() == expected.shape()))
    return ::testing::AssertionFailure()
           << "shape " << actual.shape() << " differs from the expected " << expected.shape();
  if (actual.dtype() == DType::string || expected.dtype() == DType::string) {
    if (actual.dtype() != expected.dtype())
      return ::testing::AssertionFailure() << "dtype " << actual.dtype() << " differs from the expected " << expected.dtype();
    if (actual.to_vector<std::string>() == expected.to_vector<std::string>()) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "strings " << actual << " differ from the expected " << expected;
  }
  auto a = actual.to_vector<double>(), e = expected.to_vector<double>();
  int bad = 0;
  std::ostringstream msg;
  for (size_t i = 0; i < a.size(); ++i) {
    bool both_nan = std::isnan(a[i]) && std::isnan(e[i]);
    bool same_inf = std::isinf(a[i]) && a[i] == e[i];
    if (both_nan || same_inf || std::abs(a[i] - e[i]) <= atol + rtol * std::abs(e[i])) continue;
    if (bad++ < 5) msg << "\n  at " << i << ": " << a[i] << " vs expected " << e[i];
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << bad << " of " << a.size() << " values differ" << msg.str();
}

namespace {

double projected(const OpFn& fn, const Inputs& inputs, const Tensor& r) {
  NoGradGuard guard;
  return (fn(inputs) * r).sum().item<double>();
}

}  // namespace

::testing::AssertionResult gradients_match(const OpFn& fn, const Inputs& inputs_in,
                                           const std::vector<int>& which_in, double atol,
                                           double rtol) {
  Inputs inputs;
  for (const Tensor& t : inputs_in) inputs.push_back(t.detach().clone());
  std::vector<int> which = which_in;
  if (which.empty())
    for (size_t i = 0; i < inputs.size(); ++i)
      if (inputs[i].dtype() == f64) which.push_back(int(i));
  for (int i : which) inputs[size_t(i)].requires_grad_();

  Tensor out = fn(inputs);
  Tensor r = uniform(out.shape(), 0.5, 1.5, 7);
  (out * r).sum().backward();

  const double eps = 1e-6;
  std::ostringstream msg;
  int bad = 0;
  for (int i : which) {
    Tensor x = inputs[size_t(i)];
    Tensor g = x.grad();
    if (!g.defined()) g = zeros_like(x);
    std::vector<double> analytic = g.to_vector<double>();
    double* p = x.data<double>();
    for (int64_t k = 0; k < x.numel(); ++k) {
      double saved = p[k];
      p[k] = saved + eps;
      double up = projected(fn, inputs, r);
      p[k] = saved - eps;
      double down = projected(fn, inputs, r);
      p[k] = saved;
      double numeric = (up - down) / (2 * eps);
      if (std::abs(numeric - analytic[size_t(k)]) > atol + rtol * std::abs(numeric) &&
          bad++ < 5)
        msg << "\n  input " << i << " element " << k << ": autograd " << analytic[size_t(k)]
            << " vs finite differences " << numeric;
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << bad << " gradient values differ" << msg.str();
}

Tensor uniform(const Shape& shape, double lo, double hi, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> v(size_t(shape.numel()));
  for (auto& x : v) x = dist(gen);
  return tensor(v, shape);
}

Tensor uniform_f32(const Shape& shape, uint64_t seed) { return uniform(shape, -1, 1, seed).to(f32); }

int64_t count_nans(const Tensor& t) {
  int64_t n = 0;
  for (double v : t.to(f64).to_vector<double>()) n += std::isnan(v) ? 1 : 0;
  return n;
}

Tensor map_double(const Tensor& x, const std::function<double(double)>& f) {
  std::vector<double> v = x.to_vector<double>();
  for (auto& e : v) e = f(e);
  return tensor(v, x.shape());
}

namespace {

// One tensor in the text format of make_reference.py: "dtype rank d0 d1 ... v0 v1 ...".
Tensor read_tensor(std::istream& in) {
  std::string dtype;
  size_t rank;
  in >> dtype >> rank;
  Shape shape(rank);
  for (auto& d : shape) in >> d;
  std::vector<double> v(size_t(shape.numel()));
  for (auto& x : v) in >> x;
  Tensor t = tensor(v, shape);
  return dtype == "i64" ? t.to(i64) : t;
}

}  // namespace

Reference load_reference(const std::string& name) {
  std::string path = std::string(BATON_TEST_DATA) + "/" + name + ".txt";
  std::ifstream in(path);
  if (!in) throw IOError("load_reference", "cannot open " + path, SourceLoc::current());
  size_t n_in, n_out;
  in >> n_in >> n_out;
  Reference r;
  for (size_t i = 0; i < n_in; ++i) r.inputs.push_back(read_tensor(in));
  for (size_t i = 0; i < n_out; ++i) r.outputs.push_back(read_tensor(in));
  if (!in) throw IOError("load_reference", "truncated file " + path, SourceLoc::current());
  return r;
}

OpCase torch_case(std::string name, std::string file, OpFn fn) {
  return OpCase{
      .name = std::move(name),
      .make_inputs = [file] { return load_reference(file).inputs; },
      .fn = std::move(fn),
      .reference = [file](const Inputs&) { return load_reference(file).outputs[0]; },
  };
}

std::string case_name(const ::testing::TestParamInfo<OpCase>& info) {
  std::string n = info.param.name;
  for (char& ch : n)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return n;
}

}  // namespace baton::testing
