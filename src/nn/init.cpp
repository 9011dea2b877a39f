#include "baton/nn/init.h"

#include <cmath>

#include "baton/autograd.h"
#include "baton/ops.h"

namespace baton::nn::init {
namespace {

// Writes `values` into t without history (t may require grad).
void assign(Tensor& t, const Tensor& values) {
  NoGradGuard no_grad;
  t.copy_(values);
}

int64_t receptive_field(const Tensor& w) {
  int64_t r = 1;
  for (int64_t d = 2; d < w.dim(); ++d) r *= w.shape()[size_t(d)];
  return r;
}

}  // namespace

void uniform_(Tensor& t, double low, double high) {
  assign(t, rand(t.shape(), t.dtype()) * (high - low) + low);
}

void normal_(Tensor& t, double mean, double std) {
  assign(t, randn(t.shape(), t.dtype()) * std + mean);
}

void constant_(Tensor& t, double value) {
  NoGradGuard no_grad;
  t.fill_(value);
}

int64_t fan_in(const Tensor& w) { return (w.dim() > 1 ? w.shape()[1] : 1) * receptive_field(w); }
int64_t fan_out(const Tensor& w) { return w.shape()[0] * receptive_field(w); }

void kaiming_uniform_default_(Tensor& weight) {
  // gain = sqrt(2 / (1 + a^2)) with a = sqrt(5); bound = gain * sqrt(3 / fan_in) = 1/sqrt(fan_in).
  double bound = 1.0 / std::sqrt(double(fan_in(weight)));
  uniform_(weight, -bound, bound);
}

void kaiming_normal_(Tensor& weight, bool fan_out_mode) {
  double fan = double(fan_out_mode ? fan_out(weight) : fan_in(weight));
  normal_(weight, 0, std::sqrt(2.0 / fan));
}

}  // namespace baton::nn::init
