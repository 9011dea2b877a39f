// Graph autodiff: gradients of symbolic tensors, built from the ops' gradient rules.
#pragma once
#include <vector>

#include "trace/builder.h"

namespace baton::trace {

// d output / d wrt as symbolic tensors of output's graph (zeros where wrt does not reach
// output). wrt may be symbolic values of the graph or concrete tensors it reads.
std::vector<Tensor> graph_grad(const Tensor& output, const std::vector<Tensor>& wrt,
                               const Tensor& grad_output, SourceLoc loc);

// The gradients of outputs (seeded with seeds; an undefined seed means none flows) w.r.t.
// wrt; undefined where wrt does not reach the outputs.
std::vector<Tensor> gradients(const std::vector<Tensor>& outputs, const std::vector<Tensor>& seeds,
                              const std::vector<Tensor>& wrt, SourceLoc loc);

// Tensor::backward() on a symbolic tensor: gradients for every concrete leaf the graph
// reads that requires grad, accumulated into their .grad() as symbolic tensors (a
// compiled function writes the computed values back after each run).
void symbolic_backward(const Tensor& output, const Tensor& grad_output, SourceLoc loc);

// Tensor::requires_grad() of a symbolic tensor (core's hook): whether eagerly it would
// have history, that is grad mode is on and t depends, through nodes recorded with grad
// mode on, on a bound tensor that requires grad. A plan that asked is guarded by grad mode.
bool symbolic_requires_grad(const Tensor& t);

// Tensor::grad(), zero_grad() or set_grad() on a concrete tensor while a trace is active
// (before a change): the outermost trace, whose plan feeds and writes back gradients,
// notes the use (Builder::GradUse). A change inside a branch of cond or while_loop throws
// a GraphError naming `loc`: every branch is traced, so it would be made on every run.
void note_grad_use(const Tensor& leaf, Builder::GradAccess access, SourceLoc loc);

// A stop_gradient node: what Tensor::detach() records for a symbolic tensor, a node
// through which no gradient flows.
Tensor stop_gradient(const Tensor& x, SourceLoc loc);

}  // namespace baton::trace
