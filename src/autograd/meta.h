// Autograd state attached to a tensor, and the nodes of the eager tape.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "baton/tensor.h"
#include "core/tensor_impl.h"
#include "dispatch/registry.h"

namespace baton::autograd {

struct Node;

// Where a gradient goes: an output slot of the producing node, or a leaf tensor.
struct Edge {
  std::shared_ptr<Node> node;
  uint32_t slot = 0;
  std::shared_ptr<TensorImpl> leaf;
  bool valid() const { return node || leaf; }
};

// One recorded op call: what its gradient rule needs, and where the gradients go.
struct Node : std::enable_shared_from_this<Node> {
  const ops::OpDef* op = nullptr;
  ops::Attrs attrs;
  SourceLoc loc;
  uint64_t sequence = 0;          // creation order; later nodes run first
  std::vector<Tensor> inputs;     // saved inputs
  std::vector<Tensor> outputs;    // saved outputs, detached to avoid a reference cycle
  std::vector<uint64_t> versions; // storage versions of inputs then outputs when saved
  std::vector<Edge> next;         // one per input
  size_t num_outputs = 0;         // kept when saved tensors are released
  bool released = false;          // saved tensors freed by a backward without retain_graph

  std::string name() const;       // "MulBackward"
};

struct AutogradMeta : AutogradSlot {
  bool requires_grad = false;
  Tensor grad;
  std::shared_ptr<Node> grad_fn;  // null for leaves
  uint32_t output_nr = 0;         // which output of grad_fn this tensor is

  bool wants_grad() const override { return requires_grad; }
  std::string history_name() const override;
};

// Records op's call on the tape (a node whose edges lead to the inputs' histories).
void record(const ops::OpDef& op, std::span<const Tensor> inputs, const ops::Attrs& attrs,
            std::span<Tensor> outputs, SourceLoc loc);

AutogradMeta* meta(const Tensor& t);             // null when the tensor has none
AutogradMeta& ensure_meta(const Tensor& t);

}  // namespace baton::autograd
