// One function, two ways to run it. Eagerly, each op runs the moment it is called, so
// there is no graph, only a sequence of ops (the profiler lists them). Compiled, the first
// call traces the whole function into a graph, planned once and replayed by later calls.
#include <baton/baton.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

using namespace baton;

Tensor layer(Tensor W, Tensor x, Tensor b) { return relu(matmul(W, x) + b); }

// Median wall time of one call of fn over `calls` calls, in microseconds.
template <class F>
double median_us(F&& fn, int calls = 200) {
  std::vector<double> us;
  for (int i = 0; i < calls; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    fn();
    std::chrono::duration<double, std::micro> elapsed = std::chrono::steady_clock::now() - t0;
    us.push_back(elapsed.count());
  }
  std::nth_element(us.begin(), us.begin() + calls / 2, us.end());
  return us[calls / 2];
}

int main() {
  manual_seed(0);
  set_num_threads(1);  // steadier timings on a busy machine
  Tensor W = randn({64, 64}), x = randn({64, 32}), b = randn({64, 1});

  Tensor eager = layer(W, x, b);  // the first call also warms up oneDNN's kernels
  {
    Profiler profile;  // records the ops of one eager call
    layer(W, x, b);
    std::cout << "eager: three ops, each run as it is called (sorted by time):\n"
              << profile.table() << "\n";
  }

  // Compiled: the same C++ function, traced on its first call.
  auto compiled_layer = compile(layer);
  Tensor compiled = compiled_layer(W, x, b);
  std::cout << "compiled: one graph, traced once:\n" << compiled_layer.graph() << "\n";
  double diff = max(abs(eager - compiled)).item<double>();
  std::printf("max |eager - compiled| = %g\n", diff);

  // Both run the same kernels, so on a graph this small expect similar times; the graph
  // is what the optimizing passes (fusion, memory planning) work on.
  double eager_us = median_us([&] { layer(W, x, b); });
  double compiled_us = median_us([&] { compiled_layer(W, x, b); });
  std::printf("median of 200 calls: eager %.1f us, compiled %.1f us\n", eager_us, compiled_us);
  return diff < 1e-5 ? 0 : 1;
}
