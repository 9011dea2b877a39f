// Writes through views while a graph is built (Tensor::copy_/fill_ on a slice, a
// transpose, a reshape of a value): the elements change in the base and in every view of
// it, as eagerly, in compiled functions and Session graphs at O0 and O2.
#include <gtest/gtest.h>

#include <random>

#include <baton/baton.h>

#include "harness/op_harness.h"

namespace baton {
namespace {

using testing::all_close;
using Fn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

// What a function returned and left in its inputs, after `calls` calls on copies of them.
struct Outcome {
  std::vector<Tensor> outputs, inputs_after;
};

std::vector<Tensor> copies(const std::vector<Tensor>& inputs) {
  std::vector<Tensor> out;
  for (const Tensor& t : inputs) out.push_back(t.clone());
  return out;
}

constexpr int kCalls = 2;  // the second call of a compiled function replays its plan

Outcome eager(const Fn& fn, const std::vector<Tensor>& inputs) {
  Outcome o{{}, copies(inputs)};
  for (int i = 0; i < kCalls; ++i) o.outputs = fn(o.inputs_after);
  return o;
}

Outcome compiled(const Fn& fn, const std::vector<Tensor>& inputs, OptLevel level) {
  Outcome o{{}, copies(inputs)};
  CompiledFunction f({.level = level});
  for (int i = 0; i < kCalls; ++i) o.outputs = f.call(o.inputs_after, fn, SourceLoc::current());
  return o;
}

Outcome session(const Fn& fn, const std::vector<Tensor>& inputs, OptLevel level) {
  Outcome o{{}, copies(inputs)};
  Graph g("view_writes");
  std::vector<Tensor> placeholders;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::vector<SymDim> dims(inputs[i].shape().begin(), inputs[i].shape().end());
    placeholders.push_back(g.placeholder(inputs[i].dtype(), dims, str("x", i)));
  }
  const std::vector<Tensor> fetches = fn(placeholders);
  Session s(g, {.level = level});
  Session::Feeds feeds;
  for (size_t i = 0; i < inputs.size(); ++i) feeds.emplace_back(placeholders[i], o.inputs_after[i]);
  for (int i = 0; i < kCalls; ++i) o.outputs = s.run(fetches, feeds, {.run_updates = true});
  return o;
}

::testing::AssertionResult same(const Outcome& got, const Outcome& want, const std::string& mode) {
  for (auto [what, a, b] : {std::tuple{"output", &got.outputs, &want.outputs},
                            std::tuple{"input after the calls", &got.inputs_after, &want.inputs_after}}) {
    if (a->size() != b->size()) return ::testing::AssertionFailure() << mode << ": " << what << " count differs";
    for (size_t i = 0; i < a->size(); ++i)
      if (auto r = all_close((*a)[i], (*b)[i], 0, 0); !r)
        return r << " (" << mode << ", " << what << " " << i << ")";
  }
  return ::testing::AssertionSuccess();
}

// fn in every mode against eager, bit for bit: the same kernels run either way. Without
// `as_session`, not as a Session graph: building one computes what reads only concrete
// tensors at once, before the graph's writes into them run (define-and-run).
::testing::AssertionResult agrees_with_eager(const Fn& fn, const std::vector<Tensor>& inputs,
                                             bool as_session = true) {
  const Outcome want = eager(fn, inputs);
  for (OptLevel level : {OptLevel::O0, OptLevel::O2}) {
    const std::string at = level == OptLevel::O0 ? " O0" : " O2";
    if (auto r = same(compiled(fn, inputs, level), want, "compiled" + at); !r) return r;
    if (!as_session) continue;
    if (auto r = same(session(fn, inputs, level), want, "session" + at); !r) return r;
  }
  return ::testing::AssertionSuccess();
}

Tensor x46() { return testing::uniform_f32({4, 6}, 7); }

TEST(ViewWrites, IntoASliceOfAnIntermediate) {
  EXPECT_TRUE(agrees_with_eager(
      [](const std::vector<Tensor>& in) {
        Tensor y = in[0] * 2.0f;
        slice(y, 1, 1, 3).fill_(0.0);
        return std::vector<Tensor>{relu(y) + 1.0f};
      },
      {x46()}));
}

TEST(ViewWrites, AViewMadeBeforeTheWriteSeesIt) {
  EXPECT_TRUE(agrees_with_eager(
      [](const std::vector<Tensor>& in) {
        Tensor y = in[0] + 1.0f;
        Tensor before = slice(y, 0, 0, 2);
        slice(y, 0, 1, 3).fill_(7.0);
        return std::vector<Tensor>{before * 1.0f, y};
      },
      {x46()}));
}

TEST(ViewWrites, ReadsBeforeTheWriteSeeTheOldElements) {
  EXPECT_TRUE(agrees_with_eager(
      [](const std::vector<Tensor>& in) {
        Tensor y = in[0] * 3.0f;
        Tensor old = y * 1.0f, old_sum = y.sum();
        slice(y, 1, 0, 1).copy_(full({1}, 5.0));
        return std::vector<Tensor>{old, old_sum, y * 1.0f, y.sum()};
      },
      {x46()}));
}

// The plan may lay a product's result out column-major: a view of it is taken from the
// tensor the run has, whatever its strides.
TEST(ViewWrites, ThroughATransposeOfAProduct) {
  const Tensor w = testing::uniform_f32({6, 5}, 3);
  EXPECT_TRUE(agrees_with_eager(
      [w](const std::vector<Tensor>& in) {
        Tensor y = matmul(in[0], w);
        slice(transpose(y, 0, 1), 0, 0, 2).fill_(-1.0);
        return std::vector<Tensor>{y * 2.0f, relu(y)};
      },
      {x46()}));
}

TEST(ViewWrites, ThroughAReshapeAndUnsqueezeWithABroadcastSource) {
  EXPECT_TRUE(agrees_with_eager(
      [](const std::vector<Tensor>& in) {
        Tensor y = in[0] - 1.0f;
        Tensor v = unsqueeze(reshape(y, {2, 12}), 0);
        slice(v, 2, 3, 9).copy_(full({6}, 4.0));
        return std::vector<Tensor>{y, sigmoid(y)};
      },
      {x46()}));
}

TEST(ViewWrites, OverlappingStridedWritesInOrder) {
  EXPECT_TRUE(agrees_with_eager(
      [](const std::vector<Tensor>& in) {
        Tensor y = exp(in[0]);
        slice(y, 1, 0, 6, 2).fill_(1.0);
        slice(y, 1, 2, 5).fill_(2.0);
        return std::vector<Tensor>{y * 1.0f};
      },
      {x46()}));
}

// A write through a view of an input reaches the caller's tensor, as eagerly.
TEST(ViewWrites, IntoAViewOfAnInput) {
  EXPECT_TRUE(agrees_with_eager(
      [](const std::vector<Tensor>& in) {
        slice(in[0], 1, 0, 2).copy_(slice(in[0], 1, 4, 6) * 3.0f);
        return std::vector<Tensor>{sum(in[0], {1})};
      },
      {x46()}));
}

// A slice of state the function reads (a cache) written each call: the state changes as
// eagerly, call after call.
TEST(ViewWrites, IntoASliceOfBoundStateEachCall) {
  for (OptLevel level : {OptLevel::O0, OptLevel::O2}) {
    Tensor cache = zeros({4, 3}), eager_cache = zeros({4, 3});
    auto step = [](Tensor& state, const Tensor& x, int64_t row) {
      slice(state, 0, row, row + 1).copy_(x);
      return sum(state, {0});
    };
    auto f = compile([&](Tensor x) { return step(cache, x, 1); }, {.level = level});
    for (int call = 0; call < 3; ++call) {
      const Tensor x = full({1, 3}, double(call + 1));
      EXPECT_TRUE(all_close(f(x), step(eager_cache, x, 1), 0, 0)) << "call " << call;
      EXPECT_TRUE(all_close(cache, eager_cache, 0, 0)) << "call " << call;
    }
    EXPECT_EQ(f.num_traces(), 1u);
  }
}

// A Session runs a write into a computed value's elements whenever a fetch reads them
// (it is part of computing them), without run_updates.
TEST(ViewWrites, SessionRunsAWriteIntoAComputedValueItsFetchReads) {
  Graph g("g");
  Tensor x = g.placeholder(f32, {4}, "x");
  Tensor y = x * 1.0f;
  slice(y, 0, 1, 2).fill_(9.0);
  Session s(g);
  EXPECT_EQ(s.run({y}, {{x, zeros({4})}}).at(0).to_vector<float>(), (std::vector<float>{0, 9, 0, 0}));
}

// As eagerly, writing into the elements of a value that requires grad is an error: the
// graph's gradient would not see the write.
TEST(ViewWrites, IntoAValueThatRequiresGradIsAnError) {
  Tensor w = ones({4, 6}).requires_grad_();
  auto write = [&](const Tensor& x) {
    Tensor y = x * w;
    slice(y, 1, 0, 2).fill_(0.0);
    return y.sum();
  };
  EXPECT_THROWS_WITH(AutogradError, write(x46()), "[fill_] an in-place write");
  auto f = compile(write);
  EXPECT_THROWS_WITH(AutogradError, f(x46()), "[fill_] an in-place write", "view_writes_test.cpp");
}

// --- random programs: a base value, writes through random chains of views, reads ---

struct ViewOp {
  enum Kind { Slice, Transpose, Unsqueeze, Flatten } kind;
  int64_t dim = 0, start = 0, end = 0, step = 1;  // Transpose: dims `dim` and `start`
};

Tensor apply(const Tensor& t, const ViewOp& op) {
  switch (op.kind) {
    case ViewOp::Slice: return slice(t, op.dim, op.start, op.end, op.step);
    case ViewOp::Transpose: return transpose(t, op.dim, op.start);
    case ViewOp::Unsqueeze: return unsqueeze(t, op.dim);
    case ViewOp::Flatten: return reshape(t, {-1});  // a copy where no view can show it
  }
  return t;
}

Tensor apply(Tensor t, const std::vector<ViewOp>& chain) {
  for (const ViewOp& op : chain) t = apply(t, op);
  return t;
}

std::vector<ViewOp> random_chain(const Shape& base, std::mt19937& rng) {
  std::vector<ViewOp> chain;
  Tensor probe = zeros(base);  // the shapes along the chain
  const int length = 1 + int(rng() % 3);
  for (int i = 0; i < length; ++i) {
    const int64_t rank = probe.dim();
    ViewOp op{ViewOp::Kind(rng() % 4)};
    if (op.kind == ViewOp::Slice) {
      op.dim = int64_t(rng() % uint64_t(rank));
      const int64_t n = probe.shape()[size_t(op.dim)];
      op.start = int64_t(rng() % uint64_t(n));
      op.end = op.start + 1 + int64_t(rng() % uint64_t(n - op.start));
      op.step = 1 + int64_t(rng() % 2);
    } else if (op.kind == ViewOp::Transpose) {
      if (rank < 2) continue;
      op.dim = int64_t(rng() % uint64_t(rank));
      op.start = (op.dim + 1 + int64_t(rng() % uint64_t(rank - 1))) % rank;
    } else if (op.kind == ViewOp::Unsqueeze) {
      op.dim = int64_t(rng() % uint64_t(rank + 1));
    }
    probe = apply(probe, op);
    chain.push_back(op);
  }
  return chain;
}

struct ViewProgram {
  // The input itself, an element-wise value, a product, a relu, a value of bound state
  // alone (constant folding would fold it).
  int base_kind = 0;
  std::vector<ViewOp> before;  // a view made before the writes, read after them
  std::vector<std::vector<ViewOp>> writes;
  std::vector<double> fills;
  std::vector<bool> copies;  // copy_ of a computed tensor rather than fill_
};

ViewProgram random_view_program(std::mt19937& rng) {
  ViewProgram p;
  p.base_kind = int(rng() % 5);
  p.before = random_chain({4, 6}, rng);
  const int writes = 1 + int(rng() % 2);
  for (int i = 0; i < writes; ++i) {
    p.writes.push_back(random_chain({4, 6}, rng));
    p.fills.push_back(double(int(rng() % 9)) - 4.0);
    p.copies.push_back(rng() % 2 == 0);
  }
  return p;
}

// The same base computed twice: CSE must not merge the copy the writes do not reach.
Tensor make_base(int kind, const Tensor& x, const Tensor& w) {
  switch (kind) {
    case 0: return x;
    case 1: return x * 2.0f + 1.0f;
    case 2: return matmul(x, w);
    case 3: return relu(x);
    default: return slice(w, 1, 0, 4).t() * 2.0f;  // bound state only: [4,6]
  }
}

Fn run_view_program(const ViewProgram& p, const Tensor& w) {
  return [p, w](const std::vector<Tensor>& in) {
    const Tensor& x = in[0];
    Tensor base = make_base(p.base_kind, x, w), twin = make_base(p.base_kind, x, w);
    Tensor old = base * 1.0f;
    Tensor before = apply(base, p.before);
    for (size_t i = 0; i < p.writes.size(); ++i) {
      Tensor v = apply(base, p.writes[i]);
      if (p.copies[i]) v.copy_(sigmoid(apply(x, p.writes[i])) + float(p.fills[i]));
      else v.fill_(p.fills[i]);
    }
    return std::vector<Tensor>{old, before * 1.0f, base * 1.0f, sigmoid(base) * 2.0f, sum(base, {0}), twin * 1.0f};
  };
}

TEST(ViewWrites, RandomProgramsAgreeWithEager) {
  const Tensor w = testing::uniform_f32({6, 6}, 11);
  for (uint32_t seed = 0; seed < 150; ++seed) {
    std::mt19937 rng(seed);
    const ViewProgram p = random_view_program(rng);
    const bool of_bound_state_only = p.base_kind == 4;
    EXPECT_TRUE(agrees_with_eager(run_view_program(p, w), {x46()}, !of_bound_state_only)) << "seed " << seed;
  }
}

}  // namespace
}  // namespace baton
