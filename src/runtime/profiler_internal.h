// The profiler's recorded state (runtime/profiler.cpp records, profiler_report.cpp
// prints) and the step times explain() shows (runtime/explain.cpp).
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "baton/error.h"
#include "baton/profiler.h"

namespace baton::runtime {

// One event, its strings interned in its profiler's State::strings.
struct RecordedEvent {
  uint32_t name = 0, file = 0;
  int line = 0;
  uint32_t thread = 0;
  int64_t start_ns = 0, duration_ns = 0;  // start: since profiling_epoch()
  uint64_t input_bytes = 0, output_bytes = 0;
  double flops = 0;
  bool planned = false;
};

// The sums of one op or step label.
struct Totals {
  int64_t calls = 0, ns = 0;
  double flops = 0;
  uint64_t input_bytes = 0, output_bytes = 0;
  std::map<std::pair<uint32_t, int>, int64_t> ns_by_line;  // (file, line) -> time
};

// The time one step of one plan took over the profiled runs.
struct StepTime {
  std::string label;
  int64_t calls = 0, ns = 0;
};
// Steps are known by (plan address, step index), which holds while the plan lives.
using StepTimes = std::map<std::pair<const void*, size_t>, StepTime>;

}  // namespace baton::runtime

namespace baton {

// Every field is guarded by runtime::profiler_mutex().
struct Profiler::State {
  ProfilerOptions options;
  bool recording = false;
  std::vector<std::string> strings{""};  // id 0 is ""
  std::map<std::string, uint32_t, std::less<>> string_ids{{"", 0}};
  std::vector<runtime::RecordedEvent> events;
  size_t dropped = 0;
  std::map<uint32_t, runtime::Totals> totals;  // by name
  std::shared_ptr<runtime::StepTimes> steps = std::make_shared<runtime::StepTimes>();
};

}  // namespace baton

namespace baton::runtime {

// The one lock of all profilers: recording, reading and the list of active ones.
std::mutex& profiler_mutex();

// The time the most recently started profiler recorded for step `step` of `plan`, when it
// recorded that step and the step is still the one labelled `label` (a plan freed and
// another made at its address gives other labels, mostly). Locks profiler_mutex().
std::optional<StepTime> profiled_step_time(const void* plan, size_t step, std::string_view label);

}  // namespace baton::runtime
