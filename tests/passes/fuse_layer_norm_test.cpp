// The layer-norm pass: a layer normalization written out as sums and element-wise ops (as
// ONNX models exported below opset 17 hold it) becomes one layer_norm. Values are compared
// within a tolerance (expect_close_values): layer_norm keeps the mean and variance in
// double, the written-out chain rounds each of its steps to f32; on values in [-2, 2)
// over rows of 64 the two differ by a few units in f32's last place (relative 1e-6), and
// 1e-5 leaves room for the chain's own rounding.
#include "passes/pass_testing.h"

namespace baton::passes::testing {
namespace {

const Tensor kCount64 = scalar_tensor(64.0f);
const Tensor kTwo = scalar_tensor(2.0f);
const Tensor kEps = scalar_tensor(1e-5f);

// ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div, then the affine: PyTorch's export of
// nn.LayerNorm at opset 13, as baton imports it (ReduceMean: a sum divided by the count).
constexpr const char* kWrittenOut =
    "graph @g(%x: f32[8,64], %n: f32[], %two: f32[], %eps: f32[], %gamma: f32[64], %beta: f32[64]) {\n"
    "  %0 = sum(%x) {dims=[1], keepdim=1} : f32[8,1]   # m.cpp:1\n"
    "  %1 = div(%0, %n) : f32[8,1]   # m.cpp:1\n"
    "  %2 = sub(%x, %1) : f32[8,64]   # m.cpp:2\n"
    "  %3 = pow(%2, %two) : f32[8,64]   # m.cpp:3\n"
    "  %4 = sum(%3) {dims=[1], keepdim=1} : f32[8,1]   # m.cpp:4\n"
    "  %5 = div(%4, %n) : f32[8,1]   # m.cpp:4\n"
    "  %6 = add(%5, %eps) : f32[8,1]   # m.cpp:5\n"
    "  %7 = sqrt(%6) : f32[8,1]   # m.cpp:6\n"
    "  %8 = div(%2, %7) : f32[8,64]   # m.cpp:7\n"
    "  %9 = mul(%8, %gamma) : f32[8,64]   # m.cpp:8\n"
    "  %10 = add(%9, %beta) : f32[8,64]   # m.cpp:9\n"
    "  return %10\n"
    "}\n";

// text with every `from` replaced by `to`.
std::string replaced(std::string text, const std::string& from, const std::string& to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
  return text;
}

std::map<std::string, Tensor> written_out_constants() {
  return {{"n", kCount64}, {"two", kTwo}, {"eps", kEps}};
}

TEST(PassFuseLayerNorm, ALayerNormWrittenOutAsONNXExportsItBecomesOneNode) {
  PassCase c(kWrittenOut, written_out_constants());
  Effect e = c.run_pass("fuse_layer_norm");
  EXPECT_EQ(text_of(c.g),
            "graph @g(%x: f32[8,64], %n: f32[], %two: f32[], %eps: f32[], %gamma: f32[64], %beta: f32[64]) {\n"
            "  %0, %1, %2 = layer_norm(%x) {axes=1, eps=9.999999747378752e-06} : f32[8,64], f32[8,1], f32[8,1] "
            "# m.cpp:7\n"
            "  %3 = mul(%0, %gamma) : f32[8,64] # m.cpp:8\n"
            "  %4 = add(%3, %beta) : f32[8,64] # m.cpp:9\n"
            "  return %4\n"
            "}\n");
  EXPECT_EQ(details(e),
            "fused %0 = sum(%x) (m.cpp:1), %1 = div(%0, %n) (m.cpp:1), %2 = sub(%x, %1) (m.cpp:2), "
            "%3 = pow(%2, %two) (m.cpp:3), %4 = sum(%3) (m.cpp:4), %5 = div(%4, %n) (m.cpp:4), "
            "%6 = add(%5, %eps) (m.cpp:5), %7 = sqrt(%6) (m.cpp:6), %8 = div(%2, %7) (m.cpp:7) "
            "into %8 = layer_norm(%x) {axes=1, eps=1e-05}\n");
  EXPECT_EQ(c.g.nodes().front()->fused_from, "sum + div + sub + pow + sum + div + add + sqrt + div");
  c.expect_close_values(1e-5, 1e-5);
}

// The other spellings: the square as d * d, the scale as rsqrt(eps + v) multiplied on
// either side, over the last two dims, in f64.
TEST(PassFuseLayerNorm, TheSquareAsAProductAndTheScaleAsRsqrtOverTwoDims) {
  for (const char* scale : {"mul(%2, %7)", "mul(%7, %2)"}) {
    PassCase c(str("graph @g(%x: f64[3,4,16], %n: f64[], %eps: f64[]) {\n"
                   "  %0 = sum(%x) {dims=[1,2], keepdim=1} : f64[3,1,1]   # m.cpp:1\n"
                   "  %1 = div(%0, %n) : f64[3,1,1]   # m.cpp:1\n"
                   "  %2 = sub(%x, %1) : f64[3,4,16]   # m.cpp:2\n"
                   "  %3 = mul(%2, %2) : f64[3,4,16]   # m.cpp:3\n"
                   "  %4 = sum(%3) {dims=[1,2], keepdim=1} : f64[3,1,1]   # m.cpp:4\n"
                   "  %5 = div(%4, %n) : f64[3,1,1]   # m.cpp:4\n"
                   "  %6 = add(%eps, %5) : f64[3,1,1]   # m.cpp:5\n"
                   "  %7 = rsqrt(%6) : f64[3,1,1]   # m.cpp:6\n"
                   "  %8 = ",
                   scale,
                   " : f64[3,4,16]   # m.cpp:7\n"
                   "  return %8\n"
                   "}\n"),
               {{"n", scalar_tensor(64.0)}, {"eps", scalar_tensor(1e-6)}});
    c.run_pass("fuse_layer_norm");
    EXPECT_EQ(text_of(c.g),
              "graph @g(%x: f64[3,4,16], %n: f64[], %eps: f64[]) {\n"
              "  %0, %1, %2 = layer_norm(%x) {axes=2, eps=1e-06} : f64[3,4,16], f64[3,1,1], f64[3,1,1] # m.cpp:7\n"
              "  return %0\n"
              "}\n")
        << scale;
    c.expect_close_values(1e-12, 1e-12);  // both in double: rounding of the last steps alone
  }
}

// Each of these differs from a layer norm in one place (or lets something else see a piece
// of it); the pass leaves them as they are.
TEST(PassFuseLayerNorm, ChainsThatAreNotALayerNormStay) {
  const std::string base = kWrittenOut;
  const std::vector<std::pair<std::string, std::map<std::string, Tensor>>> cases = {
      // divided by 32, not by the 64 elements summed
      {base, {{"n", scalar_tensor(32.0f)}, {"two", kTwo}, {"eps", kEps}}},
      // cubed, not squared
      {base, {{"n", kCount64}, {"two", scalar_tensor(3.0f)}, {"eps", kEps}}},
      // epsilon fed at each run, not fixed
      {base, {{"n", kCount64}, {"two", kTwo}}},
      // the deviation fetched as well
      {replaced(base, "return %10", "return %10, %2"), written_out_constants()},
      // the variance read by another node
      {replaced(replaced(base, "return %10", "return %10, %11"), "  return",
               "  %11 = mul(%5, %n) : f32[8,1]   # m.cpp:10\n  return"),
       written_out_constants()},
      // the deviation from another tensor's mean
      {replaced(base, "%2 = sub(%x, %1)", "%2 = sub(%gamma, %1)"), written_out_constants()},
  };
  for (size_t k = 0; k < cases.size(); ++k) {
    PassCase c(cases[k].first, cases[k].second);
    const std::string before = text_of(c.g);
    Effect e = c.run_pass("fuse_layer_norm");
    EXPECT_EQ(text_of(c.g), before) << "case " << k;
    EXPECT_TRUE(e.details.empty()) << "case " << k;
  }
}

// A sum over a leading dim, or one that drops the dim, is no layer norm either.
TEST(PassFuseLayerNorm, SumsOverOtherDimsStay) {
  PassCase c(
      "graph @g(%x: f32[64,8], %n: f32[], %two: f32[], %eps: f32[]) {\n"
      "  %0 = sum(%x) {dims=[0], keepdim=1} : f32[1,8]   # m.cpp:1\n"
      "  %1 = div(%0, %n) : f32[1,8]   # m.cpp:1\n"
      "  %2 = sub(%x, %1) : f32[64,8]   # m.cpp:2\n"
      "  %3 = pow(%2, %two) : f32[64,8]   # m.cpp:3\n"
      "  %4 = sum(%3) {dims=[0], keepdim=1} : f32[1,8]   # m.cpp:4\n"
      "  %5 = div(%4, %n) : f32[1,8]   # m.cpp:4\n"
      "  %6 = add(%5, %eps) : f32[1,8]   # m.cpp:5\n"
      "  %7 = sqrt(%6) : f32[1,8]   # m.cpp:6\n"
      "  %8 = div(%2, %7) : f32[64,8]   # m.cpp:7\n"
      "  return %8\n"
      "}\n",
      written_out_constants());
  const std::string before = text_of(c.g);
  c.run_pass("fuse_layer_norm");
  EXPECT_EQ(text_of(c.g), before);
}

// At O2 the whole chain, affine included, runs as two steps: layer_norm and one
// element-wise kernel for the affine; a symbolic batch keeps the count fixed.
TEST(PassFuseLayerNorm, AtO2TheChainAndItsAffineAreTwoSteps) {
  PassCase c(replaced(kWrittenOut, "[8,", "[batch,"), written_out_constants());
  c.optimize(Level::O2);
  std::vector<std::string> ops;
  for (const auto& n : c.g.nodes()) ops.push_back(n->op_name());
  EXPECT_EQ(ops, (std::vector<std::string>{"layer_norm", "fused_elementwise"}));
  c.expect_close_values(1e-5, 1e-5);
}

}  // namespace
}  // namespace baton::passes::testing
