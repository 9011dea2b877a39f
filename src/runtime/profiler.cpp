#include "baton/profiler.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <map>
#include <mutex>

#include "runtime/profiler_internal.h"

namespace baton::profiler {
namespace {

std::atomic<bool> is_on{false};
std::mutex mutex;
std::map<std::string, OpStat>& stats() {
  static auto* s = new std::map<std::string, OpStat>;
  return *s;
}

}  // namespace

void enable(bool on) { is_on.store(on, std::memory_order_relaxed); }
bool enabled() { return is_on.load(std::memory_order_relaxed); }

void reset() {
  std::lock_guard lock(mutex);
  stats().clear();
}

void record(const std::string& op, double ms, double flops) {
  std::lock_guard lock(mutex);
  OpStat& s = stats()[op];
  s.op = op;
  s.calls++;
  s.total_ms += ms;
  s.flops += flops;
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
