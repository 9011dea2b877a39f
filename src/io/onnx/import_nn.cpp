// ONNX neural-network ops: global pooling, normalization, Gemm/MatMul, Dropout, losses.
// Conv, ConvTranspose, MaxPool and AveragePool are in import_conv.cpp.
#include <algorithm>
#include <cmath>

#include "baton/ops.h"
#include "io/onnx/importer.h"

namespace baton::onnx::detail {
namespace {


std::vector<int64_t> spatial_dims(const Tensor& x) {
  std::vector<int64_t> dims;
  for (int64_t d = 2; d < x.dim(); ++d) dims.push_back(d);
  return dims;
}

// -input[i, target[i], ...] weighted, with ignore_index and ONNX's reductions (mean divides
// by the summed weights of the counted elements).
Tensor nll(const NodeContext& c, const Tensor& log_prob, const Tensor& target0, const Tensor& weight) {
  Tensor target = cast(target0, DType::i64);
  Tensor valid, safe = target;
  if (c.has_attr("ignore_index")) {
    valid = ne(target, c.attr_int("ignore_index"));
    safe = where(valid, target, zeros_like(target));
  }
  Tensor picked = squeeze(gather(log_prob, 1, unsqueeze(safe, 1)), 1);
  Tensor w = weight.defined() ? reshape(index_select(weight, 0, reshape(safe, Shape{-1})), safe.shape())
                              : ones_like(picked);
  if (valid.defined()) w = w * cast(valid, w.dtype());
  Tensor loss = -picked * w;
  const std::string reduction = c.attr_string("reduction", "mean");
  if (reduction == "none") return loss;
  if (reduction == "sum") return sum(loss);
  if (reduction == "mean") return sum(loss) / sum(w);
  c.fail(str("reduction '", reduction, "' is not one of none, sum, mean"));
}

// Training mode: y normalized with the batch's mean and biased variance per channel, and
// the running statistics moved toward them: running * momentum + batch * (1 - momentum).
// Outputs (y, running_mean, running_var) and, before opset 14, the batch statistics.
Outputs batch_norm_training(const NodeContext& c) {
  const Tensor& x = c.input(0);
  if (x.dim() < 2) c.fail(str("training mode needs an input [N, C, ...], not ", x.shape()));
  std::vector<int64_t> dims{0};
  for (int64_t d = 2; d < x.dim(); ++d) dims.push_back(d);
  const Tensor batch_mean = mean(x, dims), batch_var = var(x, dims, false, 0);
  const int64_t rank = x.dim();
  const Tensor y = (x - per_channel(batch_mean, rank)) * rsqrt(per_channel(batch_var, rank) + c.attr_float("epsilon", 1e-5)) *
                       per_channel(c.input(1), rank) + per_channel(c.input(2), rank);
  const double momentum = c.attr_float("momentum", 0.9);
  return {y, c.input(3) * momentum + batch_mean * (1 - momentum), c.input(4) * momentum + batch_var * (1 - momentum),
          batch_mean, batch_var};
}

}  // namespace

BATON_ONNX_IMPORTER("GlobalAveragePool", [](NodeContext& c) -> Outputs {
  return {mean(c.input(0), spatial_dims(c.input(0)), true)};
});
BATON_ONNX_IMPORTER("GlobalMaxPool", [](NodeContext& c) -> Outputs {
  return {max(c.input(0), spatial_dims(c.input(0)), true)};
});

// Training mode: training_mode=1 from opset 14; before, more than one output (and, before
// opset 7, is_test=0).
BATON_ONNX_IMPORTER("BatchNormalization", [](NodeContext& c) -> Outputs {
  const bool several_outputs = c.wants_output(1) || c.wants_output(2) || c.wants_output(3) || c.wants_output(4);
  const bool training = c.opset >= 14 ? c.attr_int("training_mode", 0) != 0
                        : c.opset < 7 ? c.attr_int("is_test", 0) == 0 && several_outputs
                                      : several_outputs;
  if (training) {
    Outputs out = batch_norm_training(c);
    out.resize(std::min(out.size(), c.num_outputs()));
    return out;
  }
  const double eps = c.attr_float("epsilon", 1e-5);
  return {batch_norm(c.input(0), c.input(3), c.input(4), c.input(1), c.input(2), false, 0.1, eps)};
});

BATON_ONNX_IMPORTER("InstanceNormalization", [](NodeContext& c) -> Outputs {
  const Tensor& x = c.input(0);
  std::vector<int64_t> dims = spatial_dims(x);
  Tensor centered = x - mean(x, dims, true);
  Tensor normalized = centered * rsqrt(var(x, dims, true, 0) + c.attr_float("epsilon", 1e-5));
  return {normalized * per_channel(c.input(1), x.dim()) + per_channel(c.input(2), x.dim())};
});

BATON_ONNX_IMPORTER("LayerNormalization", [](NodeContext& c) -> Outputs {
  const Tensor& x = c.input(0);
  const int64_t axis = axis_attr(c, "axis", -1, x.dim());
  const double eps = c.attr_float("epsilon", 1e-5);
  Shape normalized(std::vector<int64_t>(x.shape().begin() + axis, x.shape().end()));
  Outputs out;
  if (c.input(1).shape() == normalized && (!c.has_input(2) || c.input(2).shape() == normalized)) {
    out.push_back(layer_norm(x, normalized, c.input(1), c.has_input(2) ? c.input(2) : Tensor(), eps));
  } else {  // scale or bias broadcast
    out.push_back(layer_norm(x, normalized, {}, {}, eps) * c.input(1));
    if (c.has_input(2)) out[0] = out[0] + c.input(2);
  }
  if (c.wants_output(1) || c.wants_output(2)) {
    std::vector<int64_t> dims;
    for (int64_t d = axis; d < x.dim(); ++d) dims.push_back(d);
    out.push_back(mean(x, dims, true));
    out.push_back(rsqrt(var(x, dims, true, 0) + eps));
  }
  return out;
});

BATON_ONNX_IMPORTER("MatMul", [](NodeContext& c) -> Outputs { return {matmul(c.input(0), c.input(1))}; });

BATON_ONNX_IMPORTER("Gemm", [](NodeContext& c) -> Outputs {
  Tensor a = c.input(0), b = c.input(1);
  if (a.dim() != 2 || b.dim() != 2) c.fail(str("takes matrices, got ", a.shape(), " and ", b.shape()));
  if (c.attr_int("transA", 0) != 0) a = a.t();
  const bool trans_b = c.attr_int("transB", 0) != 0;
  const double alpha = c.attr_float("alpha", 1.0), beta = c.attr_float("beta", 1.0);
  Tensor bias = c.has_input(2) ? c.input(2) : Tensor();
  // The common case is a linear layer: one product with its bias.
  if (alpha == 1.0 && beta == 1.0 && bias.defined() && bias.dim() == 1 && bias.shape()[0] == b.shape()[trans_b ? 0 : 1])
    return {linear(a, trans_b ? b : b.t(), bias)};
  Tensor y = matmul(a, trans_b ? b.t() : b);
  if (alpha != 1.0) y = y * alpha;
  if (bias.defined()) y = y + (beta == 1.0 ? bias : bias * beta);
  return {y};
});

// Dropout: inference (or a ratio of 0) passes x through with an all-true mask. The ratio is
// read only in training mode, so a fed ratio with inference leaves the graph as it is.
BATON_ONNX_IMPORTER("Dropout", [](NodeContext& c) -> Outputs {
  const Tensor& x = c.input(0);
  const bool training =
      c.opset < 12 ? (c.opset < 7 && c.attr_int("is_test", 0) == 0) : (c.has_input(2) && c.scalar_input(2) != 0);
  const double ratio = !training ? 0.0 : c.opset < 12 ? c.attr_float("ratio", 0.5) : (c.has_input(1) ? c.scalar_input(1) : 0.5);
  if (training && ratio > 0) {
    if (c.wants_output(1)) c.fail("the mask of training-mode dropout is not supported");
    return {dropout(x, ratio, true)};
  }
  return {x, full_like(x, true, DType::b8)};
});

BATON_ONNX_IMPORTER("NegativeLogLikelihoodLoss", [](NodeContext& c) -> Outputs {
  return {nll(c, c.input(0), c.input(1), c.has_input(2) ? c.input(2) : Tensor())};
});

BATON_ONNX_IMPORTER("SoftmaxCrossEntropyLoss", [](NodeContext& c) -> Outputs {
  Tensor log_prob = log_softmax(c.input(0), 1);
  return {nll(c, log_prob, c.input(1), c.has_input(2) ? c.input(2) : Tensor()), log_prob};
});

}  // namespace baton::onnx::detail
