// Graph text that parses and verifies runs without crashing: whatever a run cannot do is
// a baton::Error. Valid graphs of several op families are mutated (op names, operand
// lists, sizes, attribute values) and each mutant is parsed, verified and, when it
// verifies, run on small inputs.
#include <gtest/gtest.h>

#include <cstdlib>

#include <random>

#include "baton/graph.h"
#include "baton/ops.h"
#include "harness/op_harness.h"
#include "dispatch/registry.h"

namespace baton::testing {
namespace {

const char* kSeeds[] = {
    "graph @mlp(%x: f32[batch,4], %w: f32[4,3], %b: f32[3]) {\n"
    "  %0 = matmul(%x, %w) : f32[batch,3]\n"
    "  %1 = add(%0, %b) : f32[batch,3]\n"
    "  %2 = relu(%1) : f32[batch,3]\n"
    "  %3 = softmax(%2) {dim=1} : f32[batch,3]\n"
    "  %4 = sum(%3) {dims=[1], keepdim=0} : f32[batch]\n"
    "  return %4, %3\n"
    "}\n",
    "graph @cnn(%x: f32[2,1,4,4], %w: f32[2,1,3,3], %b: f32[2]) {\n"
    "  %0 = conv2d(%x, %w, %b) {stride=[1,1], padding=[1,1], dilation=[1,1], groups=1} : f32[2,2,4,4]\n"
    "  %1, %2 = max_pool2d(%0) {kernel=[2,2], stride=[2,2], padding=[0,0]} : f32[2,2,2,2], i64[2,2,2,2]\n"
    "  %3 = max_pool2d_backward(%1, %2) {kernel=[2,2], stride=[2,2], padding=[0,0], input_shape=[2,2,4,4]} : f32[2,2,4,4]\n"
    "  %4 = avg_pool2d(%3) {kernel=[2,2], stride=[2,2], padding=[0,0]} : f32[2,2,2,2]\n"
    "  %5 = view(%4) {shape=[2,8]} : f32[2,8]\n"
    "  return %5\n"
    "}\n",
    "graph @idx(%x: f32[3,4], %i: i64[2], %j: i64[3,4]) {\n"
    "  %0 = index_select(%x, %i) {dim=0} : f32[2,4]\n"
    "  %1 = gather(%x, %j) {dim=1} : f32[3,4]\n"
    "  %2 = embedding(%x, %i) : f32[2,4]\n"
    "  %3 = cat(%0, %2) {dim=0} : f32[4,4]\n"
    "  %4 = slice(%3) {dim=1, start=1, end=3, step=1} : f32[4,2]\n"
    "  %5 = permute(%4) {dims=[1,0]} : f32[2,4]\n"
    "  %6 = scatter_add(%x, %j, %1) {dim=1} : f32[3,4]\n"
    "  return %5, %6\n"
    "}\n",
    "graph @norm(%x: f32[n,3], %c: f32[3]) {\n"
    "  %0, %1, %2 = batch_norm(%x, %c, %c, %c, %c) {training=0, eps=0.001} : f32[n,3], f32[3], f32[3]\n"
    "  %3, %4, %5 = layer_norm(%0) {axes=1, eps=0.001} : f32[n,3], f32[n,1], f32[n,1]\n"
    "  %6 = pad(%3) {pads=[1,1], value=0.5} : f32[n,5]\n"
    "  %7 = lt(%6, %6) : bool[n,5]\n"
    "  %8 = where(%7, %6, %6) : f32[n,5]\n"
    "  %9 = cast(%8) {dtype=f64} : f64[n,5]\n"
    "  %10 = unsqueeze(%9) {dim=0} : f64[1,n,5]\n"
    "  %11 = squeeze(%10) {dim=0} : f64[n,5]\n"
    "  %12 = expand(%c) {shape=[2,3]} : f32[2,3]\n"
    "  return %11, %12\n"
    "}\n",
    "graph @cf(%p: bool[], %x: f32[n], %i: i64[], %l: i64[]) {\n"
    "  %0 = if(%p, %x, %x) {then_inputs=1} : f32[n] {\n"
    "    graph @then_branch(%t: f32[n]) {\n"
    "      %0 = exp(%t) : f32[n]\n"
    "      return %0\n"
    "    }\n"
    "    graph @else_branch(%e: f32[n]) {\n"
    "      return %e\n"
    "    }\n"
    "  }\n"
    "  %1, %2 = loop(%i, %0, %l) {num_vars=2, cond_captures=1} : i64[], f32[n] {\n"
    "    graph @loop_cond(%a: i64[], %b: f32[n], %m: i64[]) {\n"
    "      %0 = lt(%a, %m) : bool[]\n"
    "      return %0\n"
    "    }\n"
    "    graph @loop_body(%a: i64[], %b: f32[n]) {\n"
    "      %0 = add(%a, %a) : i64[]\n"
    "      %1 = mul(%b, %b) : f32[n]\n"
    "      return %0, %1\n"
    "    }\n"
    "  }\n"
    "  return %2\n"
    "}\n",
};

// Small values: 0 and 1 for integers and bools (valid indices, a short loop).
Tensor feed_for(const Tensor& placeholder) {
  Shape s;
  for (int64_t d : placeholder.shape()) s.push_back(d >= 0 ? d : 2);  // every symbol is 2
  Tensor t = is_floating(placeholder.dtype()) ? uniform(s, -1, 1) : zeros(s, f64);
  if (!is_floating(placeholder.dtype()) && placeholder.dtype() != b8) t = t + 1.0;
  return cast(t, placeholder.dtype());
}

// Parses, verifies and runs: true when it ran. Any error must be a baton::Error.
bool run_text(const std::string& text) {
  try {
    Graph g = Graph::from_text(text);
    Session::Feeds feeds;
    for (const Tensor& p : g.inputs()) feeds.emplace_back(p, feed_for(p));
    Session s(g);
    s.run(g.outputs(), feeds);
    return true;
  } catch (const Error&) {
    return false;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "threw a non-baton " << e.what() << " for:\n" << text;
    return false;
  }
}

TEST(GraphTextRun, SeedsRun) {
  for (const char* seed : kSeeds) EXPECT_TRUE(run_text(seed)) << seed;
}

TEST(GraphTextRun, IssueExamplesAreVerifierErrors) {
  EXPECT_THROWS_WITH(ValueError, Graph::from_text("graph @f(%x: f32[2]) {\n  %0 = add(%x) : f32[2]\n  return %0\n}"),
                     "op 'add' takes 2 operands, the node has 1");
  EXPECT_THROWS_WITH(ValueError,
                     Graph::from_text("graph @f(%x: f32[2]) {\n  %0 = relu(%x) : f32[2]\n  %1 = relu(%0) : f32[2]\n"
                                      "  %2 = relu(%1, %0, %x) : f32[2]\n  return %2\n}"),
                     "op 'relu' takes 1 operand, the node has 3");
  EXPECT_THROWS_WITH(ValueError,
                     Graph::from_text("graph @f(%x: f32[2,3], %w: f32[3,4]) {\n  %0 = matmul(%x, %w) : i64[2,4]\n"
                                      "  return %0\n}"),
                     "result 0 (%0) is declared i64[2,4] but 'matmul' gives f32[2,4]");
}

// One random edit at the token level: another op name, a dropped or repeated operand,
// another number, a dim swapped for a symbol.
std::string mutate(std::string t, std::mt19937& rng, const std::vector<std::string>& op_names) {
  auto pick = [&](size_t n) { return size_t(rng() % std::max<size_t>(n, 1)); };
  switch (rng() % 6) {
    case 0: {  // replace an op name: the word before '('
      std::vector<size_t> at;
      for (size_t i = 1; i < t.size(); ++i)
        if (t[i] == '(' && std::isalpha(static_cast<unsigned char>(t[i - 1]))) at.push_back(i);
      if (at.empty()) break;
      size_t end = at[pick(at.size())], start = end;
      while (start > 0 && (std::isalnum(static_cast<unsigned char>(t[start - 1])) || t[start - 1] == '_')) --start;
      if (t.compare(start, end - start, "graph") == 0) break;
      t.replace(start, end - start, op_names[pick(op_names.size())]);
      break;
    }
    case 1: {  // drop an operand ", %v"
      size_t at = t.find(", %", pick(t.size()));
      if (at == std::string::npos) break;
      size_t end = t.find_first_of(",)", at + 2);
      t.erase(at, end - at);
      break;
    }
    case 2: {  // repeat an operand
      size_t at = t.find("(%", pick(t.size()));
      if (at == std::string::npos) break;
      size_t end = t.find_first_of(",)", at + 1);
      t.insert(end, ", " + t.substr(at + 1, end - at - 1));
      break;
    }
    case 3: case 4: {  // another number
      std::vector<size_t> at;
      for (size_t i = 0; i < t.size(); ++i)
        if (std::isdigit(static_cast<unsigned char>(t[i])) && (i == 0 || !std::isalnum(static_cast<unsigned char>(t[i - 1])) ))
          at.push_back(i);
      if (at.empty()) break;
      const char* numbers[] = {"0", "1", "2", "3", "5", "-1", "-2", "-7", "64", "9223372036854775807", "n", "4294967296"};
      size_t i = at[pick(at.size())], end = i;
      while (end < t.size() && std::isdigit(static_cast<unsigned char>(t[end]))) ++end;
      t.replace(i, end - i, numbers[pick(std::size(numbers))]);
      break;
    }
    default: {  // another dtype
      const char* types[] = {"f32[", "f64[", "i64[", "i32[", "bool["};
      size_t at = t.find('[', pick(t.size()));
      if (at == std::string::npos || at < 4) break;
      size_t start = t.find_last_of(" (", at) + 1;
      t.replace(start, at + 1 - start, types[pick(std::size(types))]);
    }
  }
  return t;
}

TEST(GraphTextRun, MutantsRunOrFailWithBatonErrors) {
  std::vector<std::string> op_names;
  for (const ops::OpDef* op : ops::all_ops()) op_names.push_back(op->name);
  // BATON_MUTANTS and BATON_MUTANT_SEED run a longer or another search (e.g. under ASan).
  auto env_or = [](const char* name, unsigned fallback) {
    const char* v = std::getenv(name);
    return v ? unsigned(std::strtoul(v, nullptr, 10)) : fallback;
  };
  std::mt19937 rng(env_or("BATON_MUTANT_SEED", 8));
  const int trials = int(env_or("BATON_MUTANTS", 4000));
  int ran = 0;
  for (int trial = 0; trial < trials; ++trial) {
    std::string t = kSeeds[rng() % std::size(kSeeds)];
    for (int k = 1 + int(rng() % 3); k > 0; --k) t = mutate(t, rng, op_names);
    ran += run_text(t);
  }
  EXPECT_GT(ran, 100);  // enough mutants stay valid to reach the runtime
}

}  // namespace
}  // namespace baton::testing
