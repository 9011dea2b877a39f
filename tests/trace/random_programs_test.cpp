// Thousands of seeded random programs (random_program.h) run in each mode: eagerly, as a
// static graph (placeholders with a symbolic batch dim, Session::run; unoptimized and
// optimized) and through compile() with the batch dim dynamic (two optimization levels),
// each at batch sizes 2 and 5. Outputs and the gradients of a loss w.r.t. the inputs
// (eager autograd; graph autodiff, fetched or returned by the compiled function) must
// agree with eager mode.
//
// A failure prints the seed and the program's listing; rerun one program with
//   BATON_RANDOM_SEED=<seed> baton-tests --gtest_filter='RandomPrograms.*'
// (BATON_RANDOM_PROGRAMS=<n> sets how many programs run from there).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>

#include "harness/op_harness.h"
#include "trace/random_program.h"

namespace baton::testing {
namespace {

constexpr int64_t kBatchSizes[] = {2, 5};
constexpr uint64_t kPrograms = 6000;  // about 10 s in a Release build

// Outputs, then the gradients w.r.t. the inputs, for one batch size.
struct Results {
  std::vector<Tensor> outputs, grads;
};

// sum_k sum(outputs[k] * cotangents[k]): its input gradients are the vector-Jacobian
// products of the program with random cotangents.
Tensor loss_of(const std::vector<Tensor>& outputs, const std::vector<Tensor>& cotangents) {
  Tensor loss = (outputs[0] * cotangents[0]).sum();
  for (size_t k = 1; k < outputs.size(); ++k) loss = loss + (outputs[k] * cotangents[k]).sum();
  return loss;
}

Results run_eager(const RandomProgram& p, int64_t batch) {
  std::vector<Tensor> xs = p.make_inputs(batch);
  for (Tensor& x : xs) x.requires_grad_();
  Results r{p.run(xs), {}};
  loss_of(r.outputs, p.make_cotangents(batch)).backward();
  for (const Tensor& x : xs) r.grads.push_back(x.grad().defined() ? x.grad() : zeros_like(x));
  return r;
}

// A placeholder's dims: the batch dim is the symbol "batch"; a multiple of it (what
// flattening or concatenating along it gives) is -1, a symbol of its own.
std::vector<SymDim> placeholder_dims(const DimList& dims) {
  std::vector<SymDim> out;
  for (const Dim& d : dims) out.push_back(!d.batch ? SymDim(d.size) : d.size == 1 ? SymDim("batch") : SymDim(-1));
  return out;
}

// The program as a static graph: placeholders for the inputs and the cotangents; fetches
// the outputs, then the input gradients (graph autodiff).
struct BuiltGraph {
  Graph graph{"random"};
  std::vector<Tensor> inputs, cotangents, fetches;
  size_t num_outputs = 0;
};

BuiltGraph build_graph(const RandomProgram& p) {
  BuiltGraph b;
  for (size_t i = 0; i < p.inputs.size(); ++i)
    b.inputs.push_back(b.graph.placeholder(p.input_dtypes[i], placeholder_dims(p.inputs[i]), str("x", i)));
  for (size_t k = 0; k < p.output_dims.size(); ++k)
    b.cotangents.push_back(b.graph.placeholder(p.output_dtypes[k], placeholder_dims(p.output_dims[k]), str("r", k)));
  b.fetches = p.run(b.inputs);
  b.num_outputs = b.fetches.size();
  std::vector<Tensor> grads = grad(loss_of(b.fetches, b.cotangents), b.inputs);
  b.fetches.insert(b.fetches.end(), grads.begin(), grads.end());
  return b;
}

Session::Feeds feeds_for(const BuiltGraph& b, const RandomProgram& p, int64_t batch) {
  Session::Feeds feeds;
  std::vector<Tensor> xs = p.make_inputs(batch), rs = p.make_cotangents(batch);
  for (size_t i = 0; i < xs.size(); ++i) feeds.emplace_back(b.inputs[i], xs[i]);
  for (size_t k = 0; k < rs.size(); ++k) feeds.emplace_back(b.cotangents[k], rs[k]);
  return feeds;
}

Results split(std::vector<Tensor> all, size_t num_outputs) {
  return {{all.begin(), all.begin() + int64_t(num_outputs)}, {all.begin() + int64_t(num_outputs), all.end()}};
}

std::vector<Results> run_static(const RandomProgram& p, OptLevel level) {
  BuiltGraph b = build_graph(p);
  Session sess(b.graph, {.level = level});
  std::vector<Results> out;
  for (int64_t batch : kBatchSizes) out.push_back(split(sess.run(b.fetches, feeds_for(b, p, batch)), b.num_outputs));
  return out;
}

// compile()'s arguments are the inputs then the cotangents; every batch-carrying dim is
// dynamic, so both batch sizes share one trace.
CompileOptions compile_options(const RandomProgram& p, OptLevel level) {
  CompileOptions o{.name = "random", .level = level};
  std::vector<DimList> args = p.inputs;
  args.insert(args.end(), p.output_dims.begin(), p.output_dims.end());
  for (size_t a = 0; a < args.size(); ++a)
    for (size_t d = 0; d < args[a].size(); ++d)
      if (args[a][d].batch)
        o.dynamic_dims.push_back({a, int64_t(d), args[a][d].size == 1 ? "batch" : ""});
  return o;
}

std::vector<Results> run_compiled(const RandomProgram& p, OptLevel level, size_t& traces) {
  CompiledFunction compiled(compile_options(p, level));
  const size_t n = p.inputs.size();
  CompiledFunction::Fn fn = [&](const std::vector<Tensor>& args) {
    std::vector<Tensor> xs(args.begin(), args.begin() + int64_t(n)), rs(args.begin() + int64_t(n), args.end());
    std::vector<Tensor> out = p.run(xs);
    std::vector<Tensor> grads = grad(loss_of(out, rs), xs);
    out.insert(out.end(), grads.begin(), grads.end());
    return out;
  };
  std::vector<Results> out;
  for (int64_t batch : kBatchSizes) {
    std::vector<Tensor> args = p.make_inputs(batch), rs = p.make_cotangents(batch);
    args.insert(args.end(), rs.begin(), rs.end());
    out.push_back(split(compiled.call(args, fn, SourceLoc::current()), p.outputs.size()));
  }
  traces = compiled.num_traces();
  return out;
}

// Every mode runs the same kernels on the same data, and most programs agree to the bit.
// What may differ is the order in which sums are accumulated: gradient contributions
// (eager autograd adds a value's gradients as its uses finish, graph autodiff in graph
// order), kernels reading strided rather than contiguous memory, and the optimized
// plans' rewritten and fused steps. Such rounding is relative to the magnitudes summed,
// which the tensor's largest entry bounds (the generator keeps values within 100), not
// to each, possibly cancelled, entry: so |got - expected| <= tol * max(1, max|expected|).
// A sum of n terms reordered moves by at most about n * eps of that scale, and n stays
// below a few thousand: tol = 1e-10 in f64 (eps 2.2e-16), 1e-4 in f32 (eps 1.2e-7).
// A real bug (a wrong element, a wrong broadcast) is off by the order of the scale.
double tolerance(const RandomProgram& p) { return p.uses_f32 ? 1e-4 : 1e-10; }

::testing::AssertionResult agree(const Tensor& got, const Tensor& expected, double tol) {
  if (got.dtype() != expected.dtype() || !(got.shape() == expected.shape()))
    return ::testing::AssertionFailure() << got.dtype() << got.shape() << " instead of " << expected.dtype()
                                         << expected.shape();
  auto g = got.to_vector<double>(), e = expected.to_vector<double>();
  double scale = 1;
  for (double v : e) scale = std::max(scale, std::abs(v));
  for (size_t i = 0; i < g.size(); ++i)
    if (!(std::abs(g[i] - e[i]) <= tol * scale))
      return ::testing::AssertionFailure() << "element " << i << ": " << g[i] << " instead of " << e[i]
                                           << " (tolerance " << tol * scale << ")";
  return ::testing::AssertionSuccess();
}

// Empty when `got` agrees with eager mode's results; else what differs.
std::string compare(const char* mode, const std::vector<Results>& got, const std::vector<Results>& eager, double tol) {
  for (size_t b = 0; b < eager.size(); ++b) {
    for (size_t k = 0; k < eager[b].outputs.size(); ++k)
      if (auto ok = agree(got[b].outputs[k], eager[b].outputs[k], tol); !ok)
        return str(mode, ", batch ", kBatchSizes[b], ", output ", k, ": ", ok.message());
    for (size_t i = 0; i < eager[b].grads.size(); ++i)
      if (auto ok = agree(got[b].grads[i], eager[b].grads[i], tol); !ok)
        return str(mode, ", batch ", kBatchSizes[b], ", gradient w.r.t. v", i, ": ", ok.message());
  }
  return "";
}

// The graph modes, each compared with eager mode. Static graphs run unoptimized (the graph
// as built) and fully optimized; compiled functions with the cleanup passes and with all.
struct GraphMode {
  const char* name;
  bool compiled;
  OptLevel level;
};
constexpr GraphMode kGraphModes[] = {
    {"static graph O0", false, OptLevel::O0},
    {"static graph O2", false, OptLevel::O2},
    {"compile() O1", true, OptLevel::O1},
    {"compile() O2", true, OptLevel::O2},
};

// The results of one graph mode for every batch size, or the problem that stopped it.
std::string run_mode(const RandomProgram& p, const GraphMode& mode, std::vector<Results>& out) {
  try {
    size_t traces = 1;
    out = mode.compiled ? run_compiled(p, mode.level, traces) : run_static(p, mode.level);
    if (traces != 1) return str(mode.name, " traced ", traces, " times for two batch sizes");
  } catch (const std::exception& e) {
    return str(mode.name, " failed: ", e.what());
  }
  return "";
}

// Empty when every mode agrees with eager mode; else the first problem.
std::string check_program(const RandomProgram& p) {
  std::vector<Results> eager;
  try {
    for (int64_t batch : kBatchSizes) eager.push_back(run_eager(p, batch));
  } catch (const std::exception& e) {
    return str("eager mode failed (a generator bug: it made an invalid program): ", e.what());
  }
  for (const GraphMode& mode : kGraphModes) {
    std::vector<Results> got;
    std::string problem = run_mode(p, mode, got);
    if (problem.empty()) problem = compare(mode.name, got, eager, tolerance(p));
    if (!problem.empty()) return problem;
  }
  return "";
}

// The seeds to run: [BATON_RANDOM_SEED or 1, + BATON_RANDOM_PROGRAMS or kPrograms, or 1
// when only a seed is given).
std::pair<uint64_t, uint64_t> seed_range(uint64_t default_count) {
  const char* seed = std::getenv("BATON_RANDOM_SEED");
  const char* count = std::getenv("BATON_RANDOM_PROGRAMS");
  const uint64_t first = seed ? std::strtoull(seed, nullptr, 10) : 1;
  const uint64_t n = count ? std::strtoull(count, nullptr, 10) : seed ? 1 : default_count;
  return {first, first + n};
}

std::string rerun_hint(uint64_t seed) {
  return str("rerun: BATON_RANDOM_SEED=", seed, " baton-tests --gtest_filter='RandomPrograms.*'");
}

// The programs' tensors have a few dozen elements: an OpenMP team per kernel costs far more
// than it saves, and on a busy machine its spinning threads made the test 12 times slower.
// One thread for the test's duration (other tests cover the parallel kernels).
class SingleThreaded {
 public:
  SingleThreaded() : previous_(get_num_threads()) { set_num_threads(1); }
  ~SingleThreaded() { set_num_threads(previous_); }

 private:
  int previous_;
};

TEST(RandomPrograms, EveryModeAgreesWithEager) {
  SingleThreaded one_thread;
  auto [first, end] = seed_range(kPrograms);
  int failures = 0;
  for (uint64_t seed = first; seed < end && failures < 5; ++seed) {
    const RandomProgram p = generate_program(seed);
    const std::string problem = check_program(p);
    if (problem.empty()) continue;
    ++failures;
    ADD_FAILURE() << "seed " << seed << ": " << problem << "\n" << p.text() << rerun_hint(seed);
  }
}

bool bit_identical(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || !(a.shape() == b.shape())) return false;
  const Tensor ca = a.contiguous(), cb = b.contiguous();
  return std::memcmp(ca.raw_data(), cb.raw_data(), ca.nbytes()) == 0;
}

// A graph's results depend on nothing but its feeds: running the same plan twice, or the
// graph in a second Session, gives the same bits.
TEST(RandomPrograms, SessionRunsAreBitIdentical) {
  SingleThreaded one_thread;
  auto [first, end] = seed_range(kPrograms / 6);  // three runs per batch size each
  int failures = 0;
  for (uint64_t seed = first; seed < end && failures < 5; ++seed) {
    const RandomProgram p = generate_program(seed);
    std::string problem;
    try {
      BuiltGraph b = build_graph(p);
      Session sess(b.graph), other(b.graph);  // optimized (O2), the default
      for (int64_t batch : kBatchSizes) {
        const Session::Feeds feeds = feeds_for(b, p, batch);
        std::vector<Tensor> runs[3] = {sess.run(b.fetches, feeds), sess.run(b.fetches, feeds),
                                       other.run(b.fetches, feeds)};
        for (int r = 1; r < 3 && problem.empty(); ++r)
          for (size_t k = 0; k < b.fetches.size(); ++k)
            if (!bit_identical(runs[r][k], runs[0][k])) {
              problem = str("batch ", batch, ": fetch ", k, " differs in ", r == 1 ? "the second run" : "another Session");
              break;
            }
      }
    } catch (const std::exception& e) {
      problem = str("static graph failed: ", e.what());
    }
    if (problem.empty()) continue;
    ++failures;
    ADD_FAILURE() << "seed " << seed << ": " << problem << "\n" << p.text() << rerun_hint(seed);
  }
}

}  // namespace
}  // namespace baton::testing
