// The op registry: every operator is defined once, in one place (DESIGN.md idea 1).
//
// An OpDef holds everything every mode needs: the shape/dtype rule, the CPU kernel (or a
// view rule for ops that alias their input), the gradient rule written with public ops,
// the fusion kind, the cost and the ONNX name. Eager execution, autograd and (later)
// graph building, passes and ONNX all read the same definition.
//
//   BATON_OP(exp_op, "exp")
//       .fusion(Fusion::Elementwise)
//       .infer(same_as_input)
//       .cpu(unary_float_kernel<ExpFn>)
//       .grad([](const GradContext& c) { return Grads{c.grad_output() * c.output()}; })
//       .onnx("Exp");
#pragma once
#include <cstddef>
#include <functional>
#include <memory>
#include <new>
#include <span>
#include <string>
#include <type_traits>
#include <typeinfo>
#include <variant>
#include <vector>

#include "baton/tensor.h"
#include "kernels/cpu/prepared.h"

namespace baton::ops {

enum class Fusion : uint8_t { Elementwise, Broadcast, Reduction, Injective, Opaque };

using AttrValue = std::variant<int64_t, double, std::vector<int64_t>, std::string, DType>;

// Named attributes of one op call, e.g. {"dim", 1}, {"keepdim", 0}. Each read by name is a
// search: kernels read their parameters (OpDef::params) instead.
class Attrs {
 public:
  Attrs() = default;
  Attrs(std::initializer_list<std::pair<std::string, AttrValue>> items) : items_(items) {}
  Attrs& set(std::string name, AttrValue v);
  bool has(std::string_view name) const { return find(name) != nullptr; }
  int64_t i(std::string_view name) const;
  double f(std::string_view name) const;  // also accepts an int attribute
  const std::vector<int64_t>& ints(std::string_view name) const;
  const std::string& s(std::string_view name) const;
  DType dtype(std::string_view name) const;
  const std::vector<std::pair<std::string, AttrValue>>& items() const { return items_; }
  // True when an int attribute holds a symbolic dim (a size taken from a graph).
  bool holds_symbols() const;
  bool operator==(const Attrs& o) const { return items_ == o.items_; }

 private:
  const AttrValue* find(std::string_view name) const;
  const AttrValue& get(std::string_view name) const;
  std::vector<std::pair<std::string, AttrValue>> items_;
};
std::ostream& operator<<(std::ostream& os, const Attrs& a);

// How many attributes this thread has read by name (Attrs::has, i, f, ints, s, dtype): tests
// check with it that a plan's runs read none.
uint64_t attribute_reads();

struct TensorMeta {
  DType dtype;
  Shape shape;
};

// Where an op's parameters (OpDef::params) live once made: in place when they are small,
// so that an eager call makes them without a heap allocation; a plan keeps one per step.
// A copy starts empty (a copied CallContext points at the original's parameters).
class ParamsStorage {
 public:
  ParamsStorage() = default;
  ParamsStorage(const ParamsStorage&) {}
  ParamsStorage& operator=(const ParamsStorage&) = delete;
  ~ParamsStorage() {
    if (destroy_) destroy_(value_);
  }

  template <class T>
  const void* emplace(T&& made) {
    using V = std::decay_t<T>;
    if constexpr (sizeof(V) <= sizeof(inline_) && alignof(V) <= alignof(std::max_align_t)) {
      value_ = new (inline_) V(std::forward<T>(made));
      destroy_ = [](const void* p) { static_cast<const V*>(p)->~V(); };
    } else {
      value_ = new V(std::forward<T>(made));
      destroy_ = [](const void* p) { delete static_cast<const V*>(p); };
    }
    return value_;
  }
  const void* get() const { return value_; }

 private:
  alignas(std::max_align_t) unsigned char inline_[64];
  const void* value_ = nullptr;
  void (*destroy_)(const void*) = nullptr;
};

struct OpDef;

// What every rule sees of one call: the op, its inputs, its attributes, the caller.
struct CallContext {
  const OpDef& op;
  std::span<const Tensor> inputs;
  const Attrs& attrs;
  SourceLoc loc;
  // For a prepare hook (OpDef::prepare): per input, then per output, the channel block a
  // plan stores that value in (oneDNN's nChw8c or nChw16c: 8 or 16), 0 where its strides
  // say where its elements are. The hook's state keeps the layouts for the step's runs,
  // whose tensors then carry plain strides over blocked bytes. Empty everywhere else.
  std::span<const int64_t> channel_blocks = {};
  // For a prepare hook: per input, its value when it is a constant the plan owns (a folded
  // result, fixed for the plan's life), else an undefined tensor. Empty everywhere else.
  std::span<const Tensor> constant_inputs = {};
  // The op's parameters (OpDef::params) when made already, as a plan makes them for a step
  // once per specialization; otherwise params<T>() makes them on first use (eager calls).
  mutable const void* made_params = nullptr;
  mutable ParamsStorage owned_params;  // what params<T>() made here

  // The op's parameters: what its kernel (or view rule) reads of the attributes, worked out
  // once (OpDef::params). T must be the type the op declared.
  template <class T>
  const T& params() const {
    return *static_cast<const T*>(params_of(typeid(T)));
  }
  const void* params_of(const std::type_info& type) const;
  const Tensor& input(size_t i) const { return inputs[i]; }
  int64_t input_block(size_t i) const { return i < channel_blocks.size() ? channel_blocks[i] : 0; }
  int64_t output_block(size_t i) const { return input_block(inputs.size() + i); }
  const Tensor* constant_input(size_t i) const {
    return i < constant_inputs.size() && constant_inputs[i].defined() ? &constant_inputs[i] : nullptr;
  }
  // "f32[2,3], i64[4]": the inputs as error messages show them.
  std::string describe_inputs() const;
  // Throw E with "[op] message; inputs: ... (at file:line)".
  template <class E = ShapeError, class... Args>
  [[noreturn]] void fail(const Args&... message) const {
    throw E(op_name(), str(message..., "; inputs: ", describe_inputs()), loc);
  }
  const std::string& op_name() const;
};
using InferContext = CallContext;

struct KernelContext : CallContext {
  // Allocated and shaped by the infer rule; contiguous, or channels-last where the op takes
  // that layout (OpDef::channels_last) and a plan chose it.
  std::span<Tensor> outputs;
  // What the op's prepare hook made for this plan step (nullptr eagerly, or without one).
  const void* prepared = nullptr;
  Tensor& output(size_t i = 0) const { return outputs[i]; }
};

struct GradContext : CallContext {
  std::span<const Tensor> outputs;       // the forward outputs
  std::span<const Tensor> grad_outputs;  // undefined where no gradient flows
  std::span<const bool> needs_input_grad;
  const Tensor& output(size_t i = 0) const { return outputs[i]; }
  const Tensor& grad_output(size_t i = 0) const { return grad_outputs[i]; }
  bool needs_grad(size_t i) const { return needs_input_grad[i]; }
};
using Grads = std::vector<Tensor>;  // one per input; undefined for "no gradient"

using InferFn = std::function<TensorMeta(const InferContext&)>;
using InferManyFn = std::function<std::vector<TensorMeta>(const InferContext&)>;
using KernelFn = std::function<void(const KernelContext&)>;
using ViewFn = std::function<Tensor(const CallContext&)>;
using MakeOutputsFn = std::function<std::vector<Tensor>(const CallContext&)>;
using GradFn = std::function<Grads(const GradContext&)>;
// Control flow: runs subgraph `index` of the node whole on `inputs` and returns its outputs.
using SubgraphRunner = std::function<std::vector<Tensor>(size_t index, std::vector<Tensor> inputs)>;
// How a control-flow op (If, Loop) executes: which subgraphs it runs, on what, how often.
using ControlFlowFn = std::function<std::vector<Tensor>(const CallContext&, const SubgraphRunner&)>;
struct Cost {
  double flops = 0, bytes = 0;
};
using CostFn = std::function<Cost(const CallContext&, std::span<const TensorMeta> outputs)>;
// Work a kernel can do once per plan specialization instead of on every run, such as
// creating its oneDNN primitive and reorders. Called with the step's inputs and outputs
// as metadata (dtype, shape and the strides they will have; no data), its resolved
// attributes and its parameters (c.params<T>(), made already); `state` reaches each run's
// KernelContext::prepared. `implementation` names
// what will run ("brgconv:avx512_core"), for explain(); `scratch_bytes` is what its
// primitives need while the step runs, which the plan lends from its arena. The kernel must
// also work without it (eager calls) and when the tensors it is handed differ from the
// metadata.
struct Prepared : kernels::PreparedKernel {
  std::shared_ptr<const void> state;
};
using PrepareFn = std::function<Prepared(const CallContext& c, std::span<const Tensor> outputs)>;
// Whether the op's output 0 would be written clearly faster column-major (OpDef::column_major).
using ColumnMajorFn = std::function<bool(const CallContext& c, std::span<const Tensor> outputs)>;
// Makes the op's parameters into `into` and returns where they are (OpDef::params).
using ParamsFn = std::function<const void*(const CallContext& c, ParamsStorage& into)>;

struct OpDef {
  // What a node of this op may hold: its operand count, its attributes and subgraphs.
  // Every registered op declares its inputs (OpRegistry.EveryOpDeclaresItsSignature);
  // the graph verifier checks each node against them before running the infer rule,
  // which may then read input(i) for i < min_inputs and every required attribute.
  static constexpr int kAnyNumber = -1;  // max_inputs of a variadic op (cat, if, loop)
  enum class AttrKind : uint8_t { Int, Float, Ints, String, DType };
  enum Presence : uint8_t { required, optional };
  struct AttrSpec {
    std::string name;
    AttrKind kind;
    int length = -1;  // of an Ints attribute: -1 any, else exactly this many
    Presence presence = required;
  };

  std::string name;
  int num_outputs = 1;  // -1: as many as the node says (control flow)
  int min_inputs = -1;  // -1: not declared
  int max_inputs = -1;  // kAnyNumber: no upper bound
  std::vector<AttrSpec> attr_specs;
  int num_subgraphs = 0;  // If and Loop: 2
  Fusion fusion_kind = Fusion::Opaque;
  InferFn infer_one;
  InferManyFn infer_many;
  KernelFn kernel;
  ViewFn view_rule;
  GradFn grad_rule;
  ControlFlowFn control_flow;
  CostFn cost_rule;
  PrepareFn prepare;
  ParamsFn make_params;  // OpDef::params
  const std::type_info* params_type = nullptr;
  std::string onnx_name;
  std::vector<int> mutated_inputs;  // inputs the kernel writes in place (optimizer updates)
  // Layout planning (runtime/specialize.cpp): inputs the kernel reads as they are when
  // stored channels-last (rank 4, NHWC in memory, the layout oneDNN's convolutions pick),
  // and whether it writes output 0 in the layout of the tensor it is handed.
  std::vector<int> channels_last_inputs;
  bool channels_last_output = false;
  // Rank-2 layout planning (runtime/specialize.cpp): inputs the kernel (or view) reads at
  // speed when stored column-major ([rows, cols] with each column's elements adjacent), and
  // whether output 0 would be written clearly faster so (measured by the kernel; null: the
  // op never asks for that layout).
  std::vector<int> column_major_inputs;
  ColumnMajorFn prefers_column_major;
  // An element-wise kernel (kernels::map_elements, fused_elementwise's) that reads inputs
  // of any strides and writes output 0 in the layout it is handed: a plan gives that
  // output the layout of its inputs of the same shape, so that one flat loop serves.
  bool keeps_layout = false;
  // Where oneDNN's convolutions want channel-blocked activations (nChw8c on AVX2), a plan
  // stores a value blocked when its producer lists it in blocked_outputs and each step
  // reading it lists it in blocked_inputs: the prepare hook is then told so
  // (CallContext::channel_blocks) and must return a state that handles the layouts.
  std::vector<int> blocked_inputs;
  std::vector<int> blocked_outputs;
  // An input whose buffer output 0 may take when the input dies at this step (besides the
  // inputs of element-wise ops, which always may): -1 for none.
  int output_may_overwrite = -1;
  // Output 0 is element-wise in the inputs (element i reads element i of each input of its
  // shape) though the op has more outputs or is no element-wise op itself
  // (fused_elementwise_and_sum): a plan may write it over any such input that dies there.
  bool pointwise_first_output = false;
  // Two inputs whose order does not matter: f(a, b) is f(b, a) bit for bit, but for which
  // NaN's payload a result of two NaNs carries (add, mul, eq, ne; not maximum, which keeps
  // its first zero of two). CSE merges a node with its operands swapped.
  bool commutative = false;
  // The kernel draws from the global random generator (dropout): passes never merge, fold
  // or reorder such nodes, and a plan runs them in program order.
  bool draws_random = false;
  // The op reads and writes storage dtypes (u8, f16...: dtype.h), which every other op
  // refuses before running: cast, and the ops whose outputs are views (no kernel).
  bool accepts_storage_dtypes = false;
  // The op moves whole elements (concatenation, selection, where) and takes string tensors
  // too, element by element; every other op refuses them before running.
  bool accepts_strings = false;
  // The sizes of its outputs depend on its inputs' values (nonzero's count). It makes its
  // outputs itself, sized as it computes them (make_outputs: eager calls and plan runs);
  // its infer rule gives a graph node's outputs the fresh symbols the node holds. A plan
  // runs the steps after such a step once it has run and bound those symbols
  // (runtime/plan.h, "Stages").
  bool sized_by_values = false;
  MakeOutputsFn make_outputs;

  OpDef& outputs(int n) { num_outputs = n; return *this; }
  // Exactly n operands, or between min and max (trailing optional ones, e.g. a bias);
  // max may be kAnyNumber.
  OpDef& inputs(int n) { return inputs(n, n); }
  OpDef& inputs(int min, int max) { min_inputs = min; max_inputs = max; return *this; }
  // The attribute schema: a node must hold every required attribute with its kind and no
  // attribute the op does not declare. A Float attribute also accepts an int; Int and
  // Ints values may hold symbolic dims.
  OpDef& int_attr(std::string n, Presence p = required) { return attr(std::move(n), AttrKind::Int, -1, p); }
  OpDef& float_attr(std::string n, Presence p = required) { return attr(std::move(n), AttrKind::Float, -1, p); }
  OpDef& ints_attr(std::string n, int length = -1, Presence p = required) {
    return attr(std::move(n), AttrKind::Ints, length, p);
  }
  OpDef& string_attr(std::string n, Presence p = required) { return attr(std::move(n), AttrKind::String, -1, p); }
  OpDef& dtype_attr(std::string n, Presence p = required) { return attr(std::move(n), AttrKind::DType, -1, p); }
  OpDef& attr(std::string n, AttrKind kind, int length, Presence p) {
    attr_specs.push_back({std::move(n), kind, length, p});
    return *this;
  }
  OpDef& subgraphs(int n) { num_subgraphs = n; return *this; }
  OpDef& fusion(Fusion f) { fusion_kind = f; return *this; }
  OpDef& infer(InferFn f) { infer_one = std::move(f); return *this; }
  OpDef& infer(InferManyFn f) { infer_many = std::move(f); return *this; }
  OpDef& cpu(KernelFn f) { kernel = std::move(f); return *this; }
  // The output is a view of an input (reshape, transpose...): no allocation, no kernel.
  OpDef& view(ViewFn f) { view_rule = std::move(f); return *this; }
  OpDef& grad(GradFn f) { grad_rule = std::move(f); return *this; }
  // The op executes its subgraphs (declared with subgraphs(n)) instead of a kernel.
  OpDef& runs_subgraphs(ControlFlowFn f) { control_flow = std::move(f); return *this; }
  OpDef& cost(CostFn f) { cost_rule = std::move(f); return *this; }
  OpDef& prepared_by(PrepareFn f) { prepare = std::move(f); return *this; }
  // The typed parameters of the kernel (or view rule): `make` turns a call's attributes and
  // its inputs' dtypes and shapes (never their strides or data) into a struct, which the
  // kernel reads with c.params<T>() instead of reading attributes by name. A plan makes it
  // once per specialization, before the prepare hook (which may read it too), so that its
  // runs read no attribute; an eager call makes it when the kernel first asks.
  //   .params([](const CallContext& c) { return SoftmaxParams{normalize_dim(c.attrs.i("dim"), ...)}; })
  template <class F>
  OpDef& params(F make) {
    using T = std::decay_t<std::invoke_result_t<F&, const CallContext&>>;
    params_type = &typeid(T);
    make_params = [make = std::move(make)](const CallContext& c, ParamsStorage& into) -> const void* {
      return into.emplace(T(make(c)));
    };
    return *this;
  }
  OpDef& onnx(std::string n) { onnx_name = std::move(n); return *this; }
  // The kernel updates these inputs in place (like TensorFlow's ApplyMomentum on a
  // variable); dispatch bumps their version so stale saved tensors are detected.
  OpDef& mutates(std::vector<int> inputs) { mutated_inputs = std::move(inputs); return *this; }
  OpDef& channels_last(std::vector<int> inputs) {
    channels_last_inputs = std::move(inputs);
    channels_last_output = true;
    return *this;
  }
  // Reads these inputs in either layout but writes no activation (a weight gradient, a
  // reduction over the batch).
  OpDef& reads_channels_last(std::vector<int> inputs) {
    channels_last_inputs = std::move(inputs);
    return *this;
  }
  OpDef& layout_follows_inputs() { keeps_layout = true; return *this; }
  OpDef& column_major(std::vector<int> inputs, ColumnMajorFn prefers = nullptr) {
    column_major_inputs = std::move(inputs);
    prefers_column_major = std::move(prefers);
    return *this;
  }
  OpDef& channel_blocked(std::vector<int> inputs, std::vector<int> outputs = {0}) {
    blocked_inputs = std::move(inputs);
    blocked_outputs = std::move(outputs);
    return *this;
  }
  OpDef& output_overwrites(int input) { output_may_overwrite = input; return *this; }
  OpDef& first_output_pointwise() { pointwise_first_output = true; return *this; }
  OpDef& commutes() { commutative = true; return *this; }
  OpDef& random() { draws_random = true; return *this; }
  OpDef& storage_dtypes() { accepts_storage_dtypes = true; return *this; }
  OpDef& strings() { accepts_strings = true; return *this; }
  OpDef& value_sized(MakeOutputsFn f) {
    sized_by_values = true;
    make_outputs = std::move(f);
    return *this;
  }
  bool differentiable() const { return bool(grad_rule); }
  bool declares_inputs() const { return min_inputs >= 0; }
  bool accepts_input_count(size_t n) const {
    return declares_inputs() && n >= size_t(min_inputs) && (max_inputs == kAnyNumber || n <= size_t(max_inputs));
  }
  const AttrSpec* attr_spec(std::string_view n) const {
    for (const AttrSpec& a : attr_specs)
      if (a.name == n) return &a;
    return nullptr;
  }
  // The output dtypes and shapes of a call: the view rule's result (metadata only), the
  // infer rule's, or nothing for ops with neither (control flow).
  std::vector<TensorMeta> infer_outputs(const CallContext& c) const {
    if (view_rule) {
      Tensor v = view_rule(c);
      return {{v.dtype(), v.shape()}};
    }
    if (infer_one) return {infer_one(c)};
    if (infer_many) return infer_many(c);
    return {};
  }
};

// Creates and registers an op; the reference lives for the whole program.
OpDef& define_op(std::string name);
// nullptr when no op has that name.
const OpDef* find_op(std::string_view name);

// The FLOPs the op's cost rule gives for a call with these outputs; 0 where it has no rule
// or the rule cannot say (it throws), so that a profile or a plan's cost model never fails
// the call it looks at.
double rule_flops(const CallContext& c, std::span<const TensorMeta> outputs);
std::vector<const OpDef*> all_ops();
// An unregistered OpDef that only lends `name` to error messages: composite functions
// (transpose, flatten, mean...) validate through a CallContext of their own name.
const OpDef& composite_op(std::string_view name);

#define BATON_OP(var, name) static ::baton::ops::OpDef& var = ::baton::ops::define_op(name)

// Runs an op: infers output shapes, allocates, runs the kernel (or makes the view) and
// records autograd history when an input requires grad.
void call(const OpDef& op, std::span<const Tensor> inputs, const Attrs& attrs,
          std::span<Tensor> outputs, SourceLoc loc);
inline Tensor call(const OpDef& op, std::initializer_list<Tensor> inputs, const Attrs& attrs,
                   SourceLoc loc) {
  Tensor out;
  call(op, std::span<const Tensor>(inputs.begin(), inputs.size()), attrs, {&out, 1}, loc);
  return out;
}
std::vector<Tensor> call_many(const OpDef& op, std::span<const Tensor> inputs, const Attrs& attrs,
                              SourceLoc loc);

// --- common shape/dtype rules ---
TensorMeta same_as_input(const InferContext& c);  // dtype and shape of input 0
// numpy broadcasting of two shapes; throws ShapeError naming the op and both shapes.
Shape broadcast_shapes(const Shape& a, const Shape& b, const CallContext& c);
// Normalises a possibly negative dim against rank; throws IndexError when out of range.
int64_t normalize_dim(int64_t dim, int64_t rank, const CallContext& c);

}  // namespace baton::ops
