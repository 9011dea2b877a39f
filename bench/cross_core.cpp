// How much a store costs when another core holds the line: the machine state that decides
// several of baton's figures on the two-vCPU machines of docs/PERF.md (a weight's update
// after two products read it, steps side by side). Prints `name value` lines:
//   store_own_line_ns     a thread writes 64-byte lines only it has read
//   store_shared_line_ns  a thread writes lines both threads have read
// per line, each thread writing its half of 512 KiB, medians of 301 rounds. While the two
// cores share a cache the two are close; while they do not, the second is several times
// the first.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

namespace {

constexpr long kFloats = 131072, kLineFloats = 16, kRounds = 301;

double median(std::vector<double> v) {
  std::nth_element(v.begin(), v.begin() + long(v.size() / 2), v.end());
  return v[v.size() / 2];
}

// ns per line of one thread's half written, after each thread read `read_all` ? everything : its half.
double store_ns(std::vector<float>& data, bool read_all) {
  std::vector<double> ns;
  volatile float sink = 0;
  for (long round = 0; round < kRounds; ++round) {
#pragma omp parallel num_threads(2)
    {
      const long half = kFloats / 2, begin = read_all ? 0 : omp_get_thread_num() * half;
      const long end = read_all ? kFloats : begin + half;
      float sum = 0;
      for (long i = begin; i < end; i += kLineFloats) sum += data[size_t(i)];
      sink = sink + sum;
    }
    const auto start = std::chrono::steady_clock::now();
#pragma omp parallel num_threads(2)
    {
      const long half = kFloats / 2, begin = omp_get_thread_num() * half;
      for (long i = begin; i < begin + half; ++i) data[size_t(i)] = data[size_t(i)] * 0.5f + 1.0f;
    }
    const double elapsed = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count();
    ns.push_back(elapsed / double(kFloats / 2 / kLineFloats));
  }
  return median(ns);
}

}  // namespace

int main() {
  std::vector<float> data(size_t(kFloats), 1.0f);
  std::printf("store_own_line_ns %.2f\n", store_ns(data, false));
  std::printf("store_shared_line_ns %.2f\n", store_ns(data, true));
  return 0;
}
