// An optimized ONNX save of steps with fused activations (a convolution's silu, a linear
// layer's residual add and clamp) writes them in the ai.baton domain with the activation
// and its parameters, and reads back to the same graph text and outputs; a plain save's
// standard ops fuse again when the imported graph is planned.
#include <onnx/onnx_pb.h>

#include <gtest/gtest.h>

#include "baton/baton.h"
#include "baton/onnx.h"
#include "harness/op_harness.h"

namespace baton {
namespace {

const ::onnx::AttributeProto* attribute(const ::onnx::NodeProto& n, const std::string& name) {
  for (const ::onnx::AttributeProto& a : n.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

TEST(OnnxFusedActivation, OptimizedSaveKeepsTheActivationAndItsParameters) {
  Graph g;
  Tensor x = g.placeholder(f32, {2, 8, 6, 6}, "x"), f = g.placeholder(f32, {3, 5}, "f");
  Tensor r = g.placeholder(f32, {3, 4}, "r");
  Tensor w = testing::uniform({8, 8, 3, 3}, -1, 1, 1).to(f32), b = testing::uniform({8}, -1, 1, 2).to(f32);
  Tensor v = testing::uniform({4, 5}, -1, 1, 3).to(f32), c = testing::uniform({4}, -1, 1, 4).to(f32);
  Tensor y = silu(conv2d(x, w, b, {.padding = {1, 1}}));
  Tensor z = clamp(linear(f, v, c) + r, 0.0, 0.5);
  g.set_outputs({y, z});
  const std::vector<Tensor> feed{testing::uniform({2, 8, 6, 6}, -1, 1, 5).to(f32),
                                 testing::uniform({3, 5}, -1, 1, 6).to(f32),
                                 testing::uniform({3, 4}, -1, 1, 7).to(f32)};
  const std::vector<Tensor> want = Session(g).run({y, z}, {{x, feed[0]}, {f, feed[1]}, {r, feed[2]}});

  const std::string bytes = onnx::save_bytes(g, {.optimized = true});
  ::onnx::ModelProto proto;
  ASSERT_TRUE(proto.ParseFromString(bytes));
  std::map<std::string, std::string> activations;
  for (const ::onnx::NodeProto& n : proto.graph().node()) {
    if (n.domain() != "ai.baton" || !attribute(n, "activation")) continue;
    activations[n.op_type()] = attribute(n, "activation")->s();
    if (n.op_type() == "linear_fused") {
      EXPECT_EQ(n.input_size(), 4);  // x, weight, bias, residual
      EXPECT_NE(attribute(n, "min"), nullptr);
      EXPECT_NE(attribute(n, "max"), nullptr);
    }
  }
  EXPECT_EQ(activations, (std::map<std::string, std::string>{{"conv2d_fused", "silu"}, {"linear_fused", "clamp"}}));

  onnx::Model m = onnx::load_bytes(bytes, "optimized.onnx");
  const std::string text = m.graph().to_text();
  EXPECT_NE(text.find("activation=\"silu\""), std::string::npos) << text;
  EXPECT_NE(text.find("activation=\"clamp\", min=0.0, max=0.5"), std::string::npos) << text;
  const std::vector<Tensor> got = m.run(feed);
  ASSERT_EQ(got.size(), 2u);
  // The same steps with the same kernels as the saved graph's plan: equal values (the
  // tolerance only for a kernel timed to another choice in the second plan).
  EXPECT_ALL_CLOSE(got[0], want[0], 1e-6, 1e-6);
  EXPECT_ALL_CLOSE(got[1], want[1], 1e-6, 1e-6);

  // A plain save writes standard ONNX: silu as Mul(x, Sigmoid(x)), clamp as Clip with
  // bound inputs (read back as maximum and minimum). The imported graph's plan (what
  // `baton graph --optimized` shows) fuses both forms again.
  onnx::Model plain = onnx::load_bytes(onnx::save_bytes(g), "plain.onnx");
  const std::string optimized = plain.graph().optimized().to_text();
  EXPECT_NE(optimized.find("activation=\"silu\""), std::string::npos) << optimized;
  EXPECT_NE(optimized.find("activation=\"clamp\", min=0.0, max=0.5"), std::string::npos) << optimized;
  const std::vector<Tensor> plain_got = plain.run(feed);
  EXPECT_ALL_CLOSE(plain_got[0], want[0], 1e-6, 1e-6);
  EXPECT_ALL_CLOSE(plain_got[1], want[1], 1e-6, 1e-6);
}

}  // namespace
}  // namespace baton
