// baton-bench [--mode eager|graph|compiled|all] [--profile FILE] [name ...]: the workloads
// of shared/bench/README.md and our own, printed as `name value` lines (median of
// repetitions). No names: run them all. --mode picks how the model workloads run
// (tools/modes.h; default eager); a mode other than eager adds its name to theirs
// (mlp_train_step_ms_compiled), and such a full name may also be asked for directly.
// --profile FILE writes baton's per-op time table (Profiler::table()) over every workload
// run, warm-ups included, to FILE, and their Chrome trace (the first 200,000 calls) to
// FILE.trace.json; profiling adds its own cost to the printed figures.
// Timing loops come from Google Benchmark; a reporter turns its medians into our lines.
#include <CLI/CLI.hpp>
#include <benchmark/benchmark.h>
#include <oneapi/dnnl/dnnl.h>

#include <baton/baton.h>
#include <baton/nn.h>
#include <baton/onnx.h>
#include <baton/optim.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "modes.h"

using namespace baton;

namespace {

struct Workload {
  std::string name;
  // Ratio: the workload reports a dimensionless ratio in its "ratio" counter; Mebibytes:
  // a memory figure in its "mib" counter.
  enum Unit { Microseconds, Milliseconds, GflopsPerSecond, Ratio, Mebibytes } unit;
  double flops_per_iteration;  // for GflopsPerSecond
  std::function<void(benchmark::State&)> run;
  // Set for the model workloads, which run in each mode: `name` then ends in the mode's
  // suffix, and `base` is the name without it.
  std::optional<Mode> mode = std::nullopt;
  std::string base = name;
  // > 0: the workload times itself (State::SetIterationTime) over this many iterations.
  int64_t manual_iterations = 0;
  // The figure is the median of the repetitions; with 1, the one run's (memory figures,
  // which do not vary from run to run).
  int repetitions = 7;
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

// sigmoid((tanh(x * a + b) * c - x) * 0.5 + x) on 1M floats (a one element, b and c rows of
// 1024): 8 element-wise ops, each a pass over 4 MiB when run apart (eager); at O2 (compiled,
// graph) fuse_elementwise makes them one kernel, one pass.
void elementwise_chain_1m(benchmark::State& state, Mode mode) {
  Tensor x = rand({1024, 1024}), a = rand({}), b = rand({1024}), c = rand({1024});
  NoGradGuard no_grad;
  ModeFunction f(
      mode, [a, b, c](const std::vector<Tensor>& in) { return sigmoid((tanh(in[0] * a + b) * c - in[0]) * 0.5 + in[0]); },
      {x});
  f({x});  // warm-up, untimed (compiled: the trace)
  for (auto _ : state) {
    Tensor y = f({x});
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

// Times `numerator` and `denominator` alternately, in blocks of `block` runs each (which
// block goes first alternates too), so that the shared machine's load drifts affect both
// alike, and sets the "ratio" counter to the ratio of their medians. Blocks of one run
// compare each right after the other; longer ones, with their first `settle` runs left
// out, compare their steady states (a run after runs of its own kind, as in a loop of
// either alone).
void interleaved_ratio(benchmark::State& state, const std::function<void()>& numerator,
                       const std::function<void()>& denominator, int block = 1, int settle = 0) {
  std::vector<double> numerator_s, denominator_s;
  bool numerator_first = true;
  for (auto _ : state) {
    double total = 0;
    auto run_block = [&](const std::function<void()>& f, std::vector<double>& times) {
      for (int i = 0; i < block; ++i) {
        const double s = seconds(f);
        total += s;
        if (i >= settle) times.push_back(s);
      }
    };
    if (numerator_first) run_block(numerator, numerator_s), run_block(denominator, denominator_s);
    else run_block(denominator, denominator_s), run_block(numerator, numerator_s);
    numerator_first = !numerator_first;
    state.SetIterationTime(total);
  }
  state.counters["ratio"] = median(numerator_s) / median(denominator_s);
}

// How compiled_over_eager alternates the two modes: step by step (each step starts with
// the caches as the other mode's step left them) or in blocks of steps (steady state).
enum class Alternation { Steps, Blocks };

// Compiled over eager time of one training step: the ratio of the medians of steps run
// interleaved on twin models, step by step or in blocks of ten (the first three of a block
// untimed). "compiled is never slower than eager" means <= 1 within noise.
void compiled_over_eager(benchmark::State& state, std::function<std::shared_ptr<nn::Module>()> make,
                         Alternation alternation = Alternation::Steps) {
  manual_seed(0);
  TrainStepSetup e(make());
  manual_seed(0);
  TrainStepSetup c(make());
  ModeFunction eager = make_train_step(Mode::Eager, *e.model, e.opt, e.x, e.y);
  ModeFunction compiled = make_train_step(Mode::Compiled, *c.model, c.opt, c.x, c.y);
  eager({e.x, e.y});
  compiled({c.x, c.y});  // the trace
  auto run_compiled = [&] { benchmark::DoNotOptimize(compiled({c.x, c.y}).raw_data()); };
  auto run_eager = [&] { benchmark::DoNotOptimize(eager({e.x, e.y}).raw_data()); };
  if (alternation == Alternation::Blocks) interleaved_ratio(state, run_compiled, run_eager, 10, 3);
  else interleaved_ratio(state, run_compiled, run_eager);
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

// torchvision's ResNet-18 in eval mode and a batch of 3x224x224 images, forward without
// gradients (NoGradGuard) in one mode.
struct ResNetInference {
  ResNetInference(int64_t batch, Mode mode) : x(rand({batch, 3, 224, 224})) {
    model->eval();
    forward = std::make_unique<ModeFunction>(make_forward(mode, *model, x));
  }
  void run() { benchmark::DoNotOptimize((*forward)({x}).raw_data()); }

  std::shared_ptr<nn::Module> model = nn::resnet18();
  NoGradGuard no_grad;
  Tensor x;
  std::unique_ptr<ModeFunction> forward;
};

// Times itself over the workload's few iterations: ResNet-18 takes tens of ms per image here.
void resnet18_infer(benchmark::State& state, int64_t batch, Mode mode) {
  ResNetInference r(batch, mode);
  r.run();  // warm-up, untimed (compiled: the trace)
  for (auto _ : state) state.SetIterationTime(seconds([&] { r.run(); }));
}

// --- ONNX: ../shared/models/resnet18 (torchvision's, exported for one image) ---
// The model file: $BATON_MODELS/resnet18/model.onnx, by default the checkout's
// ../shared/models; the workloads are left out when it is missing.
std::string resnet18_onnx_path() {
  const char* dir = std::getenv("BATON_MODELS");
  return std::string(dir ? dir : BATON_SHARED_MODELS) + "/resnet18/model.onnx";
}

// Loaded for any batch (the file declares [1,3,224,224]), at O2 as compiled runs.
onnx::Model load_resnet18_onnx() {
  return onnx::load(resnet18_onnx_path(), {.input_shapes = {{"input_0", {"batch", 3, 224, 224}}}});
}

void resnet18_onnx_infer(benchmark::State& state, int64_t batch) {
  onnx::Model m = load_resnet18_onnx();
  const Tensor x = rand({batch, 3, 224, 224});
  m.run({x});  // warm-up, untimed: the plan
  for (auto _ : state) state.SetIterationTime(seconds([&] { benchmark::DoNotOptimize(m.run({x})[0].raw_data()); }));
}

// The imported model's time over the native compiled ResNet-18's (nn::resnet18, eval,
// frozen as in resnet18_bs*_ms_compiled), interleaved in one loop so that the machine's
// drift falls on both alike: the goal "an imported model is as fast as a native one".
void resnet18_onnx_over_compiled(benchmark::State& state, int64_t batch) {
  onnx::Model m = load_resnet18_onnx();
  ResNetInference native(batch, Mode::Compiled);
  m.run({native.x});
  native.run();
  interleaved_ratio(
      state, [&] { benchmark::DoNotOptimize(m.run({native.x})[0].raw_data()); }, [&] { native.run(); });
}

// File to runnable plan: reading and importing the model, then the first run of one
// image, which makes the plan (so it includes one inference).
void onnx_load_resnet18(benchmark::State& state) {
  const Tensor x = rand({1, 3, 224, 224});
  for (auto _ : state)
    state.SetIterationTime(seconds([&] { load_resnet18_onnx().run({x}); }));
}

// --- peak memory of one step ---
// From the allocator's statistics (baton/memory.h), in MiB (2^20 bytes). Counted: the
// bytes of live tensor storages, each rounded up to the caching allocator's size class,
// buffers that a compiled or graph plan keeps between calls included (its arena, folded
// constants, and the convolutions' copies of constant weights in oneDNN's layout). Not
// counted: blocks freed into the allocator's cache, memory oneDNN allocates itself
// (scratchpads, primitives), the C++ objects of modules, graphs and plans. Each workload
// starts from empty_cache(), so copies of an earlier workload's weights are gone.
//   peak: the highest bytes in use during the measured step (after one warm-up step, with
//     the peak reset just before it), less the bytes in use before the workload built
//     anything; so parameters, buffers, gradients, optimizer state and the input batch are
//     included.
//   activation peak: peak less persistent_bytes() (parameters, buffers, one gradient per
//     trainable parameter, optimizer state) and less the plan's constants
//     (MemoryPlan::constant_bytes: folded batch norm weights, weights packed in a kernel's
//     layout; zero eagerly), which are the parameters in another form and do not grow with
//     the batch; resnet18_bs8_plan_constants_mb shows them. What is left: activations, the
//     input batch, the step's temporaries, and whatever a mode keeps beyond those tensors.
//     persistent_bytes() is the same in every mode, also in graph mode, where the gradients
//     live only inside the step rather than between steps, so the modes compare alike.
enum class MemoryFigure { Peak, ActivationPeak };

size_t bytes_in_use() { return memory_stats().bytes_in_use; }

// What is in use before a workload builds anything, leftovers of earlier ones dropped.
size_t start_of_workload() {
  empty_cache();
  return bytes_in_use();
}

// The bytes the allocator holds for a tensor of t's dtype and size, its size class included
// (measured on a copy: the size classes are the allocator's own business).
size_t allocator_bytes(const Tensor& t) {
  const size_t before = bytes_in_use();
  Tensor copy = t.clone();
  return bytes_in_use() - before;
}

// Parameters, buffers and, with an optimizer (training), one gradient per trainable
// parameter and the optimizer's state (momentum buffers, step counters).
size_t persistent_bytes(const nn::Module& model, const optim::Optimizer* opt) {
  size_t total = 0;
  for (const Tensor& p : model.parameters()) {
    total += allocator_bytes(p);
    if (opt && p.requires_grad()) total += allocator_bytes(p);  // its gradient
  }
  for (const auto& [name, buffer] : model.named_buffers()) total += allocator_bytes(buffer);
  if (opt)
    for (const auto& [name, state] : opt->state_dict()) total += allocator_bytes(state);
  return total;
}

// Runs `step` once as a warm-up (compiled: the trace; it also creates the optimizer state),
// then measures the workload's one iteration; `start`: the bytes in use before the workload
// built anything.
void measure_step_memory(benchmark::State& state, MemoryFigure figure, size_t start,
                         const std::function<void()>& step, const std::function<size_t()>& persistent) {
  step();
  for (auto _ : state) {
    reset_peak_memory_stats();
    state.SetIterationTime(seconds(step));
    const double peak = double(memory_stats().peak_bytes_in_use - start);
    const double value = figure == MemoryFigure::Peak ? peak : peak - double(persistent());
    state.counters["mib"] = value / double(1 << 20);
  }
}

// The step of cnn_train_step_ms.
void cnn_train_step_memory(benchmark::State& state, MemoryFigure figure, Mode mode) {
  const size_t start = start_of_workload();
  TrainStepSetup s(nn::mnist_cnn());
  ModeFunction step = make_train_step(mode, *s.model, s.opt, s.x, s.y);
  measure_step_memory(state, figure, start, [&] { step({s.x, s.y}); },
                      [&] { return persistent_bytes(*s.model, &s.opt) + step.memory_plan().constant_bytes; });
}

// The forward of resnet18_bs8_ms.
void resnet18_bs8_memory(benchmark::State& state, MemoryFigure figure, Mode mode) {
  const size_t start = start_of_workload();
  ResNetInference r(8, mode);
  measure_step_memory(state, figure, start, [&] { r.run(); },
                      [&] { return persistent_bytes(*r.model, nullptr) + r.forward->memory_plan().constant_bytes; });
}

// The memory figures of the compiled resnet18_bs8 forward's plan (MemoryPlan): the arena it
// lays out, one buffer per intermediate (naive), the most bytes alive at one step, and the
// constants it keeps between runs.
enum class PlanFigure { Arena, Naive, LowerBound, Constants };

// The four figures come from one plan: ResNet-18 traced and run once, on the first ask.
const MemoryPlan& resnet18_bs8_memory_plan() {
  static const MemoryPlan plan = [] {
    ResNetInference r(8, Mode::Compiled);
    r.run();
    return r.forward->memory_plan();
  }();
  return plan;
}

void resnet18_bs8_plan(benchmark::State& state, PlanFigure figure) {
  const MemoryPlan& m = resnet18_bs8_memory_plan();
  for (auto _ : state) {
    state.SetIterationTime(1e-9);  // a memory figure: the time is not reported
    const size_t bytes = figure == PlanFigure::Arena        ? m.arena_bytes
                         : figure == PlanFigure::Naive      ? m.naive_bytes
                         : figure == PlanFigure::LowerBound ? m.lower_bound_bytes
                                                            : m.constant_bytes;
    state.counters["mib"] = double(bytes) / double(1 << 20);
  }
}

// --- static graphs of small elementwise ops ---
// `count` f32 placeholders of `size` elements, named prefix0, prefix1, ...
std::vector<Tensor> placeholders(Graph& g, int count, int64_t size, const std::string& prefix) {
  std::vector<Tensor> out;
  for (int i = 0; i < count; ++i) out.push_back(g.placeholder(f32, {size}, prefix + std::to_string(i)));
  return out;
}

// Values in [0.9, 1.1) for each placeholder, so that a long add/mul/sub chain stays near its
// start (no overflow, no denormals).
Session::Feeds near_one_feeds(const std::vector<Tensor>& placeholders, int64_t size) {
  Session::Feeds feeds;
  for (const Tensor& p : placeholders) feeds.emplace_back(p, rand({size}) * 0.2f + 0.9f);
  return feeds;
}

// `length` elementwise ops on x: add, mul, sub in turn, the operands taken in turn from
// `operands`. With a number of operands prime to 3 the (op, operand) pairs keep changing,
// and every op reads the one before: no pass can cancel, merge or drop any of them.
Tensor elementwise_chain(Tensor x, const std::vector<Tensor>& operands, int length) {
  for (int i = 0; i < length; ++i) {
    const Tensor& c = operands[size_t(i) % operands.size()];
    if (i % 3 == 0) x = x + c;
    else if (i % 3 == 1) x = x * c;
    else x = x - c;
  }
  return x;
}

// Session::run's cost per step of the plan: 100 chained elementwise ops on 16 floats (the
// kernels are next to nothing), time per run divided by the 100 ops.
// At O1: O2 would fuse the chain into one step, and there would be no steps to count.
void plan_step_overhead(benchmark::State& state) {
  constexpr int kOps = 100;
  Graph g("plan_step_overhead");
  std::vector<Tensor> inputs = placeholders(g, 8, 16, "p");
  Tensor out = elementwise_chain(inputs[0], {inputs.begin() + 1, inputs.end()}, kOps);  // 7 operands
  Session session(g, {.level = OptLevel::O1});
  Session::Feeds feeds = near_one_feeds(inputs, 16);
  session.run({out}, feeds);  // warm-up: plans the fetch
  for (auto _ : state) {
    double s = seconds([&] { benchmark::DoNotOptimize(session.run({out}, feeds).at(0).raw_data()); });
    state.SetIterationTime(s / kOps);
  }
}

// Intra-op threads set for a scope; the previous count comes back after it.
class ScopedThreads {
 public:
  explicit ScopedThreads(int n) : previous_(get_num_threads()) { set_num_threads(n); }
  ~ScopedThreads() { set_num_threads(previous_); }
  ScopedThreads(const ScopedThreads&) = delete;
  ScopedThreads& operator=(const ScopedThreads&) = delete;

 private:
  int previous_;
};

// Sums tensors as a balanced tree of adds (the adds of one level are independent too).
Tensor pairwise_sum(std::vector<Tensor> terms) {
  while (terms.size() > 1) {
    std::vector<Tensor> next;
    for (size_t i = 0; i + 1 < terms.size(); i += 2) next.push_back(terms[i] + terms[i + 1]);
    if (terms.size() % 2) next.push_back(terms.back());
    terms = std::move(next);
  }
  return terms.at(0);
}

// Sequential over parallel executor time of a graph of 8 independent branches (20
// elementwise ops each on 4096 floats, summed at the end), both on the same two threads,
// timed interleaved: > 1 when running branches side by side pays.
// At O1: O2 would fuse the whole graph (branches and sums) into one step.
void parallel_branches_speedup(benchmark::State& state) {
  constexpr int kBranches = 8, kOpsPerBranch = 20;
  constexpr int64_t kSize = 4096;
  ScopedThreads two_threads(2);
  Graph g("parallel_branches");
  std::vector<Tensor> branch_inputs = placeholders(g, kBranches, kSize, "branch");
  std::vector<Tensor> operands = placeholders(g, 7, kSize, "c");
  std::vector<Tensor> branches;
  for (const Tensor& input : branch_inputs) branches.push_back(elementwise_chain(input, operands, kOpsPerBranch));
  Tensor out = pairwise_sum(branches);
  Session sequential(g, {.level = OptLevel::O1});
  Session parallel(g, {.level = OptLevel::O1, .inter_op_threads = 2});  // 2 workers, 1 kernel thread each
  Session::Feeds feeds = near_one_feeds(branch_inputs, kSize);
  for (auto& feed : near_one_feeds(operands, kSize)) feeds.push_back(feed);
  auto run = [&](Session& session) { benchmark::DoNotOptimize(session.run({out}, feeds).at(0).raw_data()); };
  run(sequential), run(parallel);  // warm-up: plans the fetch
  // Then ~50 ms more: a new helper thread starts on the caller's core, and the first
  // milliseconds of two workers measure where the scheduler put it (PERF.md).
  for (auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(50);
       std::chrono::steady_clock::now() < end;)
    run(sequential), run(parallel);
  interleaved_ratio(state, [&] { run(sequential); }, [&] { run(parallel); });
}

constexpr Mode kModes[] = {Mode::Eager, Mode::Compiled, Mode::Graph};

// A model workload in one mode.
Workload in_mode(const std::string& base, Mode mode, std::function<void(benchmark::State&, Mode)> run,
                 Workload::Unit unit = Workload::Milliseconds) {
  std::string name = mode == Mode::Eager ? base : base + "_" + mode_name(mode);
  return {name, unit, 0, [run, mode](benchmark::State& s) { run(s, mode); }, mode, base};
}

// A model workload timed over a fixed, small number of iterations (ResNet-18).
Workload timed_in_mode(const std::string& base, Mode mode, std::function<void(benchmark::State&, Mode)> run,
                       int64_t iterations, int repetitions) {
  Workload w = in_mode(base, mode, std::move(run));
  w.manual_iterations = iterations;
  w.repetitions = repetitions;
  return w;
}

// A memory figure of a model workload in one mode: one run of one measured step.
Workload memory_in_mode(const std::string& base, Mode mode, MemoryFigure figure,
                        void (*measure)(benchmark::State&, MemoryFigure, Mode)) {
  Workload w = in_mode(base, mode, [figure, measure](benchmark::State& s, Mode m) { measure(s, figure, m); },
                       Workload::Mebibytes);
  w.manual_iterations = 1;
  w.repetitions = 1;
  return w;
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
  out.push_back({.name = "mlp_train_step_compiled_over_eager_steady", .unit = Workload::Ratio,
                 .flops_per_iteration = 0,
                 .run = [](benchmark::State& s) {
                   compiled_over_eager(s, [] { return nn::mnist_mlp(); }, Alternation::Blocks);
                 },
                 .manual_iterations = 40});
  out.push_back({.name = "cnn_train_step_compiled_over_eager", .unit = Workload::Ratio,
                 .flops_per_iteration = 0,
                 .run = [](benchmark::State& s) { compiled_over_eager(s, [] { return nn::mnist_cnn(); }); },
                 .manual_iterations = 20});
  out.push_back({.name = "plan_step_overhead_us", .unit = Workload::Microseconds, .flops_per_iteration = 0,
                 .run = plan_step_overhead, .manual_iterations = 2000});
  out.push_back({.name = "parallel_branches_speedup", .unit = Workload::Ratio, .flops_per_iteration = 0,
                 .run = parallel_branches_speedup, .manual_iterations = 200});
  for (auto [name, figure] : {std::pair{"resnet18_bs8_arena_mb", PlanFigure::Arena},
                               std::pair{"resnet18_bs8_naive_mb", PlanFigure::Naive},
                               std::pair{"resnet18_bs8_lower_bound_mb", PlanFigure::LowerBound},
                               std::pair{"resnet18_bs8_plan_constants_mb", PlanFigure::Constants}})
    out.push_back({.name = name, .unit = Workload::Mebibytes, .flops_per_iteration = 0,
                   .run = [figure](benchmark::State& s) { resnet18_bs8_plan(s, figure); }, .manual_iterations = 1,
                   .repetitions = 1});
  if (std::ifstream(resnet18_onnx_path()).good()) {
    out.push_back({.name = "resnet18_onnx_bs1_ms", .unit = Workload::Milliseconds, .flops_per_iteration = 0,
                   .run = [](benchmark::State& s) { resnet18_onnx_infer(s, 1); }, .manual_iterations = 10,
                   .repetitions = 5});
    out.push_back({.name = "resnet18_onnx_bs8_ms", .unit = Workload::Milliseconds, .flops_per_iteration = 0,
                   .run = [](benchmark::State& s) { resnet18_onnx_infer(s, 8); }, .manual_iterations = 3,
                   .repetitions = 3});
    out.push_back({.name = "onnx_load_resnet18_ms", .unit = Workload::Milliseconds, .flops_per_iteration = 0,
                   .run = onnx_load_resnet18, .manual_iterations = 3, .repetitions = 3});
    for (int64_t batch : {1, 8})
      out.push_back({.name = str("resnet18_onnx_bs", batch, "_over_compiled"), .unit = Workload::Ratio,
                     .flops_per_iteration = 0,
                     .run = [batch](benchmark::State& s) { resnet18_onnx_over_compiled(s, batch); },
                     .manual_iterations = batch == 1 ? 20 : 6, .repetitions = 3});
  }
  for (Mode mode : kModes) {
    out.push_back(in_mode("elementwise_chain_ms", mode, elementwise_chain_1m));
    out.push_back(in_mode("mlp_infer_bs64_ms", mode, mlp_infer_bs64));
    out.push_back(in_mode("mlp_train_step_ms", mode,
                          [](benchmark::State& s, Mode m) { train_step(s, nn::mnist_mlp(), m); }));
    out.push_back(in_mode("cnn_train_step_ms", mode,
                          [](benchmark::State& s, Mode m) { train_step(s, nn::mnist_cnn(), m); }));
    out.push_back(timed_in_mode("resnet18_bs1_ms", mode,
                                [](benchmark::State& s, Mode m) { resnet18_infer(s, 1, m); }, 10, 5));
    out.push_back(timed_in_mode("resnet18_bs8_ms", mode,
                                [](benchmark::State& s, Mode m) { resnet18_infer(s, 8, m); }, 3, 3));
    out.push_back(memory_in_mode("cnn_train_step_peak_mb", mode, MemoryFigure::Peak, cnn_train_step_memory));
    out.push_back(memory_in_mode("cnn_train_step_activation_peak_mb", mode, MemoryFigure::ActivationPeak,
                                 cnn_train_step_memory));
    out.push_back(memory_in_mode("resnet18_bs8_peak_mb", mode, MemoryFigure::Peak, resnet18_bs8_memory));
    out.push_back(memory_in_mode("resnet18_bs8_activation_peak_mb", mode, MemoryFigure::ActivationPeak,
                                 resnet18_bs8_memory));
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
      const Workload& w = by_name_.at(run.run_name.function_name);
      const bool single_run = w.repetitions == 1 && run.run_type == Run::RT_Iteration;
      if (run.aggregate_name != "median" && !single_run) continue;
      double seconds = run.GetAdjustedRealTime() * 1e-9;  // time unit is ns
      double value = w.unit == Workload::Microseconds   ? seconds * 1e6
                     : w.unit == Workload::Milliseconds ? seconds * 1e3
                     : w.unit == Workload::Ratio        ? double(run.counters.at("ratio"))
                     : w.unit == Workload::Mebibytes    ? double(run.counters.at("mib"))
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
  std::string profile_file;  // empty: no profile
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
  app.add_option("--profile", a.profile_file,
                 "write baton's per-op time table over every workload run (warm-ups included) to FILE\n"
                 "and their Chrome trace (Perfetto, chrome://tracing) to FILE.trace.json")
      ->type_name("FILE");
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

// Opened before any workload runs, so that a path that cannot be written fails at once.
static std::ofstream open_profile(const std::string& path) {
  std::ofstream out(path);
  if (!out) throw std::runtime_error("cannot write the profile to '" + path + "'");
  return out;
}

static void write_profile(Profiler& profiler, std::ofstream& out, const std::string& path) {
  profiler.stop();
  out << "time per op over every workload run (inclusive):\n" << profiler.table();
  out.close();
  if (!out) throw std::runtime_error("cannot write the profile to '" + path + "'");
  profiler.write_chrome_trace(path + ".trace.json");
}

static int run_benchmarks(int argc, char** argv) {
  Args args = parse_args(argc, argv);
  std::map<std::string, Workload> chosen;
  std::set<std::string> matched;
  for (Workload& w : workloads()) {
    if (!selected(w, args, matched)) continue;
    benchmark::internal::Benchmark* b = benchmark::RegisterBenchmark(w.name.c_str(), w.run)
                                            ->Unit(benchmark::kNanosecond)
                                            ->Repetitions(w.repetitions)
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
  std::ofstream profile;
  if (!args.profile_file.empty()) profile = open_profile(args.profile_file);
  int bench_argc = 1;
  benchmark::Initialize(&bench_argc, argv);
  LineReporter reporter(chosen);
  std::optional<Profiler> profiler;
  if (profile.is_open()) profiler.emplace(ProfilerOptions{.max_events = 200'000});  // a trace of ~40 MB
  benchmark::RunSpecifiedBenchmarks(&reporter);
  if (profiler) write_profile(*profiler, profile, args.profile_file);
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
