#pragma once
#include <string>

namespace baton::profiler {
// Adds one call of `op` taking `ms` milliseconds and `flops` floating-point operations.
void record(const std::string& op, double ms, double flops);
}  // namespace baton::profiler
