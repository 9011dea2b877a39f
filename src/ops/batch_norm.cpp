// batch_norm over channel dim 1 of [N, C, ...], with its backward op. The op itself is
// pure: it returns the statistics it normalized with; batch_norm() folds the batch
// statistics into the running buffers (PyTorch's momentum rule, unbiased variance).
// f32 runs on oneDNN where that is faster (batch_norm_onednn.cpp); f64 always loops.
#include <cmath>

#include "baton/autograd.h"
#include "baton/ops.h"
#include "kernels/cpu/batch_norm.h"
#include "kernels/cpu/copy.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/loops.h"
#include "kernels/cpu/onednn.h"
#include "ops/common.h"
#include "ops/sym_dims.h"

namespace baton::ops {

namespace {

struct BnShape {
  int64_t n, c, inner;
  int64_t count() const { return n * inner; }  // elements per channel
};

BnShape bn_shape(const CallContext& c) {
  const bool forward_op = c.op_name() == "batch_norm";
  const Tensor& x = c.input(forward_op ? 0 : 1);
  if (x.dim() < 2) c.fail("input must be [N, C, ...], got ", x.shape());
  BnShape s{x.size(0), x.size(1), 1};
  for (int64_t d = 2; d < x.dim(); ++d) s.inner = dim_mul(s.inner, x.size(d));
  for (size_t i = forward_op ? 1 : 2; i < c.inputs.size(); ++i) {  // the per-channel inputs
    const Tensor& t = c.input(i);
    if (!(t.dim() == 1 && t.size(0) == s.c))
      c.fail("per-channel input ", i, " must be [", s.c, "], got ", t.shape());
  }
  // With a symbolic size the count is known only at run time, where the kernel checks it.
  if (c.attrs.i("training") && sym::is_static(x.shape()) && s.count() < 2)
    c.template fail<ValueError>("training needs more than one value per channel");
  return s;
}

// What the kernels read of the call (OpDef::params): its shape, mode and epsilon.
struct BnParams {
  BnShape shape;
  bool training;
  double eps;
};
BnParams bn_params(const CallContext& c) { return {bn_shape(c), c.attrs.i("training") != 0, c.attrs.f("eps")}; }

// Runs body(channel) for every channel, channels spread over threads when large.
template <class Body>
void for_channels(const BnShape& s, Body&& body) {
  kernels::parallel_range(s.c, [&](int64_t b, int64_t e) {
    for (int64_t ch = b; ch < e; ++ch) body(ch);
  }, kernels::grain_for(s.count()));
}

// Calls f(element offset, length) for the rows of channel ch in a contiguous [N, C, inner].
template <class F>
void channel_rows(const BnShape& s, int64_t ch, F&& f) {
  for (int64_t i = 0; i < s.n; ++i) f((i * s.c + ch) * s.inner, s.inner);
}

template <class T>
void forward(const KernelContext& c, const BnParams& params) {
  const BnShape& s = params.shape;
  namespace dnn = kernels::onednn;
  Tensor x = dnn::dense(c.input(0));
  auto w = dnn::dense(c.input(1)).to_vector<double>(), b = dnn::dense(c.input(2)).to_vector<double>();
  const bool training = params.training;
  std::vector<double> rm, rv;
  if (!training) rm = dnn::dense(c.input(3)).to_vector<double>(), rv = dnn::dense(c.input(4)).to_vector<double>();
  const double eps = params.eps;
  const T* px = x.data<T>();
  T *py = c.output(0).data<T>(), *pm = c.output(1).data<T>(), *pv = c.output(2).data<T>();
  for_channels(s, [&](int64_t ch) {
    double mean = 0, var = 0;
    if (!training) {
      mean = rm[size_t(ch)];
      var = rv[size_t(ch)];
    } else {
      double sum = 0, sq = 0;
      channel_rows(s, ch, [&](int64_t o, int64_t len) { for (int64_t k = 0; k < len; ++k) sum += px[o + k]; });
      mean = sum / double(s.count());
      channel_rows(s, ch, [&](int64_t o, int64_t len) {
        for (int64_t k = 0; k < len; ++k) sq += (px[o + k] - mean) * (px[o + k] - mean);
      });
      var = sq / double(s.count());
    }
    const T scale = T(w[size_t(ch)] / std::sqrt(var + eps));
    const T shift = T(b[size_t(ch)] - mean * w[size_t(ch)] / std::sqrt(var + eps));
    channel_rows(s, ch, [&](int64_t o, int64_t len) {
      for (int64_t k = 0; k < len; ++k) py[o + k] = px[o + k] * scale + shift;
    });
    pm[ch] = T(mean);
    pv[ch] = T(var);
  });
}

// Inputs (g, x, weight, mean, var) -> (gx, gweight, gbias).
template <class T>
void backward(const KernelContext& c, const BnParams& params) {
  const BnShape& s = params.shape;
  namespace dnn = kernels::onednn;
  Tensor g = dnn::dense(c.input(0)), x = dnn::dense(c.input(1));
  auto w = dnn::dense(c.input(2)).to_vector<double>(), mean = dnn::dense(c.input(3)).to_vector<double>();
  auto var = dnn::dense(c.input(4)).to_vector<double>();
  const bool training = params.training;
  const double eps = params.eps, m = double(s.count());
  const T *pg = g.data<T>(), *px = x.data<T>();
  T *pgx = c.output(0).data<T>(), *pgw = c.output(1).data<T>(), *pgb = c.output(2).data<T>();
  for_channels(s, [&](int64_t ch) {
    const double mu = mean[size_t(ch)], invstd = 1 / std::sqrt(var[size_t(ch)] + eps);
    double sum_g = 0, sum_gxhat = 0;
    channel_rows(s, ch, [&](int64_t o, int64_t len) {
      for (int64_t k = 0; k < len; ++k) {
        sum_g += pg[o + k];
        sum_gxhat += pg[o + k] * (px[o + k] - mu) * invstd;
      }
    });
    const double a = w[size_t(ch)] * invstd;
    const double mean_g = training ? sum_g / m : 0, mean_gxhat = training ? sum_gxhat / m : 0;
    channel_rows(s, ch, [&](int64_t o, int64_t len) {
      for (int64_t k = 0; k < len; ++k)
        pgx[o + k] = T(a * (pg[o + k] - mean_g - (px[o + k] - mu) * invstd * mean_gxhat));
    });
    pgw[ch] = T(sum_gxhat);
    pgb[ch] = T(sum_g);
  });
}

bool forward_onednn(const KernelContext& c, const BnParams& params) {
  const bool training = params.training;
  if (!training) {  // outputs 1, 2 hold the running statistics, read in place (the loop rewrites them)
    kernels::copy_into(c.output(1), c.input(3));
    kernels::copy_into(c.output(2), c.input(4));
  }
  return kernels::batch_norm_forward_onednn(c.input(0), c.input(1), c.input(2), params.eps, training,
                                            c.output(0), c.output(1), c.output(2),
                                            static_cast<const kernels::BatchNormPlan*>(c.prepared));
}

// A plan step's oneDNN primitive (where oneDNN runs this batch norm), made with the plan.
PrepareFn prepare_batch_norm(bool backward) {
  return [backward](const CallContext& c, std::span<const Tensor>) {
    Prepared p;
    const Tensor& x = c.input(backward ? 1 : 0);
    const BnParams& params = c.params<BnParams>();
    if (x.dtype() == f32 && (params.training || !backward))
      p.state = kernels::prepare_batch_norm_f32(x, params.eps, params.training, backward, p);
    return p;
  };
}

std::vector<TensorMeta> metas(const InferContext& c, const Tensor& x) {
  require_same_dtype(c);
  require_float(c);
  BnShape s = bn_shape(c);
  DType t = x.dtype();
  return {{t, x.shape()}, {t, {s.c}}, {t, {s.c}}};
}

}  // namespace

// Inputs (x, weight, bias) when training, (x, weight, bias, running_mean, running_var) in
// inference; attrs training, eps. Outputs
// (y, mean, var): the batch statistics (biased var) when training, else the running ones.
BATON_OP(batch_norm_op, "batch_norm")
    .inputs(3, 5)
    .int_attr("training")
    .float_attr("eps")
    .outputs(3)
    .infer([](const InferContext& c) {
      // Inference reads the running statistics (inputs 3 and 4); training reads neither.
      if (c.inputs.size() == 4 || (!c.attrs.i("training") && c.inputs.size() != 5))
        c.fail<ValueError>("takes (x, weight, bias) when training, and also (running_mean, "
                           "running_var) in inference; got ", c.inputs.size(), " inputs");
      return metas(c, c.input(0));
    })
    .params(bn_params)
    .cpu([](const KernelContext& c) {
      const BnParams& params = c.params<BnParams>();
      if (c.input(0).dtype() == f32 && forward_onednn(c, params)) return;
      kernels::visit_float(c.input(0).dtype(), "batch_norm", [&](auto tag) {
        forward<typename decltype(tag)::type>(c, params);
      });
    })
    .prepared_by(prepare_batch_norm(false))
    .grad([](const GradContext& c) {
      if (!c.grad_output(0).defined()) return Grads(c.inputs.size());
      Tensor in[5] = {c.grad_output(0), c.input(0), c.input(1), c.output(1), c.output(2)};
      auto g = call_many(*find_op("batch_norm_backward"), in, c.attrs, c.loc);
      Grads grads{g[0], g[1], g[2]};
      grads.resize(c.inputs.size());  // none for the running statistics
      return grads;
    })
    .cost([](const CallContext& c, std::span<const TensorMeta>) {
      double n = double(c.input(0).numel());
      return Cost{5 * n, 3 * n * double(dtype_size(c.input(0).dtype()))};
    })
    .onnx("BatchNormalization");

BATON_OP(batch_norm_backward_op, "batch_norm_backward")
    .inputs(5)
    .int_attr("training")
    .float_attr("eps")
    .outputs(3)
    .infer([](const InferContext& c) {
      if (!(c.input(0).shape() == c.input(1).shape())) c.fail("gradient and input shapes differ");
      return metas(c, c.input(1));
    })
    .params(bn_params)
    .cpu([](const KernelContext& c) {
      const BnParams& params = c.params<BnParams>();
      if (c.input(0).dtype() == f32 && params.training &&
          kernels::batch_norm_backward_onednn(c.input(0), c.input(1), c.input(2), c.input(3), c.input(4),
                                              params.eps, c.output(0), c.output(1), c.output(2),
                                              static_cast<const kernels::BatchNormPlan*>(c.prepared)))
        return;
      kernels::visit_float(c.input(0).dtype(), "batch_norm_backward", [&](auto tag) {
        backward<typename decltype(tag)::type>(c, params);
      });
    })
    .prepared_by(prepare_batch_norm(true));

}  // namespace baton::ops

namespace baton {

// The dims batch statistics reduce over: all but the channel dim 1.
static std::vector<int64_t> per_channel_dims(const Tensor& x) {
  std::vector<int64_t> dims{0};
  for (int64_t d = 2; d < x.dim(); ++d) dims.push_back(d);
  return dims;
}

Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight, const Tensor& bias, bool training, double momentum,
                  double eps, SourceLoc loc) {
  const int64_t c = x.dim() >= 2 ? x.size(1) : 1;
  const bool have_stats = running_mean.defined() && running_var.defined();
  const bool batch_stats = training || !have_stats;
  auto or_fill = [&](const Tensor& t, double v) { return t.defined() ? t : full({c}, v, x.dtype()); };
  // Training reads no running statistics (they are updated in place below, which must
  // not touch anything autograd saved).
  Tensor in[5] = {x, or_fill(weight, 1), or_fill(bias, 0), running_mean, running_var};
  ops::Attrs attrs{{"training", int64_t(batch_stats)}, {"eps", eps}};
  if (have_stats) ops::bn_shape(ops::CallContext{ops::batch_norm_op, in, attrs, loc});  // check all 5
  std::vector<Tensor> out = ops::call_many(
      ops::batch_norm_op, std::span<const Tensor>(in, batch_stats ? 3 : 5), attrs, loc);
  if (training && have_stats) {
    NoGradGuard no_grad;
    ops::SizeCount count = ops::size_count(x, per_channel_dims(x), x.dtype(), loc);
    Tensor unbiased =
        count.apply([&](auto n) { return out[2].detach() * (n / ops::at_least(n - 1, 1.0, loc)); });
    Tensor rm = running_mean, rv = running_var;  // handles: the updates reach the caller's buffers
    // rm + (batch - rm) * momentum: every op reads the batch statistics, so in a static
    // graph each run reads the buffers' current values (rm * (1 - momentum) alone would
    // be computed once, while building, and baked in).
    rm.copy_(rm + (out[1].detach() - rm) * momentum, loc);
    rv.copy_(rv + (unbiased - rv) * momentum, loc);
  }
  return out[0];
}

}  // namespace baton
