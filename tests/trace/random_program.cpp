// The random-program generator (random_program.h).
#include "trace/random_program.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>
#include <random>
#include <sstream>

#include "harness/op_harness.h"

namespace baton::testing {

std::string dims_text(const DimList& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) s += ",";
    const Dim& d = dims[i];
    if (!d.batch) s += std::to_string(d.size);
    else s += d.size == 1 ? "batch" : std::to_string(d.size) + "*batch";
  }
  return s + "]";
}

Shape concrete_shape(const DimList& dims, int64_t batch) {
  Shape s;
  for (const Dim& d : dims) s.push_back(d.batch ? d.size * batch : d.size);
  return s;
}

std::vector<Tensor> RandomProgram::run(const std::vector<Tensor>& in) const {
  std::vector<Tensor> values = in;
  for (const Step& step : steps) values.push_back(step.run(values));
  std::vector<Tensor> out;
  for (int id : outputs) out.push_back(values.at(size_t(id)));
  return out;
}

namespace {

uint64_t data_seed(uint64_t program_seed, size_t which, int64_t batch) {
  return program_seed * 1000003 + which * 101 + uint64_t(batch);
}

}  // namespace

std::vector<Tensor> RandomProgram::make_inputs(int64_t batch) const {
  std::vector<Tensor> out;
  for (size_t i = 0; i < inputs.size(); ++i)
    out.push_back(uniform(concrete_shape(inputs[i], batch), input_lo[i], input_hi[i],
                          data_seed(seed, i, batch))
                      .to(input_dtypes[i]));
  return out;
}

std::vector<Tensor> RandomProgram::make_cotangents(int64_t batch) const {
  std::vector<Tensor> out;
  for (size_t k = 0; k < output_dims.size(); ++k)
    out.push_back(uniform(concrete_shape(output_dims[k], batch), -1, 1, data_seed(seed, 100 + k, batch))
                      .to(output_dtypes[k]));
  return out;
}

std::string RandomProgram::text() const {
  std::ostringstream os;
  os << "program " << seed << ":\n";
  for (size_t i = 0; i < inputs.size(); ++i)
    os << "  v" << i << ": input " << dims_text(inputs[i]) << " " << input_dtypes[i] << " in ["
       << input_lo[i] << "," << input_hi[i] << ")\n";
  for (const Step& s : steps) os << "  " << s.text << "\n";
  os << "  outputs:";
  for (int id : outputs) os << " v" << id;
  return os.str() + "\n";
}

namespace {

using Values = std::vector<Tensor>;
using StepFn = std::function<Tensor(const Values&)>;

// Bounds that keep programs small and their values (and so their gradients) tame.
constexpr size_t kMaxRank = 5;
constexpr int64_t kMaxStaticNumel = 96;  // product of the static sizes and batch factors
constexpr int kMaxBatchDims = 2;
constexpr double kMaxMagnitude = 100;
constexpr int64_t kMinBatch = 2, kMaxBatch = 5;  // the batch sizes the tests run
constexpr int64_t kToEnd = std::numeric_limits<int64_t>::max();

// An interval holding every value of a tensor.
struct Range {
  double lo = 0, hi = 0;
  double mag() const { return std::max(std::abs(lo), std::abs(hi)); }
  bool excludes_zero(double margin) const { return lo >= margin || hi <= -margin; }
};
Range hull(Range a, Range b) { return {std::min(a.lo, b.lo), std::max(a.hi, b.hi)}; }
Range corners(Range a, Range b, const std::function<double(double, double)>& f) {
  double c[4] = {f(a.lo, b.lo), f(a.lo, b.hi), f(a.hi, b.lo), f(a.hi, b.hi)};
  return {*std::min_element(c, c + 4), *std::max_element(c, c + 4)};
}
Range monotone(Range a, const std::function<double(double)>& f) { return {f(a.lo), f(a.hi)}; }

struct ValueInfo {
  DimList dims;
  Range range;
  DType dtype = f64;
  bool contiguous = true;  // a view may be taken with view()
  std::string expr;        // the expression that computed it (inputs: "")
};

int64_t static_numel(const DimList& dims) {
  int64_t n = 1;
  for (const Dim& d : dims) n *= d.size;
  return n;
}
int batch_dims(const DimList& dims) {
  return int(std::count_if(dims.begin(), dims.end(), [](const Dim& d) { return d.batch; }));
}
// The fewest and most elements over `dims` for the batch sizes the tests run.
int64_t min_count(const DimList& dims) {
  int64_t n = 1;
  for (const Dim& d : dims) n *= d.batch ? d.size * kMinBatch : d.size;
  return n;
}
int64_t max_count(const DimList& dims) {
  int64_t n = 1;
  for (const Dim& d : dims) n *= d.batch ? d.size * kMaxBatch : d.size;
  return n;
}
constexpr Dim kOne{1, false};

std::optional<DimList> broadcast(const DimList& a, const DimList& b) {
  const size_t rank = std::max(a.size(), b.size());
  DimList out(rank);
  for (size_t i = 0; i < rank; ++i) {
    Dim da = i < a.size() ? a[a.size() - 1 - i] : kOne;
    Dim db = i < b.size() ? b[b.size() - 1 - i] : kOne;
    if (da == db || db == kOne) out[rank - 1 - i] = da;
    else if (da == kOne) out[rank - 1 - i] = db;
    else return std::nullopt;
  }
  return out;
}

// numpy matmul's result dims, or nullopt when the operands do not fit.
std::optional<DimList> matmul_dims(const DimList& a, const DimList& b) {
  if (a.empty() || b.empty()) return std::nullopt;
  const bool a_vec = a.size() == 1, b_vec = b.size() == 1;
  const Dim k_a = a.back(), k_b = b_vec ? b[0] : b[b.size() - 2];
  if (!(k_a == k_b)) return std::nullopt;
  DimList lead_a(a.begin(), a.end() - (a_vec ? 1 : 2)), lead_b(b.begin(), b.end() - (b_vec ? 1 : 2));
  auto out = broadcast(lead_a, lead_b);
  if (!out) return std::nullopt;
  if (!a_vec) out->push_back(a[a.size() - 2]);
  if (!b_vec) out->push_back(b.back());
  return out;
}

DimList swap_last_two(DimList d) {
  std::swap(d[d.size() - 1], d[d.size() - 2]);
  return d;
}

// A size in an op's shape attribute: a literal, or dim `dim` of value `value` read when the
// step runs (so while building a graph it is that value's symbolic size).
struct SizeArg {
  int64_t literal = 0;
  int value = -1;
  int dim = 0;
  int64_t eval(const Values& v) const { return value < 0 ? literal : v[size_t(value)].size(dim); }
  std::string text() const {
    std::ostringstream os;
    if (value < 0) os << literal;
    else os << "v" << value << ".size(" << dim << ")";
    return os.str();
  }
};
Shape eval_shape(const std::vector<SizeArg>& args, const Values& v) {
  Shape s;
  for (const SizeArg& a : args) s.push_back(a.eval(v));
  return s;
}
std::string args_text(const std::vector<SizeArg>& args) {
  std::string s = "[";
  for (size_t i = 0; i < args.size(); ++i) {
    if (i) s += ",";
    s += args[i].text();
  }
  return s + "]";
}
std::string ints_text(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) s += ",";
    s += std::to_string(v[i]);
  }
  return s + "]";
}
std::string num(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}
std::string vname(int id) {
  std::string s = "v";
  s += std::to_string(id);
  return s;
}

// --- op tables ---

struct UnaryOp {
  const char* name;
  std::function<Tensor(const Tensor&)> fn;
  std::function<bool(Range)> applies;
  std::function<Range(Range)> range;
};

const std::vector<UnaryOp>& unary_ops() {
  auto always = [](Range) { return true; };
  auto unit = [](Range) { return Range{-1, 1}; };
  static const std::vector<UnaryOp> ops = {
      {"neg", [](const Tensor& x) { return neg(x); }, always, [](Range r) { return Range{-r.hi, -r.lo}; }},
      {"-", [](const Tensor& x) { return -x; }, always, [](Range r) { return Range{-r.hi, -r.lo}; }},
      {"abs", [](const Tensor& x) { return abs(x); }, always,
       [](Range r) { return Range{r.lo >= 0 ? r.lo : (r.hi <= 0 ? -r.hi : 0), r.mag()}; }},
      {"exp", [](const Tensor& x) { return exp(x); }, [](Range r) { return r.hi <= 3; },
       [](Range r) { return monotone(r, [](double v) { return std::exp(v); }); }},
      {"log", [](const Tensor& x) { return log(x); }, [](Range r) { return r.lo >= 0.05; },
       [](Range r) { return monotone(r, [](double v) { return std::log(v); }); }},
      {"sqrt", [](const Tensor& x) { return sqrt(x); }, [](Range r) { return r.lo >= 0.05; },
       [](Range r) { return monotone(r, [](double v) { return std::sqrt(v); }); }},
      {"rsqrt", [](const Tensor& x) { return rsqrt(x); }, [](Range r) { return r.lo >= 0.1; },
       [](Range r) { return Range{1 / std::sqrt(r.hi), 1 / std::sqrt(r.lo)}; }},
      {"tanh", [](const Tensor& x) { return tanh(x); }, always,
       [](Range r) { return monotone(r, [](double v) { return std::tanh(v); }); }},
      {"sigmoid", [](const Tensor& x) { return sigmoid(x); }, always,
       [](Range r) { return monotone(r, [](double v) { return 1 / (1 + std::exp(-v)); }); }},
      {"relu", [](const Tensor& x) { return relu(x); }, always,
       [](Range r) { return Range{std::max(r.lo, 0.0), std::max(r.hi, 0.0)}; }},
      {"softplus", [](const Tensor& x) { return softplus(x); }, always,
       [](Range r) { return monotone(r, [](double v) { return std::log1p(std::exp(v)); }); }},
      {"sin", [](const Tensor& x) { return sin(x); }, always, unit},
      {"cos", [](const Tensor& x) { return cos(x); }, always, unit},
      {"erf", [](const Tensor& x) { return erf(x); }, always, unit},
      {"silu", [](const Tensor& x) { return silu(x); }, always,
       [](Range r) { return Range{-0.28, std::max(r.hi, 0.0)}; }},
      {"gelu", [](const Tensor& x) { return gelu(x); }, always,
       [](Range r) { return Range{-0.17, std::max(r.hi, 0.0)}; }},
      {"gelu_tanh", [](const Tensor& x) { return gelu_tanh(x); }, always,
       [](Range r) { return Range{-0.171, std::max(r.hi, 0.0)}; }},
      {"elu", [](const Tensor& x) { return elu(x); }, always,
       [](Range r) { return monotone(r, [](double v) { return v > 0 ? v : std::expm1(v); }); }},
      {"leaky_relu(0.1)", [](const Tensor& x) { return leaky_relu(x, 0.1); }, always,
       [](Range r) { return monotone(r, [](double v) { return v > 0 ? v : 0.1 * v; }); }},
      {"clamp(-0.5,0.75)", [](const Tensor& x) { return clamp(x, -0.5, 0.75); }, always,
       [](Range r) { return monotone(r, [](double v) { return std::clamp(v, -0.5, 0.75); }); }},
  };
  return ops;
}

// A binary op in every operand form: tensor-tensor, tensor-scalar, scalar-tensor.
struct BinaryOp {
  std::string name;  // "add", or "+" for the operator spelling
  bool infix;
  std::function<Tensor(const Tensor&, const Tensor&)> tt;
  std::function<Tensor(const Tensor&, double)> ts;
  std::function<Tensor(double, const Tensor&)> st;
};
template <class F>
BinaryOp binary_op(std::string name, bool infix, F f) {
  return {std::move(name), infix, [f](const Tensor& a, const Tensor& b) { return f(a, b); },
          [f](const Tensor& a, double s) { return f(a, s); }, [f](double s, const Tensor& b) { return f(s, b); }};
}
const std::vector<BinaryOp>& binary_ops() {
  static const std::vector<BinaryOp> ops = {
      binary_op("add", false, [](const auto& a, const auto& b) { return add(a, b); }),
      binary_op("+", true, [](const auto& a, const auto& b) { return a + b; }),
      binary_op("sub", false, [](const auto& a, const auto& b) { return sub(a, b); }),
      binary_op("-", true, [](const auto& a, const auto& b) { return a - b; }),
      binary_op("mul", false, [](const auto& a, const auto& b) { return mul(a, b); }),
      binary_op("*", true, [](const auto& a, const auto& b) { return a * b; }),
      binary_op("div", false, [](const auto& a, const auto& b) { return div(a, b); }),
      binary_op("/", true, [](const auto& a, const auto& b) { return a / b; }),
      binary_op("maximum", false, [](const auto& a, const auto& b) { return maximum(a, b); }),
      binary_op("minimum", false, [](const auto& a, const auto& b) { return minimum(a, b); }),
      binary_op("pow", false, [](const auto& a, const auto& b) { return pow(a, b); }),
  };
  return ops;
}

// An operand of a binary op: a value, a tensor constant or a number.
struct Operand {
  enum Kind { Value, Constant, Number } kind = Value;
  int id = -1;
  Tensor constant;
  double number = 0;
  DimList dims;
  Range range;
  DType dtype = f64;
  std::string text;
};

// Whether `op` is safe on these operands, and the range of its result.
std::optional<Range> binary_range(const std::string& op, const Operand& a, const Operand& b) {
  const Range x = a.range, y = b.range;
  if (op == "add" || op == "+") return Range{x.lo + y.lo, x.hi + y.hi};
  if (op == "sub" || op == "-") return Range{x.lo - y.hi, x.hi - y.lo};
  if (op == "mul" || op == "*") return corners(x, y, [](double u, double v) { return u * v; });
  if (op == "div" || op == "/") {
    if (!y.excludes_zero(0.2)) return std::nullopt;
    return corners(x, y, [](double u, double v) { return u / v; });
  }
  if (op == "maximum") return Range{std::max(x.lo, y.lo), std::max(x.hi, y.hi)};
  if (op == "minimum") return Range{std::min(x.lo, y.lo), std::min(x.hi, y.hi)};
  if (op == "pow") {
    if (b.kind == Operand::Number && (b.number == 2 || b.number == 3)) {
      if (b.number == 3) return Range{std::pow(x.lo, 3), std::pow(x.hi, 3)};
      return Range{x.lo >= 0 ? x.lo * x.lo : (x.hi <= 0 ? x.hi * x.hi : 0), x.mag() * x.mag()};
    }
    if (x.lo < 0.1 || y.mag() > 3) return std::nullopt;  // a positive base, a tame exponent
    return corners(x, y, [](double u, double v) { return std::pow(u, v); });
  }
  return std::nullopt;
}

class Generator {
 public:
  explicit Generator(uint64_t seed) : rng_(seed) { program_.seed = seed; }

  RandomProgram generate() {
    add_inputs();
    const size_t target = size_t(between(3, 15));
    for (int attempt = 0; program_.steps.size() < target && attempt < 1000; ++attempt) try_a_step();
    choose_outputs();
    return std::move(program_);
  }

 private:
  // --- randomness ---
  int64_t between(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng_); }
  bool chance(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }
  template <class T>
  const T& pick(const std::vector<T>& v) { return v[size_t(between(0, int64_t(v.size()) - 1))]; }
  // A dim index of a rank-r tensor, sometimes written from the end.
  int64_t dim_arg(int64_t d, int64_t rank) { return chance(0.3) ? d - rank : d; }
  Tensor constant(const Shape& shape, double lo, double hi, DType dtype) {
    return uniform(shape, lo, hi, rng_()).to(dtype);
  }

  // --- values ---
  int num_values() const { return int(values_.size()); }
  const ValueInfo& info(int id) const { return values_[size_t(id)]; }

  std::vector<int> values_where(const std::function<bool(const ValueInfo&)>& ok) const {
    std::vector<int> ids;
    for (int i = 0; i < num_values(); ++i)
      if (ok(info(i))) ids.push_back(i);
    return ids;
  }
  // A value, preferring recent ones so programs grow deep rather than wide; -1 if none fits.
  int pick_value(const std::function<bool(const ValueInfo&)>& ok = [](const ValueInfo&) { return true; }) {
    std::vector<int> ids = values_where(ok);
    if (ids.empty()) return -1;
    if (chance(0.4)) return ids.back();
    if (chance(0.4)) return ids[size_t(between(std::max<int64_t>(0, int64_t(ids.size()) - 3), int64_t(ids.size()) - 1))];
    return pick(ids);
  }

  // The attribute form of dim `d`: a literal when static, else the size of some value's
  // dim that equals it (nullopt when no value has one).
  std::optional<SizeArg> size_arg(Dim d) {
    if (!d.batch) return SizeArg{d.size};
    std::vector<SizeArg> refs;
    for (int id = 0; id < num_values(); ++id)
      for (size_t k = 0; k < info(id).dims.size(); ++k)
        if (info(id).dims[k] == d) refs.push_back(SizeArg{0, id, int(k)});
    if (refs.empty()) return std::nullopt;
    return pick(refs);
  }

  // Appends a step unless its result breaks the size or range limits.
  bool add(std::string expr, StepFn fn, ValueInfo v) {
    if (v.dims.size() > kMaxRank || static_numel(v.dims) > kMaxStaticNumel || batch_dims(v.dims) > kMaxBatchDims)
      return false;
    for (const Dim& d : v.dims)
      if (d.size < 1) return false;
    if (!std::isfinite(v.range.lo) || !std::isfinite(v.range.hi) || v.range.mag() > kMaxMagnitude) return false;
    const int id = num_values();
    std::ostringstream line;
    line << vname(id) << " = " << expr;
    std::string text = line.str();
    text.resize(std::max<size_t>(text.size() + 2, 56), ' ');
    text += dims_text(v.dims) + " " + str(v.dtype);
    if (v.dtype == f32) program_.uses_f32 = true;
    v.expr = std::move(expr);
    program_.steps.push_back({std::move(text), std::move(fn)});
    values_.push_back(std::move(v));
    return true;
  }
  // A result of x's dtype in storage of its own.
  ValueInfo derived(int x, DimList dims, Range range, bool contiguous) const {
    return ValueInfo{std::move(dims), range, info(x).dtype, contiguous, ""};
  }
  void add_inputs() {
    const DType dtype = chance(0.25) ? f32 : f64;
    const int n = int(between(1, 3));
    for (int i = 0; i < n; ++i) {
      DimList dims{{1, true}};
      const int64_t rest = between(0, 3);
      for (int64_t k = 0; k < rest; ++k) dims.push_back({chance(0.2) ? 1 : between(2, 4), false});
      const bool positive = chance(0.3);
      const Range range = positive ? Range{0.2, 1.5} : Range{-1, 1};
      program_.inputs.push_back(dims);
      program_.input_dtypes.push_back(dtype);
      program_.input_lo.push_back(range.lo);
      program_.input_hi.push_back(range.hi);
      if (dtype == f32) program_.uses_f32 = true;
      values_.push_back(ValueInfo{dims, range, dtype, true, ""});
    }
  }

  void try_a_step() {
    struct Choice {
      int weight;
      bool (Generator::*make)();
    };
    static const std::vector<Choice> choices = {
        {14, &Generator::unary},       {18, &Generator::binary},      {7, &Generator::matmul_op},
        {3, &Generator::linear_layer}, {10, &Generator::reduce_op},      {4, &Generator::softmax_op},
        {7, &Generator::reshape_op},   {3, &Generator::flatten_op},   {6, &Generator::transpose_op},
        {5, &Generator::unsqueeze_op}, {3, &Generator::squeeze_op},   {5, &Generator::expand_op},
        {5, &Generator::slice_op},     {5, &Generator::cat_op},       {2, &Generator::split_op},
        {2, &Generator::pad_op},       {2, &Generator::index_select_op}, {3, &Generator::where_op},
        {2, &Generator::layer_norm_op}, {2, &Generator::mse_op},      {2, &Generator::shape_scalar_op},
        {2, &Generator::cast_op},      {1, &Generator::contiguous_op}, {2, &Generator::sum_to_size_op},
        {3, &Generator::size_number_op}, {2, &Generator::detach_op},   {2, &Generator::mask_op},
        {2, &Generator::gather_argmax_op}, {2, &Generator::index_by_argmax_op}, {2, &Generator::prod_op},
        {3, &Generator::conv_op},      {2, &Generator::pool_op},      {2, &Generator::batch_norm_op},
        {2, &Generator::embedding_op}, {2, &Generator::index_add_op}, {2, &Generator::storage_round_trip_op},
        {5, &Generator::duplicate},
    };
    int total = 0;
    for (const Choice& c : choices) total += c.weight;
    int64_t r = between(0, total - 1);
    for (const Choice& c : choices) {
      if (r < c.weight) {
        (this->*c.make)();
        return;
      }
      r -= c.weight;
    }
  }

  // --- element-wise ---

  bool unary() {
    const int x = pick_value();
    std::vector<const UnaryOp*> fitting;
    for (const UnaryOp& op : unary_ops())
      if (op.applies(info(x).range)) fitting.push_back(&op);
    const UnaryOp& op = *pick(fitting);
    auto fn = op.fn;
    ValueInfo out = derived(x, info(x).dims, op.range(info(x).range), true);
    return add(std::string(op.name) + "(" + vname(x) + ")", [fn, x](const Values& v) { return fn(v[size_t(x)]); },
               out);
  }

  Operand value_operand(int id) const {
    const ValueInfo& v = info(id);
    return {Operand::Value, id, {}, 0, v.dims, v.range, v.dtype, vname(id)};
  }
  // A constant that broadcasts against `dims`: some trailing dims, batch and some others 1.
  Operand constant_operand(const DimList& dims, DType dtype, bool divisor) {
    DimList c;
    const size_t k = size_t(between(0, int64_t(dims.size())));
    for (size_t i = dims.size() - k; i < dims.size(); ++i)
      c.push_back(dims[i].batch || chance(0.3) ? kOne : dims[i]);
    if (k == dims.size() && c.size() < kMaxRank && chance(0.1)) c.insert(c.begin(), Dim{2, false});  // a new leading dim
    const Range range = divisor ? (chance(0.5) ? Range{0.5, 1.5} : Range{-1.5, -0.5}) : Range{-1, 1};
    const Shape shape = concrete_shape(c, 1);
    Operand o{Operand::Constant, -1, constant(shape, range.lo, range.hi, dtype), 0, c, range, dtype, ""};
    o.text = "const" + str(shape);
    return o;
  }
  Operand number_operand(const std::string& op, bool right) {
    std::vector<double> choices{0.5, 2.0, -1.5, 3.0, 0.25};
    if (op == "pow") choices = right ? std::vector<double>{2, 3, 0.5} : std::vector<double>{2.0, 0.5};
    const double s = pick(choices);
    return {Operand::Number, -1, {}, s, {}, {s, s}, f64, num(s)};
  }
  Operand second_operand(const std::string& op, int a) {
    const ValueInfo& va = info(a);
    const int kind = int(between(0, 9));
    if (kind == 0) return value_operand(a);  // the same value twice
    if (kind <= 4) {
      const int b = pick_value([&](const ValueInfo& v) { return broadcast(va.dims, v.dims).has_value(); });
      return value_operand(b);  // at worst `a` itself
    }
    if (kind <= 6) return constant_operand(va.dims, va.dtype, op == "div" || op == "/");
    return number_operand(op, true);
  }

  bool binary() {
    const BinaryOp& op = pick(binary_ops());
    const int a = pick_value();
    Operand lhs = value_operand(a), rhs = second_operand(op.name, a);
    if (rhs.kind == Operand::Number ? chance(0.3) : chance(0.5)) std::swap(lhs, rhs);
    if (lhs.kind == Operand::Number && op.name == "pow") lhs = number_operand("pow", false);
    const auto range = binary_range(op.name, lhs, rhs);
    if (!range) return false;
    const std::string expr = op.infix ? lhs.text + " " + op.name + " " + rhs.text
                                      : op.name + "(" + lhs.text + ", " + rhs.text + ")";
    DimList dims = *broadcast(lhs.dims, rhs.dims);
    ValueInfo out{dims, *range, promoted(lhs, rhs), true, ""};
    return add(expr, binary_fn(op, lhs, rhs), out);
  }
  static DType promoted(const Operand& a, const Operand& b) {
    if (a.kind == Operand::Number) return b.dtype;
    if (b.kind == Operand::Number) return a.dtype;
    return a.dtype == f64 || b.dtype == f64 ? f64 : f32;
  }
  static StepFn binary_fn(const BinaryOp& op, const Operand& lhs, const Operand& rhs) {
    auto tensor_of = [](const Operand& o) {
      return [o](const Values& v) { return o.kind == Operand::Value ? v[size_t(o.id)] : o.constant; };
    };
    if (lhs.kind == Operand::Number) {
      auto b = tensor_of(rhs);
      return [f = op.st, s = lhs.number, b](const Values& v) { return f(s, b(v)); };
    }
    auto a = tensor_of(lhs);
    if (rhs.kind == Operand::Number)
      return [f = op.ts, a, s = rhs.number](const Values& v) { return f(a(v), s); };
    auto b = tensor_of(rhs);
    return [f = op.tt, a, b](const Values& v) { return f(a(v), b(v)); };
  }

  // where(c > t, a, b): the condition from a value, the branches broadcast with it.
  bool where_op() {
    const int a = pick_value();
    const int c = pick_value([&](const ValueInfo& v) { return broadcast(info(a).dims, v.dims).has_value(); });
    const DimList ac = *broadcast(info(a).dims, info(c).dims);
    Operand b = chance(0.6) ? value_operand(pick_value([&](const ValueInfo& v) { return broadcast(ac, v.dims).has_value(); }))
                            : constant_operand(ac, info(a).dtype, false);
    const double t = (info(c).range.lo + info(c).range.hi) / 2;
    const DimList dims = *broadcast(ac, b.dims);
    ValueInfo out{dims, hull(info(a).range, b.range), promoted(value_operand(a), b), true, ""};
    Tensor bc = b.constant;
    const int bid = b.id;
    return add("where(" + vname(c) + " > " + num(t) + ", " + vname(a) + ", " + b.text + ")",
               [=](const Values& v) {
                 return where(v[size_t(c)] > t, v[size_t(a)], bid >= 0 ? v[size_t(bid)] : bc);
               },
               out);
  }

  // --- linear algebra ---

  bool matmul_op() {
    const int a = pick_value([](const ValueInfo& v) { return !v.dims.empty(); });
    if (a < 0) return false;
    const ValueInfo& va = info(a);
    const bool transpose_a = va.dims.size() >= 2 && chance(0.25);
    const DimList da = transpose_a ? swap_last_two(va.dims) : va.dims;
    struct Rhs { int id; bool transposed; };
    std::vector<Rhs> fitting;
    for (int b = 0; b < num_values(); ++b) {
      if (matmul_dims(da, info(b).dims)) fitting.push_back({b, false});
      if (info(b).dims.size() >= 2 && matmul_dims(da, swap_last_two(info(b).dims))) fitting.push_back({b, true});
    }
    const std::string lhs_text = vname(a) + (transpose_a ? ".transpose(-2,-1)" : "");
    auto lhs = [a, transpose_a](const Values& v) {
      return transpose_a ? v[size_t(a)].transpose(-2, -1) : v[size_t(a)];
    };
    if (fitting.empty() || chance(0.3)) return matmul_constant(a, da, lhs_text, lhs);
    const Rhs rhs = pick(fitting);
    const ValueInfo& vb = info(rhs.id);
    const DimList db = rhs.transposed ? swap_last_two(vb.dims) : vb.dims;
    const Dim k = da.back();
    const double bound = double(k.batch ? k.size * kMaxBatch : k.size) * va.range.mag() * vb.range.mag();
    ValueInfo out{*matmul_dims(da, db), {-bound, bound}, va.dtype == f64 || vb.dtype == f64 ? f64 : f32, true, ""};
    const int b = rhs.id;
    const bool tb = rhs.transposed;
    return add("matmul(" + lhs_text + ", " + vname(b) + (tb ? ".transpose(-2,-1)" : "") + ")",
               [lhs, b, tb](const Values& v) { return matmul(lhs(v), tb ? v[size_t(b)].transpose(-2, -1) : v[size_t(b)]); },
               out);
  }
  // x @ W with W a constant [K, N] or [K] (a static K).
  bool matmul_constant(int a, const DimList& da, const std::string& lhs_text, const StepFn& lhs) {
    const Dim k = da.back();
    if (k.batch) return false;
    DimList dw{k};
    if (chance(0.8)) dw.push_back({between(1, 4), false});
    const Tensor w = constant(concrete_shape(dw, 1), -1, 1, info(a).dtype);
    const double bound = double(k.size) * info(a).range.mag();
    return add("matmul(" + lhs_text + ", const" + str(w.shape()) + ")",
               [lhs, w](const Values& v) { return matmul(lhs(v), w); },
               derived(a, *matmul_dims(da, dw), {-bound, bound}, true));
  }
  bool linear_layer() {
    const int x = pick_value([](const ValueInfo& v) { return !v.dims.empty() && !v.dims.back().batch; });
    if (x < 0) return false;
    const int64_t k = info(x).dims.back().size, n = between(1, 4);
    const Tensor w = constant({n, k}, -1, 1, info(x).dtype);
    const Tensor b = chance(0.6) ? constant({n}, -1, 1, info(x).dtype) : Tensor{};
    DimList dims = info(x).dims;
    dims.back() = {n, false};
    const double bound = double(k) * info(x).range.mag() + 1;
    return add("linear(" + vname(x) + ", const" + str(w.shape()) + (b.defined() ? ", const" + str(b.shape()) : "") + ")",
               [x, w, b](const Values& v) { return linear(v[size_t(x)], w, b); },
               derived(x, dims, {-bound, bound}, true));
  }

  // --- reductions ---

  // Distinct dims of a rank-r value (none: all dims), in attribute form and as indices.
  std::pair<std::vector<int64_t>, std::vector<bool>> some_dims(int64_t rank, bool allow_all) {
    std::vector<bool> reduced(size_t(rank), false);
    std::vector<int64_t> arg;
    const int64_t n = rank == 0 ? 0 : between(allow_all ? 0 : 1, std::min<int64_t>(rank, 2));
    if (n == 0) return {arg, std::vector<bool>(size_t(rank), true)};
    while (int64_t(arg.size()) < n) {
      const int64_t d = between(0, rank - 1);
      if (reduced[size_t(d)]) continue;
      reduced[size_t(d)] = true;
      arg.push_back(dim_arg(d, rank));
    }
    return {arg, reduced};
  }
  static DimList reduced_dims(const DimList& dims, const std::vector<bool>& reduced, bool keepdim) {
    DimList out;
    for (size_t i = 0; i < dims.size(); ++i)
      if (!reduced[i]) out.push_back(dims[i]);
      else if (keepdim) out.push_back(kOne);
    return out;
  }
  static DimList selected(const DimList& dims, const std::vector<bool>& which) {
    DimList out;
    for (size_t i = 0; i < dims.size(); ++i)
      if (which[i]) out.push_back(dims[i]);
    return out;
  }

  bool reduce_op() {
    static const std::vector<std::string> names{"sum", "mean", "max", "min", "logsumexp", "var", "sum()", "mean()"};
    const std::string name = pick(names);
    const int x = pick_value();
    const ValueInfo& vx = info(x);
    const int64_t rank = int64_t(vx.dims.size());
    if (name == "sum()" || name == "mean()") {
      const bool is_sum = name == "sum()";
      const double n = double(max_count(vx.dims));
      const Range r = is_sum ? Range{std::min(0.0, vx.range.lo * n), std::max(0.0, vx.range.hi * n)} : vx.range;
      ValueInfo out = derived(x, {}, r, true);
      return add(vname(x) + "." + name, [x, is_sum](const Values& v) { return is_sum ? v[size_t(x)].sum() : v[size_t(x)].mean(); },
                 out);
    }
    if (name == "logsumexp" && rank == 0) return false;
    auto [arg, reduced] = some_dims(rank, name != "logsumexp");
    const bool keepdim = chance(0.5);
    const DimList over = selected(vx.dims, reduced);
    const double most = double(max_count(over));
    Range r = vx.range;
    if (name == "sum") r = {std::min(0.0, r.lo * most), std::max(0.0, r.hi * most)};
    if (name == "logsumexp") r = {r.lo, r.hi + std::log(most)};
    int64_t correction = 0;
    if (name == "var") {
      correction = min_count(over) >= 2 ? between(0, 1) : 0;
      const double spread = vx.range.hi - vx.range.lo;
      r = {0, spread * spread * 2};
    }
    StepFn fn = [name, x, arg, keepdim, correction](const Values& v) {
      const Tensor& t = v[size_t(x)];
      if (name == "sum") return sum(t, arg, keepdim);
      if (name == "mean") return mean(t, arg, keepdim);
      if (name == "max") return max(t, arg, keepdim);
      if (name == "min") return min(t, arg, keepdim);
      if (name == "logsumexp") return logsumexp(t, arg, keepdim);
      return var(t, arg, keepdim, correction);
    };
    std::string extra = name == "var" ? ", correction=" + std::to_string(correction) : "";
    ValueInfo out = derived(x, reduced_dims(vx.dims, reduced, keepdim), r, true);
    return add(name + "(" + vname(x) + ", " + ints_text(arg) + ", keepdim=" + (keepdim ? "true" : "false") + extra + ")",
               fn, out);
  }

  bool softmax_op() {
    const int x = pick_value([](const ValueInfo& v) { return !v.dims.empty(); });
    if (x < 0) return false;
    const int64_t rank = int64_t(info(x).dims.size()), d = between(0, rank - 1), arg = dim_arg(d, rank);
    const bool log_form = chance(0.5);
    const Range r = info(x).range;
    const double n = double(max_count({info(x).dims[size_t(d)]}));
    const Range out = log_form ? Range{r.lo - r.hi - std::log(n), 0} : Range{0, 1};
    return add(std::string(log_form ? "log_softmax(" : "softmax(") + vname(x) + ", " + std::to_string(arg) + ")",
               [x, arg, log_form](const Values& v) {
                 return log_form ? log_softmax(v[size_t(x)], arg) : softmax(v[size_t(x)], arg);
               },
               derived(x, info(x).dims, out, true));
  }

  bool layer_norm_op() {
    const int x = pick_value([](const ValueInfo& v) { return !v.dims.empty(); });
    if (x < 0) return false;
    const DimList& dims = info(x).dims;
    const size_t k = size_t(between(1, std::min<int64_t>(2, int64_t(dims.size()))));
    const DimList normalized(dims.end() - int64_t(k), dims.end());
    std::vector<SizeArg> shape;
    for (const Dim& d : normalized) shape.push_back(*size_arg(d));  // x itself has each dim
    Tensor w, b;
    if (batch_dims(normalized) == 0 && chance(0.6)) {
      w = constant(concrete_shape(normalized, 1), 0.5, 1.5, info(x).dtype);
      b = constant(concrete_shape(normalized, 1), -1, 1, info(x).dtype);
    }
    const double bound = std::sqrt(double(max_count(normalized))) * 1.5 + 1;
    return add("layer_norm(" + vname(x) + ", " + args_text(shape) + (w.defined() ? ", const, const" : "") + ")",
               [x, shape, w, b](const Values& v) { return layer_norm(v[size_t(x)], eval_shape(shape, v), w, b); },
               derived(x, dims, {-bound, bound}, true));
  }

  bool mse_op() {
    const int a = pick_value();
    const int b = pick_value([&](const ValueInfo& v) { return v.dims == info(a).dims; });
    static const std::vector<std::string> reductions{"mean", "sum", "none"};
    const std::string reduction = pick(reductions);
    const double diff = info(a).range.mag() + info(b).range.mag();
    const double n = reduction == "sum" ? double(max_count(info(a).dims)) : 1;
    ValueInfo out{reduction == "none" ? info(a).dims : DimList{}, {0, diff * diff * n},
                  info(a).dtype == f64 || info(b).dtype == f64 ? f64 : f32, true, ""};
    return add("mse_loss(" + vname(a) + ", " + vname(b) + ", \"" + reduction + "\")",
               [a, b, reduction](const Values& v) { return mse_loss(v[size_t(a)], v[size_t(b)], reduction); }, out);
  }

  // --- shapes and views ---

  // Splits n into `slots` factors at random (each prime factor goes to one slot).
  std::vector<int64_t> random_factors(int64_t n, size_t slots) {
    std::vector<int64_t> out(slots, 1);
    for (int64_t p = 2; n > 1; ++p)
      while (n % p == 0) {
        out[size_t(between(0, int64_t(slots) - 1))] *= p;
        n /= p;
      }
    return out;
  }

  bool reshape_op() {
    const bool as_view = chance(0.4);
    const int x = pick_value([&](const ValueInfo& v) { return batch_dims(v.dims) <= 1 && (!as_view || v.contiguous); });
    if (x < 0) return false;
    const ValueInfo& vx = info(x);
    const bool has_batch = batch_dims(vx.dims) == 1;
    const size_t rank = size_t(between(has_batch ? 1 : 0, 4));
    const std::vector<int64_t> sizes = random_factors(static_numel(vx.dims), std::max<size_t>(rank, 1));
    if (rank == 0 && sizes[0] != 1) return false;
    DimList dims;
    for (size_t i = 0; i < rank; ++i) dims.push_back({sizes[i], false});
    if (has_batch) dims[size_t(between(0, int64_t(rank) - 1))].batch = true;
    // The attribute: -1 for the batch slot or a value's size; maybe -1 for one static slot.
    std::vector<SizeArg> shape;
    bool inferred = false;
    for (size_t i = 0; i < rank; ++i) {
      std::optional<SizeArg> s = chance(0.6) ? size_arg(dims[i]) : std::nullopt;
      if (!s && dims[i].batch) {
        s = SizeArg{-1};
        inferred = true;
      }
      shape.push_back(s ? *s : SizeArg{dims[i].size});
    }
    if (!inferred && rank > 0 && chance(0.3)) shape[size_t(between(0, int64_t(rank) - 1))] = SizeArg{-1};
    const int spelling = int(between(0, 1));
    const std::string name = as_view ? "view" : "reshape";
    const std::string expr = spelling ? vname(x) + "." + name + "(" + args_text(shape) + ")"
                                      : name + "(" + vname(x) + ", " + args_text(shape) + ")";
    return add(expr,
               [x, shape, as_view](const Values& v) {
                 return as_view ? view(v[size_t(x)], eval_shape(shape, v)) : reshape(v[size_t(x)], eval_shape(shape, v));
               },
               derived(x, dims, vx.range, vx.contiguous));
  }

  bool flatten_op() {
    const int x = pick_value();
    const DimList& dims = info(x).dims;
    const int64_t rank = int64_t(dims.size());
    if (rank == 0) return false;
    const int64_t start = between(0, rank - 1), end = between(start, rank - 1);
    DimList merged(dims.begin() + start, dims.begin() + end + 1);
    if (batch_dims(merged) > 1) return false;
    DimList out(dims.begin(), dims.begin() + start);
    out.push_back({static_numel(merged), batch_dims(merged) == 1});
    out.insert(out.end(), dims.begin() + end + 1, dims.end());
    const int64_t s = dim_arg(start, rank), e = dim_arg(end, rank);
    return add("flatten(" + vname(x) + ", " + std::to_string(s) + ", " + std::to_string(e) + ")",
               [x, s, e](const Values& v) { return flatten(v[size_t(x)], s, e); },
               derived(x, out, info(x).range, info(x).contiguous));
  }

  bool transpose_op() {
    const int x = pick_value([](const ValueInfo& v) { return v.dims.size() >= 2; });
    if (x < 0) return false;
    const DimList& dims = info(x).dims;
    const int64_t rank = int64_t(dims.size());
    if (rank == 2 && chance(0.2))
      return add(vname(x) + ".t()", [x](const Values& v) { return v[size_t(x)].t(); },
                 derived(x, swap_last_two(dims), info(x).range, false));
    if (chance(0.5)) {
      const int64_t d0 = between(0, rank - 1), d1 = between(0, rank - 1);
      DimList out = dims;
      std::swap(out[size_t(d0)], out[size_t(d1)]);
      const int64_t a0 = dim_arg(d0, rank), a1 = dim_arg(d1, rank);
      return add("transpose(" + vname(x) + ", " + std::to_string(a0) + ", " + std::to_string(a1) + ")",
                 [x, a0, a1](const Values& v) { return transpose(v[size_t(x)], a0, a1); },
                 derived(x, out, info(x).range, false));
    }
    std::vector<int64_t> perm(static_cast<size_t>(rank));
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng_);
    DimList out;
    for (int64_t p : perm) out.push_back(dims[size_t(p)]);
    return add("permute(" + vname(x) + ", " + ints_text(perm) + ")",
               [x, perm](const Values& v) { return permute(v[size_t(x)], Shape(perm)); },
               derived(x, out, info(x).range, false));
  }

  bool unsqueeze_op() {
    const int x = pick_value();
    const int64_t rank = int64_t(info(x).dims.size());
    const int64_t d = between(0, rank), arg = dim_arg(d, rank + 1);
    DimList out = info(x).dims;
    out.insert(out.begin() + d, kOne);
    return add("unsqueeze(" + vname(x) + ", " + std::to_string(arg) + ")",
               [x, arg](const Values& v) { return unsqueeze(v[size_t(x)], arg); },
               derived(x, out, info(x).range, info(x).contiguous));
  }

  bool squeeze_op() {
    const int x = pick_value([](const ValueInfo& v) { return std::count(v.dims.begin(), v.dims.end(), kOne) > 0; });
    if (x < 0) return false;
    const DimList& dims = info(x).dims;
    std::vector<int64_t> ones;
    for (size_t i = 0; i < dims.size(); ++i)
      if (dims[i] == kOne) ones.push_back(int64_t(i));
    const int64_t d = pick(ones), arg = dim_arg(d, int64_t(dims.size()));
    DimList out = dims;
    out.erase(out.begin() + d);
    return add("squeeze(" + vname(x) + ", " + std::to_string(arg) + ")",
               [x, arg](const Values& v) { return squeeze(v[size_t(x)], arg); },
               derived(x, out, info(x).range, info(x).contiguous));
  }

  // A size a size-1 dim may be expanded to: static, or some value's batch-carrying dim.
  std::pair<Dim, SizeArg> expansion() {
    if (chance(0.5)) {
      std::vector<Dim> batch_carrying;
      for (const ValueInfo& v : values_)
        for (const Dim& d : v.dims)
          if (d.batch) batch_carrying.push_back(d);
      const Dim d = pick(batch_carrying);  // inputs have one
      return {d, *size_arg(d)};
    }
    const int64_t n = between(2, 4);
    return {{n, false}, SizeArg{n}};
  }

  bool expand_op() {
    const int x = pick_value();
    const DimList& dims = info(x).dims;
    DimList out;
    std::vector<SizeArg> shape;
    if (dims.size() < kMaxRank && chance(0.3)) {  // a new leading dim
      auto [d, arg] = expansion();
      out.push_back(d);
      shape.push_back(arg);
    }
    for (const Dim& d : dims) {
      if (d == kOne && chance(0.7)) {
        auto [to, arg] = expansion();
        out.push_back(to);
        shape.push_back(arg);
        continue;
      }
      out.push_back(d);
      shape.push_back(chance(0.5) ? SizeArg{-1} : *size_arg(d));
    }
    const bool method = chance(0.5);
    return add(method ? vname(x) + ".expand(" + args_text(shape) + ")" : "expand(" + vname(x) + ", " + args_text(shape) + ")",
               [x, shape](const Values& v) { return expand(v[size_t(x)], eval_shape(shape, v)); },
               derived(x, out, info(x).range, false));
  }

  bool slice_op() {
    const int x = pick_value([](const ValueInfo& v) { return !v.dims.empty(); });
    if (x < 0) return false;
    const DimList& dims = info(x).dims;
    const int64_t rank = int64_t(dims.size()), d = between(0, rank - 1), arg = dim_arg(d, rank);
    const Dim dim = dims[size_t(d)];
    int64_t start = 0, end = kToEnd, step = 1;
    SizeArg end_arg{kToEnd};
    Dim size = dim;
    if (!dim.batch) {
      const int64_t n = dim.size;
      step = between(1, 3);
      start = between(0, n - 1);
      end = between(start + 1, n);
      size = {(end - start + step - 1) / step, false};
      if (chance(0.3)) start -= n;  // the same bound, counted from the end
      end_arg = SizeArg{end == n && chance(0.5) ? kToEnd : end};
    } else if (dim.size == 1 && chance(0.5)) {
      // Static bounds inside a batch dim (every batch size run is >= 2).
      static const std::vector<std::pair<int64_t, int64_t>> bounds{{0, 1}, {0, 2}, {-1, kToEnd}, {-2, kToEnd}, {1, 2}};
      std::tie(start, end) = pick(bounds);
      end_arg = SizeArg{end};
      size = {end == kToEnd ? -start : end - start, false};
    } else if (chance(0.5)) {
      end_arg = SizeArg{0, x, int(d)};  // the whole dim: x.size(d)
    }
    const StepFn fn = [x, arg, start, end_arg, step](const Values& v) {
      return slice(v[size_t(x)], arg, start, end_arg.eval(v), step);
    };
    const std::string end_text = end_arg.value < 0 && end_arg.literal == kToEnd ? "end" : end_arg.text();
    DimList out = dims;
    out[size_t(d)] = size;
    return add("slice(" + vname(x) + ", " + std::to_string(arg) + ", " + std::to_string(start) + ", " + end_text +
                   ", " + std::to_string(step) + ")",
               fn, derived(x, out, info(x).range, false));
  }

  bool cat_op() {
    const int x = pick_value([](const ValueInfo& v) { return !v.dims.empty(); });
    if (x < 0) return false;
    const DimList& dims = info(x).dims;
    const int64_t rank = int64_t(dims.size());
    const bool stacked = chance(0.25);
    const int64_t d = between(0, stacked ? rank : rank - 1), arg = dim_arg(d, stacked ? rank + 1 : rank);
    // Pieces agree with x except (for cat) along d, where all are static or all the same batch dim.
    auto fits = [&](const ValueInfo& v) {
      if (v.dims.size() != dims.size()) return false;
      for (size_t i = 0; i < dims.size(); ++i)
        if (!(v.dims[i] == dims[i]) && (stacked || int64_t(i) != d || v.dims[i].batch || dims[i].batch)) return false;
      return true;
    };
    std::vector<int> pieces{x};
    const int64_t count = between(1, 2);
    for (int64_t i = 0; i < count; ++i) pieces.push_back(pick_value(fits));
    if (chance(0.5)) std::shuffle(pieces.begin(), pieces.end(), rng_);
    DimList out = dims;
    Range range = info(x).range;
    DType dtype = info(x).dtype;
    std::string list;
    for (int p : pieces) {
      range = hull(range, info(p).range);
      if (info(p).dtype == f64) dtype = f64;
      list += (list.empty() ? "" : ", ") + vname(p);
    }
    if (stacked) {
      out.insert(out.begin() + d, Dim{int64_t(pieces.size()), false});
    } else {
      out[size_t(d)].size = 0;
      for (int p : pieces) out[size_t(d)].size += info(p).dims[size_t(d)].size;
    }
    return add(std::string(stacked ? "stack" : "cat") + "({" + list + "}, " + std::to_string(arg) + ")",
               [pieces, arg, stacked](const Values& v) {
                 std::vector<Tensor> xs;
                 for (int p : pieces) xs.push_back(v[size_t(p)]);
                 return stacked ? stack(xs, arg) : cat(xs, arg);
               },
               ValueInfo{out, range, dtype, true, ""});
  }

  // A static dim of at least `min_size` of value x, or -1.
  int64_t static_dim(int x, int64_t min_size) {
    std::vector<int64_t> fitting;
    for (size_t i = 0; i < info(x).dims.size(); ++i)
      if (!info(x).dims[i].batch && info(x).dims[i].size >= min_size) fitting.push_back(int64_t(i));
    return fitting.empty() ? -1 : pick(fitting);
  }

  bool split_op() {
    const int x = pick_value();
    const int64_t d = static_dim(x, 2);
    if (d < 0) return false;
    const int64_t n = info(x).dims[size_t(d)].size, size = between(1, n - 1);
    const int64_t piece = between(0, (n + size - 1) / size - 1), arg = dim_arg(d, int64_t(info(x).dims.size()));
    DimList out = info(x).dims;
    out[size_t(d)].size = std::min(size, n - piece * size);
    return add("split(" + vname(x) + ", " + std::to_string(size) + ", " + std::to_string(arg) + ")[" +
                   std::to_string(piece) + "]",
               [x, size, arg, piece](const Values& v) { return split(v[size_t(x)], size, arg).at(size_t(piece)); },
               derived(x, out, info(x).range, false));
  }

  bool pad_op() {
    const int x = pick_value([](const ValueInfo& v) { return !v.dims.empty() && !v.dims.back().batch; });
    if (x < 0) return false;
    const DimList& dims = info(x).dims;
    const size_t k = dims.size() >= 2 && !dims[dims.size() - 2].batch && chance(0.5) ? 2 : 1;
    std::vector<int64_t> pads;
    DimList out = dims;
    for (size_t i = 0; i < k; ++i) {
      const int64_t lo = between(0, 2), hi = between(0, 2);
      pads.push_back(lo);
      pads.push_back(hi);
      out[dims.size() - 1 - i].size += lo + hi;
    }
    const double value = pick(std::vector<double>{0, 0.5, -1});
    return add("pad(" + vname(x) + ", " + ints_text(pads) + ", " + num(value) + ")",
               [x, pads, value](const Values& v) { return pad(v[size_t(x)], pads, value); },
               derived(x, out, hull(info(x).range, {value, value}), true));
  }

  bool index_select_op() {
    const int x = pick_value();
    const int64_t d = static_dim(x, 1);
    if (d < 0) return false;
    const int64_t n = info(x).dims[size_t(d)].size, m = between(1, 4);
    std::vector<int64_t> idx;
    for (int64_t i = 0; i < m; ++i) idx.push_back(between(0, n - 1));  // repeats accumulate gradients
    const Tensor index = tensor(idx, {m});
    const int64_t arg = dim_arg(d, int64_t(info(x).dims.size()));
    DimList out = info(x).dims;
    out[size_t(d)].size = m;
    return add("index_select(" + vname(x) + ", " + std::to_string(arg) + ", " + ints_text(idx) + ")",
               [x, arg, index](const Values& v) { return index_select(v[size_t(x)], arg, index); },
               derived(x, out, info(x).range, true));
  }

  // x / element_count(y, dims) and x + full_like(y, s): shape-dependent values at run time.
  bool shape_scalar_op() {
    const int x = pick_value();
    const DType dtype = info(x).dtype;
    if (chance(0.5)) {
      const int y = pick_value();
      auto [arg, reduced] = some_dims(int64_t(info(y).dims.size()), true);
      const Range r = info(x).range;
      return add(vname(x) + " / element_count(" + vname(y) + ", " + ints_text(arg) + ")",
                 [x, y, arg, dtype](const Values& v) { return v[size_t(x)] / element_count(v[size_t(y)], arg, dtype); },
                 derived(x, info(x).dims, {std::min(r.lo, 0.0), std::max(r.hi, 0.0)}, true));
    }
    const int y = pick_value([&](const ValueInfo& v) { return broadcast(info(x).dims, v.dims).has_value(); });
    const double s = pick(std::vector<double>{0.5, -1.0, 2.0});
    const Range r = info(x).range;
    return add(vname(x) + " + full_like(" + vname(y) + ", " + num(s) + ")",
               [x, y, s, dtype](const Values& v) { return v[size_t(x)] + full_like(v[size_t(y)], s, dtype); },
               derived(x, *broadcast(info(x).dims, info(y).dims), {r.lo + s, r.hi + s}, true));
  }

  bool cast_op() {
    const int x = pick_value();
    const DType to = info(x).dtype == f64 ? f32 : f64;
    ValueInfo out = derived(x, info(x).dims, info(x).range, true);
    out.dtype = to;
    const bool method = chance(0.5);
    return add(method ? vname(x) + ".to(" + str(to) + ")" : "cast(" + vname(x) + ", " + str(to) + ")",
               [x, to, method](const Values& v) { return method ? v[size_t(x)].to(to) : cast(v[size_t(x)], to); }, out);
  }

  // x stored in a narrower dtype and read back (bf16 or f16 activations, a u8 image, i32
  // indices), its values rounded, truncated or saturated as cast converts them, times x: a
  // stored copy carries no gradient (its dtype is no floating one), the factor x does.
  bool storage_round_trip_op() {
    const int x = pick_value();
    const Range r = info(x).range;
    const DType stored = pick(std::vector<DType>{DType::bf16, DType::f16, DType::u8, i32});
    if (stored == DType::f16 && std::max(std::abs(r.lo), std::abs(r.hi)) > 60000) return false;  // past f16's range
    const Range read = stored == DType::u8 ? Range{0, std::clamp(r.hi, 0.0, 255.0)}
                       : stored == i32     ? Range{std::min(r.lo, 0.0), std::max(r.hi, 0.0)}
                                           : Range{r.lo - 0.01 * std::abs(r.lo), r.hi + 0.01 * std::abs(r.hi)};
    const DType dtype = info(x).dtype;
    return add("cast(cast(" + vname(x) + ", " + str(stored) + "), " + str(dtype) + ") * " + vname(x),
               [x, stored, dtype](const Values& v) { return cast(cast(v[size_t(x)], stored), dtype) * v[size_t(x)]; },
               derived(x, info(x).dims, corners(read, r, [](double a, double b) { return a * b; }), true));
  }

  bool contiguous_op() {
    const int x = pick_value();
    return add("contiguous(" + vname(x) + ")", [x](const Values& v) { return contiguous(v[size_t(x)]); },
               derived(x, info(x).dims, info(x).range, true));
  }

  // sum_to_size(x, shape): x's dims with some leading ones dropped and some set to 1.
  bool sum_to_size_op() {
    const int x = pick_value();
    const DimList& dims = info(x).dims;
    const size_t drop = size_t(between(0, int64_t(dims.size())));
    DimList out;
    std::vector<SizeArg> shape;
    DimList summed(dims.begin(), dims.begin() + int64_t(drop));
    for (size_t i = drop; i < dims.size(); ++i) {
      const bool keep = chance(0.6);
      out.push_back(keep ? dims[i] : kOne);
      if (!keep) summed.push_back(dims[i]);
      shape.push_back(*size_arg(out.back()));  // x has the dim
    }
    const Range r = info(x).range;
    const double n = double(max_count(summed));
    // A new tensor where it sums something; else x itself (or a view of it) comes back.
    const bool sums = std::any_of(summed.begin(), summed.end(), [](const Dim& d) { return d.batch || d.size != 1; });
    return add("sum_to_size(" + vname(x) + ", " + args_text(shape) + ")",
               [x, shape](const Values& v) { return sum_to_size(v[size_t(x)], eval_shape(shape, v)); },
               derived(x, out, {std::min(0.0, r.lo * n), std::max(0.0, r.hi * n)}, sums || info(x).contiguous));
  }

  // x op n with n a size read from a value (y.size(d) or y.numel()): a plain number in eager
  // mode, a symbol while a graph is built when the size depends on the batch.
  bool size_number_op() {
    const int x = pick_value(), y = pick_value();
    const DimList& dy = info(y).dims;
    const bool whole = dy.empty() || chance(0.3);
    const int d = whole ? 0 : int(between(0, int64_t(dy.size()) - 1));
    const DimList counted = whole ? dy : DimList{dy[size_t(d)]};
    const Range n{double(min_count(counted)), double(max_count(counted))};
    const std::string n_text = whole ? vname(y) + ".numel()" : vname(y) + ".size(" + std::to_string(d) + ")";
    auto size = [y, whole, d](const Values& v) { return whole ? v[size_t(y)].numel() : v[size_t(y)].size(d); };
    const Range r = info(x).range;
    switch (between(0, 2)) {
      case 0:
        return add(vname(x) + " / " + n_text, [x, size](const Values& v) { return v[size_t(x)] / size(v); },
                   derived(x, info(x).dims, {std::min(r.lo, 0.0), std::max(r.hi, 0.0)}, true));
      case 1:
        return add(vname(x) + " * double(" + n_text + ")",
                   [x, size](const Values& v) { return v[size_t(x)] * double(size(v)); },
                   derived(x, info(x).dims, corners(r, n, [](double a, double b) { return a * b; }), true));
      default:
        return add(n_text + " - " + vname(x), [x, size](const Values& v) { return size(v) - v[size_t(x)]; },
                   derived(x, info(x).dims, {n.lo - r.hi, n.hi - r.lo}, true));
    }
  }

  // x.detach() * y or x.clone(): the same values, gradients cut or kept.
  bool detach_op() {
    const int x = pick_value();
    if (chance(0.4))
      return add(vname(x) + ".clone()", [x](const Values& v) { return v[size_t(x)].clone(); },
                 derived(x, info(x).dims, info(x).range, true));
    const int y = pick_value([&](const ValueInfo& v) { return broadcast(info(x).dims, v.dims).has_value(); });
    const Range r = corners(info(x).range, info(y).range, [](double a, double b) { return a * b; });
    ValueInfo out{*broadcast(info(x).dims, info(y).dims), r, info(x).dtype == f64 || info(y).dtype == f64 ? f64 : f32,
                  true, ""};
    return add(vname(x) + ".detach() * " + vname(y),
               [x, y](const Values& v) { return v[size_t(x)].detach() * v[size_t(y)]; }, out);
  }

  // A comparison cast to a float (no gradient flows through it) times a value.
  bool mask_op() {
    const int x = pick_value();
    const int y = pick_value([&](const ValueInfo& v) { return broadcast(info(x).dims, v.dims).has_value(); });
    const DType dtype = info(y).dtype;
    const Range r = hull(info(y).range, {0, 0});
    return add("cast(" + vname(x) + " <= " + vname(y) + ", " + str(dtype) + ") * " + vname(y),
               [x, y, dtype](const Values& v) { return cast(v[size_t(x)] <= v[size_t(y)], dtype) * v[size_t(y)]; },
               derived(y, *broadcast(info(x).dims, info(y).dims), r, true));
  }

  // gather(x, d, argmax(y, d, keepdim)) with y of x's dims: data-dependent indices.
  bool gather_argmax_op() {
    const int x = pick_value([](const ValueInfo& v) { return !v.dims.empty(); });
    if (x < 0) return false;
    const int y = pick_value([&](const ValueInfo& v) { return v.dims == info(x).dims; });
    const int64_t rank = int64_t(info(x).dims.size()), d = between(0, rank - 1), arg = dim_arg(d, rank);
    const bool smallest = chance(0.5);
    DimList out = info(x).dims;
    out[size_t(d)] = kOne;
    return add("gather(" + vname(x) + ", " + std::to_string(arg) + ", " + (smallest ? "argmin(" : "argmax(") +
                   vname(y) + ", " + std::to_string(arg) + ", keepdim=true))",
               [x, y, arg, smallest](const Values& v) {
                 const Tensor& t = v[size_t(y)];
                 return gather(v[size_t(x)], arg, smallest ? argmin(t, arg, true) : argmax(t, arg, true));
               },
               derived(x, out, info(x).range, true));
  }

  // index_select(x, d, argmax(y, k)) with y 2-D: as many indices as y's other dim (maybe
  // the batch), each < y.size(k) <= x.size(d).
  bool index_by_argmax_op() {
    const int y = pick_value([](const ValueInfo& v) { return v.dims.size() == 2; });
    if (y < 0) return false;
    const int64_t k = between(0, 1);
    const Dim range_dim = info(y).dims[size_t(k)], count = info(y).dims[size_t(1 - k)];
    auto wide_enough = [&](Dim d) { return d == range_dim || (!d.batch && !range_dim.batch && d.size >= range_dim.size); };
    std::vector<std::pair<int, int64_t>> fitting;
    for (int x = 0; x < num_values(); ++x)
      for (size_t d = 0; d < info(x).dims.size(); ++d)
        if (wide_enough(info(x).dims[d])) fitting.push_back({x, int64_t(d)});
    if (fitting.empty()) return false;
    const auto [x, d] = pick(fitting);
    DimList out = info(x).dims;
    out[size_t(d)] = count;
    return add("index_select(" + vname(x) + ", " + std::to_string(d) + ", argmax(" + vname(y) + ", " + std::to_string(k) + "))",
               [x, d, y, k](const Values& v) { return index_select(v[size_t(x)], d, argmax(v[size_t(y)], k)); },
               derived(x, out, info(x).range, true));
  }

  // prod over a few static elements of a tame value.
  bool prod_op() {
    // Away from 0, where a product's gradient divides by zero.
    const int x = pick_value([](const ValueInfo& v) { return !v.dims.empty() && v.range.mag() <= 2 && v.range.excludes_zero(0.1); });
    if (x < 0) return false;
    const int64_t rank = int64_t(info(x).dims.size()), d = between(0, rank - 1);
    const Dim dim = info(x).dims[size_t(d)];
    if (dim.batch || dim.size > 4) return false;
    const bool keepdim = chance(0.5);
    const int64_t arg = dim_arg(d, rank);
    const double bound = std::pow(info(x).range.mag(), double(dim.size));
    std::vector<bool> reduced(size_t(rank), false);
    reduced[size_t(d)] = true;
    return add("prod(" + vname(x) + ", [" + std::to_string(arg) + "], keepdim=" + (keepdim ? "true" : "false") + ")",
               [x, arg, keepdim](const Values& v) { return prod(v[size_t(x)], {arg}, keepdim); },
               derived(x, reduced_dims(info(x).dims, reduced, keepdim), {-bound, bound}, true));
  }

  static bool image_like(const ValueInfo& v) {
    return v.dims.size() == 4 && !v.dims[1].batch && !v.dims[2].batch && !v.dims[3].batch;
  }

  // conv2d of an [N, C, H, W] value (N may be the batch) with a constant weight.
  bool conv_op() {
    const int x = pick_value(image_like);
    if (x < 0) return false;
    const DimList& dims = info(x).dims;
    const int64_t c = dims[1].size, h = dims[2].size, w = dims[3].size;
    Conv2dOptions o;
    o.groups = c > 1 && chance(0.3) ? c : 1;
    const int64_t out_c = o.groups * between(1, 2), kh = between(1, std::min<int64_t>(3, h)), kw = between(1, std::min<int64_t>(3, w));
    o.stride = {between(1, 2), between(1, 2)};
    o.padding = {between(0, 1), between(0, 1)};
    o.dilation = {chance(0.2) ? 2 : 1, chance(0.2) ? 2 : 1};
    const int64_t span_h = o.dilation[0] * (kh - 1) + 1, span_w = o.dilation[1] * (kw - 1) + 1;
    if (h + 2 * o.padding[0] < span_h || w + 2 * o.padding[1] < span_w) return false;
    const int64_t oh = (h + 2 * o.padding[0] - span_h) / o.stride[0] + 1, ow = (w + 2 * o.padding[1] - span_w) / o.stride[1] + 1;
    const Tensor weight = constant({out_c, c / o.groups, kh, kw}, -1, 1, info(x).dtype);
    const Tensor bias = chance(0.5) ? constant({out_c}, -1, 1, info(x).dtype) : Tensor{};
    const double bound = double(c / o.groups * kh * kw) * info(x).range.mag() + 1;
    std::ostringstream expr;
    expr << "conv2d(" << vname(x) << ", const" << weight.shape() << (bias.defined() ? ", const" : ", {}") << ", stride "
         << o.stride[0] << "x" << o.stride[1] << ", padding " << o.padding[0] << "x" << o.padding[1] << ", dilation "
         << o.dilation[0] << "x" << o.dilation[1] << ", groups " << o.groups << ")";
    return add(expr.str(), [x, weight, bias, o](const Values& v) { return conv2d(v[size_t(x)], weight, bias, o); },
               derived(x, {dims[0], {out_c, false}, {oh, false}, {ow, false}}, {-bound, bound}, true));
  }

  bool pool_op() {
    const int x = pick_value([](const ValueInfo& v) { return image_like(v) && v.dims[2].size >= 2 && v.dims[3].size >= 2; });
    if (x < 0) return false;
    const DimList& dims = info(x).dims;
    const int64_t h = dims[2].size, w = dims[3].size;
    const int kind = int(between(0, 2));
    if (kind == 2) {
      const int64_t oh = between(1, h), ow = between(1, w);
      return add("adaptive_avg_pool2d(" + vname(x) + ", " + ints_text({oh, ow}) + ")",
                 [x, oh, ow](const Values& v) { return adaptive_avg_pool2d(v[size_t(x)], {oh, ow}); },
                 derived(x, {dims[0], dims[1], {oh, false}, {ow, false}}, info(x).range, true));
    }
    Pool2dOptions o;
    o.stride = chance(0.5) ? std::array<int64_t, 2>{1, 1} : std::array<int64_t, 2>{0, 0};  // {0, 0}: the kernel
    const int64_t s = o.stride[0] == 0 ? 2 : 1;
    const bool is_max = kind == 0;
    const Range r = is_max ? info(x).range : hull(info(x).range, {0, 0});
    return add(std::string(is_max ? "max_pool2d(" : "avg_pool2d(") + vname(x) + ", kernel 2x2, stride " + std::to_string(s) + ")",
               [x, o, is_max](const Values& v) { return is_max ? max_pool2d(v[size_t(x)], o) : avg_pool2d(v[size_t(x)], o); },
               derived(x, {dims[0], dims[1], {(h - 2) / s + 1, false}, {(w - 2) / s + 1, false}}, r, true));
  }

  // batch_norm over dim 1 (static) of a rank 2-4 value, with constant statistics and affine
  // parameters. Training mode updates the statistics in place; its output does not read them.
  bool batch_norm_op() {
    const int x = pick_value([](const ValueInfo& v) {
      if (v.dims.size() < 2 || v.dims.size() > 4 || v.dims[1].batch) return false;
      DimList per_channel = v.dims;
      per_channel.erase(per_channel.begin() + 1);
      return min_count(per_channel) >= 2;
    });
    if (x < 0) return false;
    const DimList& dims = info(x).dims;
    const int64_t c = dims[1].size;
    const DType dtype = info(x).dtype;
    const bool training = chance(0.6);
    const Tensor mean = constant({c}, -0.5, 0.5, dtype), var = constant({c}, 0.5, 1.5, dtype);
    const Tensor weight = chance(0.5) ? constant({c}, 0.5, 1.5, dtype) : Tensor{};
    const Tensor bias = weight.defined() ? constant({c}, -1, 1, dtype) : Tensor{};
    DimList per_channel = dims;
    per_channel.erase(per_channel.begin() + 1);
    const double z = training ? std::sqrt(double(max_count(per_channel))) : (info(x).range.mag() + 0.5) / std::sqrt(0.5);
    const double bound = z * 1.5 + 1;
    return add("batch_norm(" + vname(x) + ", const, const" + (weight.defined() ? ", const, const" : ", {}, {}") +
                   ", training=" + (training ? "true" : "false") + ")",
               [x, mean, var, weight, bias, training](const Values& v) {
                 return batch_norm(v[size_t(x)], mean, var, weight, bias, training);
               },
               derived(x, dims, {-bound, bound}, true));
  }

  // Rows of a 2-D value with a static first dim, picked by constant indices.
  bool embedding_op() {
    const int w = pick_value([](const ValueInfo& v) { return v.dims.size() == 2 && !v.dims[0].batch; });
    if (w < 0) return false;
    const int64_t n = info(w).dims[0].size;
    Shape index_shape{between(1, 4)};
    if (chance(0.4)) index_shape.push_back(between(1, 3));
    std::vector<int64_t> idx;
    for (int64_t i = 0; i < index_shape.numel(); ++i) idx.push_back(between(0, n - 1));
    const Tensor index = tensor(idx, index_shape);
    DimList out;
    for (int64_t s : index_shape) out.push_back({s, false});
    out.push_back(info(w).dims[1]);
    return add("embedding(" + vname(w) + ", " + ints_text(idx) + " as " + str(index_shape) + ")",
               [w, index](const Values& v) { return embedding(v[size_t(w)], index); },
               derived(w, out, info(w).range, true));
  }

  // index_add(x, d, idx, src): src's rows added at constant indices (repeats accumulate).
  bool index_add_op() {
    const int x = pick_value();
    const int64_t d = static_dim(x, 1);
    if (d < 0) return false;
    auto fits = [&](const ValueInfo& v) {
      if (v.dtype != info(x).dtype || v.dims.size() != info(x).dims.size() || v.dims[size_t(d)].batch) return false;
      for (size_t i = 0; i < v.dims.size(); ++i)
        if (int64_t(i) != d && !(v.dims[i] == info(x).dims[i])) return false;
      return true;
    };
    const int src = pick_value(fits);  // x itself fits
    const int64_t n = info(x).dims[size_t(d)].size, m = info(src).dims[size_t(d)].size;
    std::vector<int64_t> idx;
    for (int64_t i = 0; i < m; ++i) idx.push_back(between(0, n - 1));
    const Tensor index = tensor(idx, {m});
    const Range r = info(x).range, s = info(src).range;
    const double k = double(m);
    // The base's gradient is g itself.
    const ValueInfo out =
        derived(x, info(x).dims, {r.lo + k * std::min(s.lo, 0.0), r.hi + k * std::max(s.hi, 0.0)}, true);
    return add("index_add(" + vname(x) + ", " + std::to_string(d) + ", " + ints_text(idx) + ", " + vname(src) + ")",
               [x, d, index, src](const Values& v) { return index_add(v[size_t(x)], d, index, v[size_t(src)]); }, out);
  }

  // The same op on the same inputs again (a common subexpression).
  bool duplicate() {
    const int first = int(program_.inputs.size());
    if (num_values() == first) return false;
    const int id = int(between(first, num_values() - 1));
    ValueInfo copy = info(id);
    return add(copy.expr, program_.steps[size_t(id - first)].run, copy);
  }

  // The last value, sometimes with another (an input, a view or an intermediate). Every
  // value depends on an input, so the loss of the gradient check always has a gradient.
  void choose_outputs() {
    const int last = num_values() - 1;
    program_.outputs.push_back(last);
    const int other = int(between(0, last));
    if (other != last && chance(0.35)) program_.outputs.push_back(other);
    for (int id : program_.outputs) {
      program_.output_dims.push_back(info(id).dims);
      program_.output_dtypes.push_back(info(id).dtype);
    }
  }

  std::mt19937_64 rng_;
  RandomProgram program_;
  std::vector<ValueInfo> values_;
};

}  // namespace

RandomProgram generate_program(uint64_t seed) { return Generator(seed).generate(); }

}  // namespace baton::testing
