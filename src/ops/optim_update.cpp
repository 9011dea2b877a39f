// Fused optimizer updates (SGD with momentum, Adam/AdamW) as in-place ops.
#include <cmath>

#include "baton/ops.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/loops.h"
#include "ops/common.h"

namespace baton::ops {
namespace {

// Update ops have no outputs: they write their inputs.
std::vector<TensorMeta> check_update_inputs(const InferContext& c) {
  require_float(c);
  for (size_t i = 1; i < c.inputs.size(); ++i) {
    if (!(c.input(i).shape() == c.input(0).shape()))
      c.fail("input ", i, " has shape ", c.input(i).shape(), ", the parameter ", c.input(0).shape());
    if (c.input(i).dtype() != c.input(0).dtype()) c.fail<DTypeError>("inputs must share one dtype");
  }
  for (const Tensor& t : c.inputs)
    if (!t.is_contiguous()) c.fail("update ops need contiguous tensors");
  return {};
}

// The SGD loop with its options as template parameters, so each variant is a straight,
// vectorizable loop (a branch on a runtime flag inside kept GCC from vectorizing it).
template <class T, bool kBuffer, bool kNesterov, bool kFirst>
void sgd_loop(T* __restrict p, const T* __restrict g, T* __restrict buf, int64_t n, T lr, T mom,
              T damp, T wd) {
  kernels::parallel_range(n, [=](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      T d = g[i] + wd * p[i];
      if constexpr (kBuffer) {
        const T m = kFirst ? d : mom * buf[i] + damp * d;
        buf[i] = m;
        d = kNesterov ? d + mom * m : m;
      }
      p[i] -= lr * d;
    }
  });
}

void sgd_kernel(const KernelContext& c) {
  const double lr = c.attrs.f("lr"), mom = c.attrs.f("momentum"), damp = c.attrs.f("dampening");
  const double wd = c.attrs.f("weight_decay");
  const bool nesterov = c.attrs.i("nesterov") != 0, first = c.attrs.i("first_step") != 0;
  const bool with_buffer = c.inputs.size() == 3;
  kernels::visit_float(c.input(0).dtype(), "sgd_update", [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = static_cast<T*>(c.input(0).raw_data());
    const T* g = static_cast<const T*>(c.input(1).raw_data());
    T* buf = with_buffer ? static_cast<T*>(c.input(2).raw_data()) : nullptr;
    const int64_t n = c.input(0).numel();
    const T args[] = {T(lr), T(mom), T(1 - damp), T(wd)};
    auto run = [&](auto loop) { loop(p, g, buf, n, args[0], args[1], args[2], args[3]); };
    if (!with_buffer) run(sgd_loop<T, false, false, false>);
    else if (first) run(nesterov ? sgd_loop<T, true, true, true> : sgd_loop<T, true, false, true>);
    else run(nesterov ? sgd_loop<T, true, true, false> : sgd_loop<T, true, false, false>);
  });
}

void adam_kernel(const KernelContext& c) {
  const double lr = c.attrs.f("lr"), b1 = c.attrs.f("beta1"), b2 = c.attrs.f("beta2");
  const double eps = c.attrs.f("eps"), wd = c.attrs.f("weight_decay");
  const bool decoupled = c.attrs.i("decoupled") != 0;
  const auto step = double(c.attrs.i("step"));
  const double correction1 = 1 - std::pow(b1, step), correction2 = 1 - std::pow(b2, step);
  kernels::visit_float(c.input(0).dtype(), "adam_update", [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = static_cast<T*>(c.input(0).raw_data());
    const T* g = static_cast<const T*>(c.input(1).raw_data());
    T* m = static_cast<T*>(c.input(2).raw_data());
    T* v = static_cast<T*>(c.input(3).raw_data());
    const T step_size = T(lr / correction1), sqrt_c2 = T(std::sqrt(correction2));
    const T tb1 = T(b1), tb2 = T(b2), teps = T(eps);
    const T decay = T(decoupled ? 1 - lr * wd : 1), l2 = T(decoupled ? 0 : wd);
    kernels::parallel_range(c.input(0).numel(), [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        T gi = g[i] + l2 * p[i];
        m[i] = tb1 * m[i] + (1 - tb1) * gi;
        v[i] = tb2 * v[i] + (1 - tb2) * gi * gi;
        p[i] = p[i] * decay - step_size * m[i] / (std::sqrt(v[i]) / sqrt_c2 + teps);
      }
    });
  });
}

}  // namespace

BATON_OP(sgd_update_op, "sgd_update")
    .outputs(0)
    .infer(InferManyFn(check_update_inputs))
    .cpu(sgd_kernel)
    .mutates({0, 2});

BATON_OP(adam_update_op, "adam_update")
    .outputs(0)
    .infer(InferManyFn(check_update_inputs))
    .cpu(adam_kernel)
    .mutates({0, 2, 3});

}  // namespace baton::ops

namespace baton {

void sgd_update_(Tensor& param, const Tensor& grad, Tensor& momentum_buffer, const SgdHyper& h,
                 bool first_step, SourceLoc loc) {
  ops::Attrs attrs{{"lr", h.lr},
                   {"momentum", h.momentum},
                   {"dampening", h.dampening},
                   {"weight_decay", h.weight_decay},
                   {"nesterov", int64_t(h.nesterov)},
                   {"first_step", int64_t(first_step)}};
  std::vector<Tensor> inputs{param, grad};
  if (h.momentum != 0) inputs.push_back(momentum_buffer);
  ops::call(ops::sgd_update_op, inputs, attrs, {}, loc);
}

void adam_update_(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq,
                  const AdamHyper& h, int64_t step, SourceLoc loc) {
  ops::Attrs attrs{{"lr", h.lr},       {"beta1", h.beta1},
                   {"beta2", h.beta2}, {"eps", h.eps},
                   {"weight_decay", h.weight_decay},
                   {"decoupled", int64_t(h.decoupled_weight_decay)},
                   {"step", step}};
  ops::call(ops::adam_update_op, std::vector<Tensor>{param, grad, exp_avg, exp_avg_sq}, attrs, {}, loc);
}

}  // namespace baton
