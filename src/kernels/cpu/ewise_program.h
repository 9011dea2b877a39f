// The programs of fused_elementwise (src/ops/fused_elementwise.cpp): a short list of
// element-wise instructions that one kernel evaluates block by block, keeping every
// intermediate in L1 (src/kernels/cpu/fused_elementwise.cpp).
//
// Text form, as graph text and explain() show the op's `program` attribute:
//
//   r0=mul(in0,in1); r1=add(r0,in2); r2=tanh(r1); r3=leaky_relu[0.01](r2)
//
// Instruction k defines register rk (SSA: each register once, read only after it is
// defined); inN is the op's input N, broadcast to the output's shape; the last register
// is the output. Parameters of an op with attributes (leaky_relu's negative_slope, elu's
// alpha, clamp's min and max) follow its name in brackets, in the shortest form that reads
// back as the same double.
//
// Every register holds the program's type (the output's, f32 or f64). An input of another
// dtype is read converted to it, as cast converts (a bool mask reads as 0 and 1, bf16
// exactly, i64 rounded), which is how a group takes in the casts that fed it. A comparison
// gives 1 or 0 and where's condition is any nonzero value, so
//
//   r0=gt(in0,in1); r1=where(r0,in0,in2)
//
// computes where(x > y, x, z) with the bool kept in a register.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "baton/dtype.h"

namespace baton::kernels {

enum class EwOp : uint8_t {
  // unary
  neg, abs, exp, log, sqrt, rsqrt, sin, cos, tanh, erf, sigmoid, relu, gelu, gelu_tanh, silu, softplus,
  leaky_relu, elu, clamp, floor, ceil, round, tan, asin, acos, atan, sinh, cosh, asinh, acosh, atanh,
  // binary
  add, sub, mul, div, maximum, minimum, pow,
  relu_backward,  // (g, out): g where out > 0, else 0 (a training graph's relu gradient)
  sigmoid_backward, tanh_backward,  // (g, out): the gradients from the result
  gelu_backward, gelu_tanh_backward, silu_backward,  // (g, x): from the input
  eq, ne, lt, le, gt, ge,  // 1 where the comparison holds, else 0
  // ternary
  where,  // (cond, a, b): a where cond is nonzero, else b
};

// What a program needs to know of one op: the registry op it computes exactly, its
// operand count, the node attributes its parameters come from, and its cost.
struct EwOpInfo {
  EwOp op;
  const char* name;  // the registry op's name, also the program's
  int arity;         // 1, 2 or 3
  std::array<const char*, 2> params;  // attribute names, nullptr past the last
  double flops;      // per element
  int num_params() const { return params[0] ? (params[1] ? 2 : 1) : 0; }
};

// nullptr when programs cannot express the registry op `name`.
const EwOpInfo* find_ew_op(std::string_view name);
const EwOpInfo& ew_op_info(EwOp op);

// The dtypes op's registry op reads as operand `arg` and gives, in a program computing in
// `type`: bool for where's condition and for a comparison's result, `type` for the rest
// (a register holds a bool as 1 or 0).
inline bool is_comparison(EwOp op) { return op >= EwOp::eq && op <= EwOp::ge; }
inline DType operand_dtype(EwOp op, int arg, DType type) { return op == EwOp::where && arg == 0 ? DType::b8 : type; }
inline DType result_dtype(EwOp op, DType type) { return is_comparison(op) ? DType::b8 : type; }

// An operand: input `index` of the op, or the register defined by instruction `index`.
struct EwOperand {
  bool is_input = true;
  int index = 0;
  friend bool operator==(const EwOperand&, const EwOperand&) = default;
};

struct EwInstr {
  EwOp op;
  std::array<EwOperand, 3> args;  // the first `arity` are used
  std::array<double, 2> params{};  // the first num_params() are used
};

struct EwProgram {
  std::vector<EwInstr> code;
  // Inputs the program reads: one more than the largest inN (0 for none).
  int num_inputs() const;
};

std::string to_string(const EwProgram& p);

// The program `text` means, or an explanation of what is wrong with it in `error`.
struct ParsedProgram {
  EwProgram program;
  std::string error;  // empty when the text is a valid program
};
ParsedProgram parse_program(std::string_view text);

}  // namespace baton::kernels
