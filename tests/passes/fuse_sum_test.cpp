// The reduction-fusion pass: an element-wise group that only a sum reads becomes one
// fused_elementwise_sum; one that other nodes read too (or that is fetched), one
// fused_elementwise_and_sum. Values are compared exactly (expect_same_values): the fused
// kernels compute each element with the same element functions and sum them in sum's
// own order (tests/ops/fused_elementwise_sum_test.cpp and fused_elementwise_test.cpp check
// every path of the kernels bit for bit). Groups too small, columns too narrow, dims not
// adjacent stay as they are.
#include "baton/nn.h"
#include "baton/optim.h"
#include "passes/pass_testing.h"

namespace baton::passes::testing {
namespace {

// A squared error summed per row (the last dim): sub and mul, then the sum, one kernel.
TEST(PassFuseSum, ASquaredErrorSummedOverRowsBecomesOneNode) {
  PassCase c(
      "graph @g(%y: f32[64,256], %t: f32[64,256]) {\n"
      "  %0 = sub(%y, %t) : f32[64,256]   # m.cpp:1\n"
      "  %1 = mul(%0, %0) : f32[64,256]   # m.cpp:2\n"
      "  %2 = sum(%1) {dims=[1], keepdim=0} : f32[64]   # m.cpp:3\n"
      "  return %2\n"
      "}\n");
  c.run_pass("fuse_elementwise");
  Effect e = c.run_pass("fuse_sum");
  EXPECT_EQ(text_of(c.g),
            "graph @g(%y: f32[64,256], %t: f32[64,256]) {\n"
            "  %0 = fused_elementwise_sum(%y, %t) {program=\"r0=sub(in0,in1); r1=mul(r0,r0)\", dims=[1], keepdim=0} "
            ": f32[64] # m.cpp:3\n"
            "  return %0\n"
            "}\n");
  EXPECT_EQ(details(e),
            "fused %0 = fused_elementwise(%y, %t) (m.cpp:2) into %1 = sum(%0) (m.cpp:3)\n");
  EXPECT_EQ(c.g.nodes().front()->fused_from, "sub + mul + sum");
  c.expect_same_values();
}

// A bias gradient: the relu's gradient summed over the batch (the leading dim), 512 wide.
TEST(PassFuseSum, AReluGradientSummedOverTheBatchBecomesOneNode) {
  PassCase c(
      "graph @g(%g: f32[64,512], %r: f32[64,512]) {\n"
      "  %0 = relu_backward(%g, %r) : f32[64,512]   # m.cpp:1\n"
      "  %1 = sum(%0) {dims=[0], keepdim=1} : f32[1,512]   # m.cpp:2\n"
      "  return %1\n"
      "}\n");
  Effect e = c.run_pass("fuse_sum");
  EXPECT_EQ(text_of(c.g),
            "graph @g(%g: f32[64,512], %r: f32[64,512]) {\n"
            "  %0 = fused_elementwise_sum(%g, %r) {program=\"r0=relu_backward(in0,in1)\", dims=[0], keepdim=1} "
            ": f32[1,512] # m.cpp:2\n"
            "  return %0\n"
            "}\n");
  EXPECT_EQ(details(e), "fused %0 = relu_backward(%g, %r) (m.cpp:1) into %1 = sum(%0) (m.cpp:2)\n");
  c.expect_same_values();
}

// where's gradient for a broadcast branch: the gradient where the condition holds, summed
// over the batch. The bool condition is read converted; the program's type an attribute.
TEST(PassFuseSum, AWhereOnABoolConditionSummedOverTheBatchBecomesOneNode) {
  PassCase c(
      "graph @g(%c: bool[64,512], %g: f32[64,512], %z: f32[]) {\n"
      "  %0 = where(%c, %g, %z) : f32[64,512]   # m.cpp:1\n"
      "  %1 = sum(%0) {dims=[0], keepdim=0} : f32[512]   # m.cpp:2\n"
      "  return %1\n"
      "}\n");
  c.run_pass("fuse_sum");
  EXPECT_EQ(text_of(c.g),
            "graph @g(%c: bool[64,512], %g: f32[64,512], %z: f32[]) {\n"
            "  %0 = fused_elementwise_sum(%c, %g, %z) {program=\"r0=where(in0,in1,in2)\", dtype=f32, dims=[0], "
            "keepdim=0} : f32[512] # m.cpp:2\n"
            "  return %0\n"
            "}\n");
  c.expect_same_values();
}

// The largest absolute error of each row (a quantization scale's calibration, a loss's
// worst term): sub and abs, then the max, one kernel; the same for min over the batch.
TEST(PassFuseSum, AMaxOrMinOfAGroupBecomesOneNode) {
  PassCase c(
      "graph @g(%y: f32[64,256], %t: f32[64,256]) {\n"
      "  %0 = sub(%y, %t) : f32[64,256]   # m.cpp:1\n"
      "  %1 = abs(%0) : f32[64,256]   # m.cpp:2\n"
      "  %2 = max(%1) {dims=[1], keepdim=0} : f32[64]   # m.cpp:3\n"
      "  %3 = mul(%y, %t) : f32[64,256]   # m.cpp:4\n"
      "  %4 = min(%3) {dims=[0], keepdim=1} : f32[1,256]   # m.cpp:5\n"
      "  return %2, %4\n"
      "}\n");
  c.run_pass("fuse_elementwise");
  Effect e = c.run_pass("fuse_sum");
  EXPECT_EQ(text_of(c.g),
            "graph @g(%y: f32[64,256], %t: f32[64,256]) {\n"
            "  %0 = fused_elementwise_max(%y, %t) {program=\"r0=sub(in0,in1); r1=abs(r0)\", dims=[1], keepdim=0} "
            ": f32[64] # m.cpp:3\n"
            "  %1 = fused_elementwise_min(%y, %t) {program=\"r0=mul(in0,in1)\", dims=[0], keepdim=1} "
            ": f32[1,256] # m.cpp:5\n"
            "  return %0, %1\n"
            "}\n");
  EXPECT_EQ(details(e),
            "fused %0 = fused_elementwise(%y, %t) (m.cpp:2) into %1 = max(%0) (m.cpp:3)\n"
            "fused %2 = mul(%y, %t) (m.cpp:4) into %3 = min(%2) (m.cpp:5)\n");
  c.expect_same_values();
}

// A softmax written out: the scores (a masked product's, here an input plus a mask) are
// read by their max and again by the exponentials, which their sum and the division read
// in turn. One node writes the scores and takes their max, one writes the exponentials and
// sums them; the division stays.
TEST(PassFuseSum, ASoftmaxWrittenOutWritesAndFoldsEachGroupOnce) {
  PassCase c(
      "graph @g(%x: f32[64,256], %mask: f32[256]) {\n"
      "  %0 = add(%x, %mask) : f32[64,256]   # m.cpp:1\n"
      "  %1 = max(%0) {dims=[1], keepdim=1} : f32[64,1]   # m.cpp:2\n"
      "  %2 = sub(%0, %1) : f32[64,256]   # m.cpp:3\n"
      "  %3 = exp(%2) : f32[64,256]   # m.cpp:3\n"
      "  %4 = sum(%3) {dims=[1], keepdim=1} : f32[64,1]   # m.cpp:4\n"
      "  %5 = div(%3, %4) : f32[64,256]   # m.cpp:5\n"
      "  return %5\n"
      "}\n");
  c.run_pass("fuse_elementwise");
  Effect e = c.run_pass("fuse_sum");
  EXPECT_EQ(text_of(c.g),
            "graph @g(%x: f32[64,256], %mask: f32[256]) {\n"
            "  %0, %1 = fused_elementwise_and_max(%x, %mask) {program=\"r0=add(in0,in1)\", dims=[1], keepdim=1} "
            ": f32[64,256], f32[64,1] # m.cpp:2\n"
            "  %2, %3 = fused_elementwise_and_sum(%0, %1) {program=\"r0=sub(in0,in1); r1=exp(r0)\", dims=[1], "
            "keepdim=1} : f32[64,256], f32[64,1] # m.cpp:4\n"
            "  %4 = div(%2, %3) : f32[64,256] # m.cpp:5\n"
            "  return %4\n"
            "}\n");
  EXPECT_EQ(details(e),
            "fused (keeping its elements) %0 = add(%x, %mask) (m.cpp:1) into %1 = max(%0) (m.cpp:2)\n"
            "fused (keeping its elements) %2 = fused_elementwise(%0, %1) (m.cpp:3) into %3 = sum(%2) (m.cpp:4)\n");
  EXPECT_EQ(c.g.nodes().front()->fused_from, "add + max");
  c.expect_same_values();
}

// Kept elements over dims in several runs: centred values a later step reads too, summed
// over N, H and W of a row-major [N, C, H, W].
TEST(PassFuseSum, KeptElementsOverDimsInSeveralRunsAreWrittenAndSummedInOneNode) {
  PassCase c(
      "graph @g(%x: f32[32,16,12,12], %m: f32[1,16,1,1], %w: f32[1,16,1,1]) {\n"
      "  %0 = sub(%x, %m) : f32[32,16,12,12]   # m.cpp:1\n"
      "  %1 = sum(%0) {dims=[0,2,3], keepdim=1} : f32[1,16,1,1]   # m.cpp:2\n"
      "  %2 = mul(%0, %w) : f32[32,16,12,12]   # m.cpp:3\n"
      "  return %1, %2\n"
      "}\n");
  Effect e = c.run_pass("fuse_sum");
  EXPECT_EQ(text_of(c.g),
            "graph @g(%x: f32[32,16,12,12], %m: f32[1,16,1,1], %w: f32[1,16,1,1]) {\n"
            "  %0, %1 = fused_elementwise_and_sum(%x, %m) {program=\"r0=sub(in0,in1)\", dims=[0,2,3], keepdim=1} "
            ": f32[32,16,12,12], f32[1,16,1,1] # m.cpp:2\n"
            "  %2 = mul(%0, %w) : f32[32,16,12,12] # m.cpp:3\n"
            "  return %1, %2\n"
            "}\n");
  EXPECT_EQ(details(e), "fused (keeping its elements) %0 = sub(%x, %m) (m.cpp:1) into %1 = sum(%0) (m.cpp:2)\n");
  c.expect_same_values();
}

// A product of a group's elements (a likelihood's factors per row): one node; and a
// product whose factors the gradient reads too keeps them.
TEST(PassFuseSum, AProductOfAGroupBecomesOneNode) {
  PassCase c(
      "graph @g(%p: f32[64,256], %q: f32[64,256]) {\n"
      "  %0 = mul(%p, %q) : f32[64,256]   # m.cpp:1\n"
      "  %1 = prod(%0) {dims=[1], keepdim=0} : f32[64]   # m.cpp:2\n"
      "  %2 = add(%p, %q) : f32[64,256]   # m.cpp:3\n"
      "  %3 = prod(%2) {dims=[0], keepdim=0} : f32[256]   # m.cpp:4\n"
      "  return %1, %3, %2\n"
      "}\n");
  Effect e = c.run_pass("fuse_sum");
  EXPECT_EQ(text_of(c.g),
            "graph @g(%p: f32[64,256], %q: f32[64,256]) {\n"
            "  %0 = fused_elementwise_prod(%p, %q) {program=\"r0=mul(in0,in1)\", dims=[1], keepdim=0} : f32[64] "
            "# m.cpp:2\n"
            "  %1, %2 = fused_elementwise_and_prod(%p, %q) {program=\"r0=add(in0,in1)\", dims=[0], keepdim=0} "
            ": f32[64,256], f32[256] # m.cpp:4\n"
            "  return %0, %2, %1\n"
            "}\n");
  EXPECT_EQ(details(e),
            "fused %0 = mul(%p, %q) (m.cpp:1) into %1 = prod(%0) (m.cpp:2)\n"
            "fused (keeping its elements) %2 = add(%p, %q) (m.cpp:3) into %3 = prod(%2) (m.cpp:4)\n");
  c.expect_same_values();
}

// Dims in several runs: a batch norm's sum of squared deviations over N, H and W of an
// [N, C, H, W] (rows of H * W, whose sums are then summed over N), and a max over the
// first and last dims. Each group and its reduction become one node.
TEST(PassFuseSum, ReductionsOverDimsInSeveralRunsBecomeOneNode) {
  PassCase c(
      "graph @g(%x: f32[32,16,12,12], %m: f32[1,16,1,1], %z: f32[64,16,16]) {\n"
      "  %0 = sub(%x, %m) : f32[32,16,12,12]   # m.cpp:1\n"
      "  %1 = mul(%0, %0) : f32[32,16,12,12]   # m.cpp:1\n"
      "  %2 = sum(%1) {dims=[0,2,3], keepdim=1} : f32[1,16,1,1]   # m.cpp:2\n"
      "  %3 = abs(%z) : f32[64,16,16]   # m.cpp:3\n"
      "  %4 = max(%3) {dims=[0,2], keepdim=0} : f32[16]   # m.cpp:4\n"
      "  return %2, %4\n"
      "}\n");
  c.run_pass("fuse_elementwise");
  Effect e = c.run_pass("fuse_sum");
  EXPECT_EQ(text_of(c.g),
            "graph @g(%x: f32[32,16,12,12], %m: f32[1,16,1,1], %z: f32[64,16,16]) {\n"
            "  %0 = fused_elementwise_sum(%x, %m) {program=\"r0=sub(in0,in1); r1=mul(r0,r0)\", dims=[0,2,3], "
            "keepdim=1} : f32[1,16,1,1] # m.cpp:2\n"
            "  %1 = fused_elementwise_max(%z) {program=\"r0=abs(in0)\", dims=[0,2], keepdim=0} : f32[16] # m.cpp:4\n"
            "  return %0, %1\n"
            "}\n");
  EXPECT_EQ(details(e),
            "fused %0 = fused_elementwise(%x, %m) (m.cpp:1) into %1 = sum(%0) (m.cpp:2)\n"
            "fused %2 = abs(%z) (m.cpp:3) into %3 = max(%2) (m.cpp:4)\n");
  c.expect_same_values();
}

// A bias gradient whose relu gradient the weight gradient's product reads too: one node
// writes the elements and sums them; the product reads its first result. The batch is
// symbolic: the sums' width (512) decides alone.
TEST(PassFuseSum, AReluGradientAProductAlsoReadsIsWrittenAndSummedInOneNode) {
  PassCase c(
      "graph @g(%g: f32[batch,512], %r: f32[batch,512], %x: f32[batch,784]) {\n"
      "  %0 = relu_backward(%g, %r) : f32[batch,512]   # m.cpp:1\n"
      "  %1 = permute(%0) {dims=[1,0]} : f32[512,batch]   # m.cpp:2\n"
      "  %2 = matmul(%1, %x) : f32[512,784]   # m.cpp:2\n"
      "  %3 = sum(%0) {dims=[0], keepdim=0} : f32[512]   # m.cpp:3\n"
      "  return %2, %3\n"
      "}\n");
  Effect e = c.run_pass("fuse_sum");
  EXPECT_EQ(text_of(c.g),
            "graph @g(%g: f32[batch,512], %r: f32[batch,512], %x: f32[batch,784]) {\n"
            "  %0, %1 = fused_elementwise_and_sum(%g, %r) {program=\"r0=relu_backward(in0,in1)\", dims=[0], "
            "keepdim=0} : f32[batch,512], f32[512] # m.cpp:3\n"
            "  %2 = permute(%0) {dims=[1,0]} : f32[512,batch] # m.cpp:2\n"
            "  %3 = matmul(%2, %x) : f32[512,784] # m.cpp:2\n"
            "  return %3, %1\n"
            "}\n");
  EXPECT_EQ(details(e),
            "fused (keeping its elements) %0 = relu_backward(%g, %r) (m.cpp:1) into %3 = sum(%0) (m.cpp:3)\n");
  EXPECT_EQ(c.g.nodes().front()->fused_from, "relu_backward + sum");
  c.expect_same_values();
}

// Elements that are fetched are kept too; a row sum of them (rows of 256).
TEST(PassFuseSum, FetchedElementsAreKept) {
  PassCase c(
      "graph @g(%x: f32[64,256]) {\n  %0 = exp(%x) : f32[64,256]   # m.cpp:1\n"
      "  %1 = sum(%0) {dims=[1], keepdim=0} : f32[64]   # m.cpp:2\n  return %1, %0\n}\n");
  c.run_pass("fuse_sum");
  EXPECT_EQ(text_of(c.g),
            "graph @g(%x: f32[64,256]) {\n"
            "  %0, %1 = fused_elementwise_and_sum(%x) {program=\"r0=exp(in0)\", dims=[1], keepdim=0} "
            ": f32[64,256], f32[64] # m.cpp:2\n"
            "  return %1, %0\n"
            "}\n");
  c.expect_same_values();
}

// A mean over everything is a sum and a division: the sum takes the group, the division
// (of one element) stays. f64, with a broadcast operand.
TEST(PassFuseSum, AMeanOverEverythingKeepsItsDivision) {
  PassCase c(
      "graph @g(%x: f64[100,50], %b: f64[50], %n: f64[]) {\n"
      "  %0 = add(%x, %b) : f64[100,50]   # m.cpp:1\n"
      "  %1 = tanh(%0) : f64[100,50]   # m.cpp:2\n"
      "  %2 = sum(%1) {dims=[], keepdim=0} : f64[]   # m.cpp:3\n"
      "  %3 = div(%2, %n) : f64[]   # m.cpp:4\n"
      "  return %3\n"
      "}\n");
  c.optimize(Level::O2);
  EXPECT_EQ(text_of(c.g),
            "graph @g(%x: f64[100,50], %b: f64[50], %n: f64[]) {\n"
            "  %0 = fused_elementwise_sum(%x, %b) {program=\"r0=add(in0,in1); r1=tanh(r0)\", dims=[0,1], keepdim=0} "
            ": f64[] # m.cpp:3\n"
            "  %1 = div(%0, %n) : f64[] # m.cpp:4\n"
            "  return %1\n"
            "}\n");
  c.expect_same_values();
}

// Where it does not pay or is not allowed, nothing changes.
void expect_unchanged(const std::string& text) {
  PassCase c(text);
  c.run_pass("fuse_elementwise");
  const std::string before = text_of(c.g);
  Effect e = c.run_pass("fuse_sum");
  EXPECT_EQ(text_of(c.g), before);
  EXPECT_EQ(details(e), "");
}

TEST(PassFuseSum, SmallNarrowScatteredOrSharedGroupsStay) {
  expect_unchanged(  // 2048 elements: under 4096
      "graph @g(%x: f32[64,32]) {\n  %0 = exp(%x) : f32[64,32]\n"
      "  %1 = sum(%0) {dims=[1], keepdim=0} : f32[64]\n  return %1\n}\n");
  expect_unchanged(  // columns 16 wide: one evaluation of 16 elements per row is slower
      "graph @g(%x: f32[4096,16]) {\n  %0 = exp(%x) : f32[4096,16]\n"
      "  %1 = sum(%0) {dims=[0], keepdim=0} : f32[16]\n  return %1\n}\n");
  expect_unchanged(  // rows of 8
      "graph @g(%x: f32[1024,8]) {\n  %0 = exp(%x) : f32[1024,8]\n"
      "  %1 = sum(%0) {dims=[-1], keepdim=0} : f32[1024]\n  return %1\n}\n");
  expect_unchanged(  // dims 0 and 2, the inner run columns 16 wide
      "graph @g(%x: f32[64,16,16,16]) {\n  %0 = exp(%x) : f32[64,16,16,16]\n"
      "  %1 = sum(%0) {dims=[0,2], keepdim=0} : f32[16,16]\n  return %1\n}\n");
  expect_unchanged(  // kept elements over dims 0 and 2, the inner run columns 16 wide
      "graph @g(%x: f32[64,16,16,16]) {\n  %0 = exp(%x) : f32[64,16,16,16]\n"
      "  %1 = sum(%0) {dims=[0,2], keepdim=0} : f32[16,16]\n  %2 = neg(%0) : f32[64,16,16,16]\n"
      "  return %1, %2\n}\n");
  expect_unchanged(  // kept elements in columns 16 wide
      "graph @g(%x: f32[4096,16]) {\n  %0 = exp(%x) : f32[4096,16]\n"
      "  %1 = sum(%0) {dims=[0], keepdim=0} : f32[16]\n  %2 = neg(%0) : f32[4096,16]\n  return %1, %2\n}\n");
  expect_unchanged(  // kept elements in columns of a symbolic width
      "graph @g(%x: f32[64,n]) {\n  %0 = exp(%x) : f32[64,n]\n"
      "  %1 = sum(%0) {dims=[0], keepdim=0} : f32[n]\n  %2 = neg(%0) : f32[64,n]\n  return %1, %2\n}\n");
  expect_unchanged(  // not element-wise
      "graph @g(%x: f32[64,256], %w: f32[256,256]) {\n  %0 = matmul(%x, %w) : f32[64,256]\n"
      "  %1 = sum(%0) {dims=[1], keepdim=0} : f32[64]\n  return %1\n}\n");
}

// A compiled training step whose loss is a mean squared error over 64 x 128 outputs: the
// loss's sub, square and sum are one step, and the step trains as the eager one does.
// Tolerance 1e-5: the fused sum is exact, but the compiled step also fuses the linear
// layers' relu into oneDNN's matmul, whose order of arithmetic differs from eager's.
TEST(PassFuseSum, ACompiledTrainingStepWithAFusedLossMatchesEager) {
  auto make = [] {
    manual_seed(3);
    return nn::sequential({std::make_shared<nn::Linear>(32, 128), nn::ReLU(), std::make_shared<nn::Linear>(128, 128)});
  };
  auto eager_model = make(), compiled_model = make();
  optim::SGD eager_opt(eager_model->parameters(), {.lr = 0.01});
  optim::SGD compiled_opt(compiled_model->parameters(), {.lr = 0.01});
  auto step = [](nn::Module& model, optim::Optimizer& opt, const Tensor& x, const Tensor& y) {
    opt.zero_grad();
    Tensor d = model.forward(x) - y;
    Tensor loss = (d * d).mean();
    loss.backward();
    opt.step();
    return loss;
  };
  auto compiled = compile([&](Tensor x, Tensor y) { return step(*compiled_model, compiled_opt, x, y); });
  for (int i = 0; i < 3; ++i) {
    const Tensor x = baton::testing::uniform({64, 32}, -1, 1, 10 + i).to(f32);
    const Tensor y = baton::testing::uniform({64, 128}, -1, 1, 20 + i).to(f32);
    const Tensor want = step(*eager_model, eager_opt, x, y);
    EXPECT_TRUE(baton::testing::all_close(compiled(x, y), want, 1e-5, 1e-5)) << "step " << i;
  }
  EXPECT_NE(compiled.explain().find("fused_elementwise_sum"), std::string::npos) << compiled.explain();
  auto ep = eager_model->parameters(), cp = compiled_model->parameters();
  for (size_t i = 0; i < ep.size(); ++i) EXPECT_TRUE(baton::testing::all_close(cp[i], ep[i], 1e-5, 1e-5)) << i;
}

}  // namespace
}  // namespace baton::passes::testing
