// Which plan steps read attributes by name (ops::attribute_reads) as they run: a plan's
// runs should read none, each kernel taking its parameters from its step (OpDef::params).
#pragma once
#include <map>
#include <string>

#include "baton/error.h"
#include "dispatch/hooks.h"
#include "dispatch/registry.h"

namespace baton::testing {

// While alive, it observes the plan steps run on this thread (through the dispatch observer,
// so no profiler may run meanwhile) and notes, per op, the attributes read since the step
// before: its kernel's, and those of eager calls its kernel makes.
class AttributeReadWatch {
 public:
  AttributeReadWatch() : previous_(dispatch::op_observer()) {
    reset();
    dispatch::set_op_observer(&observe);
  }
  ~AttributeReadWatch() { dispatch::set_op_observer(previous_); }
  AttributeReadWatch(const AttributeReadWatch&) = delete;
  AttributeReadWatch& operator=(const AttributeReadWatch&) = delete;

  // Forgets what was read so far (after a first run, which specializes the plan).
  void reset() {
    state().readers.clear();
    state().last = ops::attribute_reads();
    state().start = state().last;
  }
  // All reads on this thread since the start or reset(), in a call or not.
  uint64_t reads() const { return ops::attribute_reads() - state().start; }
  // Reads per step's op name ("fused_elementwise").
  const std::map<std::string, uint64_t>& readers() const { return state().readers; }
  // "softmax (2 reads), slice (4 reads)".
  std::string describe() const {
    std::string s;
    for (auto& [op, n] : readers()) s += str(s.empty() ? "" : ", ", op, " (", n, " reads)");
    return s.empty() ? "none in a step" : s;
  }

 private:
  struct State {
    uint64_t start = 0, last = 0;
    std::map<std::string, uint64_t> readers;
  };
  static State& state() {
    static thread_local State s;
    return s;
  }
  static void observe(const ops::OpDef& op, std::span<const Tensor>, const ops::Attrs&, std::span<const Tensor>,
                      const dispatch::TimedCall& call, dispatch::Clock::time_point, dispatch::Clock::time_point) {
    if (!call.plan) return;  // an eager call, perhaps inside a step: counted with the step
    State& s = state();
    const uint64_t now = ops::attribute_reads();
    if (now > s.last) s.readers[op.name] += now - s.last;
    s.last = now;
  }

  dispatch::OpTimedFn previous_;
};

}  // namespace baton::testing
