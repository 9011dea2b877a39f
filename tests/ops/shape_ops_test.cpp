// Shape ops: views (view, expand, permute, squeeze, unsqueeze, slice), copies (cat, pad,
// contiguous) and indexing (gather, index_select, embedding and their scatter gradients).
#include "harness/op_harness.h"
#include "dispatch/registry.h"

namespace baton::testing {
namespace {

using Index = std::vector<int64_t>;

// Reads a tensor by multi-index (any layout), in double.
struct Reader {
  explicit Reader(const Tensor& t) : shape(t.shape()), v(t.to_vector<double>()) {}
  double operator()(const Index& idx) const {
    int64_t off = 0;
    for (size_t d = 0; d < idx.size(); ++d) off = off * shape[d] + idx[d];
    return v[size_t(off)];
  }
  Shape shape;
  std::vector<double> v;
};

// An f64 tensor of `shape` with element idx = f(idx): the closed-form references.
Tensor build(const Shape& shape, const std::function<double(const Index&)>& f) {
  std::vector<double> v;
  Index idx(shape.size(), 0);
  for (int64_t i = 0; i < shape.numel(); ++i) {
    v.push_back(f(idx));
    for (size_t d = shape.size(); d-- > 0;) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
  return tensor(v, shape);
}

int64_t ravel(const Index& idx, const Shape& shape) {
  int64_t pos = 0;
  for (size_t d = 0; d < idx.size(); ++d) pos = pos * shape[d] + idx[d];
  return pos;
}

Tensor ints(std::vector<int64_t> v, const Shape& shape) { return tensor(v, shape); }

OpCase reshape_case(std::string name, OpFn fn, Shape in, Shape out) {
  return OpCase{
      .name = name,
      .make_inputs = [in] { return Inputs{uniform(in)}; },
      .fn = fn,
      .reference = [out](const Inputs& i) {
        Reader x(i[0]);
        return build(out, [&](const Index& idx) { return x.v[size_t(ravel(idx, out))]; });
      },
  };
}

std::vector<OpCase> view_cases() {
  return {
      reshape_case("shape.view/infer", [](const Inputs& i) { return view(i[0], {3, -1}); }, {2, 3, 2}, {3, 4}),
      OpCase{
          .name = "shape.view/reshape_strided",  // copies, reading the transposed order
          .make_inputs = [] { return Inputs{uniform({3, 2})}; },
          .fn = [](const Inputs& i) { return reshape(i[0].t(), {6}); },
          .reference = [](const Inputs& i) {
            Reader x(i[0]);
            return build({6}, [&](const Index& k) { return x({k[0] % 3, k[0] / 3}); });
          },
      },
      reshape_case("shape.view/flatten", [](const Inputs& i) { return flatten(i[0], 1); }, {2, 3, 2}, {2, 6}),
      reshape_case("shape.squeeze/basic", [](const Inputs& i) { return squeeze(i[0], 1); }, {3, 1, 2}, {3, 2}),
      reshape_case("shape.squeeze/not_one", [](const Inputs& i) { return squeeze(i[0], 0); }, {3, 2}, {3, 2}),
      reshape_case("shape.unsqueeze/middle", [](const Inputs& i) { return unsqueeze(i[0], -2); }, {3, 2}, {3, 1, 2}),
      OpCase{
          .name = "shape.unsqueeze/strided",
          .make_inputs = [] { return Inputs{uniform({2, 3})}; },
          .fn = [](const Inputs& i) { return unsqueeze(i[0].t(), 1) * 1.0; },
          .reference = [](const Inputs& i) {
            Reader x(i[0]);
            return build({3, 1, 2}, [&](const Index& k) { return x({k[2], k[0]}); });
          },
      },
      OpCase{
          .name = "shape.permute/3d",
          .make_inputs = [] { return Inputs{uniform({2, 3, 4})}; },
          .fn = [](const Inputs& i) { return permute(i[0], {2, 0, 1}); },
          .reference = [](const Inputs& i) {
            Reader x(i[0]);
            return build({4, 2, 3}, [&](const Index& k) { return x({k[1], k[2], k[0]}); });
          },
      },
      OpCase{
          .name = "shape.permute/transpose",
          .make_inputs = [] { return Inputs{uniform({2, 3})}; },
          .fn = [](const Inputs& i) { return transpose(i[0], 0, -1); },
          .reference = [](const Inputs& i) {
            Reader x(i[0]);
            return build({3, 2}, [&](const Index& k) { return x({k[1], k[0]}); });
          },
      },
      OpCase{
          .name = "shape.expand/broadcast",
          .make_inputs = [] { return Inputs{uniform({3, 1})}; },
          .fn = [](const Inputs& i) { return expand(i[0], {2, 3, 4}); },
          .reference = [](const Inputs& i) {
            Reader x(i[0]);
            return build({2, 3, 4}, [&](const Index& k) { return x({k[1], 0}); });
          },
      },
      OpCase{
          .name = "shape.cast/contiguous",
          .make_inputs = [] { return Inputs{uniform({2, 3})}; },
          .fn = [](const Inputs& i) { return contiguous(i[0].t()); },
          .reference = [](const Inputs& i) {
            Reader x(i[0]);
            return build({3, 2}, [&](const Index& k) { return x({k[1], k[0]}); });
          },
      },
  };
}

OpCase slice_case(std::string what, Shape in, int64_t dim, int64_t start, int64_t end, int64_t step,
                  Shape out) {
  return OpCase{
      .name = "shape.slice/" + what,
      .make_inputs = [in] { return Inputs{uniform(in)}; },
      .fn = [=](const Inputs& i) { return slice(i[0], dim, start, end, step); },
      .reference = [=](const Inputs& i) {
        Reader x(i[0]);
        size_t d = size_t(dim < 0 ? dim + int64_t(in.size()) : dim);
        int64_t n = in[d];
        int64_t s = std::clamp<int64_t>(start < 0 ? start + n : start, 0, n);
        return build(out, [&](Index k) {
          k[d] = s + k[d] * step;
          return x(k);
        });
      },
  };
}

std::vector<OpCase> slice_cases() {
  std::vector<OpCase> cases = {
      slice_case("rows", {5, 3}, 0, 1, 4, 1, {3, 3}),
      slice_case("step", {2, 7}, 1, 0, 7, 3, {2, 3}),
      slice_case("negative", {2, 6, 2}, -2, -4, -1, 2, {2, 2, 2}),
      slice_case("clamped", {4}, 0, 2, 100, 1, {2}),
      slice_case("empty", {4, 2}, 0, 3, 1, 1, {0, 2}),
  };
  // slice_backward is reached through the registry: it is slice's gradient, not public.
  cases.push_back(OpCase{
      .name = "shape.slice_backward/step",
      .make_inputs = [] { return Inputs{uniform({2, 3})}; },
      .fn = [](const Inputs& i) {
        ops::Attrs a{{"dim", int64_t(1)}, {"start", int64_t(1)}, {"end", int64_t(7)},
                     {"step", int64_t(2)}, {"shape", std::vector<int64_t>{2, 7}}};
        return ops::call(*ops::find_op("slice_backward"), {i[0]}, a, SourceLoc::current());
      },
      .reference = [](const Inputs& i) {
        Reader g(i[0]);
        return build({2, 7}, [&](const Index& k) {
          return k[1] % 2 == 1 && k[1] < 7 ? g({k[0], (k[1] - 1) / 2}) : 0.0;
        });
      },
  });
  return cases;
}

std::vector<OpCase> copy_cases() {
  return {
      OpCase{
          .name = "shape.cat/dim1",
          .make_inputs = [] { return Inputs{uniform({2, 1, 2}), uniform({2, 3, 2}, -1, 1, 2), uniform({2, 2, 2}, -1, 1, 3)}; },
          .fn = [](const Inputs& i) { return cat({i[0], i[1], i[2]}, 1); },
          .reference = [](const Inputs& i) {
            Reader a(i[0]), b(i[1]), c(i[2]);
            return build({2, 6, 2}, [&](const Index& k) {
              if (k[1] < 1) return a(k);
              if (k[1] < 4) return b({k[0], k[1] - 1, k[2]});
              return c({k[0], k[1] - 4, k[2]});
            });
          },
      },
      OpCase{
          .name = "shape.cat/stack_last",
          .make_inputs = [] { return Inputs{uniform({2, 3}), uniform({2, 3}, -1, 1, 2)}; },
          .fn = [](const Inputs& i) { return stack({i[0], i[1].t().contiguous().t()}, -1); },
          .reference = [](const Inputs& i) {
            Reader a(i[0]), b(i[1]);
            return build({2, 3, 2}, [&](const Index& k) { return (k[2] ? b : a)({k[0], k[1]}); });
          },
      },
      OpCase{
          .name = "shape.cat/split",
          .make_inputs = [] { return Inputs{uniform({7, 2})}; },
          .fn = [](const Inputs& i) {
            auto parts = split(i[0], 3);
            return cat({parts[2], parts[0], parts[1]}, 0);  // [1, 3, 3] rows reordered
          },
          .reference = [](const Inputs& i) {
            Reader x(i[0]);
            return build({7, 2}, [&](const Index& k) {
              int64_t r = k[0] == 0 ? 6 : k[0] - 1;
              return x({r, k[1]});
            });
          },
      },
      OpCase{
          .name = "shape.pad/two_dims",
          .make_inputs = [] { return Inputs{uniform({2, 3, 2})}; },
          .fn = [](const Inputs& i) { return pad(i[0], {1, 2, 0, 1}, 0.5); },
          .reference = [](const Inputs& i) {
            Reader x(i[0]);
            return build({2, 4, 5}, [&](const Index& k) {
              bool inside = k[1] < 3 && k[2] >= 1 && k[2] < 3;
              return inside ? x({k[0], k[1], k[2] - 1}) : 0.5;
            });
          },
      },
  };
}

std::vector<OpCase> index_cases() {
  return {
      OpCase{
          .name = "shape.gather/dim1",
          .make_inputs = [] { return Inputs{uniform({3, 4}), ints({3, 0, 3, 1, 2, 2, 0, 0}, {2, 4})}; },
          .fn = [](const Inputs& i) { return gather(i[0], 1, i[1]); },
          .reference = [](const Inputs& i) {
            Reader x(i[0]), idx(i[1]);
            return build({2, 4}, [&](const Index& k) { return x({k[0], int64_t(idx(k))}); });
          },
      },
      OpCase{
          .name = "shape.scatter_add/repeats",
          .make_inputs = [] { return Inputs{uniform({3, 2}), ints({2, 0, 2, 2}, {2, 2}), uniform({2, 2}, -1, 1, 5)}; },
          .fn = [](const Inputs& i) { return scatter_add(i[0], 0, i[1], i[2]); },
          .reference = [](const Inputs& i) {
            Reader base(i[0]), idx(i[1]), src(i[2]);
            return build({3, 2}, [&](const Index& k) {
              double v = base(k);
              for (int64_t r = 0; r < 2; ++r)
                if (int64_t(idx({r, k[1]})) == k[0]) v += src({r, k[1]});
              return v;
            });
          },
      },
      OpCase{
          .name = "shape.index_select/dim1",
          .make_inputs = [] { return Inputs{uniform({2, 4, 3}), ints({3, 0, 3}, {3})}; },
          .fn = [](const Inputs& i) { return index_select(i[0], 1, i[1]); },
          .reference = [](const Inputs& i) {
            Reader x(i[0]);
            Index idx{3, 0, 3};
            return build({2, 3, 3}, [&](const Index& k) { return x({k[0], idx[size_t(k[1])], k[2]}); });
          },
      },
      OpCase{
          .name = "shape.index_add/repeats",
          .make_inputs = [] { return Inputs{uniform({3, 2}), ints({1, 1, 0}, {3}), uniform({3, 2}, -1, 1, 4)}; },
          .fn = [](const Inputs& i) { return index_add(i[0], 0, i[1], i[2]); },
          .reference = [](const Inputs& i) {
            Reader base(i[0]), src(i[2]);
            return build({3, 2}, [&](const Index& k) {
              double v = base(k);
              if (k[0] == 1) v += src({0, k[1]}) + src({1, k[1]});
              if (k[0] == 0) v += src({2, k[1]});
              return v;
            });
          },
      },
      // gather along a dim that is not the last, the index smaller than x elsewhere.
      OpCase{
          .name = "shape.gather/dim0_smaller_index",
          .make_inputs = [] {
            return Inputs{uniform({4, 3, 5}), ints({3, 0, 1, 1, 2, 3, 0, 0, 1, 2, 3, 3, 0, 2, 2, 1}, {2, 2, 4})};
          },
          .fn = [](const Inputs& i) { return gather(i[0], 0, i[1]); },
          .reference = [](const Inputs& i) {
            Reader x(i[0]), idx(i[1]);
            return build({2, 2, 4}, [&](const Index& k) { return x({int64_t(idx(k)), k[1], k[2]}); });
          },
      },
      // gather along the last dim of a transposed (strided) input.
      OpCase{
          .name = "shape.gather/last_dim_of_transpose",
          .make_inputs = [] {
            return Inputs{uniform({5, 3}), ints({4, 0, 4, 2, 1, 3, 0, 0, 1, 2, 3, 4, 2, 2, 2, 1, 0, 4}, {3, 6})};
          },
          .fn = [](const Inputs& i) { return gather(i[0].t(), 1, i[1]); },
          .reference = [](const Inputs& i) {
            Reader x(i[0]), idx(i[1]);
            return build({3, 6}, [&](const Index& k) { return x({int64_t(idx(k)), k[0]}); });
          },
      },
      // scatter_add along the last dim (rows over threads), repeated indices adding up.
      OpCase{
          .name = "shape.scatter_add/last_dim_repeats",
          .make_inputs = [] { return Inputs{uniform({2, 4}), ints({3, 3, 0, 1, 1, 1}, {2, 3}), uniform({2, 3}, -1, 1, 6)}; },
          .fn = [](const Inputs& i) { return scatter_add(i[0], 1, i[1], i[2]); },
          .reference = [](const Inputs& i) {
            Reader base(i[0]), idx(i[1]), src(i[2]);
            return build({2, 4}, [&](const Index& k) {
              double v = base(k);
              for (int64_t c = 0; c < 3; ++c)
                if (int64_t(idx({k[0], c})) == k[1]) v += src({k[0], c});
              return v;
            });
          },
      },
      // index_select along the last dim: single elements, not rows.
      OpCase{
          .name = "shape.index_select/last_dim",
          .make_inputs = [] { return Inputs{uniform({3, 5}), ints({4, 0, 4, 2}, {4})}; },
          .fn = [](const Inputs& i) { return index_select(i[0], 1, i[1]); },
          .reference = [](const Inputs& i) {
            Reader x(i[0]);
            Index idx{4, 0, 4, 2};
            return build({3, 4}, [&](const Index& k) { return x({k[0], idx[size_t(k[1])]}); });
          },
      },
      OpCase{
          .name = "nn.embedding/2d_indices",
          .make_inputs = [] { return Inputs{uniform({5, 3}), ints({4, 0, 4, 2, 1, 4}, {2, 3})}; },
          .fn = [](const Inputs& i) { return embedding(i[0], i[1]); },
          .reference = [](const Inputs& i) {
            Reader w(i[0]), idx(i[1]);
            return build({2, 3, 3}, [&](const Index& k) { return w({int64_t(idx({k[0], k[1]})), k[2]}); });
          },
      },
  };
}

BATON_OP_CASES {
  std::vector<OpCase> all;
  for (auto* group : {view_cases, slice_cases, copy_cases, index_cases})
    for (auto& c : group()) all.push_back(std::move(c));
  return all;
}

// --- views share storage ---

TEST(ShapeViews, ViewsShareStorageWithTheirBase) {
  Tensor x = zeros({2, 3});
  Tensor v = x.view({3, 2}), t = x.t(), s = slice(x, 1, 1, 3), u = x.unsqueeze(0), q = u.squeeze(0);
  for (const Tensor* view : {&v, &t, &s, &u, &q})
    EXPECT_TRUE(view->shares_storage_with(x));
  v.fill_(0);
  t.copy_(tensor({{1.0f, 2.0f}, {3.0f, 4.0f}, {5.0f, 6.0f}}));  // writes x through its transpose
  EXPECT_EQ(x.to_vector<float>(), (std::vector<float>{1, 3, 5, 2, 4, 6}));
  s.fill_(9.0f);  // columns 1..2
  EXPECT_EQ(x.to_vector<float>(), (std::vector<float>{1, 9, 9, 2, 9, 9}));
  EXPECT_EQ(v.to_vector<float>(), x.to_vector<float>());
  EXPECT_EQ(q.to_vector<float>(), x.to_vector<float>());
}

TEST(ShapeViews, ExpandHasZeroStrides) {
  Tensor x = tensor({1.0f, 2.0f, 3.0f}).reshape({3, 1});
  Tensor e = x.expand({3, 4});
  EXPECT_EQ(e.strides(), (Shape{1, 0}));
  EXPECT_TRUE(e.shares_storage_with(x));
}

TEST(ShapeViews, SliceWithStepIsAView) {
  Tensor x = arange(0, 10, 1, f32);
  Tensor s = slice(x, 0, 1, 10, 3);  // 1, 4, 7
  EXPECT_EQ(s.shape(), (Shape{3}));
  EXPECT_EQ(s.strides(), (Shape{3}));
  EXPECT_EQ(s.offset(), 1);
  EXPECT_EQ(s.to_vector<float>(), (std::vector<float>{1, 4, 7}));
  s.fill_(-1.0f);
  EXPECT_EQ(x.to_vector<float>()[4], -1.0f);
}

TEST(ShapeViews, ReshapeOfNonContiguousCopies) {
  Tensor x = arange(0, 6, 1, f32).reshape({2, 3});
  Tensor r = x.t().reshape({6});
  EXPECT_FALSE(r.shares_storage_with(x));
  EXPECT_EQ(r.to_vector<float>(), (std::vector<float>{0, 3, 1, 4, 2, 5}));
  Tensor same = x.reshape({3, 2});  // contiguous: a view
  EXPECT_TRUE(same.shares_storage_with(x));
}

TEST(ShapeViews, ViewOfNonContiguousThrows) {
  Tensor x = zeros({2, 3});
  int line = __LINE__ + 1;
  EXPECT_THROWS_WITH(ShapeError, x.t().view({6}), "[view]", "contiguous", "reshape()", "[3,2]",
                     "shape_ops_test.cpp:" + std::to_string(line));
}

TEST(ShapeViews, SqueezeAndUnsqueezeOfStridedStayViews) {
  Tensor x = zeros({3, 2});
  Tensor u = x.t().unsqueeze(1);  // [2,1,3], strided
  EXPECT_EQ(u.shape(), (Shape{2, 1, 3}));
  EXPECT_TRUE(u.shares_storage_with(x));
  EXPECT_EQ(u.squeeze(1).strides(), (Shape{1, 2}));
}

TEST(ShapeViews, SliceGradientHasHigherOrder) {
  Tensor x = tensor({1.0, 2.0, 3.0, 4.0}).requires_grad_();
  Tensor y = (slice(x, 0, 1, 4, 2) * slice(x, 0, 1, 4, 2)).sum();  // x1^2 + x3^2
  Tensor g = grad({y}, {x}, {}, true, true)[0];
  EXPECT_EQ(g.to_vector<double>(), (std::vector<double>{0, 4, 0, 8}));
  Tensor gg = grad({g.sum()}, {x})[0];
  EXPECT_EQ(gg.to_vector<double>(), (std::vector<double>{0, 2, 0, 2}));
}

// --- errors ---

TEST(ShapeErrors, ReshapeWrongSize) {
  EXPECT_THROWS_WITH(ShapeError, reshape(zeros({2, 3}), {4, 2}), "[view]", "invalid for 6",
                     "shape_ops_test.cpp:");
}

TEST(ShapeErrors, CatMismatch) {
  int line = __LINE__ + 1;
  EXPECT_THROWS_WITH(ShapeError, cat({zeros({2, 3}), zeros({2, 4})}, 0), "[cat]", "[2,3]", "[2,4]",
                     "shape_ops_test.cpp:" + std::to_string(line));
  EXPECT_THROWS_WITH(ValueError, cat({}), "[cat]", "at least 1 operand");
  EXPECT_THROWS_WITH(IndexError, cat({zeros({2})}, 1), "[cat]", "dim 1");
}

TEST(ShapeErrors, SliceBadStepAndDim) {
  EXPECT_THROWS_WITH(ValueError, slice(zeros({3}), 0, 0, 3, 0), "[slice]", "step", "shape_ops_test.cpp:");
  EXPECT_THROWS_WITH(IndexError, slice(zeros({3}), 1, 0, 3), "[slice]", "dim 1", "[3]");
}

TEST(ShapeErrors, PadNegative) {
  EXPECT_THROWS_WITH(ValueError, pad(zeros({2, 3}), {-1, 0}), "[pad]", "negative", "[2,3]",
                     "shape_ops_test.cpp:");
  EXPECT_THROWS_WITH(ValueError, pad(zeros({2}), {1, 1, 1, 1}), "[pad]", "at most 1 dims");
}

TEST(ShapeErrors, IndexOutOfRange) {
  Tensor w = zeros({5, 3});
  int line = __LINE__ + 1;
  EXPECT_THROWS_WITH(IndexError, embedding(w, tensor<int64_t>({1, 7})), "[embedding]", "index 7",
                     "size 5", "[5,3]", "shape_ops_test.cpp:" + std::to_string(line));
  EXPECT_THROWS_WITH(IndexError, embedding(w, tensor<int64_t>({-1})), "[embedding]", "index -1");
  EXPECT_THROWS_WITH(IndexError, index_select(w, 1, tensor<int64_t>({3})), "[index_select]", "index 3");
  EXPECT_THROWS_WITH(IndexError, gather(w, 0, ints({9}, {1, 1})), "[gather]", "index 9");
  EXPECT_THROWS_WITH(DTypeError, gather(w, 0, zeros({1, 1})), "[gather]", "i64");
  EXPECT_THROWS_WITH(ShapeError, gather(w, 0, ints({0}, {1})), "[gather]", "rank");
}

// --- other behaviour ---

TEST(ShapeOps, CatPromotesAndStackSplitRoundTrip) {
  Tensor c = cat({tensor({1, 2}), tensor({0.5f})});
  EXPECT_EQ(c.dtype(), f32);
  EXPECT_EQ(c.to_vector<float>(), (std::vector<float>{1, 2, 0.5f}));
  Tensor a = arange(0, 6, 1, f32).reshape({2, 3});
  Tensor s = stack({a, a * 2.0f}, 1);
  EXPECT_EQ(s.shape(), (Shape{2, 2, 3}));
  auto parts = split(a, 2, 1);
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[1].shape(), (Shape{2, 1}));
  EXPECT_EQ(parts[1].to_vector<float>(), (std::vector<float>{2, 5}));
}

TEST(ShapeOps, EmbeddingAcceptsI32AndAccumulatesRepeatedRows) {
  Tensor w = arange(0, 6, 1, f64).reshape({3, 2}).detach().requires_grad_();
  Tensor e = embedding(w, tensor({2, 2, 0}));
  EXPECT_EQ(e.to_vector<double>(), (std::vector<double>{4, 5, 4, 5, 0, 1}));
  e.sum().backward();
  EXPECT_EQ(w.grad().to_vector<double>(), (std::vector<double>{1, 1, 0, 0, 2, 2}));
}

// Large enough for threads: gather along each dim of a [300, 500] input, scatter_add along
// dim 0, and index_select of single elements (of 1, 4 and 8 bytes), against the loops written out.
TEST(ShapeOps, LargeGatherAndElementSelectAgree) {
  Tensor x = uniform({300, 500});
  const std::vector<double> xv = x.to_vector<double>();
  std::vector<int64_t> rows, cols;
  for (int64_t i = 0; i < 300 * 500; ++i) {
    rows.push_back((i * 7919) % 300);
    cols.push_back((i * 104729) % 500);
  }
  const std::vector<double> by_rows = gather(x, 0, tensor(rows, {300, 500})).to_vector<double>();
  const std::vector<double> by_cols = gather(x, 1, tensor(cols, {300, 500})).to_vector<double>();
  for (int64_t i = 0; i < 300; ++i)
    for (int64_t j = 0; j < 500; ++j) {
      const size_t at = size_t(i * 500 + j);
      ASSERT_EQ(by_rows[at], xv[size_t(rows[at] * 500 + j)]);
      ASSERT_EQ(by_cols[at], xv[size_t(i * 500 + cols[at])]);
    }
  // scatter_add along dim 0 (threads take columns), many rows adding into each element:
  // in index order, so equal to the float additions written out in that order.
  Tensor src = uniform({300, 500}, -1, 1, 3).to(f32);
  const std::vector<float> sv = src.to_vector<float>();
  std::vector<float> sums(150 * 500, 0.0f);
  for (int64_t i = 0; i < 300; ++i)
    for (int64_t j = 0; j < 500; ++j) sums[size_t(rows[size_t(i * 500 + j)] % 150 * 500 + j)] += sv[size_t(i * 500 + j)];
  std::vector<int64_t> into(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) into[i] = rows[i] % 150;
  EXPECT_EQ(scatter_add(zeros({150, 500}), 0, tensor(into, {300, 500}), src).to_vector<float>(), sums);
  std::vector<int64_t> picks;
  for (int64_t j = 0; j < 700; ++j) picks.push_back((j * 31) % 500);
  for (DType t : {b8, i32, f32, f64}) {
    SCOPED_TRACE(str(t));
    Tensor xt = x.to(t);
    const std::vector<double> v = xt.to(f64).to_vector<double>();
    const std::vector<double> out = index_select(xt, 1, tensor(picks, {700})).to(f64).to_vector<double>();
    for (int64_t i = 0; i < 300; ++i)
      for (int64_t j = 0; j < 700; ++j) ASSERT_EQ(out[size_t(i * 700 + j)], v[size_t(i * 500 + picks[size_t(j)])]);
  }
}

// Scatters into rows of no elements add nothing, and index nothing out of range.
TEST(ShapeOps, ScattersIntoEmptyRowsAddNothing) {
  EXPECT_EQ(index_add(zeros({3, 0}), 0, tensor<int64_t>({1, 2}), zeros({2, 0})).shape(), (Shape{3, 0}));
  EXPECT_EQ(scatter_add(zeros({0, 3}), 0, zeros({0, 3}, i64), zeros({0, 3})).shape(), (Shape{0, 3}));
  EXPECT_EQ(gather(zeros({3, 0}), 1, zeros({3, 0}, i64)).shape(), (Shape{3, 0}));
}

TEST(ShapeOps, LargeIndexSelectAgrees) {
  Tensor x = uniform({4000, 16});
  std::vector<int64_t> idx;
  for (int64_t i = 0; i < 5000; ++i) idx.push_back((i * 7919) % 4000);
  Tensor out = index_select(x, 0, tensor(idx, {5000}));
  auto xv = x.to_vector<double>(), ov = out.to_vector<double>();
  for (size_t i = 0; i < 5000; i += 499)
    for (size_t k = 0; k < 16; ++k) EXPECT_EQ(ov[i * 16 + k], xv[size_t(idx[i]) * 16 + k]);
}

}  // namespace
}  // namespace baton::testing

namespace baton::testing {
namespace {

// Composite functions name themselves in errors, not the op they are built on.
TEST(ShapeOps, CompositeFunctionsNameThemselvesInErrors) {
  Tensor x = zeros({2, 3});
  EXPECT_THROWS_WITH(IndexError, transpose(x, 0, 5), "[transpose]", "f32[2,3]", "shape_ops_test.cpp:");
  EXPECT_THROWS_WITH(IndexError, flatten(x, 0, 7), "[flatten]", "f32[2,3]", "shape_ops_test.cpp:");
  EXPECT_THROWS_WITH(IndexError, mean(x, {4}), "[mean]", "f32[2,3]");
}

}  // namespace
}  // namespace baton::testing
