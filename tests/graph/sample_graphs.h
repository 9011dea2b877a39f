// Small graphs the graph IR tests share: each uses real registry ops (except the
// control-flow "If", not registered yet, and "attr_zoo", a made-up op).
#pragma once
#include <limits>

#include "graph/ir.h"

namespace baton::graph::testing {

using Ints = std::vector<int64_t>;

// The issue's example: matmul then relu, with a symbolic batch.
inline Graph mlp_graph() {
  Graph g("mlp");
  Value* x = g.add_input("x", {f32, {"batch", 784}});
  Value* w = g.add_input("w", {f32, {784, 512}});
  Node* mm = g.add_node("matmul", {x, w}, {{f32, {"batch", 512}}}, {}, Location("mlp.cpp", 12));
  Node* relu = g.add_node("relu", {mm->output()}, {{f32, {"batch", 512}}}, {}, Location("mlp.cpp", 13));
  g.set_outputs({relu->output()});
  return g;
}

// Attributes (dims, keepdim), a rank-0 result, a named intermediate, two outputs.
inline Graph reduce_graph() {
  Graph g("reduce");
  Value* a = g.add_input("a", {f64, {"n", 3}});
  Value* b = g.add_input("", {f64, {"n", 3}});
  Node* add = g.add_node("add", {a, b}, {{f64, {"n", 3}}}, {}, Location("reduce.cpp", 7));
  add->output()->set_name("total");
  Node* rows = g.add_node("sum", {add->output()}, {{f64, {"n"}}},
                          {{"dims", Ints{1}}, {"keepdim", int64_t(0)}}, Location("reduce.cpp", 8));
  Node* all = g.add_node("sum", {rows->output()}, {{f64, {}}}, {{"dims", Ints{}}, {"keepdim", int64_t(0)}},
                         Location("reduce.cpp", 9));
  g.set_outputs({all->output(), add->output()});
  return g;
}

// max_pool2d has two outputs: values and the index of each maximum.
inline Graph pool_graph() {
  Graph g("pool");
  Value* x = g.add_input("x", {f32, {"batch", 3, 8, 8}});
  Node* pool = g.add_node("max_pool2d", {x}, {{f32, {"batch", 3, 4, 4}}, {i64, {"batch", 3, 4, 4}}},
                          {{"kernel", Ints{2, 2}}, {"stride", Ints{2, 2}}, {"padding", Ints{0, 0}}},
                          Location("cnn.cpp", 21));
  g.set_outputs({pool->output(0), pool->output(1)});
  return g;
}

// An If node whose branches are closed subgraphs taking the captured value explicitly.
inline Graph if_graph() {
  Graph g("branchy");
  Value* c = g.add_input("c", {b8, {}});
  Value* x = g.add_input("x", {f32, {"n"}});
  auto then_g = std::make_shared<Graph>("then_branch");
  Value* t = then_g->add_input("t", {f32, {"n"}});
  then_g->set_outputs({then_g->add_node("relu", {t}, {{f32, {"n"}}}, {}, Location("cf.cpp", 4))->output()});
  auto else_g = std::make_shared<Graph>("else_branch");
  Value* e = else_g->add_input("e", {f32, {"n"}});
  else_g->set_outputs({else_g->add_node("neg", {e}, {{f32, {"n"}}}, {}, Location("cf.cpp", 5))->output()});
  Node* branch = g.add_node("If", {c, x}, {{f32, {"n"}}}, {}, Location("cf.cpp", 3));
  branch->subgraphs = {then_g, else_g};
  Node* out = g.add_node("exp", {branch->output()}, {{f32, {"n"}}}, {}, Location("cf.cpp", 6));
  g.set_outputs({out->output()});
  return g;
}

// Every attribute kind, including floats that need all 17 digits and odd strings.
inline Graph attr_graph() {
  Graph g("attrs");
  Value* x = g.add_input("x", {f32, {2}});
  ops::Attrs attrs{{"i", int64_t(-3)},
                   {"one", 1.0},
                   {"tenth", 0.1},
                   {"third", 1.0 / 3.0},
                   {"tiny", 5e-324},
                   {"huge", 1e300},
                   {"ninf", -std::numeric_limits<double>::infinity()},
                   {"ints", Ints{1, -2, 3}},
                   {"none", Ints{}},
                   {"s", std::string("say \"hi\"\\\n\ttab\x01#")},
                   {"dt", DType::i64}};
  Node* n = g.add_node("attr_zoo", {x}, {{f32, {2}}}, attrs, Location());
  g.set_outputs({n->output()});
  return g;
}

inline std::vector<Graph> all_sample_graphs() {
  std::vector<Graph> v;
  v.push_back(mlp_graph());
  v.push_back(reduce_graph());
  v.push_back(pool_graph());
  v.push_back(if_graph());
  v.push_back(attr_graph());
  return v;
}

}  // namespace baton::graph::testing
