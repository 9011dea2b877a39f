// The evaluator of element-wise programs (ewise_program.h), shared by fused_elementwise's
// kernel (one pass writing every element) and fused_elementwise_sum's (one pass summing
// them as they are computed, or writing and summing them). Internal to those kernels.
#pragma once
#include <algorithm>
#include <cmath>
#include <memory>
#include <span>
#include <vector>

#include "baton/tensor.h"
#include "kernels/cpu/convert.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/element_fns.h"
#include "kernels/cpu/ewise_program.h"
#include "kernels/cpu/loops.h"
#include "kernels/cpu/vec16.h"

namespace baton::kernels::ewise {

// --- The instructions -------------------------------------------------------------------
// Each applies the registry op's own element function (element_fns.h), so fusing changes
// no bit; tests/ops/fused_elementwise_test.cpp checks every one against its op, special
// values included. Each instruction is a loop of its own, storing its result: one loop
// over a whole chain per element would let GCC contract a multiply and the next op's add
// into one FMA (it does within an expression, at -march=x86-64-v3), rounding once where
// the separate ops round twice.

template <class T, class F>
BATON_ELEMENT_FN inline void each(T* __restrict d, const T* a, int64_t n, F f) {
  for (int64_t i = 0; i < n; ++i) d[i] = f(a[i]);
}

template <class T, class F>
BATON_ELEMENT_FN inline void each(T* __restrict d, const T* a, const T* b, int64_t n, F f) {
  for (int64_t i = 0; i < n; ++i) d[i] = f(a[i], b[i]);
}

// A comparison's bool as the program's type: 1 or 0.
template <class T, class F>
BATON_ELEMENT_FN inline void compare(T* __restrict d, const T* a, const T* b, int64_t n, F f) {
  each(d, a, b, n, [f](T x, T y) BATON_ELEMENT_FN { return f(x, y) ? T(1) : T(0); });
}

// (unary, pow_by and binary are always inlined: into the evaluator, and into the AVX-512
// forms below, whose loops then vectorize for that machine.)
template <class T>
[[gnu::always_inline]] inline void unary(const EwInstr& ins, T* __restrict d, const T* a, int64_t n) {
  const T p0 = T(ins.params[0]), p1 = T(ins.params[1]);
  switch (ins.op) {
    case EwOp::neg: return each(d, a, n, ew::Neg{});
    case EwOp::abs: return each(d, a, n, ew::Abs{});
    case EwOp::exp: return each(d, a, n, ew::Exp{});
    case EwOp::log: return each(d, a, n, ew::Log{});
    case EwOp::sqrt: return each(d, a, n, ew::Sqrt{});
    case EwOp::rsqrt: return each(d, a, n, ew::Rsqrt{});
    case EwOp::sin: return ew::Sin{}.block(d, a, n);
    case EwOp::cos: return ew::Cos{}.block(d, a, n);
    case EwOp::tanh: return each(d, a, n, ew::Tanh{});
    case EwOp::erf: return each(d, a, n, ew::Erf{});
    case EwOp::sigmoid: return each(d, a, n, ew::Sigmoid{});
    case EwOp::relu: return each(d, a, n, ew::Relu{});
    case EwOp::gelu: return each(d, a, n, ew::Gelu{});
    case EwOp::gelu_tanh: return each(d, a, n, ew::GeluTanh{});
    case EwOp::silu: return each(d, a, n, ew::Silu{});
    case EwOp::softplus: return each(d, a, n, ew::Softplus{});
    case EwOp::leaky_relu: return each(d, a, n, ew::LeakyRelu<T>{p0});
    case EwOp::elu: return each(d, a, n, ew::Elu<T>{p0});
    case EwOp::clamp: return each(d, a, n, ew::Clamp<T>{p0, p1});
    case EwOp::floor: return each(d, a, n, ew::Floor{});
    case EwOp::ceil: return each(d, a, n, ew::Ceil{});
    case EwOp::round: return each(d, a, n, ew::Round{});
    case EwOp::tan: return each(d, a, n, ew::Tan{});
    case EwOp::asin: return each(d, a, n, ew::Asin{});
    case EwOp::acos: return each(d, a, n, ew::Acos{});
    case EwOp::atan: return each(d, a, n, ew::Atan{});
    case EwOp::sinh: return each(d, a, n, ew::Sinh{});
    case EwOp::cosh: return each(d, a, n, ew::Cosh{});
    case EwOp::asinh: return each(d, a, n, ew::Asinh{});
    case EwOp::acosh: return each(d, a, n, ew::Acosh{});
    case EwOp::atanh: return each(d, a, n, ew::Atanh{});
    default: return;
  }
}

// pow's exponent is one element, which picks the loop as the pow kernel does.
template <class T>
[[gnu::always_inline]] inline void pow_by(T* __restrict d, const T* a, T e, int64_t n) {
  if (e == T(2)) return each(d, a, n, [](T x) BATON_ELEMENT_FN { return x * x; });
  if (e == T(0.5)) return each(d, a, n, ew::Sqrt{});
  each(d, a, n, [e](T x) BATON_ELEMENT_FN { return T(std::pow(x, e)); });
}

template <class T>
[[gnu::always_inline]] inline void binary(const EwInstr& ins, T* __restrict d, const T* a, const T* b, int64_t n) {
  switch (ins.op) {
    case EwOp::add: return each(d, a, b, n, [](T x, T y) BATON_ELEMENT_FN { return x + y; });
    case EwOp::sub: return each(d, a, b, n, [](T x, T y) BATON_ELEMENT_FN { return x - y; });
    case EwOp::mul: return each(d, a, b, n, [](T x, T y) BATON_ELEMENT_FN { return x * y; });
    case EwOp::div: return each(d, a, b, n, [](T x, T y) BATON_ELEMENT_FN { return x / y; });
    case EwOp::maximum: return each(d, a, b, n, ew::Maximum{});
    case EwOp::minimum: return each(d, a, b, n, ew::Minimum{});
    case EwOp::pow: return pow_by(d, a, b[0], n);
    case EwOp::relu_backward: return each(d, a, b, n, ew::ReluBackward{});
    case EwOp::sigmoid_backward: return each(d, a, b, n, ew::SigmoidBackward{});
    case EwOp::tanh_backward: return each(d, a, b, n, ew::TanhBackward{});
    case EwOp::gelu_backward: return each(d, a, b, n, ew::GeluBackward{});
    case EwOp::gelu_tanh_backward: return each(d, a, b, n, ew::GeluTanhBackward{});
    case EwOp::silu_backward: return each(d, a, b, n, ew::SiluBackward{});
    case EwOp::eq: return compare(d, a, b, n, [](T x, T y) BATON_ELEMENT_FN { return x == y; });
    case EwOp::ne: return compare(d, a, b, n, [](T x, T y) BATON_ELEMENT_FN { return x != y; });
    case EwOp::lt: return compare(d, a, b, n, [](T x, T y) BATON_ELEMENT_FN { return x < y; });
    case EwOp::le: return compare(d, a, b, n, [](T x, T y) BATON_ELEMENT_FN { return x <= y; });
    case EwOp::gt: return compare(d, a, b, n, [](T x, T y) BATON_ELEMENT_FN { return x > y; });
    case EwOp::ge: return compare(d, a, b, n, [](T x, T y) BATON_ELEMENT_FN { return x >= y; });
    default: return;
  }
}

// where, the one ternary instruction: a condition register holds 1 or 0 (or, read from
// an input, what converting it gave), and any nonzero value is true, as in cast to bool.
template <class T>
[[gnu::always_inline]] inline void where(T* __restrict d, const T* c, const T* a, const T* b, int64_t n) {
  for (int64_t i = 0; i < n; ++i) d[i] = c[i] != T(0) ? a[i] : b[i];
}

// The instructions on AVX-512 machines: the same loops, compiled for 16 floats a vector
// where the library's baseline (x86-64-v3) gives 8. Each element goes through the same
// operations, so the results are the same bits. Transcendental chains run about twice as
// fast: tanh and sigmoid over 1M floats took 766 against 1425 us on one Zen 5 core.
template <class T>
__attribute__((target("avx512f"))) void unary_wide(const EwInstr& ins, T* __restrict d, const T* a, int64_t n) {
  unary(ins, d, a, n);
}

template <class T>
__attribute__((target("avx512f"))) void binary_wide(const EwInstr& ins, T* __restrict d, const T* a, const T* b,
                                                    int64_t n) {
  binary(ins, d, a, b, n);
}

template <class T>
__attribute__((target("avx512f"))) void where_wide(T* __restrict d, const T* c, const T* a, const T* b, int64_t n) {
  where(d, c, a, b, n);
}

// --- Registers ----------------------------------------------------------------------------

// Where each instruction's result lives: a scratch block (registers whose lives do not
// overlap share one; a result never shares with its own operands, so every loop writes
// memory it does not read), or -1: straight into the output.
struct Schedule {
  std::vector<int> slot;
  int num_slots = 0;
};

inline Schedule schedule(const EwProgram& p, bool last_into_output) {
  const int n = int(p.code.size());
  std::vector<int> last_use(size_t(n), -1);
  for (int k = 0; k < n; ++k) {
    const EwInstr& ins = p.code[size_t(k)];
    for (int i = 0; i < ew_op_info(ins.op).arity; ++i)
      if (!ins.args[size_t(i)].is_input) last_use[size_t(ins.args[size_t(i)].index)] = k;
  }
  Schedule s;
  std::vector<int> free;
  for (int k = 0; k < n; ++k) {
    int& slot = s.slot.emplace_back();
    if (k == n - 1 && last_into_output) slot = -1;
    else if (!free.empty()) slot = free.back(), free.pop_back();
    else slot = s.num_slots++;
    const EwInstr& ins = p.code[size_t(k)];
    const int arity = ew_op_info(ins.op).arity;
    for (int i = 0; i < arity; ++i) {
      const EwOperand& a = ins.args[size_t(i)];
      const bool repeated = std::find(ins.args.begin(), ins.args.begin() + i, a) != ins.args.begin() + i;
      if (!a.is_input && !repeated && last_use[size_t(a.index)] == k) free.push_back(s.slot[size_t(a.index)]);
    }
    if (last_use[size_t(k)] < 0 && k < n - 1) free.push_back(slot);  // a result nothing reads
  }
  return s;
}

// --- Inputs -------------------------------------------------------------------------------

// How a block of an input is found: in place (contiguous, of the output's layout and the
// program's type), in a scratch block filled once (one element), or gathered per block
// (anything else: a bias row, a column, a transposed view, another dtype converted).
enum class Access : uint8_t { Flat, Scalar, Gathered };

struct InputAccess {
  Access access = Access::Flat;
  StridedLayout<2> layout;  // Gathered: coalesced dims, the output's strides and this input's
  int buffer = -1;          // the scratch block of a Scalar or Gathered input
  DType dtype{};            // the input's, read converted where it is not the program's
};

// From t's metadata (dtype, shape and strides) alone; `type` is the program's.
inline InputAccess access_of(const Tensor& t, const Shape& out_shape, DType type) {
  InputAccess in;
  in.dtype = t.dtype();
  if (t.numel() == 1) {
    in.access = Access::Scalar;
    return in;
  }
  in.layout = coalesce<2>(out_shape, {contiguous_strides(out_shape), broadcast_strides(t, out_shape)});
  const bool flat = in.layout.shape.size() == 1 && in.layout.strides[1][0] == 1 && in.dtype == type;
  in.access = flat ? Access::Flat : Access::Gathered;
  return in;
}

template <class S, class T>
void copy_row(const S* __restrict src, int64_t stride, int64_t n, T* __restrict dst) {
  if constexpr (std::is_same_v<S, T>) {
    if (stride == 1) return void(std::copy_n(src, n, dst));
    if (stride == 0) return void(std::fill_n(dst, n, *src));
  }
  if (stride == 1) {  // a loop of its own, which vectorizes
    for (int64_t i = 0; i < n; ++i) dst[i] = convert<T>(src[i]);
    return;
  }
  for (int64_t i = 0; i < n; ++i) dst[i] = convert<T>(src[i * stride]);
}

// Elements [begin, begin + n) of the output's order, read through the input's strides
// (and converted to T), row by row; idx is scratch for the position.
template <class S, class T>
void gather(const InputAccess& in, const S* data, int64_t begin, int64_t n, T* dst, Shape& idx) {
  const Shape& shape = in.layout.shape;
  const Shape& stride = in.layout.strides[1];
  const size_t last = shape.size() - 1;
  idx.resize(shape.size());
  int64_t offset = 0;
  for (size_t d = shape.size(), rem = size_t(begin); d-- > 0;) {
    idx[d] = int64_t(rem % size_t(shape[d]));
    rem /= size_t(shape[d]);
    offset += idx[d] * stride[d];
  }
  for (int64_t done = 0; done < n;) {
    const int64_t m = std::min(shape[last] - idx[last], n - done);
    copy_row(data + offset, stride[last], m, dst + done);
    done += m;
    idx[last] += m;
    offset += m * stride[last];
    for (size_t d = last; d > 0 && idx[d] == shape[d]; --d) {  // carry into the outer dims
      offset += stride[d - 1] - shape[d] * stride[d];
      idx[d] = 0;
      ++idx[d - 1];
    }
  }
}

// True when `t` may use some of out's bytes.
inline bool overlaps(const Tensor& t, const Tensor& out) {
  int64_t extent = 1;
  for (size_t d = 0; d < size_t(t.dim()); ++d) extent += (t.shape()[d] - 1) * std::abs(t.strides()[d]);
  const char* a = static_cast<const char*>(t.raw_data());
  const char* o = static_cast<const char*>(out.raw_data());
  const int64_t size = int64_t(dtype_size(t.dtype()));
  return a < o + out.numel() * size && o < a + extent * size;
}

// An input sharing out's bytes is read by the last instruction, whose loop must not write
// what it reads: then the result goes to a scratch block first (EvalLayout's into_dst).
bool any_overlaps(std::span<const Tensor> inputs, const Tensor& out);

// --- Memory order (fused_elementwise.cpp) ---------------------------------------------------

// The dims of t from the largest stride to the smallest: the order its elements lie in
// memory when t is dense. (Size-1 dims go anywhere: they move no pointer.)
Shape memory_order(const Tensor& t);

// --- Evaluation ---------------------------------------------------------------------------

// All that evaluating a program over a shape needs but the inputs' data: the registers'
// schedule and how each input's blocks are found. It depends on the inputs' shapes and
// strides only, so a plan step makes it once (fused_elementwise's prepared state).
struct EvalLayout {
  int64_t block = 0;  // elements per evaluation
  Schedule schedule;
  std::vector<InputAccess> inputs;
  int num_buffers = 0;  // scratch blocks per thread: registers, then non-flat inputs

  // into_dst: the last instruction writes eval's dst (which must not overlap an input);
  // otherwise it writes a block of the scratch, which eval returns.
  // `type`: the program's (its output's dtype).
  EvalLayout(const EwProgram& p, std::span<const Tensor> in, const Shape& shape, DType type, int64_t block_elements,
             bool into_dst)
      : block(block_elements), schedule(ewise::schedule(p, into_dst)) {
    num_buffers = schedule.num_slots;
    for (const Tensor& t : in) {
      inputs.push_back(access_of(t, shape, type));
      if (inputs.back().access != Access::Flat) inputs.back().buffer = num_buffers++;
    }
  }
  int64_t scratch_elements() const { return num_buffers * block; }
};

// The dtypes, shapes and strides of a kernel's tensors, which a prepared state keeps to
// tell whether a run's tensors are the ones it was made for (a kernel must also run right
// when they are not).
class TensorsMeta {
 public:
  TensorsMeta(std::span<const Tensor> inputs, const Tensor& out) {
    for (const Tensor& t : inputs) tensors_.push_back({t.dtype(), t.shape(), t.strides()});
    tensors_.push_back({out.dtype(), out.shape(), out.strides()});
  }

  bool fits(std::span<const Tensor> inputs, const Tensor& out) const {
    if (inputs.size() + 1 != tensors_.size() || !tensors_.back().describes(out)) return false;
    for (size_t i = 0; i < inputs.size(); ++i)
      if (!tensors_[i].describes(inputs[i])) return false;
    return true;
  }

 private:
  struct Meta {
    DType dtype;
    Shape shape, strides;
    bool describes(const Tensor& t) const {
      const TensorImpl& impl = *t.impl();
      return impl.dtype == dtype && impl.shape == shape && impl.strides == strides;
    }
  };
  std::vector<Meta> tensors_;  // the inputs, then the output
};

// The layout of a program computing in `type` and writing `out`, its last instruction
// writing out itself (into_dst: out is of `type`) or a scratch block, `block` elements at a
// time. An out stored densely in another order (channels-last, column-major, as a plan may
// keep the inputs' layout: OpDef::keeps_layout) is evaluated in its memory order, where it
// is contiguous, the inputs read in the same order (in place where they share its layout).
// Evaluation binds the tensors' own pointers, where those memory-order views start too.
EvalLayout output_layout(const EwProgram& p, std::span<const Tensor> inputs, const Tensor& out, DType type,
                         int64_t block, bool into_dst);

// What a plan step makes once for a program computing in `type` and writing a dense `out`
// (fused_elementwise's and fused_elementwise_and_sum's prepared state): both layouts, for
// the result written straight out and through scratch (where an input shares out's bytes,
// or out is of another dtype, converted from there), and how many scratch bytes its
// threads need, which the plan lends.
class OutputPlan {
 public:
  OutputPlan(const EwProgram& p, DType type, std::span<const Tensor> inputs, const Tensor& out, int64_t block)
      : tensors_(inputs, out), dtype_(type), threads_(max_threads()),
        into_out_(output_layout(p, inputs, out, type, block, out.dtype() == type)),
        via_scratch_(output_layout(p, inputs, out, type, block, false)) {}

  bool fits(std::span<const Tensor> inputs, const Tensor& out) const { return tensors_.fits(inputs, out); }
  const EvalLayout& layout(bool via_scratch) const { return via_scratch ? via_scratch_ : into_out_; }
  int threads() const { return threads_; }
  size_t scratch_bytes() const {
    const int64_t per_thread = std::max(into_out_.scratch_elements(), via_scratch_.scratch_elements());
    return size_t(per_thread * threads_) * dtype_size(dtype_);
  }

 private:
  TensorsMeta tensors_;
  DType dtype_;
  int threads_;
  EvalLayout into_out_, via_scratch_;
};

// A program evaluated `layout.block` elements at a time over the inputs' data:
// eval(begin, n, dst) computes elements [begin, begin + n) in the shape's row-major
// order, n <= block. The inputs must have the shapes and strides the layout was made from.
template <class T>
class Evaluator {
 public:
  // Per-thread buffers: the registers' and the non-flat inputs' blocks.
  struct Scratch {
    T* blocks = nullptr;
    std::unique_ptr<T[]> owned;  // when nothing was lent; not zeroed: every block is written before it is read
    Shape idx;
  };

  Evaluator(const EwProgram& p, const EvalLayout& layout, std::span<const Tensor> inputs)
      : program_(p), layout_(layout), inputs_(inputs) {}

  int64_t block() const { return layout_.block; }

  // The calling thread's scratch: its slice of `lent` (`slices` of layout.scratch_elements()
  // each, one per OpenMP thread) when there is one for it, else its own.
  Scratch scratch(T* lent = nullptr, int slices = 0) const {
    const int t = omp_thread();
    Scratch s;
    if (lent && t < slices) s.blocks = lent + t * layout_.scratch_elements();
    else s.blocks = (s.owned = std::make_unique_for_overwrite<T[]>(size_t(layout_.scratch_elements()))).get();
    for (size_t i = 0; i < inputs_.size(); ++i)
      if (const InputAccess& in = layout_.inputs[i]; in.access == Access::Scalar)
        std::fill_n(buffer(s, in.buffer), layout_.block, first_element(i));
    return s;
  }

  // Elements [begin, begin + n): into dst, or (made with into_dst false) a scratch block
  // returned.
  const T* eval(int64_t begin, int64_t n, T* dst, Scratch& s) const {
    for (size_t i = 0; i < inputs_.size(); ++i)
      if (const InputAccess& in = layout_.inputs[i]; in.access == Access::Gathered)
        gather_input(i, begin, n, buffer(s, in.buffer), s.idx);
    const Schedule& schedule = layout_.schedule;
    auto operand = [&](const EwOperand& a) -> const T* {
      if (!a.is_input) return buffer(s, schedule.slot[size_t(a.index)]);
      const InputAccess& in = layout_.inputs[size_t(a.index)];
      return in.access == Access::Flat ? data(size_t(a.index)) + begin : buffer(s, in.buffer);
    };
    for (size_t k = 0; k < program_.code.size(); ++k) {
      const EwInstr& ins = program_.code[k];
      const int slot = schedule.slot[k];
      T* d = slot < 0 ? dst : buffer(s, slot);
      const T* a = operand(ins.args[0]);
      const int arity = ew_op_info(ins.op).arity;
      const T* b = arity > 1 ? operand(ins.args[1]) : nullptr;
      if (arity == 1) kHasAvx512 ? unary_wide(ins, d, a, n) : unary(ins, d, a, n);
      else if (arity == 2) kHasAvx512 ? binary_wide(ins, d, a, b, n) : binary(ins, d, a, b, n);
      else kHasAvx512 ? where_wide(d, a, b, operand(ins.args[2]), n) : where(d, a, b, operand(ins.args[2]), n);
    }
    return schedule.slot.back() < 0 ? dst : buffer(s, schedule.slot.back());
  }

 private:
  T* buffer(const Scratch& s, int i) const { return s.blocks + i * layout_.block; }
  const T* data(size_t i) const { return detail::elements<const T>(inputs_[i]); }

  // Input i's one element as T (a Scalar input).
  T first_element(size_t i) const {
    return visit_any_dtype(layout_.inputs[i].dtype, [&](auto tag) {
      using S = typename decltype(tag)::type;
      return convert<T>(*detail::elements<const S>(inputs_[i]));
    });
  }

  void gather_input(size_t i, int64_t begin, int64_t n, T* dst, Shape& idx) const {
    const InputAccess& in = layout_.inputs[i];
    if (in.dtype == dtype_v<T>) return gather(in, data(i), begin, n, dst, idx);
    visit_any_dtype(in.dtype, [&](auto tag) {
      using S = detail::Loaded<typename decltype(tag)::type>;  // a bool as its byte, as map_elements loads it
      gather(in, detail::elements<const S>(inputs_[i]), begin, n, dst, idx);
    });
  }

  const EwProgram& program_;
  const EvalLayout& layout_;
  std::span<const Tensor> inputs_;
};

}  // namespace baton::kernels::ewise
