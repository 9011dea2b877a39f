// reverse_sequence: for each slice b along batch_dim, the first lengths[b] elements along
// time_dim in reverse order, the rest as they are (ONNX ReverseSequence). Element t < len
// of the output reads element len - 1 - t of the input.
//
// The kernel copies contiguous runs: past the later of the two dims, a run of `inner`
// elements shares one (b, t); each run reads the run of its mirrored time step. Runs are
// independent and copied in parallel. The gradient is the same reversal of the output
// gradient (a permutation is its own inverse here); lengths get none.
//
//   %2 = reverse_sequence(%x, %lengths) {batch_dim=1, time_dim=0}
#include <algorithm>
#include <cstring>

#include "baton/ops.h"
#include "kernels/cpu/copy.h"
#include "kernels/cpu/loops.h"
#include "ops/common.h"

namespace baton::ops {
namespace {

struct Dims {
  int64_t batch, time;
};

Dims dims_of(const CallContext& c, int64_t rank) {
  const Dims d{normalize_dim(c.attrs.i("batch_dim"), rank, c), normalize_dim(c.attrs.i("time_dim"), rank, c)};
  if (d.batch == d.time) c.fail<ValueError>("batch_dim and time_dim must differ, both are ", d.batch);
  return d;
}

TensorMeta infer(const InferContext& c) {
  const Tensor &x = c.input(0), &lengths = c.input(1);
  if (x.dim() < 2) c.fail("expects a tensor of at least 2 dims (batch and time)");
  const Dims d = dims_of(c, x.dim());
  if (lengths.dtype() != i64) c.fail<DTypeError>("lengths must be i64, got ", lengths.dtype());
  const int64_t batch = x.shape()[size_t(d.batch)];
  if (lengths.dim() != 1 || (!sym::is_symbol(batch) && !sym::is_symbol(lengths.shape()[0]) && lengths.shape()[0] != batch))
    c.fail("lengths must be 1-D with one length per batch entry (", sym::to_string(batch), ")");
  return same_as_input(c);
}

// The lengths, each checked against the time dim's size.
std::vector<int64_t> checked_lengths(const KernelContext& c, int64_t steps) {
  std::vector<int64_t> lengths = kernels::dense(c.input(1)).to_vector<int64_t>();
  for (int64_t n : lengths)
    if (n < 0 || n > steps) c.fail<IndexError>("length ", n, " is out of range for a time dim of size ", steps);
  return lengths;
}

void kernel(const KernelContext& c) {
  const Tensor x = kernels::dense(c.input(0));
  const Tensor& out = c.output();
  const Dims& d = c.params<Dims>();
  const Shape& s = x.shape();
  const int64_t steps = s[size_t(d.time)];
  const std::vector<int64_t> lengths = checked_lengths(c, steps);
  if (int64_t(lengths.size()) != s[size_t(d.batch)])
    c.fail("lengths has ", lengths.size(), " entries for a batch of ", s[size_t(d.batch)]);
  if (out.numel() == 0) return;
  const Shape strides = contiguous_strides(s);
  int64_t inner = 1;
  for (size_t k = size_t(std::max(d.batch, d.time)) + 1; k < s.size(); ++k) inner *= s[k];
  const int64_t batch_stride = strides[size_t(d.batch)], time_stride = strides[size_t(d.time)];
  const size_t run_bytes = size_t(inner) * dtype_size(x.dtype());
  const char* src = static_cast<const char*>(x.raw_data());
  char* dst = static_cast<char*>(out.raw_data());
  kernels::parallel_range(out.numel() / inner, [&](int64_t b, int64_t e) {
    for (int64_t run = b; run < e; ++run) {
      const int64_t at = run * inner;
      const int64_t batch = (at / batch_stride) % s[size_t(d.batch)], t = (at / time_stride) % steps;
      const int64_t n = lengths[size_t(batch)];
      const int64_t from = t < n ? at + (n - 1 - 2 * t) * time_stride : at;
      std::memcpy(dst + size_t(at) * dtype_size(x.dtype()), src + size_t(from) * dtype_size(x.dtype()), run_bytes);
    }
  }, kernels::grain_for(inner));
}

}  // namespace

BATON_OP(reverse_sequence_op, "reverse_sequence")
    .inputs(2)
    .int_attr("batch_dim")
    .int_attr("time_dim")
    .fusion(Fusion::Injective)
    .infer(infer)
    .params([](const CallContext& c) { return dims_of(c, c.input(0).dim()); })
    .cpu(kernel)
    .grad([](const GradContext& c) {
      return Grads{reverse_sequence(c.grad_output(), c.input(1), c.attrs.i("batch_dim"), c.attrs.i("time_dim"), c.loc),
                   {}};
    })
    .cost([](const CallContext&, std::span<const TensorMeta> out) {
      return Cost{0, 2 * double(out[0].shape.numel()) * double(dtype_size(out[0].dtype))};
    })
    .onnx("ReverseSequence");

}  // namespace baton::ops

namespace baton {

Tensor reverse_sequence(const Tensor& x, const Tensor& lengths, int64_t batch_dim, int64_t time_dim, SourceLoc loc) {
  const Tensor l = lengths.defined() && lengths.dtype() == i32 ? cast(lengths, i64, loc) : lengths;
  return ops::call(ops::reverse_sequence_op, {x, l}, {{"batch_dim", batch_dim}, {"time_dim", time_dim}}, loc);
}

}  // namespace baton
