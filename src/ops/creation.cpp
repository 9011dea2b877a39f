// Creating tensors, reading their values, and in-place writes.
#include <cmath>
#include <mutex>
#include <random>

#include "baton/autograd.h"
#include "baton/ops.h"
#include "core/tensor_impl.h"
#include "dispatch/hooks.h"
#include "kernels/cpu/copy.h"
#include "kernels/cpu/dispatch.h"
#include "ops/common.h"

namespace baton {
namespace {

std::mt19937_64& generator() {
  static std::mt19937_64 gen(0);
  return gen;
}

// Guards the generator: each random tensor draws one unbroken run of the sequence, so
// threads drawing at once get well-formed (if interleaved) streams, never a data race.
std::mutex& generator_mutex() {
  static std::mutex m;
  return m;
}

// Uniform in [0, 1) with 53 random bits: the same sequence on every platform.
double uniform01() { return double(generator()() >> 11) * 0x1.0p-53; }

template <class T, class Fill>
Tensor generate(const Shape& shape, DType dtype, Fill fill) {
  Tensor t = empty(shape, dtype);
  kernels::visit_dtype(dtype, [&](auto tag) {
    using U = typename decltype(tag)::type;
    U* p = t.data<U>();
    for (int64_t i = 0; i < t.numel(); ++i) p[i] = U(fill(i));
  });
  return t;
}

template <class T>
Tensor from_nested(const std::vector<T>& flat, const Shape& shape, SourceLoc loc) {
  if (int64_t(flat.size()) != shape.numel())
    throw ShapeError("tensor", str("ragged nested list: ", flat.size(), " values for shape ", shape),
                     loc);
  if constexpr (std::is_same_v<T, bool>) {
    Tensor t = empty(shape, b8);
    for (size_t i = 0; i < flat.size(); ++i) t.data<bool>()[i] = flat[i];
    return t;
  } else {
    return from_buffer(flat.data(), dtype_v<T>, shape);
  }
}

}  // namespace

}  // namespace baton

// Random tensors as ops without inputs, so that a graph draws new values each run where a
// trace would otherwise bind the values it drew once (docs/graph-mode.md, "Random ops").
// Each draws one unbroken run of the global generator's sequence, as rand() always did.
namespace baton::ops {
namespace {

// The shape is the input's when there is one (the _like forms), else the attribute's.
TensorMeta random_infer(const InferContext& c) {
  if (c.inputs.size() == 1) return {c.attrs.dtype("dtype"), c.input(0).shape()};
  if (!c.attrs.has("shape")) c.fail("needs a shape attribute or an input to take the shape of");
  const Shape shape(c.attrs.ints("shape"));
  for (int64_t d : shape)
    if (d < 0) c.fail<ShapeError>("a size must not be negative, got ", shape);
  return {c.attrs.dtype("dtype"), shape};
}

Cost random_cost(const CallContext&, std::span<const TensorMeta> out) {
  return Cost{0, double(out[0].shape.numel()) * double(dtype_size(out[0].dtype))};
}

template <class Fill>
void fill_drawn(const Tensor& out, Fill fill) {
  std::lock_guard lock(generator_mutex());
  kernels::visit_dtype(out.dtype(), [&](auto tag) {
    using U = typename decltype(tag)::type;
    U* p = out.data<U>();
    for (int64_t i = 0; i < out.numel(); ++i) p[i] = U(fill());
  });
}

}  // namespace

void fill_uniform(const Tensor& t) { fill_drawn(t, uniform01); }

BATON_OP(random_uniform_op, "random_uniform")
    .inputs(0, 1)
    .ints_attr("shape", -1, OpDef::optional)
    .dtype_attr("dtype")
    .random()
    .infer(random_infer)
    .cpu([](const KernelContext& c) { fill_uniform(c.output()); })
    .cost(random_cost);

// Box-Muller: two uniforms give two independent normals.
BATON_OP(random_normal_op, "random_normal")
    .inputs(0, 1)
    .ints_attr("shape", -1, OpDef::optional)
    .dtype_attr("dtype")
    .random()
    .infer(random_infer)
    .cpu([](const KernelContext& c) {
      double spare = 0;
      bool has_spare = false;
      fill_drawn(c.output(), [&] {
        if (has_spare) {
          has_spare = false;
          return spare;
        }
        double u1 = 1.0 - uniform01(), u2 = uniform01();
        double r = std::sqrt(-2.0 * std::log(u1));
        spare = r * std::sin(2 * M_PI * u2);
        has_spare = true;
        return r * std::cos(2 * M_PI * u2);
      });
    })
    .cost(random_cost);

BATON_OP(random_int_op, "random_int")
    .inputs(0, 1)
    .int_attr("low")
    .int_attr("high")
    .ints_attr("shape", -1, OpDef::optional)
    .dtype_attr("dtype")
    .random()
    .infer([](const InferContext& c) {
      if (c.attrs.i("high") <= c.attrs.i("low"))
        c.fail<ValueError>("empty range [", c.attrs.i("low"), ", ", c.attrs.i("high"), ")");
      return random_infer(c);
    })
    .params([](const CallContext& c) { return std::pair{c.attrs.i("low"), uint64_t(c.attrs.i("high") - c.attrs.i("low"))}; })
    .cpu([](const KernelContext& c) {
      const auto [low, span] = c.params<std::pair<int64_t, uint64_t>>();
      fill_drawn(c.output(), [&] { return double(low + int64_t(generator()() % span)); });
    })
    .cost(random_cost);

}  // namespace baton::ops

namespace baton {

void manual_seed(uint64_t seed) {
  std::lock_guard lock(generator_mutex());
  generator().seed(seed);
}

// A size of a symbolic tensor (x.size(0) while a graph is built) is a symbol, known only
// when the graph runs: a concrete tensor would hold its bit pattern instead.
static void require_number(Scalar v, const char* what) {
  if (std::optional<int64_t> symbol = ops::symbolic_size(v))
    throw GraphError(what, str("the value ", sym::to_string(*symbol), " is a size of a symbolic tensor, known only ",
                               "when the graph runs; use element_count() or full_like() of that tensor"),
                     SourceLoc::current());
}

Tensor scalar_tensor(Scalar v, DType dtype) {
  require_number(v, "scalar_tensor");
  return generate<double>({}, dtype, [&](int64_t) { return v.value(); });
}

Tensor zeros(const Shape& shape, DType dtype) { return full(shape, 0, dtype); }
Tensor ones(const Shape& shape, DType dtype) { return full(shape, 1, dtype); }
// A symbolic t has no concrete shape to allocate: the full_like op fills one when the graph runs.
Tensor zeros_like(const Tensor& t) {
  return t.is_symbolic() ? full_like(t, 0, t.dtype()) : zeros(t.shape(), t.dtype());
}
Tensor ones_like(const Tensor& t) {
  return t.is_symbolic() ? full_like(t, 1, t.dtype()) : ones(t.shape(), t.dtype());
}

Tensor full(const Shape& shape, Scalar value, DType dtype) {
  require_number(value, "full");
  Tensor t = empty(shape, dtype);
  kernels::visit_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    std::fill_n(t.data<T>(), t.numel(), T(value.value()));
  });
  return t;
}

Tensor arange(double start, double end, double step, DType dtype) {
  const double steps = (end - start) / step;
  if (step == 0 || steps < 0)
    throw ValueError("arange", str("empty or infinite range start=", start, " end=", end,
                                   " step=", step), SourceLoc::current());
  // A NaN bound, or more elements than doubles count exactly, is no range to make;
  // converting such a count to int64 would be undefined.
  const double count = std::ceil(steps);
  if (!(count <= ops::kLargestExactCount))
    throw ValueError("arange", str("a range of ", count, " elements, start=", start, " end=", end, " step=", step),
                     SourceLoc::current());
  auto n = int64_t(count);
  return generate<double>({n}, dtype, [&](int64_t i) { return start + double(i) * step; });
}

Tensor rand(const Shape& shape, DType dtype, SourceLoc loc) {
  return ops::call(ops::random_uniform_op, {}, {{"shape", shape.vec()}, {"dtype", dtype}},
                   loc);
}

Tensor randn(const Shape& shape, DType dtype, SourceLoc loc) {
  return ops::call(ops::random_normal_op, {}, {{"shape", shape.vec()}, {"dtype", dtype}},
                   loc);
}

namespace {

// Before the op's own check, so that the message names the function the user called.
void check_range(const char* function, int64_t low, int64_t high, SourceLoc loc) {
  if (high <= low) throw ValueError(function, str("empty range [", low, ", ", high, ")"), loc);
}

}  // namespace

Tensor randint(int64_t low, int64_t high, const Shape& shape, DType dtype, SourceLoc loc) {
  check_range("randint", low, high, loc);
  return ops::call(ops::random_int_op, {},
                   {{"low", low}, {"high", high}, {"shape", shape.vec()}, {"dtype", dtype}},
                   loc);
}

Tensor randn_like(const Tensor& x, SourceLoc loc) {
  return ops::call(ops::random_normal_op, {x}, {{"dtype", x.dtype()}}, loc);
}

Tensor rand_like(const Tensor& x, SourceLoc loc) {
  return ops::call(ops::random_uniform_op, {x}, {{"dtype", x.dtype()}}, loc);
}

Tensor randint_like(const Tensor& x, int64_t low, int64_t high, SourceLoc loc) {
  check_range("randint_like", low, high, loc);
  return ops::call(ops::random_int_op, {x}, {{"low", low}, {"high", high}, {"dtype", x.dtype()}},
                   loc);
}

namespace {
// Whether a list's elements are lists again (a std::string element is a value, not a list).
template <class L>
constexpr bool holds_lists = requires(const L& list) { list.begin()->begin(); } &&
                             !std::is_same_v<std::decay_t<decltype(*std::declval<L>().begin())>, std::string>;
template <class L, class T> void flatten_into(const L& list, std::vector<T>& out) {
  if constexpr (holds_lists<L>)
    for (auto& inner : list) flatten_into(inner, out);
  else
    out.insert(out.end(), list.begin(), list.end());
}
// Sizes of a nested list, read from its first element at each level.
template <class L> void shape_into(const L& list, Shape& shape) {
  shape.push_back(int64_t(list.size()));
  if constexpr (holds_lists<L>)
    if (list.size()) shape_into(*list.begin(), shape);
}
// Throws unless every list at depth `level` has the size shape[level].
template <class L>
void check_regular(const L& list, const Shape& shape, size_t level, SourceLoc loc) {
  if (level >= shape.size() || int64_t(list.size()) != shape[level])
    throw ShapeError("tensor", str("ragged nested list: a list of ", list.size(), " at depth ",
                                   level, " does not match the first list's shape ", shape),
                     loc);
  if constexpr (holds_lists<L>)
    for (auto& inner : list) check_regular(inner, shape, level + 1, loc);
}
template <class T, class L> Tensor from_lists(const L& list, SourceLoc loc) {
  std::vector<T> flat;
  flatten_into(list, flat);
  Shape shape;
  shape_into(list, shape);
  check_regular(list, shape, 0, loc);
  return from_nested(flat, shape, loc);
}
}  // namespace

template <class T> Tensor tensor(List1<T> v, SourceLoc loc) { return from_lists<T>(v, loc); }
template <class T> Tensor tensor(List2<T> v, SourceLoc loc) { return from_lists<T>(v, loc); }
template <class T> Tensor tensor(List3<T> v, SourceLoc loc) { return from_lists<T>(v, loc); }
template <class T> Tensor tensor(List4<T> v, SourceLoc loc) { return from_lists<T>(v, loc); }
template <class T> Tensor tensor(const std::vector<T>& v, const Shape& shape, SourceLoc loc) {
  return from_nested(v, shape, loc);
}

// Reading values out of a graph being built cannot work: they exist only when it runs.
static void require_concrete(const Tensor& t, const char* what, SourceLoc loc) {
  if (t.is_symbolic())
    throw GraphError(what, str("the tensor is symbolic (", t.dtype(), t.shape(),
                               ", a value of a graph being built or traced), so it has no value "
                               "yet. To branch on it use cond(pred, then_fn, else_fn); to select "
                               "elementwise use where(cond, a, b)"),
                     loc);
}

template <class T> T Tensor::item(SourceLoc loc) const {
  require_concrete(*this, "item", loc);
  if (numel() != 1)
    throw ValueError("item", str("needs exactly one element, the tensor has shape ", shape()), loc);
  Tensor one = empty({}, dtype_v<T>);
  kernels::copy_into(one, make_view(*this, {}, {}, offset()));  // the one element, 0-d (no op called)
  return *one.data<T>();
}

template <class T> std::vector<T> Tensor::to_vector(SourceLoc loc) const {
  require_concrete(*this, "to_vector", loc);
  Tensor flat = empty(shape(), dtype_v<T>);
  kernels::copy_into(flat, detach());
  const T* p = flat.data<T>();
  return std::vector<T>(p, p + numel());
}

#define BATON_INSTANTIATE(T)                                       \
  template Tensor tensor<T>(List1<T>, SourceLoc);                            \
  template Tensor tensor<T>(List2<T>, SourceLoc);                            \
  template Tensor tensor<T>(List3<T>, SourceLoc);                            \
  template Tensor tensor<T>(List4<T>, SourceLoc);                            \
  template Tensor tensor<T>(const std::vector<T>&, const Shape&, SourceLoc); \
  template T Tensor::item<T>(SourceLoc) const;                     \
  template std::vector<T> Tensor::to_vector<T>(SourceLoc) const;
BATON_INSTANTIATE(float)
BATON_INSTANTIATE(double)
BATON_INSTANTIATE(int32_t)
BATON_INSTANTIATE(int64_t)
BATON_INSTANTIATE(bool)
BATON_INSTANTIATE(uint8_t)
BATON_INSTANTIATE(int8_t)
BATON_INSTANTIATE(int16_t)
BATON_INSTANTIATE(uint16_t)
BATON_INSTANTIATE(uint32_t)
BATON_INSTANTIATE(uint64_t)
BATON_INSTANTIATE(Half)
BATON_INSTANTIATE(BFloat16)
BATON_INSTANTIATE(std::string)
#undef BATON_INSTANTIATE

// Whether `from` broadcasts to `to` (numpy rules, `to` unchanged).
static bool broadcasts_to(const Shape& from, const Shape& to) {
  if (from.size() > to.size()) return false;
  const size_t lead = to.size() - from.size();
  for (size_t d = 0; d < from.size(); ++d)
    if (from[d] != 1 && from[d] != to[lead + d]) return false;
  return true;
}

namespace ops {

void check_in_place(const Tensor& t, std::string_view op, SourceLoc loc) {
  // requires_grad() first: for a traced value it makes the plan depend on grad mode.
  if (t.requires_grad() && GradMode::enabled())
    throw AutogradError(op, str("an in-place write to a tensor (", t.dtype(), t.shape(),
                                ") that requires grad; wrap it in NoGradGuard"), loc);
}

}  // namespace ops

Tensor& Tensor::copy_(const Tensor& src, SourceLoc loc) {
  if (is_symbolic() || src.is_symbolic() || dispatch::capturing()) {  // a graph is being built
    dispatch::graph_capture().copy_into("copy_", *this, src, loc);
    return *this;
  }
  ops::check_in_place(*this, "copy_", loc);
  if (!broadcasts_to(src.shape(), shape()))
    throw ShapeError("copy_", str("cannot copy shape ", src.shape(), " into shape ", shape()), loc);
  kernels::copy_into(*this, src);
  impl()->storage->bump_version();
  return *this;
}

Tensor& Tensor::fill_(Scalar value, SourceLoc loc) {
  if (is_symbolic() || dispatch::capturing()) {
    dispatch::graph_capture().copy_into("fill_", *this, scalar_tensor(value, dtype()), loc);
    return *this;
  }
  ops::check_in_place(*this, "fill_", loc);
  kernels::copy_into(*this, scalar_tensor(value, dtype()));
  impl()->storage->bump_version();
  return *this;
}

}  // namespace baton
