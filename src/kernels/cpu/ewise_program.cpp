#include "kernels/cpu/ewise_program.h"

#include <algorithm>
#include <charconv>
#include <cctype>

namespace baton::kernels {
namespace {

// One row per op; flops as the ops' cost rules count them.
constexpr EwOpInfo kOps[] = {
    {EwOp::neg, "neg", 1, {}, 1},
    {EwOp::abs, "abs", 1, {}, 1},
    {EwOp::exp, "exp", 1, {}, 10},
    {EwOp::log, "log", 1, {}, 10},
    {EwOp::sqrt, "sqrt", 1, {}, 4},
    {EwOp::rsqrt, "rsqrt", 1, {}, 5},
    {EwOp::sin, "sin", 1, {}, 10},
    {EwOp::cos, "cos", 1, {}, 10},
    {EwOp::tanh, "tanh", 1, {}, 12},
    {EwOp::erf, "erf", 1, {}, 15},
    {EwOp::sigmoid, "sigmoid", 1, {}, 12},
    {EwOp::relu, "relu", 1, {}, 1},
    {EwOp::gelu, "gelu", 1, {}, 20},
    {EwOp::gelu_tanh, "gelu_tanh", 1, {}, 18},
    {EwOp::silu, "silu", 1, {}, 13},
    {EwOp::softplus, "softplus", 1, {}, 20},
    {EwOp::leaky_relu, "leaky_relu", 1, {"negative_slope", nullptr}, 1},
    {EwOp::elu, "elu", 1, {"alpha", nullptr}, 12},
    {EwOp::clamp, "clamp", 1, {"min", "max"}, 1},
    {EwOp::floor, "floor", 1, {}, 1},
    {EwOp::ceil, "ceil", 1, {}, 1},
    {EwOp::round, "round", 1, {}, 1},
    {EwOp::tan, "tan", 1, {}, 15},
    {EwOp::asin, "asin", 1, {}, 15},
    {EwOp::acos, "acos", 1, {}, 15},
    {EwOp::atan, "atan", 1, {}, 15},
    {EwOp::sinh, "sinh", 1, {}, 15},
    {EwOp::cosh, "cosh", 1, {}, 15},
    {EwOp::asinh, "asinh", 1, {}, 20},
    {EwOp::acosh, "acosh", 1, {}, 20},
    {EwOp::atanh, "atanh", 1, {}, 20},
    {EwOp::add, "add", 2, {}, 1},
    {EwOp::sub, "sub", 2, {}, 1},
    {EwOp::mul, "mul", 2, {}, 1},
    {EwOp::div, "div", 2, {}, 1},
    {EwOp::maximum, "maximum", 2, {}, 1},
    {EwOp::minimum, "minimum", 2, {}, 1},
    {EwOp::pow, "pow", 2, {}, 10},
    {EwOp::relu_backward, "relu_backward", 2, {}, 1},
    {EwOp::sigmoid_backward, "sigmoid_backward", 2, {}, 3},
    {EwOp::tanh_backward, "tanh_backward", 2, {}, 3},
    {EwOp::gelu_backward, "gelu_backward", 2, {}, 30},
    {EwOp::gelu_tanh_backward, "gelu_tanh_backward", 2, {}, 25},
    {EwOp::silu_backward, "silu_backward", 2, {}, 16},
    {EwOp::eq, "eq", 2, {}, 1},
    {EwOp::ne, "ne", 2, {}, 1},
    {EwOp::lt, "lt", 2, {}, 1},
    {EwOp::le, "le", 2, {}, 1},
    {EwOp::gt, "gt", 2, {}, 1},
    {EwOp::ge, "ge", 2, {}, 1},
    {EwOp::where, "where", 3, {}, 1},
};

std::string number(double v) {
  char buf[32];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);  // shortest round-trip form
  return std::string(buf, end);
}

std::string operand(const EwOperand& a) { return std::string(a.is_input ? "in" : "r").append(std::to_string(a.index)); }

// kOps[i] describes EwOp(i): ew_op_info indexes it.
constexpr bool in_enum_order() {
  for (size_t i = 0; i < std::size(kOps); ++i)
    if (kOps[i].op != EwOp(i)) return false;
  return true;
}
static_assert(in_enum_order(), "kOps must list the ops in EwOp's order");

// A cursor over the text; each read skips the spaces before it.
class Reader {
 public:
  explicit Reader(std::string_view s) : s_(s) {}
  bool done() { return skip(), p_ == s_.size(); }
  bool eat(char c) {
    skip();
    if (p_ < s_.size() && s_[p_] == c) return ++p_, true;
    return false;
  }
  bool eat(std::string_view word) {
    skip();
    if (s_.substr(p_).starts_with(word)) return p_ += word.size(), true;
    return false;
  }
  std::string_view name() {
    skip();
    size_t b = p_;
    while (p_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[p_])) || s_[p_] == '_')) ++p_;
    return s_.substr(b, p_ - b);
  }
  bool integer(int& v) {
    skip();
    auto [end, ec] = std::from_chars(s_.data() + p_, s_.data() + s_.size(), v);
    if (ec != std::errc() || v < 0) return false;
    p_ = size_t(end - s_.data());
    return true;
  }
  bool real(double& v) {
    skip();
    auto [end, ec] = std::from_chars(s_.data() + p_, s_.data() + s_.size(), v);
    if (ec != std::errc()) return false;
    p_ = size_t(end - s_.data());
    return true;
  }
  size_t position() const { return p_; }

 private:
  void skip() {
    while (p_ < s_.size() && s_[p_] == ' ') ++p_;
  }
  std::string_view s_;
  size_t p_ = 0;
};

// Reads instruction number k; returns an error message or "".
class Parser {
 public:
  explicit Parser(std::string_view text) : r_(text) {}

  ParsedProgram run() {
    ParsedProgram out;
    do {
      if (r_.done()) break;  // a trailing ';'
      EwInstr ins{};
      out.error = instruction(int(out.program.code.size()), ins);
      if (!out.error.empty()) {
        out.error += str_at();
        return out;
      }
      out.program.code.push_back(ins);
    } while (r_.eat(';'));
    if (!r_.done()) out.error = "expected ';' between instructions" + str_at();
    else if (out.program.code.empty()) out.error = "the program has no instruction";
    return out;
  }

 private:
  std::string str_at() const { return " (at character " + std::to_string(r_.position()) + ")"; }

  std::string instruction(int k, EwInstr& ins) {
    int reg = -1;
    if (!r_.eat('r') || !r_.integer(reg) || !r_.eat('='))
      return "instruction " + std::to_string(k) + " must start with 'r" + std::to_string(k) + "='";
    if (reg != k) return "instruction " + std::to_string(k) + " defines r" + std::to_string(reg) + ", not r" + std::to_string(k);
    std::string_view name = r_.name();
    const EwOpInfo* info = find_ew_op(name);
    if (!info) return "unknown op '" + std::string(name) + "'";
    ins.op = info->op;
    if (std::string e = params(*info, ins); !e.empty()) return e;
    if (!r_.eat('(')) return "expected '(' after " + std::string(name);
    for (int a = 0; a < info->arity; ++a) {
      if (a > 0 && !r_.eat(',')) return std::string(name) + " takes " + std::to_string(info->arity) + " operands";
      if (std::string e = read_operand(k, ins.args[size_t(a)]); !e.empty()) return e;
    }
    if (!r_.eat(')')) return std::string(name) + " takes " + std::to_string(info->arity) + " operand(s)";
    if (info->op == EwOp::pow && !ins.args[1].is_input) return "pow's exponent must be an input (inN), not a register";
    return "";
  }

  std::string params(const EwOpInfo& info, EwInstr& ins) {
    const int n = info.num_params();
    if (!r_.eat('[')) return n ? std::string(info.name) + " needs " + std::to_string(n) + " parameter(s) in [...]" : "";
    for (int i = 0; i < n; ++i)
      if ((i > 0 && !r_.eat(',')) || !r_.real(ins.params[size_t(i)]))
        return std::string(info.name) + " needs " + std::to_string(n) + " numeric parameter(s) in [...]";
    if (!r_.eat(']')) return std::string(info.name) + " takes " + std::to_string(n) + " parameter(s)";
    return "";
  }

  std::string read_operand(int k, EwOperand& a) {
    a.is_input = r_.eat("in");
    if (!a.is_input && !r_.eat('r')) return "an operand must be inN or rN";
    if (!r_.integer(a.index)) return "an operand must be inN or rN";
    if (!a.is_input && a.index >= k)
      return "instruction " + std::to_string(k) + " reads r" + std::to_string(a.index) + " before it is defined";
    return "";
  }

  Reader r_;
};

}  // namespace

const EwOpInfo* find_ew_op(std::string_view name) {
  for (const EwOpInfo& info : kOps)
    if (name == info.name) return &info;
  return nullptr;
}

const EwOpInfo& ew_op_info(EwOp op) { return kOps[size_t(op)]; }

int EwProgram::num_inputs() const {
  int n = 0;
  for (const EwInstr& ins : code)
    for (int a = 0; a < ew_op_info(ins.op).arity; ++a)
      if (ins.args[size_t(a)].is_input) n = std::max(n, ins.args[size_t(a)].index + 1);
  return n;
}

std::string to_string(const EwProgram& p) {
  std::string s;
  for (size_t k = 0; k < p.code.size(); ++k) {
    const EwInstr& ins = p.code[k];
    const EwOpInfo& info = ew_op_info(ins.op);
    if (k) s += "; ";
    s.append("r").append(std::to_string(k)).append("=").append(info.name);
    for (int i = 0; i < info.num_params(); ++i) s.append(i ? "," : "[").append(number(ins.params[size_t(i)]));
    s += info.num_params() ? "](" : "(";
    for (int a = 0; a < info.arity; ++a) s.append(a ? "," : "").append(operand(ins.args[size_t(a)]));
    s += ")";
  }
  return s;
}

ParsedProgram parse_program(std::string_view text) { return Parser(text).run(); }

}  // namespace baton::kernels
