// SessionOptions::intra_op_threads: the OpenMP threads of each step's kernel, beside the
// inter-op workers; results are the same bits at every setting.
#include <gtest/gtest.h>

#include "baton/baton.h"
#include "harness/op_harness.h"

namespace baton {
namespace {

struct TwoBranches {
  Graph g{"two_branches"};
  Tensor x = g.placeholder(f32, {96, 256}, "x");
  Tensor w = testing::uniform({256, 256}, -0.1, 0.1, 2).to(f32);
  Tensor y = relu(matmul(x, w)) + tanh(matmul(x * 2.0f, w));  // products big enough to split
};

TEST(IntraOpThreads, EverySettingGivesTheSameBitsAndTheCallerKeepsItsOwn) {
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

}  // namespace
}  // namespace baton
