// Where the time went, eagerly and in plans: one event per op call (ops::call) and per
// step of a plan (Session::run, compiled calls), on every thread of the process.
//
//   {
//     Profiler profile;                          // records while alive
//     ... run the model ...
//     std::cout << profile.table();              // per op: calls, ms, share, GFLOP/s, bytes, lines
//     profile.write_chrome_trace("trace.json");  // open in Perfetto or chrome://tracing
//   }
//   std::cout << session.explain();              // each step with the time recorded for it
//
// An event has the op's name (a planned step: the node's op, or a fused step's name), its
// start and duration, the thread, the bytes of its inputs and outputs, its FLOPs (from the
// op's cost rule, where it has one) and the user's file:line: the caller's for an eager
// call, the line that built the graph node for a planned step. Times are inclusive: an op
// whose kernel calls other ops counts their time too (and they have events of their own).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace baton {

struct ProfilerOptions {
  // Events kept for events() and the trace; past this, calls still count in table() and
  // rows(), and the trace says how many events it lacks (dropped_events()).
  size_t max_events = 1'000'000;
};

struct ProfileEvent {
  std::string name;     // the op, or the planned step's label
  std::string file;     // the user's file (no folder); "" when unknown
  int line = 0;
  double start_us = 0;  // since a fixed point of the process (the first profiler's start)
  double duration_us = 0;
  uint32_t thread = 0;  // 1 for the first thread that made an event, 2 for the next...
  uint64_t input_bytes = 0, output_bytes = 0;
  double flops = 0;     // 0 where the op has no cost rule
  bool planned = false; // a step of a plan rather than an eager call
};

// Every call of one op (or planned step label), summed.
struct ProfileRow {
  std::string name;
  int64_t calls = 0;
  double total_ms = 0;
  double flops = 0;
  uint64_t input_bytes = 0, output_bytes = 0;
  // The user's lines that made these calls, "file:line" and milliseconds, most time first.
  std::vector<std::pair<std::string, double>> lines;
};

// Records from construction to destruction, or between start() and stop(). Several may
// record at once (each sees every call); all methods may be called from any thread. The
// most recently started profiler's step times are what Session::explain() and
// compiled.explain() show, even after it is gone.
class Profiler {
 public:
  explicit Profiler(ProfilerOptions options = {});
  ~Profiler();
  Profiler(const Profiler&) = delete;
  Profiler& operator=(const Profiler&) = delete;

  void start();  // resumes recording (events add to those already recorded)
  void stop();
  bool recording() const;
  void clear();  // forgets every event and sum

  std::vector<ProfileEvent> events() const;  // in the order they ended
  size_t dropped_events() const;             // calls past max_events
  std::vector<ProfileRow> rows() const;      // most total time first

  // One line per op or planned step label: calls, total ms, share of all recorded time,
  // GFLOP/s, bytes read and written, and the `top_lines` source lines with most time.
  std::string table(size_t top_lines = 3) const;
  // The events as Chrome trace event JSON ({"traceEvents": [...]}: complete events, ph
  // "X", microseconds), for Perfetto or chrome://tracing. Written to a temporary file
  // beside `path` and renamed over it: a failed write (IOError) leaves no partial file.
  void write_chrome_trace(const std::string& path) const;

  struct State;

 private:
  std::shared_ptr<State> state_;
};

}  // namespace baton
