// Eager autograd controls. Ops record history when an input requires grad and grad
// mode is on; Tensor::backward() walks it (src/autograd/engine.cpp).
#pragma once
#include <vector>

#include "baton/tensor.h"

namespace baton {

struct GradMode {
  static bool enabled();
  static void set_enabled(bool on);
};

// Turns recording off for its scope (inference, optimizer updates).
class NoGradGuard {
 public:
  NoGradGuard() : previous_(GradMode::enabled()) { GradMode::set_enabled(false); }
  ~NoGradGuard() { GradMode::set_enabled(previous_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

// Anomaly mode, as PyTorch's detect_anomaly: while on, a NaN or Inf produced by any op,
// in forward or backward, eager or in a planned run, is a RuntimeError naming the op, its
// caller's file:line and, in backward, the forward call being differentiated. Off by
// default (then it costs one relaxed atomic load per op). Process-wide.
void detect_anomaly(bool on);
bool anomaly_detection_enabled();

// Turns anomaly mode on for its scope, then back to what it was.
class DetectAnomalyGuard {
 public:
  DetectAnomalyGuard() : previous_(anomaly_detection_enabled()) { detect_anomaly(true); }
  ~DetectAnomalyGuard() { detect_anomaly(previous_); }
  DetectAnomalyGuard(const DetectAnomalyGuard&) = delete;
  DetectAnomalyGuard& operator=(const DetectAnomalyGuard&) = delete;

 private:
  bool previous_;
};

// Gradients of `outputs` w.r.t. `inputs`, returned instead of accumulated into .grad().
// With create_graph the results carry history, so they can be differentiated again
// (create_graph implies retain_graph).
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs = {}, bool retain_graph = false,
                         bool create_graph = false, SourceLoc loc = SourceLoc::current());
// The same for one output: grad(loss, {w1, w2}). On a symbolic loss the results are
// symbolic gradients built from the ops' gradient rules (graph autodiff).
std::vector<Tensor> grad(const Tensor& output, const std::vector<Tensor>& inputs,
                         const Tensor& grad_output = {}, bool retain_graph = false,
                         bool create_graph = false, SourceLoc loc = SourceLoc::current());

}  // namespace baton
