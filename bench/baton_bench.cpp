// baton-bench [name ...]: the workloads of shared/bench/README.md, printed as
// `name value` lines (median of repetitions). No names: run them all.
// Timing loops come from Google Benchmark; a reporter turns its medians into our lines.
#include <benchmark/benchmark.h>
#include <oneapi/dnnl/dnnl.h>

#include <baton/baton.h>
#include <baton/nn.h>
#include <baton/optim.h>

#include <cstdio>
#include <functional>
#include <map>
#include <string>
#include <vector>

using namespace baton;

namespace {

struct Workload {
  std::string name;
  enum Unit { Microseconds, Milliseconds, GflopsPerSecond } unit;
  double flops_per_iteration;  // for GflopsPerSecond
  std::function<void(benchmark::State&)> run;
};

void eager_add16(benchmark::State& state) {
  Tensor a = rand({16}), b = rand({16});
  for (auto _ : state) {
    Tensor c = a + b;
    benchmark::DoNotOptimize(c.raw_data());
  }
}

// MLP 784-512-256-10 with ReLU, batch 64, forward without gradients.
void mlp_infer_bs64(benchmark::State& state) {
  auto mlp = nn::mnist_mlp();
  Tensor x = rand({64, 784});
  NoGradGuard no_grad;
  for (auto _ : state) {
    Tensor y = mlp->forward(x);
    benchmark::DoNotOptimize(y.raw_data());
  }
}

// One training step as the peer defines it: zero grads, forward, loss, backward, SGD step
// (lr 0.01, momentum 0.9), batch 64 of 1x28x28 images.
void train_step(benchmark::State& state, const std::shared_ptr<nn::Module>& model) {
  Tensor x = randn({64, 1, 28, 28});
  Tensor y = randint(0, 10, {64});
  optim::SGD opt(model->parameters(), {.lr = 0.01, .momentum = 0.9});
  for (auto _ : state) {
    opt.zero_grad();
    Tensor loss = cross_entropy(model->forward(x), y);
    loss.backward();
    opt.step();
    benchmark::DoNotOptimize(loss.raw_data());
  }
}

void mlp_train_step(benchmark::State& state) { train_step(state, nn::mnist_mlp()); }
void cnn_train_step(benchmark::State& state) { train_step(state, nn::mnist_cnn()); }

void matmul_1024(benchmark::State& state) {
  Tensor a = rand({1024, 1024}), b = rand({1024, 1024});
  for (auto _ : state) {
    Tensor c = matmul(a, b);
    benchmark::DoNotOptimize(c.raw_data());
  }
}

// oneDNN's own sgemm on the same problem: the bar matmul_1024_gflops is measured against.
void onednn_sgemm_1024(benchmark::State& state) {
  const int n = 1024;
  std::vector<float> a(size_t(n) * n, 1.0f), b(size_t(n) * n, 0.5f), c(size_t(n) * n);
  for (auto _ : state) {
    dnnl_sgemm('N', 'N', n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
    benchmark::DoNotOptimize(c.data());
  }
}

std::vector<Workload> workloads() {
  const double gemm_flops = 2.0 * 1024 * 1024 * 1024;
  return {
      {"eager_add16_us", Workload::Microseconds, 0, eager_add16},
      {"mlp_infer_bs64_ms", Workload::Milliseconds, 0, mlp_infer_bs64},
      {"mlp_train_step_ms", Workload::Milliseconds, 0, mlp_train_step},
      {"cnn_train_step_ms", Workload::Milliseconds, 0, cnn_train_step},
      {"matmul_1024_gflops", Workload::GflopsPerSecond, gemm_flops, matmul_1024},
      {"onednn_sgemm_1024_gflops", Workload::GflopsPerSecond, gemm_flops, onednn_sgemm_1024},
  };
}

// Prints `name value` for the median aggregate of each workload.
class LineReporter : public benchmark::BenchmarkReporter {
 public:
  explicit LineReporter(std::map<std::string, Workload> by_name) : by_name_(std::move(by_name)) {}
  bool ReportContext(const Context&) override { return true; }
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& run : runs) {
      if (run.aggregate_name != "median") continue;
      const Workload& w = by_name_.at(run.run_name.function_name);
      double seconds = run.GetAdjustedRealTime() * 1e-9;  // time unit is ns
      double value = w.unit == Workload::Microseconds   ? seconds * 1e6
                     : w.unit == Workload::Milliseconds ? seconds * 1e3
                                                        : w.flops_per_iteration / seconds * 1e-9;
      std::printf("%s %.4g\n", w.name.c_str(), value);
      std::fflush(stdout);
    }
  }

 private:
  std::map<std::string, Workload> by_name_;
};

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> wanted(argv + 1, argv + argc);
  std::map<std::string, Workload> chosen;
  for (Workload& w : workloads()) {
    bool selected = wanted.empty();
    for (const auto& n : wanted) selected |= n == w.name;
    if (!selected) continue;
    benchmark::RegisterBenchmark(w.name.c_str(), w.run)
        ->Unit(benchmark::kNanosecond)
        ->Repetitions(7)
        ->ReportAggregatesOnly(true)
        ->MinTime(0.2);
    chosen.emplace(w.name, w);
  }
  for (const auto& n : wanted)
    if (!chosen.count(n)) {
      std::fprintf(stderr, "baton-bench: unknown workload '%s'\n", n.c_str());
      return 2;
    }
  int bench_argc = 1;
  benchmark::Initialize(&bench_argc, argv);
  LineReporter reporter(chosen);
  benchmark::RunSpecifiedBenchmarks(&reporter);
  return 0;
}
