// Per-op time in eager mode: which ops the time went to.
//
//   profiler::Scope profile;            // records until it goes out of scope
//   ... run the model ...
//   std::cout << profiler::table();     // op, calls, total ms, share, GFLOP/s
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace baton::profiler {

struct OpStat {
  std::string op;
  int64_t calls = 0;
  double total_ms = 0;  // inclusive: an op whose kernel calls other ops counts their time too
  double flops = 0;     // from the ops' cost rules, where they have one
};

void enable(bool on = true);
bool enabled();
void reset();
// Sorted by total time, largest first.
std::vector<OpStat> report();
std::string table();

class Scope {
 public:
  Scope() { reset(); enable(true); }
  ~Scope() { enable(false); }
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;
};

}  // namespace baton::profiler
