// Recording: the dispatch observer (ops::call and the executor's steps) hands each timed
// call to every active profiler. One mutex guards all of it: simple, and the cost of a
// lock per call is small beside the call it times.
#include <algorithm>
#include <atomic>

#include "dispatch/hooks.h"
#include "runtime/profiler_internal.h"

namespace baton::runtime {
namespace {

using State = Profiler::State;

std::vector<State*>& active() {
  static auto* list = new std::vector<State*>;  // never destroyed: calls may come late
  return *list;
}

// The step times explain() shows: those of the most recently started profiler.
std::shared_ptr<StepTimes>& latest_steps() {
  static auto* steps = new std::shared_ptr<StepTimes>;
  return *steps;
}

// Event times count from here, so that every profiler's events share one timeline. Set
// before the first observer is, so no timed call starts before it.
dispatch::Clock::time_point epoch() {
  static const dispatch::Clock::time_point start = dispatch::Clock::now();
  return start;
}

uint32_t this_thread_number() {
  static std::atomic<uint32_t> next{1};
  thread_local uint32_t number = next.fetch_add(1, std::memory_order_relaxed);
  return number;
}

std::string_view without_folder(std::string_view file) {
  if (size_t slash = file.rfind('/'); slash != std::string_view::npos) file.remove_prefix(slash + 1);
  return file;
}

uint32_t intern(State& s, std::string_view text) {
  if (auto it = s.string_ids.find(text); it != s.string_ids.end()) return it->second;
  const auto id = uint32_t(s.strings.size());
  s.strings.emplace_back(text);
  s.string_ids.emplace(std::string(text), id);
  return id;
}

uint64_t bytes_of(std::span<const Tensor> tensors) {
  uint64_t n = 0;
  for (const Tensor& t : tensors)
    if (t.defined()) n += t.nbytes();
  return n;
}

// The op's cost rule on the call's outputs.
double flops_of(const ops::OpDef& op, std::span<const Tensor> inputs, const ops::Attrs& attrs,
                std::span<const Tensor> outputs) {
  if (!op.cost_rule || outputs.empty()) return 0;
  std::vector<ops::TensorMeta> metas;
  for (const Tensor& t : outputs) metas.push_back({t.dtype(), t.shape()});
  return ops::rule_flops(ops::CallContext{op, inputs, attrs, SourceLoc::current()}, metas);
}

void add(State& s, const dispatch::TimedCall& call, RecordedEvent e) {
  e.name = intern(s, call.label);
  e.file = intern(s, without_folder(call.file));
  Totals& t = s.totals[e.name];
  t.calls++;
  t.ns += e.duration_ns;
  t.flops += e.flops;
  t.input_bytes += e.input_bytes;
  t.output_bytes += e.output_bytes;
  t.ns_by_line[{e.file, e.line}] += e.duration_ns;
  if (call.plan) {
    StepTime& st = (*s.steps)[{call.plan, call.step}];
    if (st.label != call.label) st = {std::string(call.label), 0, 0};  // another plan at this address
    st.calls++;
    st.ns += e.duration_ns;
  }
  if (s.events.size() < s.options.max_events) s.events.push_back(e);
  else s.dropped++;
}

void observe(const ops::OpDef& op, std::span<const Tensor> inputs, const ops::Attrs& attrs,
             std::span<const Tensor> outputs, const dispatch::TimedCall& call, dispatch::Clock::time_point start,
             dispatch::Clock::time_point end) {
  RecordedEvent e;
  e.line = call.line;
  e.thread = this_thread_number();
  e.start_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(start - epoch()).count();
  e.duration_ns = std::max<int64_t>(0, std::chrono::duration_cast<std::chrono::nanoseconds>(end - start).count());
  e.input_bytes = bytes_of(inputs);
  e.output_bytes = bytes_of(outputs);
  e.flops = flops_of(op, inputs, attrs, outputs);
  e.planned = call.plan != nullptr;
  std::lock_guard lock(profiler_mutex());
  for (State* s : active()) add(*s, call, e);
}

}  // namespace

std::mutex& profiler_mutex() {
  static auto* m = new std::mutex;
  return *m;
}

std::optional<StepTime> profiled_step_time(const void* plan, size_t step, std::string_view label) {
  std::lock_guard lock(profiler_mutex());
  const std::shared_ptr<StepTimes>& steps = latest_steps();
  if (!steps) return std::nullopt;
  auto it = steps->find({plan, step});
  if (it == steps->end() || it->second.label != label) return std::nullopt;
  return it->second;
}

}  // namespace baton::runtime

namespace baton {

using runtime::profiler_mutex;

Profiler::Profiler(ProfilerOptions options) : state_(std::make_shared<State>()) {
  state_->options = options;
  start();
}

Profiler::~Profiler() { stop(); }

void Profiler::start() {
  runtime::epoch();
  std::lock_guard lock(profiler_mutex());
  runtime::latest_steps() = state_->steps;
  if (state_->recording) return;
  state_->recording = true;
  runtime::active().push_back(state_.get());
  dispatch::set_op_observer(runtime::observe);
}

void Profiler::stop() {
  std::lock_guard lock(profiler_mutex());
  if (!state_->recording) return;
  state_->recording = false;
  std::vector<State*>& list = runtime::active();
  list.erase(std::find(list.begin(), list.end(), state_.get()));
  if (list.empty()) dispatch::set_op_observer(nullptr);
}

bool Profiler::recording() const {
  std::lock_guard lock(profiler_mutex());
  return state_->recording;
}

void Profiler::clear() {
  std::lock_guard lock(profiler_mutex());
  state_->events.clear();
  state_->dropped = 0;
  state_->totals.clear();
  state_->steps->clear();
}

size_t Profiler::dropped_events() const {
  std::lock_guard lock(profiler_mutex());
  return state_->dropped;
}

std::vector<ProfileEvent> Profiler::events() const {
  std::lock_guard lock(profiler_mutex());
  const State& s = *state_;
  std::vector<ProfileEvent> out;
  out.reserve(s.events.size());
  for (const runtime::RecordedEvent& e : s.events)
    out.push_back({s.strings[e.name], s.strings[e.file], e.line, double(e.start_ns) / 1e3, double(e.duration_ns) / 1e3,
                   e.thread, e.input_bytes, e.output_bytes, e.flops, e.planned});
  return out;
}

std::vector<ProfileRow> Profiler::rows() const {
  std::lock_guard lock(profiler_mutex());
  const State& s = *state_;
  std::vector<ProfileRow> out;
  for (const auto& [name, t] : s.totals) {
    ProfileRow row{s.strings[name], t.calls, double(t.ns) / 1e6, t.flops, t.input_bytes, t.output_bytes, {}};
    for (const auto& [where, ns] : t.ns_by_line) {
      const std::string& file = s.strings[where.first];
      row.lines.emplace_back(file.empty() ? std::string("-") : str(file, ":", where.second), double(ns) / 1e6);
    }
    std::stable_sort(row.lines.begin(), row.lines.end(), [](auto& a, auto& b) { return a.second > b.second; });
    out.push_back(std::move(row));
  }
  std::stable_sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.total_ms > b.total_ms; });
  return out;
}

}  // namespace baton
