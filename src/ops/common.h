// Helpers shared by op definitions.
#pragma once
#include <algorithm>
#include <optional>
#include <utility>

#include "core/tensor_impl.h"
#include "dispatch/registry.h"

namespace baton::ops {

// 2^53: the largest count a double holds exactly (and every integer below it).
inline constexpr double kLargestExactCount = 9007199254740992.0;

// Casts the operand of lower dtype so both share promote_types(a, b).
std::pair<Tensor, Tensor> promote(const Tensor& a, const Tensor& b, SourceLoc loc);

// A 0-d tensor for a scalar operand next to `other`: it keeps other's dtype when its kind
// fits (2.0 * f64 -> f64, 2 * i32 -> i32); a float scalar with an integer tensor is f32.
// A size of a symbolic tensor (x.size(0), x.numel() while a graph is built: a symbol, see
// symbolic_size) becomes a graph value holding that size in each run, never its bit pattern.
Tensor scalar_operand(Scalar s, const Tensor& other, SourceLoc loc = SourceLoc::current());

// The symbol a number holds when it is a symbolic size taken as a number (the int64
// pattern of `batch` or `3*batch`, sym:: in baton/shape.h); nullopt for any other number.
std::optional<int64_t> symbolic_size(Scalar s);

// Integer and bool inputs of float-only math become f32, as in PyTorch (docs/dtypes.md
// rule 4); storage dtypes too. Strings stay, for the op to refuse: text is not parsed
// unless cast is asked to.
Tensor float_input(const Tensor& x, SourceLoc loc);

// Throws DTypeError unless every input has the dtype of input 0.
void require_same_dtype(const CallContext& c);
// Throws DTypeError unless input i is f32 or f64.
void require_float(const CallContext& c, size_t i = 0);

// The count attribute of a graph node of a value-sized op (OpDef::sized_by_values): a
// symbol (or a size, from graph text); a clear error without one.
int64_t count_attr(const CallContext& c);
// A value-sized op's call attributes, with the fresh count symbol (`stem`_N) a graph node
// of it holds when the call builds one (a symbolic input, or a trace in progress); an
// eager call counts instead.
Attrs with_count_symbol(Attrs attrs, std::span<const Tensor> inputs, std::string_view stem);
// The same for an op whose output dims are values (reshape_to): a graph node's `dims` holds
// `known` (sizes or symbols), with a fresh symbol (`stem`_N) for each entry that is -1 (not
// known before it runs).
Attrs with_dim_symbols(Attrs attrs, std::span<const Tensor> inputs, std::string_view stem,
                       const std::vector<int64_t>& known);

// x's sizes as a 1-D i64 tensor, read when a graph runs where they are symbols (the shape
// a gradient of a value-sized op puts back: reshape_to, sum_over).
Tensor sizes_of(const Tensor& x);
// The values of an i32 or i64 tensor, read without dispatching an op (as kernels and
// value-sized ops read their size inputs); callers refuse other dtypes first.
std::vector<int64_t> integer_values(const Tensor& t);
// The cost of copying input 0 once (read and write), as the value-sized reshapes do.
Cost copy_cost(const CallContext& c, std::span<const TensorMeta> outputs);

// The "dim" attribute normalised against input 0's rank: the kernel parameter
// (OpDef::params) of the ops that work along one dim (cat, gather, index_select...).
int64_t input_dim_param(const CallContext& c);

// The dims a reduction covers, normalised and sorted; empty `dims` means all.
std::vector<int64_t> reduction_dims(const std::vector<int64_t>& dims, int64_t rank,
                                    const CallContext& c);
// x's shape with the reduced dims removed (or kept as 1 with keepdim).
Shape reduced_shape(const Shape& shape, const std::vector<int64_t>& dims, bool keepdim);

// Output positions of a sliding window (convolution, pooling) along one dim: input `size`
// padded by `pad` on each side, a window spanning `span` elements, moved by `stride`.
// Computed in 128 bits, so sizes and options from graph text cannot overflow; fails (naming
// `what`) when the window is larger than the padded input or the count does not fit.
int64_t window_positions(const CallContext& c, const char* what, int64_t size, int64_t pad, int64_t span,
                         int64_t stride);

// An element count taken from sizes, for the composite functions and gradient rules that
// divide or multiply by one (mean, var, the "mean" losses, batch_norm, layer_norm). When
// every counted size is static it is a plain number, so eager code computes exactly what
// it always did. When one is symbolic (a graph built once for `batch`), a number taken
// now would be baked into the graph, so the count is a 0-d tensor from element_count,
// which the graph computes from the concrete input on every run. apply() lets the
// arithmetic be written once for both:  n.apply([&](auto k) { return div(total, k, loc); })
class SizeCount {
 public:
  explicit SizeCount(double value) : value_(value) {}
  explicit SizeCount(Tensor count) : tensor_(std::move(count)) {}
  bool is_symbolic() const { return tensor_.defined(); }
  // f(the count as a double) when static, f(the 0-d count tensor) when symbolic.
  template <class F>
  Tensor apply(F&& f) const { return is_symbolic() ? f(tensor_) : f(value_); }

 private:
  double value_ = 0;
  Tensor tensor_;
};

// x's element count over dims (valid non-negative dims of x; all when empty); the tensor
// form has dtype `dtype`.
SizeCount size_count(const Tensor& x, const std::vector<int64_t>& dims, DType dtype, SourceLoc loc);

// max(v, lo) for either form of a count (inside SizeCount::apply).
inline double at_least(double v, double lo, SourceLoc = SourceLoc::current()) {
  return std::max(v, lo);
}
Tensor at_least(const Tensor& v, double lo, SourceLoc loc = SourceLoc::current());

// The zeros a gradient rule scatters into (index_add(zeros, ...)): eagerly, a zero
// broadcast to t's shape, which allocates nothing (the scatter fills its output from it);
// in a graph, zeros_like(t).
Tensor scatter_base(const Tensor& t, SourceLoc loc);

// Tensor::copy_/fill_ (`op`) into t, eagerly or traced: an AutogradError when t requires
// grad and grad mode is on (its gradient would not see the write).
void check_in_place(const Tensor& t, std::string_view op, SourceLoc loc);

// Fills t with draws in [0, 1) from the global generator: the random_uniform op's kernel,
// for kernels that draw (dropout) without calling an op per run (src/ops/creation.cpp).
void fill_uniform(const Tensor& t);

}  // namespace baton::ops

// Each binary op takes two tensors, or a tensor and a number on either side.
#define BATON_DEFINE_BINARY(name, body)                                          \
  Tensor name(const Tensor& a_in, const Tensor& b_in, SourceLoc loc) {           \
    auto [a, b] = ops::promote(a_in, b_in, loc);                                      \
    body                                                                         \
  }                                                                              \
  Tensor name(const Tensor& a, Scalar b, SourceLoc loc) {                        \
    return name(a, ops::scalar_operand(b, a, loc), loc);                                   \
  }                                                                              \
  Tensor name(Scalar a, const Tensor& b, SourceLoc loc) {                        \
    return name(ops::scalar_operand(a, b, loc), b, loc);                                   \
  }

