// ONNX importers of import_signal.cpp on hand-built models: DFT (axis, dft_length,
// inverse, onesided, IRFFT), STFT, the window generators and
// MelWeightMatrix against baton's own ops, the errors a bad node gets, and dft and stft
// exported to ONNX and read back.
#include <gtest/gtest.h>
#include <onnx/checker.h>

#include <string>
#include <vector>

#include "baton/baton.h"
#include "baton/onnx.h"
#include "harness/op_harness.h"
#include "io/onnx_model_builder.h"

namespace baton {
namespace {

using ::onnx::TensorProto;
using onnx_testing::add_int_attr;
using onnx_testing::ModelBuilder;

const Tensor signal = testing::uniform({2, 12, 3, 2}, -1, 1, 11).to(f32);

TEST(OnnxSignal, DftOpset17) {
  ModelBuilder b;
  b.input("x", TensorProto::FLOAT, {2, 12, 3, 2});
  b.ints("len", {16}, true);
  auto* n = b.node("DFT", {"x", "len"}, {"y"});
  add_int_attr(n, "axis", -3);
  add_int_attr(n, "inverse", 1);
  b.output("y");
  EXPECT_ALL_CLOSE(b.load().run({signal}).at(0), dft(signal, 1, 16, true), 1e-6, 1e-5);
}

TEST(OnnxSignal, DftOnesidedAlongAnInnerAxis) {
  ModelBuilder b;
  b.input("x", TensorProto::FLOAT, {2, 12, 3, 2});
  auto* n = b.node("DFT", {"x"}, {"y"});
  add_int_attr(n, "axis", 2);
  add_int_attr(n, "onesided", 1);
  b.output("y");
  Tensor y = b.load().run({signal}).at(0);
  EXPECT_EQ(y.shape(), (Shape{2, 12, 2, 2}));
  EXPECT_ALL_CLOSE(y, dft(signal, 2, 3, false, true), 1e-6, 1e-5);
}

TEST(OnnxSignal, Irfft) {
  ModelBuilder b;
  b.input("x", TensorProto::FLOAT, {2, 12, 3, 2});
  auto* n = b.node("DFT", {"x"}, {"y"});
  add_int_attr(n, "inverse", 1);
  add_int_attr(n, "onesided", 1);
  b.output("y");
  Tensor y = b.load().run({signal}).at(0);
  EXPECT_EQ(y.shape(), (Shape{2, 22, 3, 1}));  // 2 (12 - 1) real samples
  EXPECT_ALL_CLOSE(y, dft(signal, 1, 22, true, true), 1e-6, 1e-5);
}

TEST(OnnxSignal, StftWithWindowAndLength) {
  ModelBuilder b;
  b.input("s", TensorProto::FLOAT, {1, 40, 1});
  b.ints("step", {6}, true);
  b.ints("length", {8}, true);
  b.ints("size", {8}, true);
  b.node("HannWindow", {"size"}, {"w"});
  b.node("STFT", {"s", "step", "w", "length"}, {"y"});
  b.output("y");
  Tensor s = testing::uniform({1, 40, 1}, -1, 1, 12).to(f32);
  Tensor y = b.load().run({s}).at(0);
  EXPECT_EQ(y.shape(), (Shape{1, 6, 5, 2}));
  EXPECT_ALL_CLOSE(y, stft(s, 6, hann_window(8), 8), 1e-6, 1e-5);
}

TEST(OnnxSignal, WindowsAndMelMatrix) {
  ModelBuilder b;
  b.ints("size", {7}, true);
  b.ints("mels", {8}, true);
  b.ints("dft", {16}, true);
  b.ints("rate", {8192}, true);
  b.floats("low", {}, {0});
  b.floats("high", {}, {4096});
  auto* h = b.node("HammingWindow", {"size"}, {"hamming"});
  add_int_attr(h, "periodic", 0);
  add_int_attr(h, "output_datatype", TensorProto::DOUBLE);
  b.node("BlackmanWindow", {"size"}, {"blackman"});
  b.node("MelWeightMatrix", {"mels", "dft", "rate", "low", "high"}, {"mel"});
  b.output("hamming");
  b.output("blackman");
  b.output("mel");
  std::vector<Tensor> out = b.load().run(std::vector<Tensor>{});
  EXPECT_EQ(out.at(0).dtype(), f64);
  EXPECT_ALL_CLOSE(out.at(0), hamming_window(7, false, f64), 1e-15, 0);
  EXPECT_ALL_CLOSE(out.at(1), blackman_window(7), 1e-7, 0);
  EXPECT_ALL_CLOSE(out.at(2), mel_weight_matrix(8, 16, 8192, 0, 4096), 1e-7, 0);
}

TEST(OnnxSignal, BadNodesAreErrors) {
  auto dft_model = [](int64_t axis, std::vector<int64_t> length) {
    ModelBuilder b;
    b.input("x", TensorProto::FLOAT, {2, 12, 2});
    std::vector<std::string> in{"x"};
    if (!length.empty()) b.ints("len", length, true), in.push_back("len");
    add_int_attr(b.node("DFT", in, {"y"}), "axis", axis);
    b.output("y");
    return b;
  };
  EXPECT_THROWS_WITH(GraphError, dft_model(2, {}).load(), "DFT", "axis 2 is the last dim");
  EXPECT_THROWS_WITH(Error, dft_model(3, {}).load(), "DFT", "axis");
  EXPECT_THROWS_WITH(GraphError, dft_model(1, {0}).load(), "DFT", "length must be positive");
  ModelBuilder w;
  w.ints("size", {-3}, true);
  w.node("HannWindow", {"size"}, {"w"});
  w.output("w");
  EXPECT_THROWS_WITH(GraphError, w.load(), "HannWindow", "-3");
  ModelBuilder s;
  s.input("s", TensorProto::FLOAT, {1, 16, 1});
  s.ints("step", {4}, true);
  s.ints("length", {6}, true);
  s.floats("w", {8}, {1, 1, 1, 1, 1, 1, 1, 1});
  s.node("STFT", {"s", "step", "w", "length"}, {"y"});
  s.output("y");
  EXPECT_THROWS_WITH(ShapeError, s.load(), "STFT", "frame_length 6 differs");
}

TEST(OnnxSignal, DftAndStftExportAndReadBack) {
  Graph g;
  Tensor x = g.placeholder(f32, {2, 40, 1}, "x");
  Tensor spectrum = dft(x, 1, 48, false, true);
  Tensor back = dft(spectrum, 1, 48, true, true);
  Tensor frames = stft(x, 5, hamming_window(10), 10);
  g.set_outputs({spectrum, back, frames});
  Tensor in = testing::uniform({2, 40, 1}, -1, 1, 13).to(f32);
  std::vector<Tensor> want = Session(g).run({spectrum, back, frames}, {{x, in}});
  const std::string bytes = onnx::save_bytes(g);
  ::onnx::ModelProto proto;
  ASSERT_TRUE(proto.ParseFromString(bytes));
  EXPECT_NO_THROW(::onnx::checker::check_model(proto));
  std::vector<Tensor> got = onnx::load_bytes(bytes, "signal.onnx").run({in});
  ASSERT_EQ(got.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_ALL_CLOSE(got[i], want[i], 1e-6, 1e-6) << "output " << i;
  // The zero-padded signal comes back, cut to the transform length.
  EXPECT_ALL_CLOSE(slice(got[1], 1, 0, 40), in, 1e-6, 1e-5);
}

}  // namespace
}  // namespace baton
