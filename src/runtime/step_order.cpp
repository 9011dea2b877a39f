// Choosing the order of a plan's steps with memory in mind (runtime/step_order.h).
#include "runtime/step_order.h"

#include <algorithm>
#include <unordered_map>
#include <utility>

#include "passes/analysis.h"
#include "runtime/ordering_edges.h"

namespace baton::runtime {
namespace {

int64_t estimated_bytes(const graph::Value& v) {
  int64_t n = 1;
  for (int64_t d : v.shape().raw()) n *= sym::is_symbol(d) ? kSymbolicDimGuess : d;
  return n * int64_t(dtype_size(v.dtype()));
}

// The steps as a dependency graph over their indices in program order, and the buffers
// they make and read (a view reads and keeps alive the buffer it looks into).
class OrderProblem {
 public:
  OrderProblem(const std::vector<const graph::Node*>& program, std::span<graph::Value* const> fetched)
      : program_(program), preds_(program.size()), succs_(program.size()), makes_(program.size()),
        reads_(program.size()) {
    for (size_t i = 0; i < program.size(); ++i) index_[program[i]] = int(i);
    for (size_t i = 0; i < program.size(); ++i) note_buffers(i);
    for (graph::Value* f : fetched)
      if (int b = buffer_of(f); b >= 0) buffers_[size_t(b)].pinned = true;
    add_edges();
  }

  // Control flow may hand back its operands' buffers and runs whole subgraphs, and a step
  // sized by values ends a stage of the plan (plan.h): plans with either keep program order.
  bool can_reorder() const {
    return std::none_of(program_.begin(), program_.end(), [](const graph::Node* n) {
      return !n->subgraphs.empty() || (n->op() && n->op()->sized_by_values);
    });
  }

  int64_t peak(const std::vector<int>& order) const {
    std::vector<int> users_left = users();
    int64_t live = 0, peak = 0;
    for (int step : order) {
      const int64_t reused = written_over(step, users_left);
      for (int b : makes_[size_t(step)]) live += buffers_[size_t(b)].bytes;
      peak = std::max(peak, live - reused);
      live -= freed_by(step, users_left, /*consume=*/true);
    }
    return peak;
  }

  // Kahn's algorithm taking, of the ready steps, the one that adds the fewest bytes
  // (ties: the earliest in program order). Each pick scans the ready steps: a graph with
  // thousands ready at once would take long, so past kMaxScans it gives up (empty result).
  std::vector<int> fewest_bytes_first() const {
    constexpr size_t kMaxScans = size_t(1) << 25;
    std::vector<int> users_left = users(), order, ready;
    std::vector<size_t> waiting(program_.size());
    for (size_t i = 0; i < program_.size(); ++i)
      if ((waiting[i] = preds_[i].size()) == 0) ready.push_back(int(i));
    for (size_t scans = 0; !ready.empty(); scans += ready.size()) {
      if (scans > kMaxScans) return {};
      auto best = ready.begin();
      int64_t best_added = added_by(*best, users_left);
      for (auto it = ready.begin() + 1; it != ready.end(); ++it)
        if (int64_t added = added_by(*it, users_left); added < best_added || (added == best_added && *it < *best))
          best = it, best_added = added;
      const int step = *best;
      ready.erase(best);
      order.push_back(step);
      freed_by(step, users_left, /*consume=*/true);
      for (int next : succs_[size_t(step)])
        if (--waiting[size_t(next)] == 0) ready.push_back(next);
    }
    return order;
  }

 private:
  struct Buffer {
    int64_t bytes = 0;
    int users = 0;  // steps that read it or a view of it
    bool pinned = false;
  };

  // The buffer a value's bytes are in: -1 for graph inputs (and views of them).
  int buffer_of(const graph::Value* v) const {
    auto it = buffer_.find(graph::storage_root(v));
    return it == buffer_.end() ? -1 : it->second;
  }

  void note_buffers(size_t i) {
    const graph::Node& n = *program_[i];
    if (!graph::is_view(n))
      for (graph::Value* out : n.outputs()) {
        buffer_[out] = int(buffers_.size());
        makes_[i].push_back(int(buffers_.size()));
        buffers_.push_back({estimated_bytes(*out)});
      }
    for (graph::Value* in : n.inputs()) {
      const int b = buffer_of(in);
      std::vector<int>& reads = reads_[i];
      if (b >= 0 && std::find(reads.begin(), reads.end(), b) == reads.end()) {
        reads.push_back(b);
        ++buffers_[size_t(b)].users;
      }
    }
  }

  void wait_for(size_t step, int pred) {
    if (pred < 0 || size_t(pred) == step) return;
    preds_[step].push_back(pred);
    succs_[size_t(pred)].push_back(int(step));
  }

  // Data edges, and those that keep in-place writes and random draws in their places
  // (runtime/ordering_edges.h), over the values whose bytes the steps read and write.
  void add_edges() {
    OrderingEdges<const graph::Value*> edges([this](size_t step, int pred) { wait_for(step, pred); });
    for (size_t i = 0; i < program_.size(); ++i) {
      const graph::Node& n = *program_[i];
      if (passes::is_random(n)) edges.draws_random(i);
      for (graph::Value* in : n.inputs()) {
        if (auto it = index_.find(in->producer()); it != index_.end()) wait_for(i, it->second);
        edges.reads(i, graph::storage_root(in));
      }
      for (int m : n.op() ? n.op()->mutated_inputs : std::vector<int>{})
        if (size_t(m) < n.num_inputs())  // else: absent
          edges.writes_in_place(i, graph::storage_root(n.input(size_t(m))));
    }
  }

  std::vector<int> users() const {
    std::vector<int> out;
    for (const Buffer& b : buffers_) out.push_back(b.users);
    return out;
  }

  // The bytes freed once `step` ran: buffers it was the last to read, and what it made
  // that nothing reads. With consume, counts the step's reads as done.
  int64_t freed_by(int step, std::vector<int>& users_left, bool consume) const {
    int64_t freed = 0;
    for (int b : reads_[size_t(step)]) {
      const int left = consume ? --users_left[size_t(b)] : users_left[size_t(b)] - 1;
      if (left == 0 && !buffers_[size_t(b)].pinned) freed += buffers_[size_t(b)].bytes;
    }
    for (int b : makes_[size_t(step)])
      if (buffers_[size_t(b)].users == 0 && !buffers_[size_t(b)].pinned) freed += buffers_[size_t(b)].bytes;
    return freed;
  }

  int64_t added_by(int step, std::vector<int>& users_left) const {
    int64_t made = 0;
    for (int b : makes_[size_t(step)]) made += buffers_[size_t(b)].bytes;
    return made - freed_by(step, users_left, /*consume=*/false);
  }

  // The bytes of an input that dies at `step` and that its output is written over, as the
  // arena planner does for an element-wise step (runtime/specialize.cpp): 0 if none.
  int64_t written_over(int step, const std::vector<int>& users_left) const {
    const graph::Node& n = *program_[size_t(step)];
    const ops::OpDef* op = n.op();
    const bool pointwise = op && (op->pointwise_first_output || op->fusion_kind == ops::Fusion::Elementwise ||
                                  op->fusion_kind == ops::Fusion::Broadcast);
    if (!op || makes_[size_t(step)].empty() || !op->mutated_inputs.empty()) return 0;
    if (!pointwise && op->output_may_overwrite < 0) return 0;
    const int64_t out_bytes = buffers_[size_t(makes_[size_t(step)][0])].bytes;
    for (size_t k = 0; k < n.num_inputs(); ++k) {
      if (!pointwise && int(k) != op->output_may_overwrite) continue;
      auto it = buffer_.find(n.input(k));  // its own buffer, not a view of one
      const int b = it == buffer_.end() ? -1 : it->second;
      if (b >= 0 && users_left[size_t(b)] == 1 && !buffers_[size_t(b)].pinned && buffers_[size_t(b)].bytes == out_bytes)
        return out_bytes;
    }
    return 0;
  }

  const std::vector<const graph::Node*>& program_;
  std::unordered_map<const graph::Node*, int> index_;
  std::unordered_map<const graph::Value*, int> buffer_;
  std::vector<Buffer> buffers_;
  std::vector<std::vector<int>> preds_, succs_;
  std::vector<std::vector<int>> makes_, reads_;  // per step: buffers
};

}  // namespace

StepOrder order_for_memory(std::vector<const graph::Node*> program, std::span<graph::Value* const> fetched) {
  OrderProblem problem(program, fetched);
  std::vector<int> in_program_order(program.size());
  for (size_t i = 0; i < program.size(); ++i) in_program_order[i] = int(i);
  StepOrder out;
  out.program_peak_bytes = out.chosen_peak_bytes = problem.peak(in_program_order);
  if (problem.can_reorder()) {
    std::vector<int> greedy = problem.fewest_bytes_first();
    if (greedy.empty()) greedy = in_program_order;
    // A reorder must pay for the plan no longer reading as the program, and the estimate
    // leaves out what kernels need as scratch: 10% of the peak.
    if (const int64_t peak = problem.peak(greedy); peak < out.program_peak_bytes - out.program_peak_bytes / 10) {
      out.chosen_peak_bytes = peak;
      for (int step : greedy) out.nodes.push_back(program[size_t(step)]);
      return out;
    }
  }
  out.nodes = std::move(program);
  return out;
}

}  // namespace baton::runtime
