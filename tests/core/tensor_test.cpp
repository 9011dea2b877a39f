// Creating tensors and reading their values.
#include <cmath>

#include "harness/op_harness.h"

namespace baton::testing {
namespace {

TEST(TensorCreation, NestedListsUpToFourDims) {
  Tensor a = tensor({1.f, 2.f, 3.f});
  EXPECT_EQ(a.shape(), (Shape{3}));
  EXPECT_EQ(a.dtype(), f32);
  Tensor b = tensor({{1, 2, 3}, {4, 5, 6}});
  EXPECT_EQ(b.shape(), (Shape{2, 3}));
  EXPECT_EQ(b.dtype(), i32);
  EXPECT_EQ(b.to_vector<int32_t>(), (std::vector<int32_t>{1, 2, 3, 4, 5, 6}));
  Tensor c = tensor({{{1.0}, {2.0}}, {{3.0}, {4.0}}});
  EXPECT_EQ(c.shape(), (Shape{2, 2, 1}));
  EXPECT_EQ(c.dtype(), f64);
  Tensor d = tensor<int64_t>({{{{1, 2}}, {{3, 4}}}});
  EXPECT_EQ(d.shape(), (Shape{1, 2, 1, 2}));
  EXPECT_EQ(d.dtype(), i64);
  EXPECT_EQ(d.to_vector<int64_t>(), (std::vector<int64_t>{1, 2, 3, 4}));
  Tensor e = tensor({true, false});
  EXPECT_EQ(e.dtype(), b8);
  EXPECT_EQ(e.to_vector<bool>(), (std::vector<bool>{true, false}));
  EXPECT_TRUE(b.is_contiguous());
  EXPECT_EQ(b.strides(), (Shape{3, 1}));
}

TEST(TensorCreation, RaggedListsAreShapeErrors) {
  EXPECT_THROWS_WITH(ShapeError, tensor({{1, 2}, {3}}), "[tensor]", "ragged", "tensor_test.cpp:32");
  // Same element count as a regular [3,2] list: the sizes themselves must be checked.
  EXPECT_THROWS_WITH(ShapeError, tensor({{1, 2}, {3}, {4, 5, 6}}), "[tensor]", "ragged");
  EXPECT_THROWS_WITH(ShapeError, tensor({{{1.f}, {2.f}}, {{3.f}}}), "[tensor]", "ragged");
  EXPECT_THROWS_WITH(ShapeError, tensor(std::vector<float>{1, 2, 3}, {2, 2}), "[tensor]", "[2,2]");
}

TEST(TensorCreation, FilledTensors) {
  EXPECT_EQ(zeros({2, 2}).to_vector<float>(), (std::vector<float>(4, 0.f)));
  EXPECT_EQ(ones({3}, i64).to_vector<int64_t>(), (std::vector<int64_t>{1, 1, 1}));
  Tensor f = full({2}, 2.5, f64);
  EXPECT_EQ(f.dtype(), f64);
  EXPECT_EQ(f.to_vector<double>(), (std::vector<double>{2.5, 2.5}));
  EXPECT_EQ(zeros_like(f).dtype(), f64);
  EXPECT_EQ(ones_like(tensor({1, 2})).to_vector<int32_t>(), (std::vector<int32_t>{1, 1}));
  EXPECT_EQ(zeros({}).shape(), Shape{});
  EXPECT_EQ(zeros({}).numel(), 1);
  EXPECT_EQ(zeros({3, 0}).numel(), 0);
  EXPECT_THROWS_WITH(ValueError, empty({2, -1}), "[empty]", "negative");
}

TEST(TensorCreation, Arange) {
  Tensor a = arange(5);
  EXPECT_EQ(a.dtype(), i64);
  EXPECT_EQ(a.to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(arange(0, 1, 0.25).to_vector<float>(), (std::vector<float>{0, 0.25f, 0.5f, 0.75f}));
  EXPECT_EQ(arange(3, 0, -1, f64).to_vector<double>(), (std::vector<double>{3, 2, 1}));
  EXPECT_THROWS_WITH(ValueError, arange(0, 1, 0), "[arange]", "step=0");
  EXPECT_THROWS_WITH(ValueError, arange(0, 5, -1), "[arange]");
  // Counts no int64 holds exactly (an ONNX Range the onnx fuzzer made) and NaN bounds.
  EXPECT_THROWS_WITH(ValueError, arange(0, 1.06e37, 1), "[arange]", "elements");
  EXPECT_THROWS_WITH(ValueError, arange(0, std::nan(""), 1), "[arange]", "nan");
  EXPECT_THROWS_WITH(ValueError, arange(0, INFINITY, 1), "[arange]", "inf");
}

TEST(TensorCreation, RandomTensorsAreReproducibleAfterManualSeed) {
  manual_seed(123);
  auto a = randn({100}).to_vector<float>();
  auto u = rand({100}, f64).to_vector<double>();
  auto k = randint(-3, 4, {100}).to_vector<int64_t>();
  manual_seed(123);
  EXPECT_EQ(randn({100}).to_vector<float>(), a);
  EXPECT_EQ(rand({100}, f64).to_vector<double>(), u);
  EXPECT_EQ(randint(-3, 4, {100}).to_vector<int64_t>(), k);
  EXPECT_NE(randn({100}).to_vector<float>(), a);  // the generator moved on
  for (double v : u) EXPECT_TRUE(v >= 0 && v < 1);
  for (int64_t v : k) EXPECT_TRUE(v >= -3 && v < 4);
  EXPECT_THROWS_WITH(ValueError, randint(2, 2, {1}), "[randint]", "empty range");
}

TEST(TensorCreation, RandomDistributions) {
  manual_seed(5);
  Tensor n = randn({20000}, f64);
  double m = n.mean().item<double>();
  double var = ((n - m) * (n - m)).mean().item<double>();
  EXPECT_NEAR(m, 0.0, 0.03);
  EXPECT_NEAR(var, 1.0, 0.05);
  EXPECT_NEAR(rand({20000}, f64).mean().item<double>(), 0.5, 0.01);
}

TEST(TensorCreation, FromBufferCopiesAndFromBlobShares) {
  std::vector<float> data{1, 2, 3, 4, 5, 6};
  Tensor copied = from_buffer(data.data(), f32, {2, 3});
  Tensor shared = from_blob(data.data(), f32, {3, 2});
  data[0] = 100;
  EXPECT_EQ(copied.to_vector<float>()[0], 1.f);
  EXPECT_EQ(shared.to_vector<float>()[0], 100.f);
  shared.fill_(0.f);
  EXPECT_EQ(data[5], 0.f);
}

TEST(TensorCreation, FromBlobRunsTheDeleterWhenTheLastViewDies) {
  int deleted = 0;
  double value = 1.5;
  {
    Tensor t = from_blob(&value, f64, {}, [&](void* p) {
      EXPECT_EQ(p, &value);
      ++deleted;
    });
    Tensor v = t.reshape({1});
    t = Tensor{};
    EXPECT_EQ(deleted, 0);
    EXPECT_EQ(v.item<double>(), 1.5);
  }
  EXPECT_EQ(deleted, 1);
}

TEST(TensorAccess, ItemAndToVectorConvert) {
  Tensor t = tensor({2.75});
  EXPECT_EQ(t.item<double>(), 2.75);
  EXPECT_EQ(t.item<float>(), 2.75f);
  EXPECT_EQ(t.item<int64_t>(), 2);
  EXPECT_EQ(tensor({1, 2}).to_vector<double>(), (std::vector<double>{1, 2}));
  EXPECT_EQ(tensor({0.0f, 2.0f}).to_vector<bool>(), (std::vector<bool>{false, true}));
  EXPECT_THROWS_WITH(ValueError, tensor({1.f, 2.f}).item<float>(), "[item]", "[2]");
}

TEST(TensorAccess, DataWithTheWrongDtypeIsADTypeError) {
  Tensor t = zeros({2, 3});
  EXPECT_NE(t.data<float>(), nullptr);
  EXPECT_THROWS_WITH(DTypeError, t.data<double>(), "[data]", "f64", "f32", "[2,3]");
  EXPECT_THROWS_WITH(DTypeError, tensor({1, 2}).data<int64_t>(), "[data]", "i32");
  EXPECT_THROWS_WITH(ValueError, Tensor{}.data<float>(), "undefined");
}

TEST(TensorAccess, MetadataAndSize) {
  Tensor t = zeros({2, 3, 4});
  EXPECT_EQ(t.dim(), 3);
  EXPECT_EQ(t.numel(), 24);
  EXPECT_EQ(t.size(-1), 4);
  EXPECT_EQ(t.nbytes(), 96u);
  EXPECT_THROWS_WITH(IndexError, t.size(3), "[size]", "dim 3");
  EXPECT_FALSE(t.transpose(0, 2).is_contiguous());
  EXPECT_TRUE(zeros({3, 1}).expand({3, 1}).is_contiguous());
}

TEST(TensorAccess, CloneIsIndependentAndInPlaceWritesBroadcast) {
  Tensor a = tensor({{1.f, 2.f}, {3.f, 4.f}});
  Tensor b = a.clone();
  b.fill_(0.f);
  EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{1, 2, 3, 4}));
  a.copy_(tensor({7.f, 8.f}));  // a row broadcast to both rows
  EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{7, 8, 7, 8}));
  a.copy_(tensor({1, 2}));  // converts i32 into f32
  EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{1, 2, 1, 2}));
  EXPECT_THROWS_WITH(ShapeError, a.copy_(zeros({3})), "[copy_]", "[3]", "[2,2]");
  EXPECT_TRUE(a.contiguous().same(a));
}

TEST(TensorAccess, InPlaceWriteOnATensorThatRequiresGradIsAnError) {
  Tensor w = zeros({2}).requires_grad_();
  EXPECT_THROWS_WITH(AutogradError, w.fill_(1.f), "[fill_]", "NoGradGuard");
  NoGradGuard guard;
  w.fill_(1.f);
  EXPECT_EQ(w.to_vector<float>(), (std::vector<float>{1, 1}));
}

}  // namespace
}  // namespace baton::testing
