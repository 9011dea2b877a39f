// A plan step's choice between two ways of running, made by timing both in the step itself
// and kept up to date: which one is faster can depend on what the machine does at the
// time, not on the step alone. On the two-vCPU machines of docs/PERF.md the cores sometimes
// share a cache and sometimes do not, for minutes at a time; streaming a weight's update
// (kernels/cpu/streaming.h) saved 40-50 us in the second state and cost 5-10 in the first.
//
// Each way keeps an estimate of its time: a time below it replaces it (noise only adds
// time, and a way that got faster should win at once), one above moves it a quarter of the
// way there. A run takes the way with the lower estimate, except every kProbeEvery-th run,
// which takes the other to keep its estimate current; until each way has a time, runs
// alternate. Both ways must compute the same values, since the choice may change from run
// to run. Safe to use from several threads (the estimates are only estimates).
//
// A way may need a run to warm up after the other ran: running steps side by side wakes
// helper threads that slept while runs kept to one thread, and finds their caches cold.
// Made `with_warm_up`, a run whose way differs from the run before is not timed, and each
// probe is two runs, the second timed.
#pragma once
#include <atomic>
#include <cstdint>

namespace baton::kernels {

class MeasuredChoice {
 public:
  static constexpr uint64_t kProbeEvery = 32;
  static constexpr double kWeight = 0.25;  // of a longer time, in its way's estimate

  explicit MeasuredChoice(bool with_warm_up = false) : with_warm_up_(with_warm_up) {}

  struct Pick {
    int way;     // 0 or 1
    bool timed;  // false: a warm-up run, whose time says nothing of its way (record nothing)
  };
  // The way the next run takes.
  Pick pick() const {
    const uint64_t run = runs_.fetch_add(1, std::memory_order_relaxed);
    const double a = estimate(0), b = estimate(1);
    int way = a == 0 ? 0 : 1;  // until each way has a time
    if (a != 0 && b != 0) {
      const int faster = b < a ? 1 : 0;
      const uint64_t probe_runs = with_warm_up_ ? 2 : 1;
      way = run % kProbeEvery >= kProbeEvery - probe_runs ? 1 - faster : faster;
    }
    const int before = last_way_.exchange(way, std::memory_order_relaxed);
    return {way, !with_warm_up_ || before == way};
  }
  // A run of `way` took `seconds`.
  void record(int way, double seconds) const {
    const double old = estimate(way), t = seconds > kTiny ? seconds : kTiny;  // 0 means "no time yet"
    estimate_[way].store(old == 0 || t < old ? t : old + kWeight * (t - old), std::memory_order_relaxed);
  }
  double estimate(int way) const { return estimate_[way].load(std::memory_order_relaxed); }

 private:
  static constexpr double kTiny = 1e-12;
  const bool with_warm_up_;
  mutable std::atomic<uint64_t> runs_{0};
  mutable std::atomic<int> last_way_{-1};
  mutable std::atomic<double> estimate_[2] = {0.0, 0.0};
};

}  // namespace baton::kernels
