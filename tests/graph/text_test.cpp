// The text form: exact printing, parsing, round trips, and errors on bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "graph/sample_graphs.h"
#include "graph/text.h"
#include "harness/op_harness.h"
#include "trace/verify.h"

namespace baton::graph::testing {
namespace {

using trace::verify;

std::string round_trip(const std::string& text) { return to_text(parse_graph(text)); }

TEST(GraphText, PrintsTheIssueExample) {
  EXPECT_EQ(to_text(mlp_graph()),
            "graph @mlp(%x: f32[batch,784], %w: f32[784,512]) {\n"
            "  %0 = matmul(%x, %w) : f32[batch,512]   # mlp.cpp:12\n"
            "  %1 = relu(%0) : f32[batch,512]         # mlp.cpp:13\n"
            "  return %1\n"
            "}\n");
}

TEST(GraphText, PrintsAttributesNamesRankZeroAndSeveralOutputs) {
  EXPECT_EQ(to_text(reduce_graph()),
            "graph @reduce(%a: f64[n,3], %0: f64[n,3]) {\n"
            "  %total = add(%a, %0) : f64[n,3]                   # reduce.cpp:7\n"
            "  %1 = sum(%total) {dims=[1], keepdim=0} : f64[n]   # reduce.cpp:8\n"
            "  %2 = sum(%1) {dims=[], keepdim=0} : f64[]         # reduce.cpp:9\n"
            "  return %2, %total\n"
            "}\n");
  EXPECT_EQ(to_text(pool_graph()),
            "graph @pool(%x: f32[batch,3,8,8]) {\n"
            "  %0, %1 = max_pool2d(%x) {kernel=[2,2], stride=[2,2], padding=[0,0]} "
            ": f32[batch,3,4,4], i64[batch,3,4,4]   # cnn.cpp:21\n"
            "  return %0, %1\n"
            "}\n");
}

TEST(GraphText, PrintsSubgraphsNestedUnderTheirNode) {
  EXPECT_EQ(to_text(if_graph()),
            "graph @branchy(%c: bool[], %x: f32[n]) {\n"
            "  %0 = If(%c, %x) : f32[n] {   # cf.cpp:3\n"
            "    graph @then_branch(%t: f32[n]) {\n"
            "      %0 = relu(%t) : f32[n]   # cf.cpp:4\n"
            "      return %0\n"
            "    }\n"
            "    graph @else_branch(%e: f32[n]) {\n"
            "      %0 = neg(%e) : f32[n]   # cf.cpp:5\n"
            "      return %0\n"
            "    }\n"
            "  }\n"
            "  %1 = exp(%0) : f32[n]        # cf.cpp:6\n"
            "  return %1\n"
            "}\n");
}

TEST(GraphText, EverySampleGraphRoundTrips) {
  for (Graph& g : all_sample_graphs()) {
    std::string text = to_text(g);
    Graph parsed = parse_graph(text);
    EXPECT_EQ(to_text(parsed), text);
    EXPECT_NO_THROW(verify(parsed, {.allow_unknown_ops = true}));
    ASSERT_EQ(parsed.num_nodes(), g.num_nodes());
    for (size_t i = 0; i < g.num_nodes(); ++i) {
      const Node& a = *g.nodes()[i];
      const Node& b = *parsed.nodes()[i];
      EXPECT_EQ(a.op(), b.op());
      EXPECT_EQ(a.attrs, b.attrs) << text;  // floats bit for bit, strings byte for byte
      EXPECT_EQ(a.loc, b.loc);
      EXPECT_EQ(a.subgraphs.size(), b.subgraphs.size());
      for (size_t k = 0; k < a.num_outputs(); ++k) {
        EXPECT_EQ(a.output(k)->type, b.output(k)->type);
        EXPECT_EQ(a.output(k)->name(), b.output(k)->name());
      }
    }
  }
}

TEST(GraphText, ParsesSymbolicDims) {
  Graph g = parse_graph("graph @f(%x: f32[batch,seq_len,64], %s: i64[]) { return %x, %s }");
  const SymShape& s = g.input(0)->shape();
  ASSERT_EQ(s.rank(), 3u);
  EXPECT_EQ(s[0], Dim("batch"));
  EXPECT_EQ(s[1], Dim("seq_len"));
  EXPECT_EQ(s[2], Dim(64));
  EXPECT_EQ(g.input(1)->shape().rank(), 0u);
  EXPECT_EQ(g.input(1)->dtype(), i64);
}

TEST(GraphText, ParsesLooseLayoutAndPrintsItCanonically) {
  std::string loose =
      "# a comment before the graph\n"
      "graph @f ( %x : f32[ 2 , n ] ) {\n"
      "  %7 = relu( %x )\n"
      "     : f32[2,n]  #  my file.cpp:40  \n"
      "  # a comment line\n"
      "  %3,%out = max_pool2d(%7){kernel=[1,1],stride=[1,1],padding=[0,0]}:f32[2,n],i64[2,n]\n"
      "  print(%out)   # not a location\n"
      "  return %3, %7\n"
      "}\n";
  EXPECT_EQ(round_trip(loose),
            "graph @f(%x: f32[2,n]) {\n"
            "  %0 = relu(%x) : f32[2,n]   # my file.cpp:40\n"
            "  %1, %out = max_pool2d(%0) {kernel=[1,1], stride=[1,1], padding=[0,0]} : f32[2,n], i64[2,n]\n"
            "  print(%out)\n"
            "  return %1, %0\n"
            "}\n");
}

TEST(GraphText, NodesWithoutOutputsMayHoldSubgraphs) {
  std::string text =
      "graph @loop(%x: f32[4]) {\n"
      "  Loop(%x) {   # train.cpp:9\n"
      "    graph @body(%i: i64[], %v: f32[4]) {\n"
      "      return %v\n"
      "    }\n"
      "  }\n"
      "  return\n"
      "}\n";
  Graph g = parse_graph(text);
  EXPECT_EQ(to_text(g), text);
  ASSERT_EQ(g.num_nodes(), 1u);
  EXPECT_EQ(g.nodes()[0]->loc, Location("train.cpp", 9));
  EXPECT_EQ(g.nodes()[0]->subgraphs.at(0)->name(), "body");
}

TEST(GraphText, FloatAttributesAreExact) {
  Graph g = parse_graph(
      "graph @f() {\n  k() {a=0.1, b=1e-7, c=nan, d=inf, e=-0.0, f=2.5e10, g=3, h=f64, s=\"\\x41\\\"\"}\n  return\n}");
  const ops::Attrs& a = g.nodes()[0]->attrs;
  EXPECT_EQ(a.f("a"), 0.1);
  EXPECT_EQ(a.f("b"), 1e-7);
  EXPECT_TRUE(std::isnan(a.f("c")));
  EXPECT_EQ(a.f("d"), std::numeric_limits<double>::infinity());
  EXPECT_TRUE(std::signbit(a.f("e")));
  EXPECT_EQ(a.f("f"), 2.5e10);
  EXPECT_EQ(a.i("g"), 3);
  EXPECT_EQ(a.dtype("h"), f64);
  EXPECT_EQ(a.s("s"), "A\"");
  EXPECT_EQ(format_attr_value(a.f("e")), "-0.0");
  EXPECT_EQ(format_attr_value(2.5e10), "2.5e+10");
  EXPECT_EQ(round_trip(to_text(g)), to_text(g));
}

TEST(GraphText, SyntaxErrorsNameLineColumnAndWhatWasExpected) {
  const std::string head = "graph @f(%x: f32[2]) {\n";
  EXPECT_THROWS_WITH(ValueError, parse_graph(""), "graph text 1:1: expected 'graph', found end of input");
  EXPECT_THROWS_WITH(ValueError, parse_graph(head + "  %0 = relu(%x : f32[2]\n  return %0\n}"),
                     "graph text 2:16: expected ')', found ':'");
  EXPECT_THROWS_WITH(ValueError, parse_graph(head + "  %0 = relu(%y) : f32[2]\n  return %0\n}"),
                     "2:13: undefined value %y");
  EXPECT_THROWS_WITH(ValueError, parse_graph(head + "  %x = relu(%x) : f32[2]\n  return %x\n}"),
                     "2:3: value %x is already defined");
  EXPECT_THROWS_WITH(ValueError, parse_graph("graph @f(%x: f16[2]) {\n return\n}"),
                     "1:14: expected a dtype (bool, i32, i64, f32, f64), found 'f16'");
  EXPECT_THROWS_WITH(ValueError, parse_graph("graph @f(%x: f32[-1]) {\n return\n}"),
                     "1:18: expected a dim (a size or a symbol), found '-'");
  EXPECT_THROWS_WITH(ValueError, parse_graph(head + "  %0, %1 = relu(%x) : f32[2]\n  return %0\n}"),
                     "2:12: 'relu' names 2 results but gives 1 result types");
  EXPECT_THROWS_WITH(ValueError, parse_graph(head + "}"), "2:1: expected an op name or 'return', found '}'");
  EXPECT_THROWS_WITH(ValueError, parse_graph(head + "  k(%x) {s=\"abc}\n  return\n}"),
                     "expected '\"' closing the string");
  EXPECT_THROWS_WITH(ValueError, parse_graph(head + "  k(%x) {i=99999999999999999999}\n  return\n}"),
                     "2:12: integer '99999999999999999999' is out of range");
  EXPECT_THROWS_WITH(ValueError, parse_graph("graph @f(%x: f32[4294967296*4294967296*b]) {\n return\n}"),
                     "1:18: dim '4294967296*4294967296...' is out of range");
  EXPECT_THROWS_WITH(ValueError, parse_graph(head + "  k(%x) {i=1, i=2}\n  return\n}"),
                     "2:15: attribute 'i' is given twice");
  EXPECT_THROWS_WITH(ValueError, parse_graph(head + "  k(%x) {i=1.5.2}\n  return\n}"),
                     "2:12: expected a number, found '1.5.2'");
  EXPECT_THROWS_WITH(ValueError, parse_graph(head + "  return %x\n}\nextra"),
                     "4:1: expected end of input after the graph, found 'extra'");
}

TEST(GraphText, DeepNestingIsAnErrorNotACrash) {
  std::string text;
  for (int i = 0; i < 200; ++i) text += "graph @g() {\n  If() {\n";
  EXPECT_THROWS_WITH(ValueError, parse_graph(text), "nested deeper than 32 levels");
}

// Parsing any text either succeeds or throws ValueError; what parses prints and parses
// back to the same text.
void expect_parses_or_value_error(const std::string& text) {
  try {
    Graph g = parse_graph(text);
    std::string printed = to_text(g);
    EXPECT_EQ(round_trip(printed), printed) << "input:\n" << text;
  } catch (const ValueError&) {
  } catch (const std::exception& e) {
    ADD_FAILURE() << "threw " << e.what() << " for:\n" << text;
  }
}

TEST(GraphText, TruncatedAndGarbledTextNeverCrashes) {
  std::vector<std::string> texts;
  for (Graph& g : all_sample_graphs()) texts.push_back(to_text(g));
  for (const std::string& t : texts)
    for (size_t n = 0; n < t.size(); ++n) expect_parses_or_value_error(t.substr(0, n));
  std::mt19937 rng(1234);
  const std::string alphabet = "%@(){}[],:=#\"\\-+.0123456789abefinx_ \n\t\x01\xff";
  for (int trial = 0; trial < 3000; ++trial) {
    std::string t = texts[rng() % texts.size()];
    for (int edits = 1 + rng() % 3; edits > 0; --edits) {
      size_t at = rng() % t.size();
      switch (rng() % 3) {
        case 0: t[at] = alphabet[rng() % alphabet.size()]; break;
        case 1: t.erase(at, 1 + rng() % 4); break;
        default: t.insert(at, 1, alphabet[rng() % alphabet.size()]);
      }
      if (t.empty()) t.push_back('x');
    }
    expect_parses_or_value_error(t);
  }
}

}  // namespace
}  // namespace baton::graph::testing
