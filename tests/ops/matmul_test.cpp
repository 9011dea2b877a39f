// matmul and linear: values against naive double loops, gradients, errors, and the
// oneDNN implementations picked for typical shapes.
#include <limits>

#include "harness/op_harness.h"
#include "ops/epilogue_activations.h"
#include "dispatch/registry.h"
#include "kernels/cpu/onednn.h"

namespace baton::testing {
namespace {

// Naive numpy-semantics matmul in double.
Tensor ref_matmul(Tensor a, Tensor b) {
  const bool va = a.dim() == 1, vb = b.dim() == 1;
  if (va) a = a.unsqueeze(0);
  if (vb) b = b.unsqueeze(1);
  Shape ba(std::span<const int64_t>(a.shape().data(), a.shape().size() - 2));
  Shape bb(std::span<const int64_t>(b.shape().data(), b.shape().size() - 2));
  Shape batch = (zeros(ba, f64) + zeros(bb, f64)).shape();
  const int64_t M = a.size(-2), K = a.size(-1), N = b.size(-1);
  Shape sa = batch, sb = batch, so = batch;
  sa.push_back(M); sa.push_back(K);
  sb.push_back(K); sb.push_back(N);
  so.push_back(M); so.push_back(N);
  auto av = a.expand(sa).contiguous().to_vector<double>();
  auto bv = b.expand(sb).contiguous().to_vector<double>();
  std::vector<double> out(size_t(so.numel()), 0.0);
  for (int64_t p = 0; p < batch.numel(); ++p)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double s = 0;
        for (int64_t k = 0; k < K; ++k) s += av[size_t((p * M + i) * K + k)] * bv[size_t((p * K + k) * N + j)];
        out[size_t((p * M + i) * N + j)] = s;
      }
  Tensor r = tensor(out, so);
  if (vb) r = r.squeeze(-1);
  if (va) r = r.squeeze(vb ? -1 : -2);
  return r;
}

// prep turns the stored inputs into matmul's operands (e.g. transposed views).
using Prep = std::function<Inputs(const Inputs&)>;
OpCase mm_case(std::string name, Shape a, Shape b, Prep prep = [](const Inputs& i) { return i; }) {
  return OpCase{.name = "linalg.matmul/" + name,
                .make_inputs = [a, b] { return Inputs{uniform(a, -1, 1, 1), uniform(b, -1, 1, 2)}; },
                .fn = [prep](const Inputs& i) { Inputs o = prep(i); return matmul(o[0], o[1]); },
                .reference = [prep](const Inputs& i) { Inputs o = prep(i); return ref_matmul(o[0], o[1]); }};
}

Tensor ref_linear(const Inputs& i) {
  Tensor y = ref_matmul(i[0], i[1].t());
  return i.size() >= 3 ? y + i[2] : y;
}

OpCase linear_case(std::string name, Shape x, bool bias) {
  return OpCase{.name = "nn.linear/" + name,
                .make_inputs =
                    [x, bias] {
                      Inputs in{uniform(x, -1, 1, 1), uniform({4, x.back()}, -1, 1, 2)};
                      if (bias) in.push_back(uniform({4}, -1, 1, 3));
                      return in;
                    },
                .fn = [](const Inputs& i) { return linear(i[0], i[1], i.size() == 3 ? i[2] : Tensor{}); },
                .reference = ref_linear};
}

// linear_fused (made by the epilogue-fusion pass): relu(x @ w^T + b), f64 loops and f32
// oneDNN post-ops against the same reference.
OpCase linear_fused_case(std::string name, Shape x, bool bias) {
  OpCase c = linear_case(name, x, bias);
  c.name = "nn.linear_fused/" + name;
  c.fn = [](const Inputs& i) {
    return ops::call_many(*ops::find_op("linear_fused"), i, {{"activation", std::string("relu")}},
                          SourceLoc::current())[0];
  };
  c.reference = [](const Inputs& i) { return relu(ref_linear(i)); };
  c.check_grad = false;
  return c;
}

// linear_fused with a residual: act(x @ w^T + b + r). transposed: r is handed as a
// transposed view (the kernel reads any strides).
OpCase linear_residual_case(const EpilogueActivation& act, bool transposed = false) {
  OpCase c = linear_case("", {2, 3, 5}, true);
  c.name = "nn.linear_fused/residual_" + act.name + (transposed ? "_transposed" : "");
  c.make_inputs = [transposed] {
    Inputs in{uniform({3, 5}, -1, 1, 1), uniform({4, 5}, -1, 1, 2), uniform({4}, -1, 1, 3)};
    in.push_back(uniform(transposed ? Shape{4, 3} : Shape{3, 4}, -1, 1, 4));
    return in;
  };
  auto operands = [transposed](const Inputs& i) {
    return Inputs{i[0], i[1], i[2], transposed ? i[3].t() : i[3]};
  };
  c.fn = [=](const Inputs& i) {
    return ops::call_many(*ops::find_op("linear_fused"), operands(i), act.attrs, SourceLoc::current())[0];
  };
  c.reference = [=](const Inputs& i) {
    const Inputs o = operands(i);
    return act.op(ref_linear(o) + o[3]);
  };
  c.check_grad = false;
  return c;
}

// linear_fused with each further activation, without and with a residual.
BATON_OP_CASES {
  std::vector<OpCase> cases;
  for (const EpilogueActivation& a : epilogue_activations()) {
    OpCase plain = linear_fused_case(a.name, {2, 3, 5}, true);
    plain.fn = [a](const Inputs& i) {
      return ops::call_many(*ops::find_op("linear_fused"), i, a.attrs, SourceLoc::current())[0];
    };
    plain.reference = [a](const Inputs& i) { return a.op(ref_linear(i)); };
    cases.push_back(plain);
    cases.push_back(linear_residual_case(a));
  }
  cases.push_back(linear_residual_case({"none", {{"activation", std::string("none")}}, [](const Tensor& y) {
                                          return y;
                                        }}, true));
  return cases;
}

BATON_OP_CASES {
  return {
      linear_fused_case("bias", {3, 5}, true),
      linear_fused_case("batched_no_bias", {2, 3, 5}, false),
      mm_case("2d", {3, 4}, {4, 5}),
      mm_case("vec_mat", {4}, {4, 5}),
      mm_case("mat_vec", {3, 4}, {4}),
      mm_case("vec_vec", {4}, {4}),
      mm_case("batched", {2, 3, 4}, {2, 4, 5}),
      mm_case("broadcast_batch", {2, 1, 3, 4}, {3, 4, 2}),
      mm_case("matrix_times_batch", {3, 4}, {2, 4, 5}),
      mm_case("transposed_operands", {4, 3}, {5, 4},
              [](const Inputs& i) { return Inputs{i[0].t(), i[1].t()}; }),
      mm_case("batched_transposed", {2, 4, 3}, {2, 4, 5},
              [](const Inputs& i) { return Inputs{i[0].transpose(-1, -2), i[1]}; }),
      linear_case("bias", {3, 5}, true),
      linear_case("no_bias", {3, 5}, false),
      linear_case("batch_dims", {2, 3, 5}, true),
      linear_case("vector", {5}, true),
  };
}

TEST(Matmul, ShapeErrorsNameOpShapesAndLine) {
  Tensor a = zeros({2, 3}), b = zeros({4, 5});
  int line = __LINE__ + 1;
  EXPECT_THROWS_WITH(ShapeError, matmul(a, b), "[matmul]", "[2,3]", "[4,5]",
                     "matmul_test.cpp:" + std::to_string(line));
  EXPECT_THROWS_WITH(ShapeError, matmul(zeros({3}), zeros({4})), "[matmul]", "[3]", "[4]");
  EXPECT_THROWS_WITH(ShapeError, matmul(zeros({2, 2, 3}), zeros({3, 3, 4})), "[matmul]", "[2,2,3]");
  EXPECT_THROWS_WITH(ShapeError, linear(zeros({2, 3}), zeros({4, 5})), "[linear]", "[2,3]", "[4,5]",
                     "matmul_test.cpp:");
  EXPECT_THROWS_WITH(ShapeError, linear(zeros({2, 5}), zeros({4, 5}), zeros({3})), "[linear]", "[3]");
}

// The fused steps' attributes and residual, checked as any op's: the op, the inputs and
// the caller's line.
TEST(Matmul, FusedStepErrorsNameOpShapesAndLine) {
  auto fused = [](const Inputs& in, const ops::Attrs& attrs, SourceLoc loc) {
    return ops::call_many(*ops::find_op("linear_fused"), in, attrs, loc);
  };
  const Inputs in{zeros({3, 5}), zeros({4, 5}), zeros({4})};
  const int line = __LINE__ + 1;
  EXPECT_THROWS_WITH(ValueError, fused(in, {{"activation", std::string("swish")}}, SourceLoc::current()),
                     "[linear_fused]", "unknown activation 'swish'", "f32[3,5]",
                     "matmul_test.cpp:" + std::to_string(line));
  EXPECT_THROWS_WITH(ValueError, fused(in, {{"activation", std::string("leaky_relu")}}, SourceLoc::current()),
                     "[linear_fused]", "activation 'leaky_relu' needs attribute 'negative_slope'");
  EXPECT_THROWS_WITH(ValueError,
                     fused(in, {{"activation", std::string("tanh")}, {"alpha", 1.0}}, SourceLoc::current()),
                     "activation 'tanh' takes no attribute 'alpha'");
  EXPECT_THROWS_WITH(ShapeError,
                     fused({zeros({3, 5}), zeros({4, 5}), zeros({4}), zeros({4, 3})},
                           {{"activation", std::string("none")}}, SourceLoc::current()),
                     "[linear_fused]", "the residual must have the output's shape [3,4]", "f32[4,3]");
  const Inputs conv_in{zeros({1, 2, 4, 4}), zeros({2, 2, 3, 3}), zeros({2})};
  const ops::Attrs conv_attrs{{"stride", std::vector<int64_t>{1, 1}}, {"padding", std::vector<int64_t>{1, 1}},
                              {"dilation", std::vector<int64_t>{1, 1}}, {"groups", int64_t(1)},
                              {"activation", std::string("clamp")}, {"min", 0.0}};
  EXPECT_THROWS_WITH(ValueError,
                     ops::call_many(*ops::find_op("conv2d_fused"), conv_in, conv_attrs, SourceLoc::current()),
                     "[conv2d_fused]", "activation 'clamp' needs attribute 'max'");
}

TEST(Matmul, LargeF32AgreesWithF64) {
  Tensor a = uniform({67, 130}), b = uniform({130, 33}, -1, 1, 5);
  Tensor y = matmul(a.to(f32), b.to(f32));
  EXPECT_ALL_CLOSE(y, matmul(a, b), 1e-4, 1e-4);
  Tensor yt = matmul(b.to(f32).t(), a.to(f32).t());  // strided operands, no copies
  EXPECT_ALL_CLOSE(yt, matmul(a, b).t(), 1e-4, 1e-4);
}

// Views whose size-1 dims carry odd strides (a stepped slice of a column, a transposed
// column, an unsqueezed batch dim of a slice): oneDNN used to read a [5,1] view with
// strides [1,2] as a column-major matrix of leading dimension 2 and fail to execute.
TEST(Matmul, F32ViewsWithOddStridesOnSizeOneDims) {
  constexpr int64_t kToEnd = std::numeric_limits<int64_t>::max();
  for (int64_t n : {2, 5, 17}) {
    Tensor x = uniform({n, 1}, -1, 1, uint64_t(n));
    Tensor column = slice(x.to(f32), 1, -1, kToEnd, 2);  // [n,1], strides [1,2]
    Tensor row = x.to(f32).t();                           // [1,n], strides [1,1]
    EXPECT_ALL_CLOSE(matmul(column, row), matmul(x, x.t()), 1e-6, 1e-6) << "n " << n;
    EXPECT_ALL_CLOSE(matmul(row, column), matmul(x.t(), x), 1e-5, 1e-5) << "n " << n;
    Tensor batched = slice(uniform({3, 2, n}, -1, 1, 7), 0, 1, 2);  // [1,2,n], batch stride 2n
    Tensor rows = slice(batched.to(f32), 1, 1, 2);                    // [1,1,n], odd unit strides
    EXPECT_ALL_CLOSE(matmul(rows, column), matmul(slice(batched, 1, 1, 2), x), 1e-5, 1e-5) << "n " << n;
  }
}

// A stepped slice of a batch dim leaves batch strides that do not nest ([2,2,2,3] with
// strides [18,12,3,1]: dim 1 reaches past dim 0's stride); oneDNN could not describe it.
TEST(Matmul, F32BatchDimsWithStridesThatDoNotNest) {
  constexpr int64_t kToEnd = std::numeric_limits<int64_t>::max();
  Tensor x = uniform({2, 3, 2, 3});
  Tensor sliced = slice(x.to(f32), 1, 0, kToEnd, 2);
  ASSERT_EQ(sliced.strides(), (Shape{18, 12, 3, 1}));
  Tensor expected = matmul(slice(x, 1, 0, kToEnd, 2), slice(x, 1, 0, kToEnd, 2).transpose(-2, -1));
  EXPECT_ALL_CLOSE(matmul(sliced, sliced.transpose(-2, -1)), expected, 1e-5, 1e-5);
}

TEST(Matmul, TypicalShapesUseOptimizedKernels) {
  kernels::onednn::clear_reference_impls();
  for (int64_t n : {64, 1024}) (void)matmul(ones({n, n}), ones({n, n}));
  (void)matmul(ones({64, 128}), ones({10, 128}).t());
  (void)matmul(ones({8, 16, 32}), ones({8, 32, 16}));
  (void)linear(ones({64, 1600}), ones({128, 1600}), ones({128}));
  (void)linear(ones({64, 784}), ones({512, 784}), ones({512}));
  std::string refs;
  for (auto& r : kernels::onednn::reference_impls()) refs += r + "\n";
  EXPECT_EQ(refs, "");
}

}  // namespace
}  // namespace baton::testing
