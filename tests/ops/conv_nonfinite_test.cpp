// Plans put infinities and NaNs where eager does, whichever convolution kernels they run.
// Kernels differ at the padding (direct ones skip it, im2col ones multiply its zeros) and
// over Winograd's tiles (a transform spreads an infinity as NaN), so each timed choice that
// computes unlike eager's kernel has a way around it for operands that are not finite.
// Here every such choice is forced in turn (ImplementationOverride, WinogradOverride), one
// infinity or NaN goes into the input, the weights or the output gradient of a convolution
// between two others (its activations then in the plan's layouts), and the plan's output
// and both gradients must hold eager's values, infinities and NaNs.
#include <limits>
#include <optional>

#include "harness/op_harness.h"
#include "kernels/cpu/conv_winograd.h"
#include "kernels/cpu/onednn.h"

namespace baton::testing {
namespace {

struct Geometry {
  int64_t c, o, k, padding, stride;
};

enum class Injected { Input, Weights, OutputGradient };

struct Case {
  Geometry g;
  Injected where;
  float value;
};

std::string describe(const Case& k, const char* implementation, int winograd) {
  return str("c ", k.g.c, " o ", k.g.o, " k ", k.g.k, " padding ", k.g.padding, " stride ", k.g.stride,
             ", implementation '", implementation, "', winograd ", winograd, ", ", k.value, " in ",
             k.where == Injected::Input ? "x" : k.where == Injected::Weights ? "w" : "dy");
}

// The plan's output and gradients against eager's for one case.
void check(const Case& k) {
  const Geometry& g = k.g;
  const int64_t n = 2, side = 10, out_side = (side + 2 * g.padding - g.k) / g.stride + 1;
  Tensor x = uniform({n, g.c, side, side}, -1, 1, 3).to(f32), w = uniform({g.o, g.c, g.k, g.k}, -1, 1, 4).to(f32);
  const Tensor first = uniform({g.c, g.c, 3, 3}, -1, 1, 5).to(f32), last = uniform({4, g.o, 1, 1}, -1, 1, 6).to(f32);
  Tensor scale = ones({n, 4, out_side, out_side}, f32);
  (k.where == Injected::Input ? x : k.where == Injected::Weights ? w : scale).data<float>()[0] = k.value;
  const Conv2dOptions same{.padding = {1, 1}};
  const Conv2dOptions middle{.stride = {g.stride, g.stride}, .padding = {g.padding, g.padding}};
  auto net = [&](const Tensor& in, const Tensor& weights) {
    return conv2d(conv2d(conv2d(in, first, {}, same), weights, {}, middle), last);
  };
  Tensor xe = x.clone().requires_grad_(), we = w.clone().requires_grad_();
  const Tensor ye = net(xe, we);
  (ye * scale).sum().backward();
  Graph graph("nonfinite");
  Tensor xp = graph.placeholder(f32, {n, g.c, side, side}, "x"), wp = graph.placeholder(f32, {g.o, g.c, g.k, g.k}, "w");
  Tensor sp = graph.placeholder(f32, {n, 4, out_side, out_side}, "scale");
  const Tensor yp = net(xp, wp);
  const std::vector<Tensor> grads = grad((yp * sp).sum(), {xp, wp});
  const std::vector<Tensor> got =
      Session(graph, {.level = OptLevel::O2}).run({yp, grads[0], grads[1]}, {{xp, x}, {wp, w}, {sp, scale}});
  EXPECT_ALL_CLOSE(got[0], ye, 1e-3, 1e-3) << "output";
  EXPECT_ALL_CLOSE(got[1], xe.grad(), 1e-3, 1e-3) << "input gradient";
  EXPECT_ALL_CLOSE(got[2], we.grad(), 1e-3, 1e-3) << "weight gradient";
}

TEST(ConvNonFinite, PlansHoldEagersValuesWhicheverKernelsTheyRun) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const Geometry geometries[] = {{3, 8, 3, 1, 1},  {8, 16, 3, 1, 1}, {16, 16, 3, 1, 1},
                                 {8, 8, 5, 2, 1},  {16, 32, 3, 1, 2}, {32, 32, 3, 0, 1}};
  // "": the timed choice; the others name oneDNN implementations ("gemm" is im2col).
  const char* implementations[] = {"", "gemm", "jit:avx512_core", "jit:avx2", "brgconv"};
  for (const Geometry& g : geometries)
    for (const char* implementation : implementations)
      for (int winograd : {-1, 0, 1})  // measured, refused, forced
        for (Injected where : {Injected::Input, Injected::Weights, Injected::OutputGradient})
          for (float value : {inf, nan}) {
            const Case k{g, where, value};
            SCOPED_TRACE(describe(k, implementation, winograd));
            std::optional<kernels::onednn::ImplementationOverride> forced_implementation;
            if (*implementation) forced_implementation.emplace(implementation);
            std::optional<kernels::WinogradOverride> forced_winograd;
            if (winograd >= 0) forced_winograd.emplace(winograd == 1);
            check(k);
          }
}

}  // namespace
}  // namespace baton::testing
