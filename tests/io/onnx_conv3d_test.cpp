// ONNX 3-D Conv, ConvTranspose, MaxPool and AveragePool (composed from baton's 2-D ops over the depth
// slices) and dilated pooling (composed from strided slices per kernel tap), on hand-built
// models against reference loops in double: asymmetric pads, strides, dilations, groups,
// ceil_mode, count_include_pad both ways, a symbolic batch; and the clear failures.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "baton/baton.h"
#include "baton/onnx.h"
#include "io/onnx_model_builder.h"

namespace baton {
namespace {

using ::onnx::TensorProto;
using onnx_testing::add_int_attr;
using onnx_testing::ModelBuilder;

void set_ints(::onnx::NodeProto* n, const std::string& name, const std::vector<int64_t>& v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(::onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}

// Deterministic values in [-1, 1) with few ties.
std::vector<float> values(size_t count, uint32_t seed) {
  std::vector<float> v(count);
  for (size_t i = 0; i < count; ++i) {
    seed = seed * 1664525u + 1013904223u;
    v[i] = float(int((seed >> 8) % 2001) - 1000) / 1000.0f;
  }
  return v;
}

size_t numel(const std::vector<int64_t>& dims) {
  size_t n = 1;
  for (int64_t d : dims) n *= size_t(d);
  return n;
}

// The window of one spatial dim (ONNX's definitions, computed independently of the importer).
struct Axis {
  int64_t in, kernel, stride = 1, dilation = 1, pad_begin = 0, pad_end = 0;
  int64_t span() const { return (kernel - 1) * dilation + 1; }
  int64_t out(bool ceil_mode) const {
    const int64_t room = in + pad_begin + pad_end - span();
    int64_t o = (ceil_mode ? (room + stride - 1) / stride : room / stride) + 1;
    if (ceil_mode && (o - 1) * stride >= in + pad_begin) --o;
    return o;
  }
};

struct Spec {
  std::vector<int64_t> in;        // [N, C, spatial...]
  std::vector<int64_t> kernel, strides, dilations, pads;  // attributes (pads begin..., end...)
  std::vector<Axis> axes() const {
    const size_t n = in.size() - 2;
    std::vector<Axis> a(n);
    for (size_t i = 0; i < n; ++i) {
      a[i].in = in[2 + i], a[i].kernel = kernel[i];
      if (!strides.empty()) a[i].stride = strides[i];
      if (!dilations.empty()) a[i].dilation = dilations[i];
      if (!pads.empty()) a[i].pad_begin = pads[i], a[i].pad_end = pads[n + i];
    }
    return a;
  }
};

void set_window(::onnx::NodeProto* n, const Spec& s, bool kernel_attr) {
  if (kernel_attr) set_ints(n, "kernel_shape", s.kernel);
  if (!s.strides.empty()) set_ints(n, "strides", s.strides);
  if (!s.dilations.empty()) set_ints(n, "dilations", s.dilations);
  if (!s.pads.empty()) set_ints(n, "pads", s.pads);
}

// Calls f(out_index, in_positions per output element): iterates every output position of
// the 3-D window (1-D and 2-D specs are padded to 3-D by the caller's axes).
template <class F>
void for_each_output(const std::vector<Axis>& a, const std::vector<int64_t>& out, F f) {
  for (int64_t od = 0; od < out[0]; ++od)
    for (int64_t oh = 0; oh < out[1]; ++oh)
      for (int64_t ow = 0; ow < out[2]; ++ow) f(std::array<int64_t, 3>{od, oh, ow});
  (void)a;
}

// Spatial axes padded in front to 3 (size 1, kernel 1).
std::vector<Axis> three(std::vector<Axis> a) {
  while (a.size() < 3) a.insert(a.begin(), Axis{1, 1});
  return a;
}

// Conv in double: x [N,C,...], w [M,C/g,k...], bias [M].
std::vector<double> conv_reference(const Spec& s, int64_t m, int64_t groups, const std::vector<float>& x,
                                   const std::vector<float>& w, const std::vector<float>& bias,
                                   std::vector<int64_t>& out_dims) {
  const std::vector<Axis> a = three(s.axes());
  const int64_t n = s.in[0], c = s.in[1], cg = c / groups, mg = m / groups;
  std::vector<int64_t> out{a[0].out(false), a[1].out(false), a[2].out(false)};
  out_dims = {n, m};
  for (size_t i = 3 - (s.in.size() - 2); i < 3; ++i) out_dims.push_back(out[i]);
  std::vector<double> y;
  for (int64_t b = 0; b < n; ++b)
    for (int64_t oc = 0; oc < m; ++oc)
      for_each_output(a, out, [&](std::array<int64_t, 3> o) {
        double acc = bias.empty() ? 0.0 : bias[size_t(oc)];
        const int64_t g = oc / mg;
        for (int64_t ic = 0; ic < cg; ++ic)
          for (int64_t kd = 0; kd < a[0].kernel; ++kd)
            for (int64_t kh = 0; kh < a[1].kernel; ++kh)
              for (int64_t kw = 0; kw < a[2].kernel; ++kw) {
                const std::array<int64_t, 3> k{kd, kh, kw};
                std::array<int64_t, 3> p{};
                bool inside = true;
                for (size_t d = 0; d < 3; ++d) {
                  p[d] = o[d] * a[d].stride - a[d].pad_begin + k[d] * a[d].dilation;
                  inside = inside && p[d] >= 0 && p[d] < a[d].in;
                }
                if (!inside) continue;
                const size_t xi = size_t((((b * c + g * cg + ic) * a[0].in + p[0]) * a[1].in + p[1]) * a[2].in + p[2]);
                const size_t wi = size_t((((oc * cg + ic) * a[0].kernel + kd) * a[1].kernel + kh) * a[2].kernel + kw);
                acc += double(x[xi]) * double(w[wi]);
              }
        y.push_back(acc);
      });
  return y;
}

// MaxPool / AveragePool in double.
std::vector<double> pool_reference(const Spec& s, bool is_max, bool ceil_mode, bool include_pad,
                                   const std::vector<float>& x, std::vector<int64_t>& out_dims) {
  const std::vector<Axis> a = three(s.axes());
  std::vector<int64_t> out{a[0].out(ceil_mode), a[1].out(ceil_mode), a[2].out(ceil_mode)};
  out_dims = {s.in[0], s.in[1]};
  for (size_t i = 3 - (s.in.size() - 2); i < 3; ++i) out_dims.push_back(out[i]);
  std::vector<double> y;
  for (int64_t bc = 0; bc < s.in[0] * s.in[1]; ++bc)
    for_each_output(a, out, [&](std::array<int64_t, 3> o) {
      double best = -std::numeric_limits<double>::infinity(), total = 0, count = 0;
      for (int64_t kd = 0; kd < a[0].kernel; ++kd)
        for (int64_t kh = 0; kh < a[1].kernel; ++kh)
          for (int64_t kw = 0; kw < a[2].kernel; ++kw) {
            const std::array<int64_t, 3> k{kd, kh, kw};
            std::array<int64_t, 3> p{};
            bool inside = true, declared = true;  // in the input; in the input or its declared pads
            for (size_t d = 0; d < 3; ++d) {
              p[d] = o[d] * a[d].stride - a[d].pad_begin + k[d] * a[d].dilation;
              inside = inside && p[d] >= 0 && p[d] < a[d].in;
              declared = declared && p[d] >= -a[d].pad_begin && p[d] < a[d].in + a[d].pad_end;
            }
            if (include_pad ? declared : inside) ++count;
            if (!inside) continue;
            const double v = x[size_t(((bc * a[0].in + p[0]) * a[1].in + p[1]) * a[2].in + p[2])];
            best = std::max(best, v);
            total += v;
          }
      y.push_back(is_max ? best : total / count);
    });
  return y;
}

void expect_close(const Tensor& got, const std::vector<int64_t>& dims, const std::vector<double>& want,
                  double tol = 1e-5) {
  ASSERT_EQ(got.shape(), Shape(dims));
  const std::vector<float> g = got.contiguous().to_vector<float>();
  ASSERT_EQ(g.size(), want.size());
  for (size_t i = 0; i < g.size(); ++i) ASSERT_NEAR(g[i], want[i], tol) << "element " << i;
}

struct ConvCase {
  Spec s;
  int64_t m, groups;
  bool bias;
  std::string batch_param;  // a symbolic batch
};

void check_conv(const ConvCase& cc) {
  const Spec& s = cc.s;
  std::vector<int64_t> wdims{cc.m, s.in[1] / cc.groups};
  wdims.insert(wdims.end(), s.kernel.begin(), s.kernel.end());
  const std::vector<float> x = values(numel(s.in), 1), w = values(numel(wdims), 2),
                           bias = cc.bias ? values(size_t(cc.m), 3) : std::vector<float>{};
  ModelBuilder b;
  std::vector<int64_t> in_dims = s.in;
  if (!cc.batch_param.empty()) in_dims[0] = -1;
  b.input("x", TensorProto::FLOAT, in_dims, cc.batch_param);
  b.floats("w", wdims, w);
  std::vector<std::string> inputs{"x", "w"};
  if (cc.bias) b.floats("b", {cc.m}, bias), inputs.push_back("b");
  auto* n = b.node("Conv", inputs, {"y"});
  set_window(n, s, true);
  if (cc.groups != 1) add_int_attr(n, "group", cc.groups);
  b.output("y");
  std::vector<int64_t> out_dims;
  const std::vector<double> want = conv_reference(s, cc.m, cc.groups, x, w, bias, out_dims);
  expect_close(b.load().run({tensor(x, Shape(s.in))}).at(0), out_dims, want);
}

TEST(OnnxConv3d, AsymmetricPadsStridesDilationsGroupsBias) {
  check_conv({{{2, 4, 5, 6, 5}, {2, 3, 2}, {2, 1, 2}, {2, 1, 1}, {1, 0, 1, 0, 1, 1}}, 6, 2, true, ""});
}

TEST(OnnxConv3d, SymmetricPadsNoBias) {
  check_conv({{{1, 3, 4, 5, 6}, {3, 3, 3}, {1, 2, 1}, {}, {1, 1, 1, 1, 1, 1}}, 2, 1, false, ""});
}

TEST(OnnxConv3d, SymbolicBatch) {
  check_conv({{{3, 2, 4, 4, 4}, {2, 2, 2}, {2, 2, 2}, {1, 1, 2}, {}}, 3, 1, true, "N"});
}

TEST(OnnxConv3d, KernelDeeperThanInputFailsClearly) {
  ModelBuilder b;
  b.input("x", TensorProto::FLOAT, {1, 1, 2, 3, 3});
  b.floats("w", {1, 1, 3, 1, 1}, values(3, 4));
  b.node("Conv", {"x", "w"}, {"y"});
  b.output("y");
  try {
    b.load();
    FAIL() << "expected an error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("depth"), std::string::npos) << e.what();
  }
}

// ConvTranspose 3-D in double: x [N,C,D,H,W], w [C,M/g,kd,kh,kw]; full size (in - 1) *
// stride + (kernel - 1) * dilation + 1 + output_padding, cropped by the pads.
TEST(OnnxConvTranspose3d, StridesDilationsPadsOutputPaddingGroupsBias) {
  const std::vector<int64_t> in{2, 4, 3, 4, 3}, kernel{3, 2, 2}, strides{2, 3, 1}, dilations{2, 1, 2},
      pads{1, 0, 1, 2, 1, 0}, extra{1, 2, 0};
  const int64_t groups = 2, m = 6, mg = m / groups, cg = in[1] / groups;
  const std::vector<int64_t> wdims{in[1], mg, kernel[0], kernel[1], kernel[2]};
  const std::vector<float> x = values(numel(in), 7), w = values(numel(wdims), 8), bias = values(size_t(m), 9);
  std::array<int64_t, 3> full{}, out{};
  for (size_t d = 0; d < 3; ++d) {
    full[d] = (in[2 + d] - 1) * strides[d] + (kernel[d] - 1) * dilations[d] + 1 + extra[d];
    out[d] = full[d] - pads[d] - pads[3 + d];
  }
  std::vector<double> want(size_t(in[0] * m * out[0] * out[1] * out[2]), 0.0);
  for (int64_t b = 0; b < in[0]; ++b)
    for (int64_t oc = 0; oc < m; ++oc)
      for (int64_t o = 0; o < out[0] * out[1] * out[2]; ++o)
        want[size_t((b * m + oc) * out[0] * out[1] * out[2] + o)] = bias[size_t(oc)];
  for (int64_t b = 0; b < in[0]; ++b)
    for (int64_t ic = 0; ic < in[1]; ++ic)
      for (int64_t j = 0; j < mg; ++j)
        for (int64_t i0 = 0; i0 < in[2]; ++i0)
          for (int64_t i1 = 0; i1 < in[3]; ++i1)
            for (int64_t i2 = 0; i2 < in[4]; ++i2)
              for (int64_t k0 = 0; k0 < kernel[0]; ++k0)
                for (int64_t k1 = 0; k1 < kernel[1]; ++k1)
                  for (int64_t k2 = 0; k2 < kernel[2]; ++k2) {
                    const std::array<int64_t, 3> i{i0, i1, i2}, k{k0, k1, k2};
                    std::array<int64_t, 3> o{};
                    bool inside = true;
                    for (size_t d = 0; d < 3; ++d) {
                      o[d] = i[d] * strides[d] + k[d] * dilations[d] - pads[d];
                      inside = inside && o[d] >= 0 && o[d] < out[d];
                    }
                    if (!inside) continue;
                    const int64_t oc = (ic / cg) * mg + j;
                    const double xv = x[size_t((((b * in[1] + ic) * in[2] + i0) * in[3] + i1) * in[4] + i2)];
                    const double wv = w[size_t((((ic * mg + j) * kernel[0] + k0) * kernel[1] + k1) * kernel[2] + k2)];
                    want[size_t((((b * m + oc) * out[0] + o[0]) * out[1] + o[1]) * out[2] + o[2])] += xv * wv;
                  }
  ModelBuilder mb;
  mb.input("x", TensorProto::FLOAT, in);
  mb.floats("w", wdims, w);
  mb.floats("b", {m}, bias);
  auto* n = mb.node("ConvTranspose", {"x", "w", "b"}, {"y"});
  set_ints(n, "strides", strides);
  set_ints(n, "dilations", dilations);
  set_ints(n, "pads", pads);
  set_ints(n, "output_padding", extra);
  add_int_attr(n, "group", groups);
  mb.output("y");
  expect_close(mb.load().run({tensor(x, Shape(in))}).at(0), {in[0], m, out[0], out[1], out[2]}, want);
}

struct PoolCase {
  Spec s;
  bool is_max, ceil_mode = false, include_pad = false;
  int64_t opset = 17;
};

void check_pool(const PoolCase& pc) {
  const Spec& s = pc.s;
  const std::vector<float> x = values(numel(s.in), 5);
  ModelBuilder b(pc.opset);
  b.input("x", TensorProto::FLOAT, s.in);
  auto* n = b.node(pc.is_max ? "MaxPool" : "AveragePool", {"x"}, {"y"});
  set_window(n, s, true);
  if (pc.ceil_mode) add_int_attr(n, "ceil_mode", 1);
  if (pc.include_pad) add_int_attr(n, "count_include_pad", 1);
  b.output("y");
  std::vector<int64_t> out_dims;
  const std::vector<double> want = pool_reference(s, pc.is_max, pc.ceil_mode, pc.include_pad, x, out_dims);
  expect_close(b.load().run({tensor(x, Shape(s.in))}).at(0), out_dims, want);
}

const Spec kPool3d{{2, 3, 5, 6, 7}, {2, 3, 2}, {2, 2, 3}, {}, {1, 1, 0, 0, 1, 1}};

TEST(OnnxPool3d, MaxPool) {
  check_pool({{{1, 2, 4, 5, 6}, {2, 2, 3}, {}, {}, {}}, true});
  check_pool({kPool3d, true});
  check_pool({kPool3d, true, true});
}

TEST(OnnxPool3d, AveragePoolCountsPaddingBothWaysWithCeilMode) {
  check_pool({{{1, 2, 4, 5, 6}, {2, 2, 3}, {}, {}, {}}, false});
  for (bool ceil_mode : {false, true})
    for (bool include_pad : {false, true}) {
      SCOPED_TRACE(str("ceil_mode ", ceil_mode, " count_include_pad ", include_pad));
      check_pool({kPool3d, false, ceil_mode, include_pad});
      check_pool({{{1, 2, 6, 5, 4}, {3, 2, 2}, {2, 1, 2}, {}, {1, 1, 1, 1, 0, 1}}, false, ceil_mode, include_pad});
    }
}

TEST(OnnxPool, DilatedMaxPoolAnyRank) {
  check_pool({{{2, 3, 9}, {3}, {2}, {2}, {1, 2}}, true});
  check_pool({{{1, 2, 7, 8}, {2, 3}, {1, 2}, {2, 2}, {1, 0, 1, 2}}, true});
  check_pool({{{1, 2, 7, 8}, {2, 2}, {2, 2}, {3, 2}, {1, 1, 1, 1}}, true, true});
  check_pool({{{1, 2, 6, 5, 7}, {2, 2, 3}, {1, 2, 2}, {2, 1, 2}, {1, 0, 1, 0, 1, 1}}, true});
}

// dilations on AveragePool came with opset 19; baton reads opsets up to 18 and honours them.
TEST(OnnxPool, DilatedAveragePool) {
  for (bool include_pad : {false, true}) {
    check_pool({{{1, 2, 7, 8}, {2, 3}, {1, 2}, {2, 2}, {1, 0, 1, 2}}, false, false, include_pad, 18});
    check_pool({{{1, 2, 6, 5, 7}, {2, 2, 2}, {2, 1, 2}, {2, 1, 2}, {1, 1, 1, 0, 1, 1}}, false, true, include_pad, 18});
  }
}

// 3-D Indices stay unsupported; storage_order, which only orders the Indices (1-D and 2-D:
// tests/io/onnx_vision_test.cpp), leaves a MaxPool without them as it is.
TEST(OnnxPool, MaxPool3dIndicesStayUnsupportedAndStorageOrderChangesNoValues) {
  ModelBuilder b;
  b.input("x", TensorProto::FLOAT, {1, 1, 4, 4, 4});
  auto* n = b.node("MaxPool", {"x"}, {"y", "i"});
  set_ints(n, "kernel_shape", {2, 2, 2});
  b.output("y");
  b.output("i");
  EXPECT_THROW(b.load(), GraphError);
  ModelBuilder b2;
  b2.input("x", TensorProto::FLOAT, {1, 1, 4, 4});
  auto* n2 = b2.node("MaxPool", {"x"}, {"y"});
  set_ints(n2, "kernel_shape", {2, 2});
  set_ints(n2, "strides", {2, 2});
  add_int_attr(n2, "storage_order", 1);
  b2.output("y");
  const Tensor x = tensor<float>({{{{1, 5, 2, 0}, {3, 4, 8, 1}, {0, 0, 1, 2}, {7, 1, 3, 9}}}});
  EXPECT_EQ(b2.load().run({x}).at(0).to_vector<float>(), (std::vector<float>{5, 8, 7, 9}));
}

}  // namespace
}  // namespace baton
