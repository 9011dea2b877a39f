// baton-bench [--mode eager|graph|compiled|all] [name ...]: the workloads of
// shared/bench/README.md, printed as `name value` lines (median of repetitions). No names:
// run them all. --mode picks how the model workloads run (tools/modes.h; default eager);
// a mode other than eager adds its name to theirs (mlp_train_step_ms_compiled), and such a
// full name may also be asked for directly.
// Timing loops come from Google Benchmark; a reporter turns its medians into our lines.
#include <CLI/CLI.hpp>
#include <benchmark/benchmark.h>
#include <oneapi/dnnl/dnnl.h>

#include <baton/baton.h>
#include <baton/nn.h>
#include <baton/optim.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "modes.h"

using namespace baton;

namespace {

struct Workload {
  std::string name;
  // Ratio: the workload reports a dimensionless ratio in its "ratio" counter.
  enum Unit { Microseconds, Milliseconds, GflopsPerSecond, Ratio } unit;
  double flops_per_iteration;  // for GflopsPerSecond
  std::function<void(benchmark::State&)> run;
  // Set for the model workloads, which run in each mode: `name` then ends in the mode's
  // suffix, and `base` is the name without it.
  std::optional<Mode> mode = std::nullopt;
  std::string base = name;
  // > 0: the workload times itself (State::SetIterationTime) over this many iterations.
  int64_t manual_iterations = 0;
};

template <class F>
double seconds(F&& f) {
  auto start = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void eager_add16(benchmark::State& state) {
  Tensor a = rand({16}), b = rand({16});
  for (auto _ : state) {
    Tensor c = a + b;
    benchmark::DoNotOptimize(c.raw_data());
  }
}

// MLP 784-512-256-10 with ReLU, batch 64, forward without gradients.
void mlp_infer_bs64(benchmark::State& state, Mode mode) {
  auto mlp = nn::mnist_mlp();
  Tensor x = rand({64, 784});
  NoGradGuard no_grad;
  ModeFunction forward = make_forward(mode, *mlp, x);
  forward({x});  // warm-up, untimed (compiled: the trace)
  for (auto _ : state) {
    Tensor y = forward({x});
    benchmark::DoNotOptimize(y.raw_data());
  }
}

// The peer's training step: batch 64 of 1x28x28 images, SGD lr 0.01 momentum 0.9.
struct TrainStepSetup {
  explicit TrainStepSetup(std::shared_ptr<nn::Module> m)
      : model(std::move(m)), opt(model->parameters(), {.lr = 0.01, .momentum = 0.9}) {}
  std::shared_ptr<nn::Module> model;
  optim::SGD opt;
  Tensor x = randn({64, 1, 28, 28});
  Tensor y = randint(0, 10, {64});
};

// One training step as the peer defines it: zero grads, forward, loss, backward, step.
void train_step(benchmark::State& state, std::shared_ptr<nn::Module> model, Mode mode) {
  TrainStepSetup s(std::move(model));
  ModeFunction step = make_train_step(mode, *s.model, s.opt, s.x, s.y);
  step({s.x, s.y});  // warm-up, untimed (compiled: the trace)
  for (auto _ : state) {
    Tensor loss = step({s.x, s.y});
    benchmark::DoNotOptimize(loss.raw_data());
  }
}

// Tracing and planning the MLP training step: a fresh compiled step's first call (trace,
// plan, run) minus its second (run).
void compile_trace_plan_mlp_step(benchmark::State& state) {
  TrainStepSetup s(nn::mnist_mlp());
  for (auto _ : state) {
    ModeFunction step = make_train_step(Mode::Compiled, *s.model, s.opt, s.x, s.y);
    double first = seconds([&] { benchmark::DoNotOptimize(step({s.x, s.y}).raw_data()); });
    double steady = seconds([&] { benchmark::DoNotOptimize(step({s.x, s.y}).raw_data()); });
    state.SetIterationTime(first - steady);
  }
}

// What a compiled call costs over the eager call of the same tiny op (signature check,
// plan lookup, binding): relu on one element.
void compiled_call_overhead(benchmark::State& state) {
  Tensor x = rand({1});
  auto f = compile([](Tensor t) { return relu(t); });
  f(x);  // the trace
  for (auto _ : state) {
    double compiled = seconds([&] { benchmark::DoNotOptimize(f(x).raw_data()); });
    double eager = seconds([&] { benchmark::DoNotOptimize(relu(x).raw_data()); });
    state.SetIterationTime(compiled - eager);  // may dip below 0 in one iteration; the mean won't
  }
}

double median(std::vector<double> v) {
  std::nth_element(v.begin(), v.begin() + std::ptrdiff_t(v.size() / 2), v.end());
  return v[v.size() / 2];
}

// Compiled over eager time of one training step: the ratio of the medians of steps run
// interleaved on twin models (alternating which goes first), so that the shared machine's
// load drifts affect both alike. Reported through the "ratio" counter; "compiled is never
// slower than eager" means <= 1 within noise.
void compiled_over_eager(benchmark::State& state, std::function<std::shared_ptr<nn::Module>()> make) {
  manual_seed(0);
  TrainStepSetup e(make());
  manual_seed(0);
  TrainStepSetup c(make());
  ModeFunction eager = make_train_step(Mode::Eager, *e.model, e.opt, e.x, e.y);
  ModeFunction compiled = make_train_step(Mode::Compiled, *c.model, c.opt, c.x, c.y);
  eager({e.x, e.y});
  compiled({c.x, c.y});  // the trace
  std::vector<double> eager_s, compiled_s;
  for (auto _ : state) {
    auto run_eager = [&] { eager_s.push_back(seconds([&] { benchmark::DoNotOptimize(eager({e.x, e.y}).raw_data()); })); };
    auto run_compiled = [&] {
      compiled_s.push_back(seconds([&] { benchmark::DoNotOptimize(compiled({c.x, c.y}).raw_data()); }));
    };
    if (eager_s.size() % 2) run_eager(), run_compiled();
    else run_compiled(), run_eager();
    state.SetIterationTime(eager_s.back() + compiled_s.back());
  }
  state.counters["ratio"] = median(compiled_s) / median(eager_s);
}

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

constexpr Mode kModes[] = {Mode::Eager, Mode::Compiled, Mode::Graph};

// A model workload in one mode.
Workload in_mode(const std::string& base, Mode mode, std::function<void(benchmark::State&, Mode)> run) {
  std::string name = mode == Mode::Eager ? base : base + "_" + mode_name(mode);
  return {name, Workload::Milliseconds, 0, [run, mode](benchmark::State& s) { run(s, mode); }, mode, base};
}

std::vector<Workload> workloads() {
  const double gemm_flops = 2.0 * 1024 * 1024 * 1024;
  std::vector<Workload> out = {
      {"eager_add16_us", Workload::Microseconds, 0, eager_add16},
      {"matmul_1024_gflops", Workload::GflopsPerSecond, gemm_flops, matmul_1024},
      {"onednn_sgemm_1024_gflops", Workload::GflopsPerSecond, gemm_flops, onednn_sgemm_1024},
  };
  out.push_back({.name = "compile_trace_plan_mlp_step_ms", .unit = Workload::Milliseconds,
                 .flops_per_iteration = 0, .run = compile_trace_plan_mlp_step, .manual_iterations = 5});
  out.push_back({.name = "compiled_call_overhead_us", .unit = Workload::Microseconds,
                 .flops_per_iteration = 0, .run = compiled_call_overhead, .manual_iterations = 2000});
  out.push_back({.name = "mlp_train_step_compiled_over_eager", .unit = Workload::Ratio,
                 .flops_per_iteration = 0,
                 .run = [](benchmark::State& s) { compiled_over_eager(s, [] { return nn::mnist_mlp(); }); },
                 .manual_iterations = 200});
  out.push_back({.name = "cnn_train_step_compiled_over_eager", .unit = Workload::Ratio,
                 .flops_per_iteration = 0,
                 .run = [](benchmark::State& s) { compiled_over_eager(s, [] { return nn::mnist_cnn(); }); },
                 .manual_iterations = 20});
  for (Mode mode : kModes) {
    out.push_back(in_mode("mlp_infer_bs64_ms", mode, mlp_infer_bs64));
    out.push_back(in_mode("mlp_train_step_ms", mode,
                          [](benchmark::State& s, Mode m) { train_step(s, nn::mnist_mlp(), m); }));
    out.push_back(in_mode("cnn_train_step_ms", mode,
                          [](benchmark::State& s, Mode m) { train_step(s, nn::mnist_cnn(), m); }));
  }
  return out;
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
                     : w.unit == Workload::Ratio        ? double(run.counters.at("ratio"))
                                                        : w.flops_per_iteration / seconds * 1e-9;
      std::printf("%s %.4g\n", w.name.c_str(), value);
      std::fflush(stdout);
    }
  }

 private:
  std::map<std::string, Workload> by_name_;
};

struct Args {
  std::set<Mode> modes{Mode::Eager};
  std::set<std::string> wanted;
};

// The command line, through CLI11 as `baton`'s: a bad one is one line and exit status 2.
Args parse_args(int argc, char** argv) {
  Args a;
  CLI::App app("Runs the workloads of shared/bench/README.md, printed as `name value` lines.", "baton-bench");
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  std::string mode = "eager";
  std::vector<std::string> names;
  app.add_option("--mode", mode, "how the model workloads run (default eager)")
      ->type_name(std::string(kModeNames) + "|all")
      ->check(CLI::IsMember({"eager", "graph", "compiled", "all"}).description(""));
  app.add_option("name", names, "workloads to run, by full or base name (default: all)")->type_name("NAME");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::fputs(app.help().c_str(), stdout);
    std::exit(0);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "baton-bench: %s\n", e.what());
    std::exit(2);
  }
  if (mode == "all") a.modes = {std::begin(kModes), std::end(kModes)};
  else a.modes = {parse_mode(mode).value_or(Mode::Eager)};
  a.wanted.insert(names.begin(), names.end());
  return a;
}

// A workload runs when named (its full name, or its base name in a chosen mode), or when
// no names are given and it has no mode or a chosen one.
bool selected(const Workload& w, const Args& a, std::set<std::string>& matched) {
  const bool in_modes = !w.mode || a.modes.count(*w.mode);
  if (a.wanted.empty()) return in_modes;
  bool yes = false;
  for (const std::string& n : {w.name, w.base}) {
    if (!a.wanted.count(n) || (n == w.base && !in_modes)) continue;
    matched.insert(n);
    yes = true;
  }
  return yes;
}

}  // namespace

static int run_benchmarks(int argc, char** argv) {
  Args args = parse_args(argc, argv);
  std::map<std::string, Workload> chosen;
  std::set<std::string> matched;
  for (Workload& w : workloads()) {
    if (!selected(w, args, matched)) continue;
    benchmark::internal::Benchmark* b = benchmark::RegisterBenchmark(w.name.c_str(), w.run)
                                            ->Unit(benchmark::kNanosecond)
                                            ->Repetitions(7)
                                            ->ReportAggregatesOnly(true);
    if (w.manual_iterations > 0) b->UseManualTime()->Iterations(w.manual_iterations);
    else b->MinTime(0.2);
    chosen.emplace(w.name, w);
  }
  for (const auto& n : args.wanted)
    if (!matched.count(n)) {
      std::fprintf(stderr, "baton-bench: unknown workload '%s'\n", n.c_str());
      return 2;
    }
  int bench_argc = 1;
  benchmark::Initialize(&bench_argc, argv);
  LineReporter reporter(chosen);
  benchmark::RunSpecifiedBenchmarks(&reporter);
  return 0;
}

// Every failure, a baton::Error or anything else, is one line on stderr and exit status 1.
int main(int argc, char** argv) {
  try {
    return run_benchmarks(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "baton-bench: %s\n", e.what());
  } catch (...) {
    std::fprintf(stderr, "baton-bench: unknown error\n");
  }
  return 1;
}
