#include "baton/profiler.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <map>
#include <mutex>

#include "dispatch/hooks.h"

namespace baton::profiler {
namespace {

std::atomic<bool> is_on{false};
std::mutex mutex;
std::map<std::string, OpStat>& stats() {
  static auto* s = new std::map<std::string, OpStat>;
  return *s;
}

// Adds one call of `op` taking `ms` milliseconds and `flops` floating-point operations.
void record(const std::string& op, double ms, double flops) {
  std::lock_guard lock(mutex);
  OpStat& s = stats()[op];
  s.op = op;
  s.calls++;
  s.total_ms += ms;
  s.flops += flops;
}

// The dispatch observer: one timed op call, with its FLOPs from the op's cost rule.
void observe(const ops::OpDef& op, std::span<const Tensor> inputs, const ops::Attrs& attrs,
             std::span<const Tensor> outputs, const dispatch::TimedCall& call, dispatch::Clock::time_point start,
             dispatch::Clock::time_point end) {
  double flops = 0;
  if (op.cost_rule && !outputs.empty()) {
    std::vector<ops::TensorMeta> metas;
    for (const Tensor& t : outputs) metas.push_back({t.dtype(), t.shape()});
    flops = op.cost_rule(ops::CallContext{op, inputs, attrs, SourceLoc::current()}, metas).flops;
  }
  record(std::string(call.label), std::chrono::duration<double, std::milli>(end - start).count(), flops);
}

}  // namespace

void enable(bool on) {
  is_on.store(on, std::memory_order_relaxed);
  dispatch::set_op_observer(on ? observe : nullptr);
}
bool enabled() { return is_on.load(std::memory_order_relaxed); }

void reset() {
  std::lock_guard lock(mutex);
  stats().clear();
}

std::vector<OpStat> report() {
  std::lock_guard lock(mutex);
  std::vector<OpStat> out;
  for (auto& [name, s] : stats()) out.push_back(s);
  std::sort(out.begin(), out.end(), [](const OpStat& a, const OpStat& b) { return a.total_ms > b.total_ms; });
  return out;
}

std::string table() {
  std::vector<OpStat> rows = report();
  double total = 0;
  for (auto& r : rows) total += r.total_ms;
  std::string out = "op                          calls    total ms   share   GFLOP/s\n";
  char line[160];
  for (auto& r : rows) {
    double gflops = r.flops > 0 && r.total_ms > 0 ? r.flops / (r.total_ms * 1e6) : 0;
    std::snprintf(line, sizeof line, "%-26s %7lld %11.3f %6.1f%% %9.1f\n", r.op.c_str(),
                  (long long)r.calls, r.total_ms, total > 0 ? 100 * r.total_ms / total : 0, gflops);
    out += line;
  }
  return out;
}

}  // namespace baton::profiler
