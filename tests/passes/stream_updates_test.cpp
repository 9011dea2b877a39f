// The stream_updates pass: an optimizer update whose parameter two or more steps read
// before it writes the parameter with streaming stores (its `streaming` attribute). Values
// are compared exactly, over runs that take each way: streaming changes how the kernel
// stores, not what it computes (tests/ops/optim_update_test.cpp checks the kernels bit for
// bit).
#include "passes/pass_testing.h"

namespace baton::passes::testing {
namespace {

// A layer's weight as a training step reads it: the forward product through a transpose,
// the product for the input's gradient directly. 512 KiB.
const std::string kTwoReaders =
    "graph @g(%w: f32[256,512], %x: f32[64,512], %dy: f32[64,256], %dw: f32[256,512], %lr: f64[], %step: i64[], "
    "%m: f32[256,512]) {\n"
    "  %0 = permute(%w) {dims=[1,0]} : f32[512,256]\n"
    "  %1 = matmul(%x, %0) : f32[64,256]\n"
    "  %2 = matmul(%dy, %w) : f32[64,512]\n"
    "  sgd_update(%w, %dw, %lr, %step, %m) {momentum=0.9, dampening=0, weight_decay=0, nesterov=0}\n"
    "  return %1, %2\n"
    "}\n";

TEST(PassStreamUpdates, AWeightReadByTwoProductsIsWrittenStreaming) {
  PassCase c(kTwoReaders);
  Effect e = c.run_pass("stream_updates");
  EXPECT_EQ(graph::to_text(c.g),
            "graph @g(%w: f32[256,512], %x: f32[64,512], %dy: f32[64,256], %dw: f32[256,512], %lr: f64[], "
            "%step: i64[], %m: f32[256,512]) {\n"
            "  %0 = permute(%w) {dims=[1,0]} : f32[512,256]\n"
            "  %1 = matmul(%x, %0) : f32[64,256]\n"
            "  %2 = matmul(%dy, %w) : f32[64,512]\n"
            "  sgd_update(%w, %dw, %lr, %step, %m) {momentum=0.9, dampening=0, weight_decay=0, nesterov=0, "
            "streaming=1}\n"
            "  return %1, %2\n"
            "}\n");
  EXPECT_EQ(details(e), "sgd_update(%w, %dw, %lr, %step, %m) may stream %w (2 other steps read it)\n");
  // The outputs, and %w, %step and %m after three runs: the marked update's first run
  // stores plainly, its second streams, its third takes the faster.
  c.expect_same_values(3);
  EXPECT_TRUE(c.run_pass("stream_updates").details.empty()) << "a second run finds nothing more";
}

TEST(PassStreamUpdates, AdamStreamsToo) {
  PassCase c(
      "graph @g(%w: f32[512,256], %x: f32[8,512], %dw: f32[512,256], %lr: f64[], %step: i64[], "
      "%m: f32[512,256], %v: f32[512,256]) {\n"
      "  %0 = matmul(%x, %w) : f32[8,256]\n"
      "  %1 = exp(%w) : f32[512,256]\n"
      "  adam_update(%w, %dw, %lr, %step, %m, %v) {beta1=0.9, beta2=0.999, eps=1e-08, weight_decay=0, decoupled=0}\n"
      "  return %0, %1\n"
      "}\n");
  Effect e = c.run_pass("stream_updates");
  EXPECT_EQ(details(e), "adam_update(%w, %dw, %lr, %step, %m, %v) may stream %w (2 other steps read it)\n");
  EXPECT_EQ(c.g.nodes().back()->attrs.i("streaming"), 1);
  c.expect_same_values(3);
}

void expect_unchanged(const std::string& text) {
  PassCase c(text);
  Effect e = c.run_pass("stream_updates");
  EXPECT_EQ(graph::to_text(c.g), text);
  EXPECT_TRUE(e.details.empty());
}

// The first layer's weight: one product reads it (its input needs no gradient). Its lines
// are in no other core's cache, and streaming them out only sends the next read to memory.
TEST(PassStreamUpdates, AWeightWithOneReaderKeepsPlainStores) {
  expect_unchanged(
      "graph @g(%w: f32[256,512], %x: f32[64,512], %dw: f32[256,512], %lr: f64[], %step: i64[], "
      "%m: f32[256,512]) {\n"
      "  %0 = permute(%w) {dims=[1,0]} : f32[512,256]\n"
      "  %1 = matmul(%x, %0) : f32[64,256]\n"
      "  sgd_update(%w, %dw, %lr, %step, %m) {momentum=0.9, dampening=0, weight_decay=0, nesterov=0}\n"
      "  return %1\n"
      "}\n");
}

TEST(PassStreamUpdates, SmallOrSymbolicParametersKeepPlainStores) {
  expect_unchanged(  // 64 KiB
      "graph @g(%w: f32[128,128], %x: f32[4,128], %dw: f32[128,128], %lr: f64[], %step: i64[]) {\n"
      "  %0 = matmul(%x, %w) : f32[4,128]\n"
      "  %1 = exp(%w) : f32[128,128]\n"
      "  sgd_update(%w, %dw, %lr, %step) {momentum=0, dampening=0, weight_decay=0, nesterov=0}\n"
      "  return %0, %1\n"
      "}\n");
  expect_unchanged(
      "graph @g(%w: f32[n,512], %dw: f32[n,512], %lr: f64[], %step: i64[]) {\n"
      "  %0 = exp(%w) : f32[n,512]\n"
      "  %1 = neg(%w) : f32[n,512]\n"
      "  sgd_update(%w, %dw, %lr, %step) {momentum=0, dampening=0, weight_decay=0, nesterov=0}\n"
      "  return %0, %1\n"
      "}\n");
}

}  // namespace
}  // namespace baton::passes::testing
