// Assigning a step graph's steps to workers by a cost model (runtime/step_assignment.h).
#include "runtime/step_assignment.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <mutex>
#include <queue>
#include <unordered_map>

namespace baton::runtime {

namespace {
std::mutex costs_mutex;
CoreCosts process_costs;
}  // namespace

CoreCosts core_costs() {
  std::lock_guard lock(costs_mutex);
  return process_costs;
}

void set_core_costs(const CoreCosts& costs) {
  std::lock_guard lock(costs_mutex);
  process_costs = costs;
}

StepEstimate estimate_step(double flops, double bytes, const CoreCosts& costs) {
  return {costs.step_us + std::max(bytes / costs.local_bytes_per_us, flops / costs.flops_per_us),
          bytes >= costs.split_bytes || flops >= costs.split_flops};
}

namespace {

// A run of an assignment as the model sees it: each worker runs its steps in `order`, a
// step starts once its worker is free and its inputs have arrived.
class Model {
 public:
  Model(const StepGraph& g, std::span<const StepEstimate> steps, std::span<const DataEdge> edges, size_t workers,
        int threads, const CoreCosts& costs)
      : g_(g), steps_(steps), workers_(workers), threads_(std::max(threads, 1)), costs_(costs), in_(g.size()) {
    std::unordered_map<uint64_t, double> bytes;
    for (const DataEdge& e : edges) bytes[key(e.from, e.to)] += e.bytes;
    for (size_t p = 0; p < g.size(); ++p)
      for (int s : g.successors(p)) {
        auto it = bytes.find(key(int(p), s));
        in_[size_t(s)].push_back({int(p), it == bytes.end() ? 0.0 : it->second});
      }
    order_ = lowest_index_first_order();
  }

  const std::vector<int>& order() const { return order_; }
  size_t size() const { return g_.size(); }
  size_t workers() const { return workers_; }
  // A step's time when `used` workers share the threads.
  double step_us(size_t step, size_t used) const {
    return steps_[step].on(std::max(1, threads_ / int(std::max<size_t>(used, 1))), costs_);
  }

  // When step s would finish on worker w, free from `free` on: it starts once its
  // inputs are done (those made on another worker a hand-off later) and takes its own time
  // plus the time to pull the bytes it reads from other cores' caches. (The pull is not
  // hidden behind other work: it is the consumer's cache misses.)
  double finish_on(int s, size_t w, double free, const std::vector<uint8_t>& worker,
                   const std::vector<double>& finish, size_t used) const {
    double start = free, pulled = 0;
    for (auto [p, bytes] : in_[size_t(s)]) {
      const bool here = worker[size_t(p)] == w;
      start = std::max(start, here ? finish[size_t(p)] : finish[size_t(p)] + costs_.handoff_us);
      if (!here) pulled += bytes / costs_.remote_bytes_per_us;
    }
    return start + step_us(size_t(s), used) + pulled;
  }

  // Worker 0 is the calling thread; the others are helpers that join the run a little later.
  std::vector<double> start_of_workers() const {
    std::vector<double> free(workers_, costs_.join_us);
    free[0] = 0;
    return free;
  }

  double makespan(const std::vector<uint8_t>& worker) const {
    std::vector<char> busy(workers_, 0);
    for (uint8_t w : worker) busy[w] = 1;
    const size_t used = size_t(std::count(busy.begin(), busy.end(), 1));
    std::vector<double> finish(size(), 0.0), free = start_of_workers();
    for (int s : order_) {
      const uint8_t w = worker[size_t(s)];
      finish[size_t(s)] = free[w] = finish_on(s, w, free[w], worker, finish, used);
    }
    return *std::max_element(free.begin(), free.end());
  }

  const std::vector<std::pair<int, double>>& inputs_of(size_t step) const { return in_[step]; }
  const StepGraph& graph() const { return g_; }

 private:
  static uint64_t key(int from, int to) { return (uint64_t(uint32_t(from)) << 32) | uint32_t(to); }

  // Kahn's algorithm taking the ready step of the lowest index first: plan order wherever
  // the graph allows it (an edge that protects reused bytes may point backwards).
  std::vector<int> lowest_index_first_order() const {
    std::vector<uint32_t> waiting = g_.num_preds;
    std::priority_queue<int, std::vector<int>, std::greater<>> ready(g_.sources.begin(), g_.sources.end());
    std::vector<int> order;
    order.reserve(size());
    while (!ready.empty()) {
      const int s = ready.top();
      ready.pop();
      order.push_back(s);
      for (int next : g_.successors(size_t(s)))
        if (--waiting[size_t(next)] == 0) ready.push(next);
    }
    return order;
  }

  const StepGraph& g_;
  std::span<const StepEstimate> steps_;
  size_t workers_;
  int threads_;
  CoreCosts costs_;
  std::vector<std::vector<std::pair<int, double>>> in_;  // per step: (predecessor, bytes read of it)
  std::vector<int> order_;
};

std::vector<std::vector<int>> chains(const Model& m);

// A walk from the sinks that visits a step's predecessors (lowest index first) before it:
// a topological order in which what feeds one consumer comes together. Cut into `workers`
// runs of equal work, subtrees that meet only late stay on one worker.
std::vector<uint8_t> split_along_sink_walk(const Model& m) {
  const StepGraph& g = m.graph();
  std::vector<char> seen(g.size(), 0);
  std::vector<int> walk;
  std::vector<std::pair<int, size_t>> stack;  // step, next predecessor to visit
  for (size_t sink = 0; sink < g.size(); ++sink) {
    if (!g.successors(sink).empty() || seen[sink]) continue;
    stack.push_back({int(sink), 0});
    seen[sink] = 1;
    while (!stack.empty()) {
      auto& [s, next] = stack.back();
      if (next < m.inputs_of(size_t(s)).size()) {
        const int p = m.inputs_of(size_t(s))[next++].first;
        if (!seen[size_t(p)]) seen[size_t(p)] = 1, stack.push_back({p, 0});
      } else {
        walk.push_back(s);
        stack.pop_back();
      }
    }
  }
  double total = 0;
  for (int s : walk) total += m.step_us(size_t(s), m.workers());
  std::vector<uint8_t> worker(g.size(), 0);
  double before = 0;
  for (int s : walk) {
    const double middle = before + m.step_us(size_t(s), m.workers()) / 2;
    worker[size_t(s)] = uint8_t(std::min<double>(double(m.workers() - 1), middle / total * double(m.workers())));
    before += m.step_us(size_t(s), m.workers());
  }
  for (const std::vector<int>& chain : chains(m))  // a cut through a chain would hand its value over
    for (int s : chain) worker[size_t(s)] = worker[size_t(chain.back())];
  return worker;
}

// Each step, in order, on the worker where it would finish first (ties: the lower worker).
std::vector<uint8_t> earliest_finish(const Model& m) {
  std::vector<uint8_t> worker(m.size(), 0);
  std::vector<double> finish(m.size(), 0.0), free = m.start_of_workers();
  for (int s : m.order()) {
    double best = 0;
    for (size_t w = 0; w < m.workers(); ++w) {
      const double done = m.finish_on(s, w, free[w], worker, finish, m.workers());
      if (w == 0 || done < best) best = done, worker[size_t(s)] = uint8_t(w);
    }
    finish[size_t(s)] = free[worker[size_t(s)]] = best;
  }
  return worker;
}

// Chains: a step joins its predecessor's chain when each is the other's only neighbour
// that way. Moving a whole chain keeps its values on one core.
std::vector<std::vector<int>> chains(const Model& m) {
  const StepGraph& g = m.graph();
  std::vector<int> chain_of(g.size(), -1);
  std::vector<std::vector<int>> out;
  for (int s : m.order()) {
    const auto& in = m.inputs_of(size_t(s));
    if (in.size() == 1 && g.successors(size_t(in[0].first)).size() == 1) {
      chain_of[size_t(s)] = chain_of[size_t(in[0].first)];
    } else {
      chain_of[size_t(s)] = int(out.size());
      out.emplace_back();
    }
    out[size_t(chain_of[size_t(s)])].push_back(s);
  }
  return out;
}

// Moves whole chains to another worker while that lowers the estimate (a few passes; the
// graphs of big models skip it: each try re-runs the model).
double improve_by_moving_chains(const Model& m, std::vector<uint8_t>& worker, double estimate) {
  constexpr size_t kMaxWork = size_t(4) << 20;  // chains x steps x workers a pass may cost
  const std::vector<std::vector<int>> all = chains(m);
  if (all.size() * m.size() * m.workers() > kMaxWork) return estimate;
  for (int pass = 0; pass < 3; ++pass) {
    bool moved = false;
    for (const std::vector<int>& chain : all) {
      const uint8_t from = worker[size_t(chain[0])];
      for (size_t w = 0; w < m.workers(); ++w) {
        if (w == from) continue;
        for (int s : chain) worker[size_t(s)] = uint8_t(w);
        const double tried = m.makespan(worker);
        if (tried < estimate - 1e-9) {
          estimate = tried, moved = true;
          break;
        }
        for (int s : chain) worker[size_t(s)] = from;
      }
    }
    if (!moved) break;
  }
  return estimate;
}

}  // namespace

WorkerAssignment assign_workers(const StepGraph& g, std::span<const StepEstimate> steps,
                                std::span<const DataEdge> edges, size_t workers, int threads, const CoreCosts& costs) {
  Model m(g, steps, edges, std::clamp<size_t>(workers, 1, 255), threads, costs);
  WorkerAssignment best;
  best.order = m.order();
  best.worker.assign(g.size(), 0);
  best.sequential_us = best.estimated_us = m.makespan(best.worker);
  best.strategy = "one worker";
  if (m.workers() == 1 || g.size() == 0) return best;
  WorkerAssignment split = best;
  split.estimated_us = std::numeric_limits<double>::infinity();
  for (auto [strategy, worker] : {std::pair{"split along a walk from the sinks", split_along_sink_walk(m)},
                                  std::pair{"earliest finish", earliest_finish(m)}}) {
    const double estimate = improve_by_moving_chains(m, worker, m.makespan(worker));
    if (estimate >= split.estimated_us) continue;
    split.worker = std::move(worker);
    split.estimated_us = estimate;
    split.strategy = strategy;
  }
  // The model is rough: side by side must promise a clear gain over one worker.
  constexpr double kRequiredGain = 0.9;
  WorkerAssignment& chosen = split.estimated_us < kRequiredGain * best.sequential_us ? split : best;
  chosen.spread_us = split.estimated_us;
  return std::move(chosen);
}

}  // namespace baton::runtime
