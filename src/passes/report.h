// What passes say about their work: one line per rewrite naming the node, and errors that
// name the node a pass was working on (the pass manager adds the pass's name).
#pragma once
#include <string>
#include <unordered_map>

#include "graph/ir.h"

namespace baton::passes {

// " (model.cpp:12)" for a node built at a known place, else "".
std::string where(const graph::Node& n);

// Names values and nodes as the graph's text form did when the describer was made (so
// before the pass changed it); values added since (folded constants) show their name or
// type.
class Describer {
 public:
  explicit Describer(const graph::Graph& g);
  std::string value(const graph::Value* v) const;
  // "%3 = mul(%x, %w) (model.cpp:12)"
  std::string node(const graph::Node& n) const;
  // Call before erasing `n`: a value allocated later at the same address is another value.
  void forget(const graph::Node& n);
  // Names `v` (a new node's result, in the place of another) `text`.
  void name(const graph::Value* v, std::string text) { names_[v] = std::move(text); }

 private:
  std::unordered_map<const graph::Value*, std::string> names_;
};

// A baton::Error thrown while a pass worked on `node`: keeps the cause's message and says
// which node it was ("'mul' built at model.cpp:12").
class NodeFailure : public Error {
 public:
  NodeFailure(const Error& cause, const graph::Node& node);
  const std::string& node() const { return node_; }
  const std::string& cause() const { return cause_; }

 private:
  std::string node_, cause_;
};

// Runs work() for node `n`, turning a baton::Error it throws into a NodeFailure.
template <class Work>
decltype(auto) on_node(const graph::Node& n, Work&& work) {
  try {
    return work();
  } catch (const NodeFailure&) {
    throw;
  } catch (const Error& e) {
    throw NodeFailure(e, n);
  }
}

}  // namespace baton::passes
