// Anomaly mode (baton::detect_anomaly): every op's outputs are checked for NaN and Inf
// as they are produced, in forward and backward, eager and planned runs. Off by default,
// and then one relaxed atomic load per op.
#pragma once
#include <atomic>
#include <span>

#include "baton/tensor.h"

namespace baton::ops {

struct OpDef;

extern std::atomic<bool> anomaly_mode;

// Throws RuntimeError naming the op, the output, its first bad element, the caller's line,
// and the forward op being differentiated when a gradient rule is running.
void check_finite(const OpDef& op, std::span<const Tensor> inputs, std::span<const Tensor> outputs,
                  SourceLoc loc);

// Set by the autograd engine while it runs the gradient rule of a forward op recorded at
// `forward_loc`, so an anomaly inside the rule names the forward call it differentiates.
class BackwardScope {
 public:
  BackwardScope(const OpDef& forward_op, SourceLoc forward_loc);
  ~BackwardScope();
  BackwardScope(const BackwardScope&) = delete;
  BackwardScope& operator=(const BackwardScope&) = delete;

  const OpDef& forward_op;
  SourceLoc forward_loc;

 private:
  const BackwardScope* previous_;
};

}  // namespace baton::ops
