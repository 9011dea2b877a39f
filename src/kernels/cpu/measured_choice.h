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
#pragma once
#include <atomic>
#include <cstdint>

namespace baton::kernels {

class MeasuredChoice {
 public:
  static constexpr uint64_t kProbeEvery = 32;
  static constexpr double kWeight = 0.25;  // of a longer time, in its way's estimate

  // The way (0 or 1) the next run takes.
  int pick() const {
    const uint64_t run = runs_.fetch_add(1, std::memory_order_relaxed);
    const double a = estimate(0), b = estimate(1);
    if (a == 0 || b == 0) return a == 0 ? 0 : 1;
    const int faster = b < a ? 1 : 0;
    return run % kProbeEvery == kProbeEvery - 1 ? 1 - faster : faster;
  }
  // A run of `way` took `seconds`.
  void record(int way, double seconds) const {
    const double old = estimate(way), t = seconds > kTiny ? seconds : kTiny;  // 0 means "no time yet"
    estimate_[way].store(old == 0 || t < old ? t : old + kWeight * (t - old), std::memory_order_relaxed);
  }
  double estimate(int way) const { return estimate_[way].load(std::memory_order_relaxed); }

 private:
  static constexpr double kTiny = 1e-12;
  mutable std::atomic<uint64_t> runs_{0};
  mutable std::atomic<double> estimate_[2] = {0.0, 0.0};
};

}  // namespace baton::kernels
