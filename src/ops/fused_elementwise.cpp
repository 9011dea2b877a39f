// fused_elementwise: a chain or tree of element-wise ops run as one kernel that reads each
// input and writes the output once (src/kernels/cpu/fused_elementwise.cpp). Made by the
// elementwise-fusion pass (src/passes/fuse_elementwise.cpp), never by user code; passes run
// after autodiff, so it has no gradient rule.
//
//   %4 = fused_elementwise(%x, %a, %b) {program="r0=mul(in0,in1); r1=add(r0,in2); r2=tanh(r1)"}
//
// The program's grammar is in kernels/cpu/ewise_program.h. The inputs broadcast to the
// output's shape, as the fused ops' own operands did.
#include "kernels/cpu/fused_elementwise.h"
#include "ops/common.h"

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

TensorMeta infer(const InferContext& c) {
  const kernels::EwProgram p = program_of(c);
  if (size_t(p.num_inputs()) != c.inputs.size())
    c.fail<ValueError>("the program reads ", p.num_inputs(), " input(s) but the node has ", c.inputs.size());
  require_same_dtype(c);
  require_float(c);
  check_pow_exponents(c, p);
  Shape shape = c.input(0).shape();
  for (const Tensor& t : c.inputs) shape = broadcast_shapes(shape, t.shape(), c);
  return {c.input(0).dtype(), shape};
}

Cost cost(const CallContext& c, std::span<const TensorMeta> out) {
  const kernels::EwProgram p = program_of(c);
  const double n = double(out[0].shape.numel());
  double flops = 0, bytes = n * double(dtype_size(out[0].dtype));
  for (const kernels::EwInstr& ins : p.code) flops += n * kernels::ew_op_info(ins.op).flops;
  for (const Tensor& t : c.inputs) bytes += double(t.numel()) * double(dtype_size(t.dtype()));
  return {flops, bytes};
}

}  // namespace

BATON_OP(fused_elementwise_op, "fused_elementwise")
    .inputs(1, OpDef::kAnyNumber)
    .string_attr("program")
    .fusion(Fusion::Broadcast)
    .infer(infer)
    .cpu([](const KernelContext& c) { kernels::fused_elementwise(program_of(c), c.inputs, c.output()); })
    .cost(cost)
    .onnx("");  // no single ONNX op; an exporter would expand the program

}  // namespace baton::ops
