// The graph verifier (trace/verify.cpp). It lives above the IR because it infers every
// node's result types by running the op's own rule on symbolic tensors, as graph building does.
#pragma once
#include "graph/ir.h"

namespace baton::trace {

struct VerifyOptions {
  bool allow_unknown_ops = false;  // e.g. control-flow ops not yet registered
};
// Checks SSA form, use lists, outputs, ops against the registry and subgraphs
// (recursively). Throws ValueError listing every problem, each naming the graph and node.
void verify(const graph::Graph& g, const VerifyOptions& options = {});

}  // namespace baton::trace
