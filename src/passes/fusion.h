// The O2 fusion passes (docs/passes.md), one file each. Like the cleanup passes, each
// returns true when it changed the graph and appends one line per rewrite to effect.details.
#pragma once
#include <optional>

#include "kernels/cpu/ewise_program.h"
#include "kernels/cpu/forced_choice.h"
#include "passes/analysis.h"
#include "passes/pass.h"

namespace baton::passes {

bool fold_batch_norm(graph::Graph& g, Context& ctx, Effect& effect);     // fold_batch_norm.cpp
bool fuse_layer_norm(graph::Graph& g, Context& ctx, Effect& effect);     // fuse_layer_norm.cpp
bool fuse_conv_epilogue(graph::Graph& g, Context& ctx, Effect& effect);  // fuse_epilogue.cpp
bool fuse_conv_pool(graph::Graph& g, Context& ctx, Effect& effect);      // fuse_conv_pool.cpp
bool fuse_pool_gradient(graph::Graph& g, Context& ctx, Effect& effect);  // fuse_pool_gradient.cpp
bool fuse_elementwise(graph::Graph& g, Context& ctx, Effect& effect);    // fuse_elementwise.cpp
bool fuse_sum(graph::Graph& g, Context& ctx, Effect& effect);            // fuse_sum.cpp
// While one lives, fuse_sum takes every group it can, whatever its size and however
// symbolic its shape, instead of only those its measured rule says pay: tests whose
// tensors are too small for the rule (random programs) run the fused kernels so.
class FuseEveryReduction : kernels::ForcedChoice::Scope {
 public:
  FuseEveryReduction();
};
// Not a fusion: how an optimizer update stores the parameter.
bool stream_updates(graph::Graph& g, Context& ctx, Effect& effect);      // stream_updates.cpp

// The element-wise program computing `n` from its inputs: one instruction for an op the
// programs know, its own program for a fused_elementwise (so groups grow across rounds);
// nullopt for anything else. (fuse_elementwise.cpp)
std::optional<kernels::EwProgram> elementwise_program(const graph::Node& n);
// The floating dtype n's program computes in: its result's, or a comparison's operands'.
DType program_type(const graph::Node& n);
// A fused node's attributes for `program` computing in `type` over `inputs`: the program,
// and the dtype where the first input does not tell it (a bool condition, a cast mask).
ops::Attrs program_attrs(const kernels::EwProgram& program, DType type, const std::vector<graph::Value*>& inputs);

// Shared by the convolution passes: a node's only reader, when its single result feeds exactly one node
// input and is neither fetched nor written by an effect; else nullptr.
graph::Node* only_reader(const graph::Graph& g, const VolatileValues& vol, const graph::Node& n);

// The attributes of a conv2d_fused node computing `conv` (conv2d or conv2d_fused) with
// this activation (activation_attrs).
ops::Attrs fused_conv_attrs(const graph::Node& conv, const ops::Attrs& activation, bool cache_weights);

// What a fused step's attributes say of the activation `n` computes (its op's name as
// `activation`, then that op's parameters: ops/epilogue.h), when n is an activation op a
// fused step applies; else nullopt.
std::optional<ops::Attrs> activation_attrs(const graph::Node& n);
// {activation="none"}.
ops::Attrs no_activation();

// An activation written as several nodes after a step's result (epilogue_patterns.cpp):
// the fused step's activation attributes, the nodes before `last` (erased readers first)
// and `last`, whose result the fused step computes.
struct CompositeActivation {
  ops::Attrs attrs;
  std::vector<graph::Node*> between;
  graph::Node* last;
};
// mul(v, sigmoid(v)) as silu, minimum(maximum(v, lo), hi) with fixed bounds as clamp, v the
// step's result read by the pattern alone; nullopt otherwise.
std::optional<CompositeActivation> composite_activation(const graph::Graph& g, const Context& ctx,
                                                        const VolatileValues& vol, const graph::Node& step);

// What a node computes, for a fused node's fused_from: its op, or what it fused before.
std::string fused_ops(const graph::Node& n);

// Replaces `old_last` (whose first result the fused node computes) by a new node of `op`
// reading `inputs` with `attrs`, placed where `old_last` was; erases `old_last`, then every
// node in `absorbed` (which must have no readers left). Returns the new node.
graph::Node* replace_with_fused(graph::Graph& g, std::string_view op, graph::Node* old_last,
                                std::vector<graph::Value*> inputs, ops::Attrs attrs,
                                std::initializer_list<graph::Node*> absorbed);

}  // namespace baton::passes
