#include "dispatch/anomaly.h"

#include <cmath>

#include "baton/autograd.h"  // declares detect_anomaly(), defined here
#include "kernels/cpu/copy.h"
#include "kernels/cpu/dispatch.h"
#include "dispatch/registry.h"

namespace baton::ops {

std::atomic<bool> anomaly_mode{false};

namespace {

thread_local const BackwardScope* current_backward = nullptr;

// Index of the first NaN or Inf among n contiguous values, or -1.
template <class T>
int64_t first_non_finite(const T* p, int64_t n) {
  bool any = false;
  for (int64_t i = 0; i < n; ++i) any |= !std::isfinite(p[i]);  // vectorizes: no early exit
  if (!any) return -1;
  for (int64_t i = 0;; ++i)
    if (!std::isfinite(p[i])) return i;
}

thread_local bool inside_check = false;  // the check's own copies are not checked

struct BadElement {
  int64_t index = -1;  // flat index of the first NaN or Inf; -1 when there is none
  double value = 0;
};

BadElement first_bad_element(const Tensor& t) {
  const Tensor dense = kernels::dense(t);
  BadElement bad;
  kernels::visit_dtype(dense.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_floating_point_v<T>) {
      const T* p = static_cast<const T*>(dense.raw_data());
      bad.index = first_non_finite(p, dense.numel());
      if (bad.index >= 0) bad.value = double(p[bad.index]);
    }
  });
  return bad;
}

}  // namespace

void check_finite(const OpDef& op, std::span<const Tensor> inputs, std::span<const Tensor> outputs,
                  SourceLoc loc) {
  if (inside_check) return;
  inside_check = true;
  struct Reset {
    ~Reset() { inside_check = false; }
  } reset;
  auto report = [&](const Tensor& t, const std::string& which) {
    if (!t.defined() || t.is_symbolic() || !is_floating(t.dtype())) return;
    const BadElement bad = first_bad_element(t);
    if (bad.index < 0) return;
    std::string backward;
    if (const BackwardScope* b = current_backward)
      backward = str(" in the backward of '", b->forward_op.name, "' (forward called at ", format_loc(b->forward_loc), ")");
    const Attrs no_attrs;
    CallContext c{op, inputs, no_attrs, loc};
    c.fail<RuntimeError>("anomaly detected: ", which, " (", t.dtype(), t.shape(), ") holds ",
                         std::isnan(bad.value) ? "NaN" : bad.value > 0 ? "Inf" : "-Inf", " at flat index ",
                         bad.index, backward);
  };
  for (size_t i = 0; i < outputs.size(); ++i) report(outputs[i], str("output ", i));
  for (int i : op.mutated_inputs)  // in-place updates (optimizer steps) write their inputs
    if (size_t(i) < inputs.size()) report(inputs[size_t(i)], str("input ", i, " (updated in place)"));
}

BackwardScope::BackwardScope(const OpDef& forward_op, SourceLoc forward_loc)
    : forward_op(forward_op), forward_loc(forward_loc), previous_(current_backward) {
  current_backward = this;
}

BackwardScope::~BackwardScope() { current_backward = previous_; }

}  // namespace baton::ops

namespace baton {

void detect_anomaly(bool on) { ops::anomaly_mode.store(on, std::memory_order_relaxed); }
bool anomaly_detection_enabled() { return ops::anomaly_mode.load(std::memory_order_relaxed); }

}  // namespace baton
