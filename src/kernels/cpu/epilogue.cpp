#include "kernels/cpu/epilogue.h"

#include <array>
#include <cstring>

#include "kernels/cpu/copy.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/element_fns.h"
#include "kernels/cpu/loops.h"

namespace baton::kernels {
namespace {

using Kind = Activation::Kind;

struct KindName {
  Kind kind;
  const char* name;
};
constexpr std::array<KindName, 11> kKinds{{{Kind::none, "none"},
                                          {Kind::relu, "relu"},
                                          {Kind::sigmoid, "sigmoid"},
                                          {Kind::tanh, "tanh"},
                                          {Kind::gelu, "gelu"},
                                          {Kind::gelu_tanh, "gelu_tanh"},
                                          {Kind::silu, "silu"},
                                          {Kind::softplus, "softplus"},
                                          {Kind::leaky_relu, "leaky_relu"},
                                          {Kind::elu, "elu"},
                                          {Kind::clamp, "clamp"}}};

const KindName& entry(Kind k) { return kKinds[size_t(k)]; }

// out[i] = f(out[i]), through the loop the activation ops run (map_elements), so each
// element function compiles as it does there.
template <class T, class F>
void apply_in_place(const Tensor& out, F f) {
  map_elements<T, T>(out, f, out);
}

template <class T>
void apply_typed(const Activation& a, const Tensor& out) {
  switch (a.kind) {
    case Kind::none: return;
    case Kind::relu: return apply_in_place<T>(out, ew::Relu{});
    case Kind::sigmoid: return apply_in_place<T>(out, ew::Sigmoid{});
    case Kind::tanh: return apply_in_place<T>(out, ew::Tanh{});
    case Kind::gelu: return apply_in_place<T>(out, ew::Gelu{});
    case Kind::gelu_tanh: return apply_in_place<T>(out, ew::GeluTanh{});
    case Kind::silu: return apply_in_place<T>(out, ew::Silu{});
    case Kind::softplus: return apply_in_place<T>(out, ew::Softplus{});
    case Kind::leaky_relu: return apply_in_place<T>(out, ew::LeakyRelu<T>{T(a.alpha)});
    case Kind::elu: return apply_in_place<T>(out, ew::Elu<T>{T(a.alpha)});
    case Kind::clamp: return apply_in_place<T>(out, ew::Clamp<T>{T(a.alpha), T(a.beta)});
  }
}

}  // namespace

std::optional<Activation::Kind> activation_kind(std::string_view name) {
  for (const KindName& k : kKinds)
    if (name == k.name) return k.kind;
  return std::nullopt;
}

std::string activation_key(const Activation& a) {
  std::string key = entry(a.kind).name;
  for (double p : {a.alpha, a.beta}) {  // the bits, so that no two parameters share a key
    uint64_t bits;
    std::memcpy(&bits, &p, sizeof bits);
    key += ":" + std::to_string(bits);
  }
  return key;
}

void apply_activation(const Activation& a, const Tensor& out) {
  if (!a.any() || out.numel() == 0) return;
  if (!is_dense(out)) {
    Tensor d = dense(out);
    apply_activation(a, d);
    return copy_into(out, d);
  }
  visit_float(out.dtype(), entry(a.kind).name, [&](auto tag) { apply_typed<typename decltype(tag)::type>(a, out); });
}

void add_then_activate(const Tensor& out, const Tensor* residual, const Activation& a) {
  if (residual && out.numel() > 0)
    visit_float(out.dtype(), "add", [&](auto tag) {
      using T = typename decltype(tag)::type;
      map_elements<T, T, T>(out, [](T x, T r) { return x + r; }, out, *residual);
    });
  apply_activation(a, out);
}

}  // namespace baton::kernels
