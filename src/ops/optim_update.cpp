// Fused optimizer updates (SGD with momentum, Adam/AdamW) as in-place ops.
#include <chrono>
#include <cmath>
#include <memory>

#include "baton/ops.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/loops.h"
#include "kernels/cpu/measured_choice.h"
#include "kernels/cpu/streaming.h"
#include "ops/common.h"

namespace baton::ops {
namespace {

// Inputs of both update ops: the parameter, its gradient, the learning rate, the step
// counter, then the parameter's state buffers (SGD's momentum buffer is optional).
constexpr size_t kParam = 0, kGrad = 1, kLr = 2, kStep = 3, kFirstBuffer = 4;

void require_scalar(const InferContext& c, size_t i, DType dtype, const char* what) {
  const Tensor& t = c.input(i);
  if (t.dim() != 0 || t.dtype() != dtype)
    c.fail<DTypeError>(what, " must be a 0-d ", dtype, " tensor, not ", t.dtype(), t.shape());
}

// Update ops have no outputs: they write their inputs. The rule for an op with between
// min_buffers and max_buffers state buffers.
InferManyFn update_inputs(size_t min_buffers, size_t max_buffers) {
  return [=](const InferContext& c) {
    const size_t n = c.inputs.size();
    if (n < kFirstBuffer + min_buffers || n > kFirstBuffer + max_buffers)
      c.fail("expected the parameter, gradient, lr, step and ", min_buffers, " to ", max_buffers,
             " state buffers, got ", n, " inputs");
    require_float(c);
    require_scalar(c, kLr, f64, "lr");
    require_scalar(c, kStep, i64, "step");
    const Tensor& param = c.input(kParam);
    for (size_t i = 0; i < n; ++i) {
      if (i == kLr || i == kStep) continue;
      const Tensor& t = c.input(i);
      if (!(t.shape() == param.shape()))
        c.fail("input ", i, " has shape ", t.shape(), ", the parameter ", param.shape());
      if (t.dtype() != param.dtype()) c.fail<DTypeError>("inputs must share one dtype");
      if (!t.is_contiguous()) c.fail("update ops need contiguous tensors");
    }
    return std::vector<TensorMeta>{};
  };
}

// The run-time values, read once per call so the loops below stay straight.
double read_lr(const KernelContext& c) { return *static_cast<const double*>(c.input(kLr).raw_data()); }

// Increments the parameter's step counter and returns its value before the update.
int64_t advance_step(const KernelContext& c) {
  return (*static_cast<int64_t*>(c.input(kStep).raw_data()))++;
}

// The SGD loop with its options as template parameters, so each variant is a straight,
// vectorizable loop (a branch on a runtime flag inside kept GCC from vectorizing it).
template <class T, bool kBuffer, bool kNesterov, bool kFirst>
void sgd_loop(T* __restrict p, const T* __restrict g, T* __restrict buf, int64_t n, T lr, T mom,
              T damp, T wd, bool stream) {
  kernels::parallel_range(n, [=](int64_t b, int64_t e) {
    kernels::write_each(p, b, e, stream, [=](int64_t i) {
      T d = g[i] + wd * p[i];
      if constexpr (kBuffer) {
        const T m = kFirst ? d : mom * buf[i] + damp * d;
        buf[i] = m;
        d = kNesterov ? d + mom * m : m;
      }
      return p[i] - lr * d;
    });
  });
}

// The kernels' parameters: the hyperparameters, as the public functions take them, and
// whether the parameter may be written with streaming stores (the `streaming` attribute,
// which the stream_updates pass sets: kernels/cpu/streaming.h).
template <class Hyper>
struct UpdateParams {
  Hyper hyper;
  bool streaming = false;
};
bool streaming_attr(const CallContext& c) { return c.attrs.has("streaming") && c.attrs.i("streaming") != 0; }
UpdateParams<SgdHyper> sgd_params(const CallContext& c) {
  return {{c.attrs.f("momentum"), c.attrs.f("dampening"), c.attrs.f("weight_decay"), c.attrs.i("nesterov") != 0},
          streaming_attr(c)};
}
UpdateParams<AdamHyper> adam_params(const CallContext& c) {
  return {{c.attrs.f("beta1"), c.attrs.f("beta2"), c.attrs.f("eps"), c.attrs.f("weight_decay"),
           c.attrs.i("decoupled") != 0},
          streaming_attr(c)};
}

// Runs run(stream), the kernel's loop, storing the parameter as chosen: a plan step whose
// `streaming` attribute the pass set times both ways in place and takes the faster
// (kernels/cpu/measured_choice.h: which one wins depends on whether the machine's cores
// share a cache at the time); an eager call streams as the attribute says.
template <class Run>
void store_as_chosen(const KernelContext& c, bool streaming, const Run& run) {
  const auto* choice = static_cast<const kernels::MeasuredChoice*>(c.prepared);
  if (!choice) return run(streaming);
  const int way = choice->pick();
  const auto start = std::chrono::steady_clock::now();
  run(way == 1);
  choice->record(way, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
}

Prepared prepare_stores(const CallContext& c, std::span<const Tensor>) {
  Prepared p;
  if (!streaming_attr(c)) return p;
  p.state = std::make_shared<const kernels::MeasuredChoice>();
  p.implementation = "plain or streaming stores, as they measure in the step";
  return p;
}

void sgd_kernel(const KernelContext& c) {
  // Named, not a structured binding: clang 16 cannot capture those under OpenMP (make fuzz).
  const UpdateParams<SgdHyper>& params = c.params<UpdateParams<SgdHyper>>();
  const SgdHyper& h = params.hyper;
  const bool streaming = params.streaming;
  const double mom = h.momentum, damp = h.dampening, wd = h.weight_decay;
  const bool nesterov = h.nesterov;
  const double lr = read_lr(c);
  const bool first = advance_step(c) == 0;  // the momentum buffer starts at d
  const bool with_buffer = c.inputs.size() > kFirstBuffer;
  kernels::visit_float(c.input(kParam).dtype(), "sgd_update", [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = static_cast<T*>(c.input(kParam).raw_data());
    const T* g = static_cast<const T*>(c.input(kGrad).raw_data());
    T* buf = with_buffer ? static_cast<T*>(c.input(kFirstBuffer).raw_data()) : nullptr;
    const int64_t n = c.input(kParam).numel();
    const T args[] = {T(lr), T(mom), T(1 - damp), T(wd)};
    store_as_chosen(c, streaming, [&](bool stream) {
      auto run = [&](auto loop) { loop(p, g, buf, n, args[0], args[1], args[2], args[3], stream); };
      if (!with_buffer) run(sgd_loop<T, false, false, false>);
      else if (first) run(nesterov ? sgd_loop<T, true, true, true> : sgd_loop<T, true, false, true>);
      else run(nesterov ? sgd_loop<T, true, true, false> : sgd_loop<T, true, false, false>);
    });
  });
}

void adam_kernel(const KernelContext& c) {
  const UpdateParams<AdamHyper>& params = c.params<UpdateParams<AdamHyper>>();
  const AdamHyper& h = params.hyper;
  const bool streaming = params.streaming;
  const double b1 = h.beta1, b2 = h.beta2, eps = h.eps, wd = h.weight_decay;
  const bool decoupled = h.decoupled_weight_decay;
  const double lr = read_lr(c);
  const auto step = double(advance_step(c) + 1);  // bias correction at the new, 1-based step
  const double correction1 = 1 - std::pow(b1, step), correction2 = 1 - std::pow(b2, step);
  kernels::visit_float(c.input(kParam).dtype(), "adam_update", [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = static_cast<T*>(c.input(kParam).raw_data());
    const T* g = static_cast<const T*>(c.input(kGrad).raw_data());
    T* m = static_cast<T*>(c.input(kFirstBuffer).raw_data());
    T* v = static_cast<T*>(c.input(kFirstBuffer + 1).raw_data());
    const T step_size = T(lr / correction1), sqrt_c2 = T(std::sqrt(correction2));
    const T tb1 = T(b1), tb2 = T(b2), teps = T(eps);
    const T decay = T(decoupled ? 1 - lr * wd : 1), l2 = T(decoupled ? 0 : wd);
    store_as_chosen(c, streaming, [&](bool stream) {
      kernels::parallel_range(c.input(kParam).numel(), [&](int64_t b, int64_t e) {
        kernels::write_each(p, b, e, stream, [&](int64_t i) {
          T gi = g[i] + l2 * p[i];
          m[i] = tb1 * m[i] + (1 - tb1) * gi;
          v[i] = tb2 * v[i] + (1 - tb2) * gi * gi;
          return p[i] * decay - step_size * m[i] / (std::sqrt(v[i]) / sqrt_c2 + teps);
        });
      });
    });
  });
}

}  // namespace

BATON_OP(sgd_update_op, "sgd_update")
    .inputs(4, 5)
    .float_attr("momentum")
    .float_attr("dampening")
    .float_attr("weight_decay")
    .int_attr("nesterov")
    .int_attr("streaming", OpDef::optional)
    .outputs(0)
    .infer(update_inputs(0, 1))
    .params(sgd_params)
    .cpu(sgd_kernel)
    .prepared_by(prepare_stores)
    .mutates({0, 3, 4});  // param, step, momentum buffer

BATON_OP(adam_update_op, "adam_update")
    .inputs(6)
    .float_attr("beta1")
    .float_attr("beta2")
    .float_attr("eps")
    .float_attr("weight_decay")
    .int_attr("decoupled")
    .int_attr("streaming", OpDef::optional)
    .outputs(0)
    .infer(update_inputs(2, 2))
    .params(adam_params)
    .cpu(adam_kernel)
    .prepared_by(prepare_stores)
    .mutates({0, 3, 4, 5});  // param, step, exp_avg, exp_avg_sq

}  // namespace baton::ops

namespace baton {

void sgd_update_(Tensor& param, const Tensor& grad, const Tensor& lr, Tensor& step,
                 Tensor& momentum_buffer, const SgdHyper& h, SourceLoc loc) {
  ops::Attrs attrs{{"momentum", h.momentum},
                   {"dampening", h.dampening},
                   {"weight_decay", h.weight_decay},
                   {"nesterov", int64_t(h.nesterov)}};
  std::vector<Tensor> inputs{param, grad, lr, step};
  if (h.momentum != 0) inputs.push_back(momentum_buffer);
  ops::call(ops::sgd_update_op, inputs, attrs, {}, loc);
}

void adam_update_(Tensor& param, const Tensor& grad, const Tensor& lr, Tensor& step, Tensor& exp_avg,
                  Tensor& exp_avg_sq, const AdamHyper& h, SourceLoc loc) {
  ops::Attrs attrs{{"beta1", h.beta1},
                   {"beta2", h.beta2},
                   {"eps", h.eps},
                   {"weight_decay", h.weight_decay},
                   {"decoupled", int64_t(h.decoupled_weight_decay)}};
  ops::call(ops::adam_update_op, std::vector<Tensor>{param, grad, lr, step, exp_avg, exp_avg_sq}, attrs,
            {}, loc);
}

}  // namespace baton
