// fused_elementwise: a chain or tree of element-wise ops run as one kernel that reads each
// input and writes the output once (src/kernels/cpu/fused_elementwise.cpp). Made by the
// elementwise-fusion pass (src/passes/fuse_elementwise.cpp), never by user code; passes run
// after autodiff, so it has no gradient rule.
//
//   %4 = fused_elementwise(%x, %a, %b) {program="r0=mul(in0,in1); r1=add(r0,in2); r2=tanh(r1)"}
//
// The program's grammar is in kernels/cpu/ewise_program.h. The inputs broadcast to the
// output's shape, as the fused ops' own operands did. The program computes in f32 or f64:
// the optional `dtype` attribute where it is given, else the first input's dtype; inputs of
// other dtypes (a bool condition, a mask a cast fed, bf16 values) are read converted. The
// result is of that dtype too, or of the one the optional `to` attribute names, converted
// as cast converts (the group ended in a cast, or in a comparison: `to=bool`).
#include "baton/ops.h"
#include "dispatch/anomaly.h"
#include "kernels/cpu/copy.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/fused_elementwise.h"
#include "kernels/cpu/loops.h"
#include "ops/common.h"
#include "ops/reduce.h"

namespace baton::ops {
namespace {

kernels::EwProgram program_of(const CallContext& c) {
  const std::string& text = c.attrs.s("program");
  kernels::ParsedProgram parsed = kernels::parse_program(text);
  if (!parsed.error.empty()) c.fail<ValueError>("bad program \"", text, "\": ", parsed.error);
  return std::move(parsed.program);
}

// pow reads its exponent once per call, so it must be an input of one element.
void check_pow_exponents(const CallContext& c, const kernels::EwProgram& p) {
  for (const kernels::EwInstr& ins : p.code) {
    if (ins.op != kernels::EwOp::pow) continue;
    const Shape& e = c.input(size_t(ins.args[1].index)).shape();
    if (!std::all_of(e.begin(), e.end(), [](int64_t d) { return d == 1; }))
      c.fail("pow's exponent in", ins.args[1].index, " must hold one element, not ", e);
  }
}

// The dtype the program computes in: f32 or f64.
DType program_dtype(const CallContext& c) {
  const DType type = c.attrs.has("dtype") ? c.attrs.dtype("dtype") : c.input(0).dtype();
  if (!is_floating(type))
    c.fail<DTypeError>("the program computes in f32 or f64, not ", type, " (its dtype attribute or first input's)");
  for (size_t i = 0; i < c.inputs.size(); ++i)
    if (c.input(i).dtype() == DType::string)
      c.fail<DTypeError>("input ", i, " holds strings, which a program cannot read");
  return type;
}

// The program's elements, in the dtype it computes in: the inputs broadcast together.
TensorMeta infer(const CallContext& c) {
  const kernels::EwProgram p = program_of(c);
  if (size_t(p.num_inputs()) != c.inputs.size())
    c.fail<ValueError>("the program reads ", p.num_inputs(), " input(s) but the node has ", c.inputs.size());
  const DType type = program_dtype(c);
  check_pow_exponents(c, p);
  Shape shape = c.input(0).shape();
  for (const Tensor& t : c.inputs) shape = broadcast_shapes(shape, t.shape(), c);
  return {type, shape};
}

// fused_elementwise's result: the elements, converted to `to` where it is given.
TensorMeta infer_result(const CallContext& c) {
  TensorMeta meta = infer(c);
  if (c.attrs.has("to")) meta.dtype = c.attrs.dtype("to");
  if (meta.dtype == DType::string) c.fail<DTypeError>("the result cannot hold strings");
  return meta;
}

// fused_elementwise's kernel parameters: its program and the dtype it computes in.
struct ProgramParams {
  kernels::EwProgram program;
  DType type;
};
ProgramParams program_params(const CallContext& c) { return {program_of(c), program_dtype(c)}; }

Cost cost(const CallContext& c, std::span<const TensorMeta> out) {
  const kernels::EwProgram p = program_of(c);
  const double n = double(out[0].shape.numel());
  double flops = 0, bytes = n * double(dtype_size(out[0].dtype));
  for (const kernels::EwInstr& ins : p.code) flops += n * kernels::ew_op_info(ins.op).flops;
  for (const Tensor& t : c.inputs) bytes += double(t.numel()) * double(dtype_size(t.dtype()));
  return {flops, bytes};
}

// Instruction `ins` as a call of its own op on `operands`: that op's kernel, then anomaly
// mode's check of its result, which then names that op.
Tensor run_instruction(const kernels::EwInstr& ins, std::vector<Tensor> operands, SourceLoc loc) {
  const kernels::EwOpInfo& info = kernels::ew_op_info(ins.op);
  const OpDef& op = *find_op(info.name);
  Attrs attrs;
  for (int p = 0; p < info.num_params(); ++p) attrs.set(info.params[size_t(p)], ins.params[size_t(p)]);
  const CallContext call{op, operands, attrs, loc};
  const TensorMeta meta = op.infer_one(call);
  Tensor out = empty(meta.shape, meta.dtype);
  op.kernel(KernelContext{call, {&out, 1}});
  check_finite(op, operands, {&out, 1}, loc);
  return out;
}

// Anomaly mode checks every op's result as it is made. A fused node would report itself,
// and miss an Inf that its later ops turn finite (sigmoid of exp's overflow), so it runs its
// instructions one at a time through their ops' kernels instead, each operand cast to the
// dtype its op reads as the fused ops' casts did: the same bits, the same reports as the
// separate ops gave. The result is in the program's type `t`.
Tensor checked_elements(const CallContext& c, const kernels::EwProgram& p, DType t) {
  std::vector<Tensor> registers;
  for (const kernels::EwInstr& ins : p.code) {
    std::vector<Tensor> operands;
    for (int a = 0; a < kernels::ew_op_info(ins.op).arity; ++a) {
      const kernels::EwOperand& o = ins.args[size_t(a)];
      const Tensor& operand = o.is_input ? c.input(size_t(o.index)) : registers[size_t(o.index)];
      const DType wanted = kernels::operand_dtype(ins.op, a, t);
      operands.push_back(operand.dtype() == wanted ? operand : kernels::converted(operand, wanted));
    }
    registers.push_back(run_instruction(ins, std::move(operands), c.loc));
  }
  const Tensor& last = registers.back();
  return last.dtype() == t ? last : kernels::converted(last, t);
}

void run_checked(const KernelContext& c, const kernels::EwProgram& p, DType type) {
  kernels::copy_into(c.output(), checked_elements(c, p, type));  // broadcast and converted into the output
}

// Parsing a program takes longer than running it on a small tensor: it is the kernel's
// parameter (OpDef::params), which a plan makes once per specialization, as it makes the
// kernel's schedule and input layouts (its state) and lends its scratch blocks. explain()
// shows the program as the step's implementation.
Prepared prepare(const CallContext& c, std::span<const Tensor> outputs) {
  const auto& [program, type] = c.params<ProgramParams>();
  Prepared p;
  p.implementation = kernels::to_string(program);
  if (auto plan = kernels::plan_fused_elementwise(program, type, c.inputs, outputs[0])) {
    p.scratch_bytes = kernels::plan_scratch_bytes(*plan);
    p.state = std::move(plan);
  }
  return p;
}

void kernel(const KernelContext& c) {
  const auto& [program, type] = c.params<ProgramParams>();
  if (anomaly_mode.load(std::memory_order_relaxed)) [[unlikely]]
    return run_checked(c, program, type);
  kernels::fused_elementwise(program, type, c.inputs, c.output(),
                             static_cast<const kernels::FusedElementwisePlan*>(c.prepared));
}

}  // namespace

BATON_OP(fused_elementwise_op, "fused_elementwise")
    .inputs(1, OpDef::kAnyNumber)
    .string_attr("program")
    .dtype_attr("dtype", OpDef::optional)
    .dtype_attr("to", OpDef::optional)
    .storage_dtypes()
    .fusion(Fusion::Broadcast)
    .layout_follows_inputs()
    .infer(infer_result)
    .params(program_params)
    .cpu(kernel)
    .cost(cost)
    .prepared_by(prepare)
    .onnx("");  // no single ONNX op; an exporter would expand the program

// --- fused_elementwise_sum, _max, _min, _prod ---------------------------------------------
// sum(fused_elementwise(...), dims, keepdim) in one pass: the elements are summed as they
// are computed, never written (src/passes/fuse_sum.cpp makes it); and the same for max,
// min and prod.
//
//   %s = fused_elementwise_sum(%x, %t) {program="r0=sub(in0,in1); r1=mul(r0,r0)", dims=[1], keepdim=0}
//   %m = fused_elementwise_max(%x) {program="r0=abs(in0)", dims=[], keepdim=0}
namespace {

// The reduced dims of the elements' shape, normalised and sorted (all dims when `dims` is
// empty, as for sum); the kernel reads a run of them as [outer, n, inner]. A max or min of
// no elements has no value (as for the ops themselves); a sum or product of none is 0 or 1.
template <kernels::EwReduce kReduce>
std::vector<int64_t> reduced_dims(const CallContext& c, const Shape& elements) {
  std::vector<int64_t> dims = reduction_dims(c.attrs.ints("dims"), int64_t(elements.size()), c);
  if (elements.empty()) dims.clear();
  if (kReduce == kernels::EwReduce::Max || kReduce == kernels::EwReduce::Min)
    require_nonempty_reduction(c, elements, dims);
  return dims;
}

template <kernels::EwReduce kReduce>
TensorMeta infer_sum(const InferContext& c) {
  const TensorMeta elements = infer(c);
  const std::vector<int64_t> dims = reduced_dims<kReduce>(c, elements.shape);
  return {elements.dtype, reduced_shape(elements.shape, dims, c.attrs.i("keepdim") != 0)};
}

Cost cost_sum(const CallContext& c, std::span<const TensorMeta> out) {
  const TensorMeta elements = infer(c);
  Cost total = cost(c, {&elements, 1});  // the program's flops; its inputs and its elements' bytes
  const double n = double(elements.shape.numel());
  total.flops += n;
  total.bytes += double(out[0].shape.numel() - elements.shape.numel()) * double(dtype_size(elements.dtype));
  return total;
}

// The kernel's parameters: the program, the elements' shape (the inputs broadcast) and
// the summed dims.
struct SumParams {
  kernels::EwProgram program;
  Shape elements;
  std::vector<int64_t> dims;
  bool keepdim = false;
};
template <kernels::EwReduce kReduce>
SumParams sum_params(const CallContext& c) {
  Shape shape = c.input(0).shape();
  for (const Tensor& t : c.inputs) shape = broadcast_shapes(shape, t.shape(), c);
  std::vector<int64_t> dims = reduced_dims<kReduce>(c, shape);
  return {program_of(c), std::move(shape), std::move(dims), c.attrs.i("keepdim") != 0};
}

Prepared prepare_sum(const CallContext& c, std::span<const Tensor> outputs) {
  const SumParams& params = c.params<SumParams>();
  Prepared p;
  p.implementation = kernels::to_string(params.program);
  if (auto plan = kernels::plan_fused_elementwise_sum(params.program, c.inputs, params.elements, outputs[0])) {
    p.scratch_bytes = kernels::plan_scratch_bytes(*plan);
    p.state = std::move(plan);
  }
  return p;
}

// The reduction `reduce` names, by its public op (anomaly mode's path).
Tensor reduced(kernels::EwReduce reduce, const Tensor& values, const SumParams& p) {
  switch (reduce) {
    case kernels::EwReduce::Max: return baton::max(values, p.dims, p.keepdim);
    case kernels::EwReduce::Min: return baton::min(values, p.dims, p.keepdim);
    case kernels::EwReduce::Prod: return baton::prod(values, p.dims, p.keepdim);
    case kernels::EwReduce::Sum: break;
  }
  return baton::sum(values, p.dims, p.keepdim);
}

template <kernels::EwReduce kReduce>
void kernel_sum(const KernelContext& c) {
  const SumParams& p = c.params<SumParams>();
  if (anomaly_mode.load(std::memory_order_relaxed)) [[unlikely]] {  // each op checked, then the reduction's own kernel
    const Tensor values = kernels::dense(baton::expand(checked_elements(c, p.program, c.output().dtype()), p.elements));
    return kernels::copy_into(c.output(), reduced(kReduce, values, p));
  }
  kernels::fused_elementwise_sum(p.program, c.inputs, p.elements, p.dims, c.output(),
                                 static_cast<const kernels::FusedElementwiseSumPlan*>(c.prepared), kReduce);
}

// The inputs and attributes of the fused reductions, keeping their elements or not.
OpDef& reduction_of_program(OpDef& def) {
  return def.inputs(1, OpDef::kAnyNumber)
      .string_attr("program")
      .dtype_attr("dtype", OpDef::optional)
      .storage_dtypes()
      .ints_attr("dims")
      .int_attr("keepdim")
      .fusion(Fusion::Reduction);
}

// The four ops differ in their kernel's fold alone.
template <kernels::EwReduce kReduce>
OpDef& fused_reduction(OpDef& def) {
  return reduction_of_program(def)
      .infer(infer_sum<kReduce>)
      .params(sum_params<kReduce>)
      .cpu(kernel_sum<kReduce>)
      .cost(cost_sum)
      .prepared_by(prepare_sum)
      .onnx("");  // no single ONNX op: an optimized save writes it in the ai.baton domain
}

}  // namespace

// (What BATON_OP expands to, with the definition the four share.)
static OpDef& fused_elementwise_sum_op =
    fused_reduction<kernels::EwReduce::Sum>(define_op("fused_elementwise_sum"));
static OpDef& fused_elementwise_max_op =
    fused_reduction<kernels::EwReduce::Max>(define_op("fused_elementwise_max"));
static OpDef& fused_elementwise_min_op =
    fused_reduction<kernels::EwReduce::Min>(define_op("fused_elementwise_min"));
static OpDef& fused_elementwise_prod_op =
    fused_reduction<kernels::EwReduce::Prod>(define_op("fused_elementwise_prod"));

// --- fused_elementwise_and_sum, _and_max, _and_min, _and_prod ------------------------------
// fused_elementwise(...) and its sum in one pass, for elements that other steps read too
// (src/passes/fuse_sum.cpp makes it): each block is written, then summed while in L1. A
// linear layer's bias gradient sums relu's backward over the batch, which the products
// of its weight and input gradients also read:
//
//   %e, %s = fused_elementwise_and_sum(%g, %h) {program="r0=relu_backward(in0,in1)", dims=[0], keepdim=0}
//
// And the same for max, min and prod: a softmax written out takes the max of scores that
// its exponentials read again.
//
//   %e, %m = fused_elementwise_and_max(%q, %mask) {program="r0=add(in0,in1)", dims=[1], keepdim=1}
namespace {

// What explain() adds to the program: how the elements are reduced.
constexpr const char* kept_and(kernels::EwReduce reduce) {
  switch (reduce) {
    case kernels::EwReduce::Sum: return ", written and summed";
    case kernels::EwReduce::Max: return ", written, its max taken";
    case kernels::EwReduce::Min: return ", written, its min taken";
    case kernels::EwReduce::Prod: return ", written and multiplied";
  }
  return "";
}

template <kernels::EwReduce kReduce>
Prepared prepare_and_sum(const CallContext& c, std::span<const Tensor> outputs) {
  const SumParams& params = c.params<SumParams>();
  Prepared p;
  p.implementation = kernels::to_string(params.program) + kept_and(kReduce);
  if (auto plan = kernels::plan_fused_elementwise_and_sum(params.program, c.inputs, params.dims, outputs[0])) {
    p.scratch_bytes = kernels::plan_scratch_bytes(*plan);
    p.state = std::move(plan);
  }
  return p;
}

template <kernels::EwReduce kReduce>
void kernel_and_sum(const KernelContext& c) {
  const SumParams& p = c.params<SumParams>();
  if (anomaly_mode.load(std::memory_order_relaxed)) [[unlikely]] {  // each op checked, then the reduction's kernel
    kernels::copy_into(c.output(0), baton::expand(checked_elements(c, p.program, c.output(0).dtype()), p.elements));
    return kernels::copy_into(c.output(1), reduced(kReduce, kernels::dense(c.output(0)), p));
  }
  kernels::fused_elementwise_and_sum(p.program, c.inputs, p.dims, c.output(0), c.output(1),
                                     static_cast<const kernels::FusedElementwiseAndSumPlan*>(c.prepared), kReduce);
}

Cost cost_and_sum(const CallContext& c, std::span<const TensorMeta> out) {
  Cost total = cost_sum(c, out.subspan(1));  // the program, its inputs, the sums
  total.bytes += double(out[0].shape.numel()) * double(dtype_size(out[0].dtype));  // the elements, written
  return total;
}

// The four ops differ in their kernel's fold alone.
template <kernels::EwReduce kReduce>
OpDef& fused_reduction_keeping_elements(OpDef& def) {
  return reduction_of_program(def)
      .outputs(2)
      .layout_follows_inputs()  // the elements, as fused_elementwise's output
      .first_output_pointwise()
      .infer([](const InferContext& c) { return std::vector<TensorMeta>{infer(c), infer_sum<kReduce>(c)}; })
      .params(sum_params<kReduce>)
      .cpu(kernel_and_sum<kReduce>)
      .cost(cost_and_sum)
      .prepared_by(prepare_and_sum<kReduce>)
      .onnx("");  // as fused_elementwise_sum
}

}  // namespace

static OpDef& fused_elementwise_and_sum_op =
    fused_reduction_keeping_elements<kernels::EwReduce::Sum>(define_op("fused_elementwise_and_sum"));
static OpDef& fused_elementwise_and_max_op =
    fused_reduction_keeping_elements<kernels::EwReduce::Max>(define_op("fused_elementwise_and_max"));
static OpDef& fused_elementwise_and_min_op =
    fused_reduction_keeping_elements<kernels::EwReduce::Min>(define_op("fused_elementwise_and_min"));
static OpDef& fused_elementwise_and_prod_op =
    fused_reduction_keeping_elements<kernels::EwReduce::Prod>(define_op("fused_elementwise_and_prod"));

}  // namespace baton::ops
