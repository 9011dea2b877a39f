// SessionOptions::intra_op_threads: the OpenMP threads of each step's kernel, beside the
// inter-op workers; results are the same bits at every setting. The products stay
// row-major (ColumnMajorOverride): a plan computes one column-major where it times that
// faster, which sums in another order, and with oneDNN's AVX2 kernels the two times are
// close enough that the choice flips between plans.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "baton/baton.h"
#include "harness/op_harness.h"
#include "kernels/cpu/matmul.h"

namespace baton {
namespace {

struct TwoBranches {
  Graph g{"two_branches"};
  Tensor x = g.placeholder(f32, {96, 256}, "x");
  Tensor w = testing::uniform({256, 256}, -0.1, 0.1, 2).to(f32);
  Tensor y = relu(matmul(x, w)) + tanh(matmul(x * 2.0f, w));  // products big enough to split
};

TEST(IntraOpThreads, EverySettingGivesTheSameBitsAndTheCallerKeepsItsOwn) {
  const kernels::ColumnMajorOverride row_major(false);
  TwoBranches m;
  Tensor value = testing::uniform({96, 256}, -1, 1, 1).to(f32);
  const int before = get_num_threads();
  Tensor want = Session(m.g).run({m.y}, {{m.x, value}}).at(0);
  for (size_t inter : {1, 2})
    for (int intra : {1, 2}) {
      Session sess(m.g, {.inter_op_threads = inter, .intra_op_threads = intra});
      EXPECT_ALL_CLOSE(sess.run({m.y}, {{m.x, value}}).at(0), want, 0, 0);
      EXPECT_EQ(get_num_threads(), before);
      EXPECT_NE(sess.explain().find(str("intra-op threads: ", intra, " per worker")), std::string::npos)
          << sess.explain();
    }
}

TEST(IntraOpThreads, ACompiledFunctionTakesTheSetting) {
  const kernels::ColumnMajorOverride row_major(false);
  Tensor w = testing::uniform({256, 256}, -0.1, 0.1, 2).to(f32);
  auto body = [&](Tensor x) { return relu(matmul(x, w)); };
  auto f = compile(body, {.intra_op_threads = 1});
  Tensor x = testing::uniform({96, 256}, -1, 1, 3).to(f32);
  const int before = get_num_threads();
  f(x);
  EXPECT_ALL_CLOSE(f(x), body(x), 0, 0);
  EXPECT_EQ(get_num_threads(), before);
  EXPECT_NE(f.explain().find("intra-op threads: 1 per worker"), std::string::npos) << f.explain();
}

// Every thread that runs a kernel flushes subnormal floats to zero, however its team was
// made: the pool grown by set_num_threads, shrunk and grown back (no parallel region runs
// then: the team keeps its threads and their mode), and a session's own intra-op team.
TEST(IntraOpThreads, EveryKernelThreadFlushesSubnormalsToZero) {
  const int before = get_num_threads();
  // 1e-20 * 1e-20 = 1e-40, a subnormal float; enough elements for every thread to get a share.
  const Tensor tiny = full({8 * 65536}, 1e-20, f32);
  auto nonzero = [](const Tensor& t) {
    const std::vector<float> v = t.to_vector<float>();
    return std::count_if(v.begin(), v.end(), [](float x) { return x != 0.0f; });
  };
  for (int n : {3, 1, 3, 4}) {
    set_num_threads(n);
    EXPECT_EQ(nonzero(tiny * tiny), 0) << n << " threads";
  }
  Graph g("square");
  Tensor x = g.placeholder(f32, {8 * 65536}, "x");
  Tensor squared = x * x;
  Session session(g, {.intra_op_threads = 3});
  EXPECT_EQ(nonzero(session.run({squared}, {{x, tiny}}).at(0)), 0);
  set_num_threads(before);
}

}  // namespace
}  // namespace baton
