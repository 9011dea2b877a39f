// The edges that keep what a plan computes the same as in program order when its steps
// run in another order (runtime/step_order.h) or side by side (the parallel schedule,
// runtime/specialize.cpp). Both feed it the steps in program order, each step's storages
// as they know them: graph values before a plan has slots, slots (views and control
// flow's aliasing resolved) once a specialization has them.
//
// A step waits for the last step that wrote a storage it reads; a step that writes a
// storage in place waits for every step that read it since the last write (a writer also
// reads what it writes, so it waits for the writer before it too); random draws keep
// their order. Data edges (a step waits for the producers of its operands) are the
// caller's: it knows its producers.
#pragma once
#include <cstddef>
#include <functional>
#include <unordered_map>
#include <utility>
#include <vector>

namespace baton::runtime {

template <class Storage>
class OrderingEdges {
 public:
  // Called with each edge: `step` must run after `pred` (pred < step, or -1 for none).
  using AddEdge = std::function<void(size_t step, int pred)>;
  explicit OrderingEdges(AddEdge add) : add_(std::move(add)) {}

  // Per step, in program order: what it reads, then what it writes in place or makes.
  void reads(size_t step, const Storage& s) {
    if (auto w = last_writer_.find(s); w != last_writer_.end()) add_(step, w->second);
    readers_since_write_[s].push_back(int(step));
  }
  void writes_in_place(size_t step, const Storage& s) {
    for (int reader : std::exchange(readers_since_write_[s], {})) add_(step, reader);
    last_writer_[s] = int(step);
  }
  // A value the step makes: its later in-place writers and their readers order after it.
  void makes(size_t step, const Storage& s) { last_writer_[s] = int(step); }
  void draws_random(size_t step) { add_(step, std::exchange(last_random_, int(step))); }

 private:
  AddEdge add_;
  std::unordered_map<Storage, int> last_writer_;
  std::unordered_map<Storage, std::vector<int>> readers_since_write_;
  int last_random_ = -1;
};

}  // namespace baton::runtime
