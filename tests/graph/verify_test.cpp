// The verifier: valid graphs pass; each broken invariant is reported, all at once, with
// the graph, the node and its source line.
#include <gtest/gtest.h>

#include <set>

#include "baton/graph.h"
#include "baton/ops.h"

#include "graph/sample_graphs.h"
#include "graph/text.h"
#include "harness/op_harness.h"
#include "trace/verify.h"

namespace baton::graph::testing {
namespace {

using trace::verify;

TEST(GraphVerify, SampleGraphsAreValid) {
  for (Graph& g : all_sample_graphs()) EXPECT_NO_THROW(verify(g, {.allow_unknown_ops = true})) << g;
  EXPECT_NO_THROW(verify(mlp_graph()));
  EXPECT_NO_THROW(verify(reduce_graph()));
  EXPECT_NO_THROW(verify(pool_graph()));
}

TEST(GraphVerify, UseBeforeDefinition) {
  Graph g = mlp_graph();
  g.nodes()[0]->set_input(0, g.nodes()[1]->output());
  EXPECT_THROWS_WITH(ValueError, verify(g), "graph @mlp is invalid (1 problem)",
                     "node %0 = matmul (mlp.cpp:12): input 0 uses %1 before its definition");
}

TEST(GraphVerify, UnknownOpUnlessAllowed) {
  Graph g = mlp_graph();
  Node* n = g.add_node("frobnicate", {g.input(0)}, {{f32, {"batch", 784}}}, {}, Location("mlp.cpp", 20));
  EXPECT_THROWS_WITH(ValueError, verify(g),
                     "node %2 = frobnicate (mlp.cpp:20): unknown op 'frobnicate' (not in the op registry)");
  EXPECT_NO_THROW(verify(g, {.allow_unknown_ops = true}));
  EXPECT_EQ(n->op(), nullptr);
}

TEST(GraphVerify, OutputCountMustMatchTheOp) {
  Graph g;
  Value* x = g.add_input("x", {f32, {1, 1, 4, 4}});
  g.add_node("relu", {x}, {{f32, {1, 1, 4, 4}}, {f32, {1, 1, 4, 4}}}, {}, Location("m.cpp", 3));
  g.add_node("max_pool2d", {x}, {{f32, {1, 1, 2, 2}}},
             {{"kernel", Ints{2, 2}}, {"stride", Ints{2, 2}}, {"padding", Ints{0, 0}}}, Location("m.cpp", 4));
  EXPECT_THROWS_WITH(ValueError, verify(g), "(2 problems)",
                     "node %0, %1 = relu (m.cpp:3): has 2 outputs but op 'relu' has 1",
                     "node %2 = max_pool2d (m.cpp:4): has 1 outputs but op 'max_pool2d' has 2");
}

TEST(GraphVerify, DanglingOutputsAndForeignInputs) {
  Graph g = mlp_graph();
  Graph other = mlp_graph();
  g.set_outputs({g.nodes()[1]->output(), other.input(0), nullptr});
  g.add_node("relu", {other.input(1)}, {{f32, {784, 512}}}, {}, Location("mlp.cpp", 30));
  EXPECT_THROWS_WITH(ValueError, verify(g), "(3 problems)",
                     str("graph @mlp: output 1 (%?", other.input(0)->id(), ") is not defined in this graph"),
                     "graph @mlp: output 2 is null",
                     str("node %2 = relu (mlp.cpp:30): input 0 (%?", other.input(1)->id(),
                         ") is not defined in this graph"));
}

TEST(GraphVerify, DuplicateNames) {
  Graph g = mlp_graph();
  g.nodes()[1]->output()->set_name("x");
  EXPECT_THROWS_WITH(ValueError, verify(g), "graph @mlp: more than one value is named %x");
}

TEST(GraphVerify, ProblemsInsideSubgraphsNameTheirPath) {
  Graph g = if_graph();
  Graph& then_g = *g.nodes()[0]->subgraphs[0];
  then_g.add_node("relu", {then_g.input(0)}, {}, {}, Location("cf.cpp", 8));
  EXPECT_THROWS_WITH(ValueError, verify(g, {.allow_unknown_ops = true}),
                     "graph @then_branch (subgraph 0 of node %0 = If (cf.cpp:3) in graph @branchy), "
                     "node relu (cf.cpp:8): has 0 outputs but op 'relu' has 1");
  EXPECT_THROWS_WITH(ValueError, verify(g), "unknown op 'If'", "(2 problems)");
}

TEST(GraphVerify, SubgraphsAreClosed) {
  // A branch reading a value of the enclosing graph is reported: pass it as an input.
  Graph g = if_graph();
  Graph& else_g = *g.nodes()[0]->subgraphs[1];
  else_g.nodes()[0]->set_input(0, g.input(1));
  EXPECT_THROWS_WITH(ValueError, verify(g, {.allow_unknown_ops = true}), "graph @else_branch",
                     "input 0 (%?", "is not defined in this graph");
  else_g.nodes()[0]->set_input(0, else_g.input(0));
  EXPECT_NO_THROW(verify(g, {.allow_unknown_ops = true}));
}

TEST(GraphVerify, ParsedTextIsVerified) {
  Graph g = parse_graph(
      "graph @f(%x: f32[2]) {\n"
      "  %0 = relu(%x) : f32[2]   # a.cpp:1\n"
      "  %1 = nope(%0) : f32[2]   # a.cpp:2\n"
      "  return %1\n"
      "}\n");
  EXPECT_THROWS_WITH(ValueError, verify(g), "node %1 = nope (a.cpp:2): unknown op 'nope'");
}

// --- every node against its op's definition (issue 8: graph text that lies) ---

void verify_text(const std::string& text) { verify(parse_graph(text)); }

TEST(OpRegistry, EveryOpDeclaresItsSignature) {
  for (const ops::OpDef* op : ops::all_ops()) {
    SCOPED_TRACE(op->name);
    EXPECT_TRUE(op->declares_inputs()) << "add .inputs(n) or .inputs(min, max) to its BATON_OP";
    EXPECT_TRUE(op->max_inputs == ops::OpDef::kAnyNumber || op->max_inputs >= op->min_inputs);
    std::set<std::string> names;
    for (auto& a : op->attr_specs) EXPECT_TRUE(names.insert(a.name).second) << "attribute " << a.name << " twice";
    // Only If and Loop hold subgraphs, and the runtime knows them by name.
    EXPECT_EQ(op->num_subgraphs, op->name == "if" || op->name == "loop" ? 2 : 0);
  }
}

TEST(GraphVerify, TooFewOperands) {
  EXPECT_THROWS_WITH(ValueError, verify_text("graph @f(%x: f32[2]) {\n"
                                             "  %0 = add(%x) : f32[2]   # a.cpp:3\n"
                                             "  return %0\n}"),
                     "graph @f, node %0 = add (a.cpp:3): op 'add' takes 2 operands, the node has 1");
  EXPECT_THROWS_WITH(ValueError, verify_text("graph @f(%x: f32[2,2]) {\n  %0 = matmul() : f32[2,2]\n  return %0\n}"),
                     "node %0 = matmul: op 'matmul' takes 2 operands, the node has 0");
  EXPECT_THROWS_WITH(ValueError, verify_text("graph @f(%x: f32[2]) {\n  %0 = cat() {dim=0} : f32[2]\n  return %0\n}"),
                     "op 'cat' takes at least 1 operand, the node has 0");
}

TEST(GraphVerify, TooManyOperands) {
  EXPECT_THROWS_WITH(ValueError, verify_text("graph @f(%x: f32[2]) {\n"
                                             "  %0 = relu(%x) : f32[2]\n"
                                             "  %1 = relu(%0) : f32[2]\n"
                                             "  %2 = relu(%1, %0, %x) : f32[2]   # a.cpp:9\n"
                                             "  return %2\n}"),
                     "node %2 = relu (a.cpp:9): op 'relu' takes 1 operand, the node has 3");
  EXPECT_THROWS_WITH(ValueError, verify_text("graph @f(%x: f32[2,3], %w: f32[4,3], %b: f32[4]) {\n"
                                             "  %0 = linear(%x, %w, %b, %b) : f32[2,4]\n  return %0\n}"),
                     "op 'linear' takes 2 to 3 operands, the node has 4");
}

TEST(GraphVerify, DeclaredResultTypeMustBeWhatTheOpGives) {
  const std::string head = "graph @mlp(%x: f32[batch,784], %w: f32[784,512]) {\n";
  EXPECT_NO_THROW(verify_text(head + "  %0 = matmul(%x, %w) : f32[batch,512]\n  return %0\n}"));
  EXPECT_THROWS_WITH(ValueError, verify_text(head + "  %0 = matmul(%x, %w) : i64[batch,512]   # mlp.cpp:12\n  return %0\n}"),
                     "node %0 = matmul (mlp.cpp:12): result 0 (%0) is declared i64[batch,512] but 'matmul' gives "
                     "f32[batch,512]");
  // Rank, each dim, and symbols, which must match symbolically.
  EXPECT_THROWS_WITH(ValueError, verify_text(head + "  %0 = matmul(%x, %w) : f32[batch,512,1]\n  return %0\n}"),
                     "is declared f32[batch,512,1] but 'matmul' gives f32[batch,512]");
  EXPECT_THROWS_WITH(ValueError, verify_text(head + "  %0 = matmul(%x, %w) : f32[batch,511]\n  return %0\n}"),
                     "is declared f32[batch,511] but 'matmul' gives f32[batch,512]");
  EXPECT_THROWS_WITH(ValueError, verify_text(head + "  %0 = matmul(%x, %w) : f32[n,512]\n  return %0\n}"),
                     "is declared f32[n,512] but 'matmul' gives f32[batch,512]");
  EXPECT_THROWS_WITH(ValueError, verify_text(head + "  %0 = matmul(%x, %w) : f32[64,512]\n  return %0\n}"),
                     "is declared f32[64,512] but 'matmul' gives f32[batch,512]");
  // Views, reductions, casts, comparisons and multi-output ops alike.
  const std::string v = "graph @v(%x: f32[n,6]) {\n";
  EXPECT_NO_THROW(verify_text(v + "  %0 = view(%x) {shape=[n,2,3]} : f32[n,2,3]\n  return %0\n}"));
  EXPECT_THROWS_WITH(ValueError, verify_text(v + "  %0 = view(%x) {shape=[n,2,3]} : f32[n,6]\n  return %0\n}"),
                     "result 0 (%0) is declared f32[n,6] but 'view' gives f32[n,2,3]");
  EXPECT_THROWS_WITH(ValueError, verify_text(v + "  %0 = sum(%x) {dims=[1], keepdim=1} : f32[n]\n  return %0\n}"),
                     "is declared f32[n] but 'sum' gives f32[n,1]");
  EXPECT_THROWS_WITH(ValueError, verify_text(v + "  %0 = cast(%x) {dtype=i32} : i64[n,6]\n  return %0\n}"),
                     "is declared i64[n,6] but 'cast' gives i32[n,6]");
  EXPECT_THROWS_WITH(ValueError, verify_text(v + "  %0 = lt(%x, %x) : f32[n,6]\n  return %0\n}"),
                     "is declared f32[n,6] but 'lt' gives bool[n,6]");
  EXPECT_THROWS_WITH(ValueError,
                     verify_text("graph @p(%x: f32[1,1,4,4]) {\n  %0, %1 = max_pool2d(%x) {kernel=[2,2], "
                                 "stride=[2,2], padding=[0,0]} : f32[1,1,2,2], f32[1,1,2,2]\n  return %0\n}"),
                     "result 1 (%1) is declared f32[1,1,2,2] but 'max_pool2d' gives i64[1,1,2,2]");
}

TEST(GraphVerify, OperandsTheOpRejects) {
  EXPECT_THROWS_WITH(ValueError, verify_text("graph @f(%x: f32[2,3], %w: f32[4,5]) {\n"
                                             "  %0 = matmul(%x, %w) : f32[2,5]   # m.cpp:2\n  return %0\n}"),
                     "node %0 = matmul (m.cpp:2): the op rejects its operands and attributes: [matmul]",
                     "inputs: f32[2,3], f32[4,5]");
  EXPECT_THROWS_WITH(ValueError, verify_text("graph @f(%x: f32[2], %y: i64[2]) {\n"
                                             "  %0 = add(%x, %y) : f32[2]\n  return %0\n}"),
                     "the op rejects its operands and attributes: [add]");
  EXPECT_THROWS_WITH(ValueError, verify_text("graph @f(%x: bool[2]) {\n  %0 = exp(%x) : bool[2]\n  return %0\n}"),
                     "the op rejects its operands and attributes: [exp]");
}

TEST(GraphVerify, AttributeValuesOutOfRangeAreErrorsOfTheRule) {
  const std::string head = "graph @f(%x: f32[2,3]) {\n";
  EXPECT_THROWS_WITH(ValueError, verify_text(head + "  %0 = softmax(%x) {dim=-3} : f32[2,3]\n  return %0\n}"),
                     "[softmax] dim -3 is out of range for rank 2");
  EXPECT_THROWS_WITH(ValueError, verify_text(head + "  %0 = sum(%x) {dims=[7], keepdim=0} : f32[2]\n  return %0\n}"),
                     "[sum] dim 7 is out of range");
  EXPECT_THROWS_WITH(ValueError, verify_text(head + "  %0 = slice(%x) {dim=1, start=0, end=2, step=0} : f32[2,2]\n  return %0\n}"),
                     "step must be positive");
  EXPECT_THROWS_WITH(ValueError, verify_text(head + "  %0 = permute(%x) {dims=[0,0]} : f32[2,2]\n  return %0\n}"),
                     "[permute]");
  EXPECT_THROWS_WITH(ValueError,
                     verify_text("graph @p(%x: f32[1,1,4,4]) {\n  %0, %1 = max_pool2d(%x) {kernel=[0,2], "
                                 "stride=[2,2], padding=[0,0]} : f32[1,1,2,2], i64[1,1,2,2]\n  return %0\n}"),
                     "[max_pool2d] invalid options");
}

TEST(GraphVerify, AttributesFollowTheOpsSchema) {
  const std::string head = "graph @f(%x: f32[2,3]) {\n";
  EXPECT_THROWS_WITH(ValueError, verify_text(head + "  %0 = sum(%x) {dims=[1]} : f32[2]   # r.cpp:4\n  return %0\n}"),
                     "node %0 = sum (r.cpp:4): attribute 'keepdim' (an int) is missing");
  EXPECT_THROWS_WITH(ValueError, verify_text(head + "  %0 = relu(%x) {alpha=1.0} : f32[2,3]\n  return %0\n}"),
                     "unknown attribute 'alpha' (op 'relu' takes no attributes)");
  EXPECT_THROWS_WITH(ValueError, verify_text(head + "  %0 = softmax(%x) {dim=1, axis=1} : f32[2,3]\n  return %0\n}"),
                     "unknown attribute 'axis' (op 'softmax' takes dim)");
  EXPECT_THROWS_WITH(ValueError, verify_text(head + "  %0 = sum(%x) {dims=1, keepdim=0} : f32[2]\n  return %0\n}"),
                     "attribute 'dims' must be a list of ints, found an int (1)");
  EXPECT_THROWS_WITH(ValueError, verify_text(head + "  %0 = softmax(%x) {dim=0.5} : f32[2,3]\n  return %0\n}"),
                     "attribute 'dim' must be an int, found a float (0.5)");
  EXPECT_THROWS_WITH(ValueError, verify_text(head + "  %0 = cast(%x) {dtype=\"f64\"} : f64[2,3]\n  return %0\n}"),
                     "attribute 'dtype' must be a dtype, found a string (\"f64\")");
  EXPECT_THROWS_WITH(ValueError,
                     verify_text("graph @p(%x: f32[1,1,4,4]) {\n  %0, %1 = max_pool2d(%x) {kernel=[2,2], "
                                 "stride=[2], padding=[0,0]} : f32[1,1,2,2], i64[1,1,2,2]\n  return %0\n}"),
                     "attribute 'stride' must hold 2 ints, found 1 ([2])");
  // A float attribute accepts an int.
  EXPECT_NO_THROW(verify_text(head + "  %0 = leaky_relu(%x) {negative_slope=0} : f32[2,3]\n  return %0\n}"));
}

TEST(GraphVerify, WrongResultCountOfMultiOutputOps) {
  EXPECT_THROWS_WITH(ValueError, verify_text("graph @f(%x: f32[2]) {\n  %0 = dropout(%x) {p=0.5} : f32[2]\n  return %0\n}"),
                     "has 1 outputs but op 'dropout' has 2");
  EXPECT_THROWS_WITH(ValueError,
                     verify_text("graph @f(%x: f32[2,3]) {\n  %0, %1 = layer_norm(%x) {axes=1, eps=0.001} : "
                                 "f32[2,3], f32[2,1]\n  return %0\n}"),
                     "has 2 outputs but op 'layer_norm' has 3");
}

TEST(GraphVerify, BatchNormOperandGroups) {
  const std::string head = "graph @f(%x: f32[4,3], %c: f32[3]) {\n";
  const std::string types = " : f32[4,3], f32[3], f32[3]\n  return %0\n}";
  EXPECT_NO_THROW(verify_text(head + "  %0, %1, %2 = batch_norm(%x, %c, %c) {training=1, eps=0.001}" + types));
  EXPECT_NO_THROW(verify_text(head + "  %0, %1, %2 = batch_norm(%x, %c, %c, %c, %c) {training=0, eps=0.001}" + types));
  EXPECT_THROWS_WITH(ValueError, verify_text(head + "  %0, %1, %2 = batch_norm(%x, %c, %c) {training=0, eps=0.001}" + types),
                     "[batch_norm] takes (x, weight, bias) when training");
  EXPECT_THROWS_WITH(ValueError, verify_text(head + "  %0, %1, %2 = batch_norm(%x, %c, %c, %c) {training=1, eps=0.001}" + types),
                     "got 4 inputs");
}

TEST(GraphVerify, SubgraphsOnlyOnControlFlow) {
  EXPECT_THROWS_WITH(ValueError, verify_text("graph @f(%x: f32[2]) {\n  %0 = relu(%x) : f32[2] {\n"
                                             "    graph @g(%y: f32[2]) {\n      return %y\n    }\n  }\n  return %0\n}"),
                     "op 'relu' takes 0 subgraphs, the node has 1");
}

const char* kIf =
    "graph @f(%c: bool[], %x: f32[n], %y: f32[n]) {\n"
    "  %0 = if(%c, %x, %y) {then_inputs=THEN} : f32[n] {   # cf.cpp:3\n"
    "    graph @then_branch(%t: f32[n]) {\n"
    "      %0 = relu(%t) : f32[n]\n"
    "      return %0\n"
    "    }\n"
    "    graph @else_branch(%e: f32[n]) {\n"
    "      %0 = neg(%e) : f32[n]\n"
    "      return %0\n"
    "    }\n"
    "  }\n"
    "  return %0\n"
    "}\n";

std::string replace(std::string s, const std::string& from, const std::string& to) {
  s.replace(s.find(from), from.size(), to);
  return s;
}

TEST(GraphVerify, IfOperandGroupsAndBranchSignatures) {
  const std::string ok = replace(kIf, "THEN", "1");
  EXPECT_NO_THROW(verify_text(ok));
  EXPECT_THROWS_WITH(ValueError, verify_text(replace(kIf, "THEN", "5")),
                     "node %0 = if (cf.cpp:3): then_inputs is 5 but the node has 2 captured operands");
  EXPECT_THROWS_WITH(ValueError, verify_text(replace(kIf, "THEN", "-1")), "then_inputs is -1");
  EXPECT_THROWS_WITH(ValueError, verify_text(replace(kIf, "THEN", "2")),
                     "subgraph 0 (@then_branch) takes (f32[n]) but the node passes (f32[n], f32[n])",
                     "subgraph 1 (@else_branch) takes (f32[n]) but the node passes ()");
  EXPECT_THROWS_WITH(ValueError, verify_text(replace(ok, "%c: bool[]", "%c: bool[2]")),
                     "the condition must have one element, it is bool[2]");
  EXPECT_THROWS_WITH(ValueError, verify_text(replace(ok, "%0 = neg(%e) : f32[n]\n      return %0", "return")),
                     "subgraph 1 (@else_branch) returns () but the node needs (f32[n])");
  EXPECT_THROWS_WITH(ValueError, verify_text(replace(ok, "%t: f32[n]", "%t: f64[n]")),
                     "subgraph 0 (@then_branch) takes (f64[n]) but the node passes (f32[n])");
  EXPECT_THROWS_WITH(ValueError, verify_text(replace(ok, " {then_inputs=1}", "")), "attribute 'then_inputs' (an int) is missing");
}

const char* kLoop =
    "graph @f(%i: i64[], %x: f32[n], %limit: i64[]) {\n"
    "  %0, %1 = loop(%i, %x, %limit) {num_vars=2, cond_captures=1} : i64[], f32[n] {\n"
    "    graph @loop_cond(%a: i64[], %b: f32[n], %l: i64[]) {\n"
    "      %0 = lt(%a, %l) : bool[]\n"
    "      return %0\n"
    "    }\n"
    "    graph @loop_body(%a: i64[], %b: f32[n]) {\n"
    "      %0 = add(%a, %a) : i64[]\n"
    "      %1 = mul(%b, %b) : f32[n]\n"
    "      return %0, %1\n"
    "    }\n"
    "  }\n"
    "  return %1\n"
    "}\n";

TEST(GraphVerify, LoopOperandGroupsAndBodySignatures) {
  EXPECT_NO_THROW(verify_text(kLoop));
  EXPECT_THROWS_WITH(ValueError, verify_text(replace(kLoop, "num_vars=2", "num_vars=4")),
                     "num_vars 4 and cond_captures 1 do not fit the node's 3 operands");
  EXPECT_THROWS_WITH(ValueError, verify_text(replace(kLoop, "cond_captures=1", "cond_captures=0")),
                     "subgraph 0 (@loop_cond) takes (i64[], f32[n], i64[]) but the node passes (i64[], f32[n])",
                     "subgraph 1 (@loop_body) takes (i64[], f32[n]) but the node passes (i64[], f32[n], i64[])");
  EXPECT_THROWS_WITH(ValueError, verify_text(replace(kLoop, "return %0, %1\n", "return %1, %0\n")),
                     "subgraph 1 (@loop_body) returns (f32[n], i64[]) but the node needs (i64[], f32[n])");
  EXPECT_THROWS_WITH(ValueError, verify_text(replace(kLoop, ": i64[], f32[n] {", ": i64[], f32[m] {")),
                     "the loop returns its vars (i64[], f32[n]) but the node declares (i64[], f32[m])");
  EXPECT_THROWS_WITH(ValueError, verify_text(replace(kLoop, "      return %0\n    }\n    graph @loop_body",
                                                     "      return %0, %0\n    }\n    graph @loop_body")),
                     "subgraph 0 (@loop_cond) must return one value of one element");
}

TEST(GraphVerify, NodesInsideSubgraphsAreCheckedToo) {
  EXPECT_THROWS_WITH(ValueError, verify_text(replace(replace(kIf, "THEN", "1"), "%0 = relu(%t)", "%0 = relu(%t, %t)")),
                     "graph @then_branch (subgraph 0 of node %0 = if (cf.cpp:3) in graph @f), node %0 = relu: "
                     "op 'relu' takes 1 operand, the node has 2");
}

TEST(GraphVerify, TypesTooLargeToExist) {
  EXPECT_THROWS_WITH(ValueError, verify_text("graph @f(%x: f32[4294967296,4294967296]) {\n  return %x\n}"),
                     "graph @f: input (%x) of type f32[4294967296,4294967296] is too large to exist");
}

TEST(GraphVerify, TracedGraphsVerify) {
  // What graph building records is what the verifier infers.
  baton::Graph g;
  Tensor x = g.placeholder(f32, {"batch", 4}, "x");
  Tensor w = g.placeholder(f32, {3, 4}, "w");
  Tensor y = softmax(linear(x, w).view({-1, 3}), 1) + sum(x, {1}, true);
  Tensor z = slice(y, 1, 0, 2).permute({1, 0}).unsqueeze(0);
  g.set_outputs({y, z, max(y, {1}), cat({y, y}, 0)});
  EXPECT_NO_THROW(baton::Graph::from_text(g.to_text())) << g.to_text();
}

}  // namespace
}  // namespace baton::graph::testing
