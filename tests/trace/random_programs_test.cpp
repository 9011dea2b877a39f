// Thousands of seeded random programs (random_program.h) run in each mode: eagerly, as a
// static graph (placeholders with a symbolic batch dim, Session::run; unoptimized and
// optimized) and through compile() with the batch dim dynamic (unoptimized, cleaned up and
// optimized), each at batch sizes 2 and 5; half of them with every reduction the fusion
// pass can take fused, whatever its size. Outputs and the gradients of a loss w.r.t. the
// inputs (eager autograd; graph autodiff, fetched or returned by the compiled function)
// must agree with eager mode. Their plans are checked as well: buffers in use at the same
// step never share arena bytes, and the optimized graphs hold no common subexpression CSE
// could merge and no dead node.
//
// A failure prints the seed and the program's listing; rerun one program with
//   BATON_RANDOM_SEED=<seed> baton-tests --gtest_filter='RandomPrograms.*'
// (BATON_RANDOM_PROGRAMS=<n> sets how many programs run from there).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <unordered_set>

#include "harness/op_harness.h"
#include "kernels/cpu/matmul.h"
#include "passes/analysis.h"
#include "passes/fusion.h"
#include "runtime/plan.h"
#include "trace/builder.h"
#include "trace/random_program.h"

namespace baton::testing {
namespace {

constexpr int64_t kBatchSizes[] = {2, 5};
constexpr uint64_t kPrograms = 6000;  // about 10 s in a Release build
// The plan checks (no run, no comparison) take half as many, a few seconds each: rarer
// failures need the thousands (an in-place write over an operand that another operand
// views first shows at seed 1609).
constexpr uint64_t kPlannedPrograms = kPrograms / 2;

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
// as built) and fully optimized; compiled functions unoptimized (the trace as recorded),
// with the cleanup passes and with all.
struct GraphMode {
  const char* name;
  bool compiled;
  OptLevel level;
};
constexpr GraphMode kGraphModes[] = {
    {"static graph O0", false, OptLevel::O0},
    {"static graph O2", false, OptLevel::O2},
    {"compile() O0", true, OptLevel::O0},
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

// Checks the programs of the seeds [first, end): `problem_of` says what is wrong with one
// ("" for nothing; an exception is a problem too, told after `failing`). Stops after five
// failures, each reported with its program and how to rerun it; returns how many failed.
// The programs of odd seeds fuse every reduction the reduction fusion can take (their
// tensors are far too small for its size rule), so the fused kernels run in their plans.
int check_programs(std::pair<uint64_t, uint64_t> seeds, const char* failing,
                   const std::function<std::string(const RandomProgram&)>& problem_of) {
  int failures = 0;
  for (uint64_t seed = seeds.first; seed < seeds.second && failures < 5; ++seed) {
    const RandomProgram p = generate_program(seed);
    std::optional<passes::FuseEveryReduction> fuse_every_reduction;
    if (seed % 2) fuse_every_reduction.emplace();
    std::string problem;
    try {
      problem = problem_of(p);
    } catch (const std::exception& e) {
      problem = str(failing, e.what());
    }
    if (problem.empty()) continue;
    ++failures;
    ADD_FAILURE() << "seed " << seed << ": " << problem << "\n" << p.text() << rerun_hint(seed);
  }
  return failures;
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
  check_programs(seed_range(kPrograms), "failed: ", check_program);
}

// The same with every product that may store its result column-major doing so (as plans
// choose it where it measures faster: runtime/specialize.cpp, choose_column_major).
TEST(RandomPrograms, EveryModeAgreesWithEagerWithColumnMajorProducts) {
  SingleThreaded one_thread;
  kernels::ColumnMajorOverride column_major(true);
  check_programs(seed_range(kPrograms / 3), "failed: ", check_program);
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
  check_programs(seed_range(kPrograms / 6), "static graph failed: ", [](const RandomProgram& p) {
    BuiltGraph b = build_graph(p);
    Session sess(b.graph), other(b.graph);  // optimized (O2), the default
    for (int64_t batch : kBatchSizes) {
      const Session::Feeds feeds = feeds_for(b, p, batch);
      std::vector<Tensor> runs[3] = {sess.run(b.fetches, feeds), sess.run(b.fetches, feeds),
                                     other.run(b.fetches, feeds)};
      for (int r = 1; r < 3; ++r)
        for (size_t k = 0; k < b.fetches.size(); ++k)
          if (!bit_identical(runs[r][k], runs[0][k]))
            return str("batch ", batch, ": fetch ", k, " differs in ", r == 1 ? "the second run" : "another Session");
    }
    return std::string();
  });
}

// --- the plans themselves: the arena layout of sequential plans, the passes' fixpoint ---

// The graph's plan as Session::run makes it with RunOptions::run_updates (runtime/session.cpp):
// the fetches and every in-place update (batch norm's running statistics; compile() forces
// them too), one step after another.
runtime::Plan plan_program(const BuiltGraph& b, OptLevel level) {
  const trace::Builder& builder = GraphAccess::builder(b.graph);
  std::vector<graph::Value*> fetches;
  for (const Tensor& t : b.fetches) fetches.push_back(t.impl()->symbolic->value);
  return runtime::make_plan(builder.ir(), fetches, builder.effects(),
                            {.level = runtime::to_pass_level(level),
                             .fixed_value = runtime::fixed_constants(builder),
                             .inter_op_threads = 1,
                             .release_adopted_constants = true});
}

// Its specialization for the feeds of one batch size, as a run would take it.
std::shared_ptr<const runtime::Specialization> specialize(const runtime::Plan& plan, const BuiltGraph& b,
                                                          const RandomProgram& p, int64_t batch) {
  sym::Bindings bindings;
  for (auto& [placeholder, value] : feeds_for(b, p, batch))
    runtime::bind_input(*placeholder.impl()->symbolic->value, value, [] { return std::string("feed"); }, bindings,
                        SourceLoc::current());
  return plan.specialize(bindings);
}

// What the arena check found in one plan, summed over the programs (so that the test can
// tell that it had something to check).
struct ArenaCounts {
  size_t buffers = 0, shared_pairs = 0, in_place = 0, scratchpads = 0;
};

// Whether step `i` may write its output `b` over its input `a` (both arena values, a dying
// there): `b` is the step's first output, of a's dtype, shape and strides and at a's
// offset; the op reads each element before writing it (element-wise, its first output
// element-wise, or the op names the operand: OpDef::pointwise_first_output,
// output_may_overwrite); no operand reads a's bytes another way (through a
// view, which would read what the step already overwrote:
// Plan.NoInPlaceWriteOverAnOperandAnotherOperandViews).
bool writes_over(const runtime::Plan& plan, const runtime::Specialization& spec, size_t i, int a, int b) {
  const runtime::Step& step = plan.steps[i];
  const ops::OpDef& op = *step.node->op();
  const bool pointwise = op.pointwise_first_output || op.fusion_kind == ops::Fusion::Elementwise ||
                         op.fusion_kind == ops::Fusion::Broadcast;
  if (step.outputs.empty() || step.outputs[0] != b || !op.mutated_inputs.empty()) return false;
  const runtime::ValueInfo &va = spec.values[size_t(a)], &vb = spec.values[size_t(b)];
  if (va.offset != vb.offset || va.dtype != vb.dtype || !(va.shape == vb.shape) || !(va.strides == vb.strides) ||
      va.channel_block != vb.channel_block)
    return false;
  bool operand = false;
  for (size_t k = 0; k < step.inputs.size(); ++k) {
    const int s = step.inputs[k];
    if (spec.root[size_t(s)] != a) continue;
    if (s != a || !(pointwise || int(k) == op.output_may_overwrite)) return false;
    operand = true;
  }
  return operand;
}

// Empty when no two arena buffers whose lifetimes overlap share a byte and every buffer (and
// every step's scratchpad) lies inside the arena; else the first problem. Lifetimes are
// taken from the steps, not from the planner: a value's buffer is in use from the first to
// the last step reading or writing it or a view of it. (A staged plan's specialization
// covers its first stage; the generator has no op sized by values, so there is one.)
std::string check_arena(const runtime::Plan& plan, const runtime::Specialization& spec, ArenaCounts& counts) {
  const size_t arena = spec.arena.arena_bytes;
  const int n = plan.num_slots;
  std::vector<int> first(size_t(n), -1), last(size_t(n), -1);
  for (size_t i = spec.begin; i < spec.end; ++i)
    for (const std::vector<int>* slots : {&plan.steps[i].inputs, &plan.steps[i].outputs})
      for (int s : *slots) {
        const size_t r = size_t(spec.root[size_t(s)]);
        if (first[r] < 0) first[r] = int(i);
        last[r] = int(i);
      }
  std::vector<int> buffers;  // arena slots with bytes
  for (int s = 0; s < n; ++s) {
    const runtime::ValueInfo& v = spec.values[size_t(s)];
    if (v.placement != runtime::Placement::Arena) continue;
    if (spec.root[size_t(s)] != s)
      return str("slot ", s, " lies in the arena but is a view of slot ", spec.root[size_t(s)]);
    if (first[size_t(s)] < 0) return str("arena slot ", s, " is touched by no step");
    const size_t needed = size_t(v.numel()) * dtype_size(v.dtype);
    if (v.bytes < needed)
      return str("arena slot ", s, " (", v.dtype, v.shape, ") has ", v.bytes, " bytes, needs ", needed);
    if (v.offset % runtime::kArenaAlignment != 0)
      return str("arena slot ", s, " at offset ", v.offset, " is not aligned");
    if (v.offset + v.bytes > arena)
      return str("arena slot ", s, " [", v.offset, ", ", v.offset + v.bytes, ") passes the arena's end ", arena);
    if (v.bytes) buffers.push_back(s);
  }
  counts.buffers += buffers.size();
  auto share_bytes = [&](size_t a_begin, size_t a_bytes, size_t b_begin, size_t b_bytes) {
    return a_begin < b_begin + b_bytes && b_begin < a_begin + a_bytes;
  };
  for (size_t x = 0; x < buffers.size(); ++x)
    for (size_t y = x + 1; y < buffers.size(); ++y) {
      const int a = buffers[x], b = buffers[y];
      const runtime::ValueInfo &va = spec.values[size_t(a)], &vb = spec.values[size_t(b)];
      if (!share_bytes(va.offset, va.bytes, vb.offset, vb.bytes)) continue;
      ++counts.shared_pairs;
      const int fa = first[size_t(a)], la = last[size_t(a)], fb = first[size_t(b)], lb = last[size_t(b)];
      if (la < fb || lb < fa) continue;  // one is done before the other is written
      // The one step both are in use at: the step writing one over the other.
      if (la == fb && writes_over(plan, spec, size_t(fb), a, b)) {
        ++counts.in_place;
        continue;
      }
      if (lb == fa && writes_over(plan, spec, size_t(fa), b, a)) {
        ++counts.in_place;
        continue;
      }
      return str("slots ", a, " (steps ", fa, "..", la, ", bytes [", va.offset, ", ", va.offset + va.bytes,
                 ")) and ", b, " (steps ", fb, "..", lb, ", bytes [", vb.offset, ", ", vb.offset + vb.bytes,
                 ")) are in use together and share bytes");
    }
  // A step's scratchpad is in use during that step alone, beside the values it reads and
  // writes and every other value alive then.
  for (size_t i = spec.begin; i < spec.end; ++i) {
    const runtime::SpecializedStep& s = spec.steps[i];
    if (s.scratch_offset < 0) continue;
    ++counts.scratchpads;
    const size_t offset = size_t(s.scratch_offset), bytes = s.prepared.scratch_bytes;
    if (offset % runtime::kArenaAlignment != 0 || offset + bytes > arena)
      return str("step ", i, "'s scratchpad [", offset, ", ", offset + bytes,
                 ") is unaligned or passes the arena's end ", arena);
    for (int v : buffers)
      if (first[size_t(v)] <= int(i) && int(i) <= last[size_t(v)] &&
          share_bytes(offset, bytes, spec.values[size_t(v)].offset, spec.values[size_t(v)].bytes))
        return str("step ", i, "'s scratchpad shares bytes with slot ", v, ", in use then (steps ", first[size_t(v)],
                   "..", last[size_t(v)], ")");
  }
  return "";
}

// The plans a Session makes of random programs, one step after another (the parallel
// layout has its own test: Parallel.BuffersThatMayBeInUseTogetherNeverShareBytes): buffers
// in use at the same step never share bytes (MemoryPlan.RandomLifetimesNeverOverlap checks
// plan_arena on made-up lifetimes; this checks the lifetimes the planner derives from real
// steps, views and in-place writes included), and everything lies inside the arena.
TEST(RandomPrograms, SequentialPlansKeepBuffersInUseTogetherApart) {
  SingleThreaded one_thread;
  const auto seeds = seed_range(kPlannedPrograms);
  ArenaCounts counts;
  const int failures = check_programs(seeds, "planning failed: ", [&](const RandomProgram& p) {
    const BuiltGraph b = build_graph(p);
    for (OptLevel level : {OptLevel::O2, OptLevel::O1}) {
      const runtime::Plan plan = plan_program(b, level);
      for (int64_t batch : kBatchSizes)
        if (std::string problem = check_arena(plan, *specialize(plan, b, p, batch), counts); !problem.empty())
          return str(level == OptLevel::O2 ? "O2" : "O1", ", batch ", batch, ": ", problem);
    }
    return std::string();
  });
  if (failures || seeds.second - seeds.first < kPlannedPrograms) return;  // cut short, or a rerun of a few seeds
  // The check had something to check: bytes shared between buffers, in-place writes.
  EXPECT_GT(counts.shared_pairs, counts.buffers / 10) << counts.buffers << " buffers";
  EXPECT_GT(counts.in_place, 100u);
}

// Attributes equal as the CSE pass compares them (passes/cse.cpp): floats bit for bit, so
// that a fill of 0.0 and one of -0.0 differ.
bool identical_attrs(const ops::Attrs& a, const ops::Attrs& b) {
  const auto &x = a.items(), &y = b.items();
  if (x.size() != y.size()) return false;
  for (size_t i = 0; i < x.size(); ++i) {
    if (x[i].first != y[i].first) return false;
    const double *u = std::get_if<double>(&x[i].second), *v = std::get_if<double>(&y[i].second);
    if (u && v ? std::memcmp(u, v, sizeof(double)) != 0 : !(x[i].second == y[i].second)) return false;
  }
  return true;
}

// A pure node: neither an effect nor a random draw nor control flow, the nodes the CSE
// pass may merge. (It also leaves alone readers of storage an effect writes, and merges
// that would make a fetched result share storage with an input or another fetched result:
// see mergeable below.)
bool pure(const graph::Node& n) {
  return n.op() && !passes::has_effects(n) && !passes::is_random(n) && n.subgraphs.empty();
}

// Pairs (earlier, later) of pure nodes computing the same thing: the same op on the same
// input values with identical attributes and output types.
std::vector<std::pair<const graph::Node*, const graph::Node*>> common_subexpressions(const graph::Graph& g) {
  std::vector<std::pair<const graph::Node*, const graph::Node*>> out;
  std::vector<const graph::Node*> nodes;
  for (const auto& n : g.nodes())
    if (pure(*n)) nodes.push_back(n.get());
  for (size_t i = 0; i < nodes.size(); ++i)
    for (size_t j = i + 1; j < nodes.size(); ++j) {
      const graph::Node &a = *nodes[i], &b = *nodes[j];
      if (a.op() != b.op() || a.inputs() != b.inputs() || a.num_outputs() != b.num_outputs() ||
          !identical_attrs(a.attrs, b.attrs))
        continue;
      bool same_types = true;
      for (size_t k = 0; k < a.num_outputs(); ++k) same_types = same_types && a.output(k)->type == b.output(k)->type;
      if (same_types) out.emplace_back(&a, &b);
    }
  return out;
}

// Whether the CSE pass may let `later`'s readers read `earlier`'s results: neither reads
// or is storage an effect writes (an assign between two reads makes them differ), and no
// fetched result of `later` would come to share storage with a graph input or another
// fetched result (the caller may write into what it gets back).
bool mergeable(const graph::Graph& g, const graph::Node& earlier, const graph::Node& later) {
  const passes::VolatileValues written(g);
  if (written.touches(earlier) || written.touches(later)) return false;
  for (size_t k = 0; k < later.num_outputs(); ++k) {
    const graph::Value *from = later.output(k), *to = earlier.output(k);
    if (passes::storage_root(from) == passes::storage_root(to) || !passes::is_fetched_storage(g, from)) continue;
    if (!passes::storage_root(to)->producer() || passes::is_fetched_storage(g, to)) return false;
  }
  return true;
}

// Nodes none of whose outputs reaches a graph output and that have no effect.
std::vector<const graph::Node*> dead_nodes(const graph::Graph& g) {
  std::unordered_set<const graph::Value*> needed(g.outputs().begin(), g.outputs().end());
  std::vector<const graph::Node*> dead;
  for (auto it = g.nodes().rbegin(); it != g.nodes().rend(); ++it) {
    const graph::Node& n = **it;
    bool live = passes::has_effects(n);
    for (const graph::Value* v : n.outputs()) live = live || needed.count(v);
    if (!live) dead.push_back(&n);
    else needed.insert(n.inputs().begin(), n.inputs().end());
  }
  return dead;
}

// "node 3 (graph node 'mul' built at random_program.cpp:512)": its place in graph order
// (the listing printed with a failure shows the nodes in that order).
std::string describe_node(const graph::Graph& g, const graph::Node& n) {
  size_t k = 0;
  while (k < g.nodes().size() && g.nodes()[k].get() != &n) ++k;
  return str("node ", k, " (", runtime::describe(n), ")");
}

// After the passes, the graph a plan runs (Graph::optimized, as Plan.
// OptimizedGraphIsWhatThePlanRuns shows it) holds no two pure nodes computing the same
// thing that CSE could merge (the rounds reached their fixpoint), and every node feeds a
// fetched result or has an effect (DCE removed the rest). The graphs as built have both
// (the generator repeats steps; graph autodiff and unused steps leave dead nodes), so the
// test counts them there too.
// What keeps a graph from its fixpoint: two nodes CSE could merge, or a dead node ("" if
// neither).
std::string not_cleaned_up(const Graph& optimized, const char* level) {
  const graph::Graph& g = GraphAccess::builder(optimized).ir();
  for (auto [earlier, later] : common_subexpressions(g))
    if (mergeable(g, *earlier, *later))  // not: two fetched results, a read of written state
      return str(level, ": ", describe_node(g, *later), " computes what ", describe_node(g, *earlier), " does\n",
                 optimized.to_text());
  if (auto dead = dead_nodes(g); !dead.empty())
    return str(level, ": ", describe_node(g, *dead.back()), " reaches no output and has no effect\n",
               optimized.to_text());
  return "";
}

TEST(RandomPrograms, OptimizedGraphsHaveNoCommonSubexpressionsOrDeadNodes) {
  SingleThreaded one_thread;
  const auto seeds = seed_range(kPlannedPrograms);
  size_t built_duplicates = 0, built_dead = 0;
  const int failures = check_programs(seeds, "optimizing failed: ", [&](const RandomProgram& p) {
    BuiltGraph b = build_graph(p);
    b.graph.set_outputs(b.fetches);
    const graph::Graph& built = GraphAccess::builder(b.graph).ir();
    for (auto [earlier, later] : common_subexpressions(built)) built_duplicates += mergeable(built, *earlier, *later);
    built_dead += dead_nodes(built).size();
    for (OptLevel level : {OptLevel::O1, OptLevel::O2})
      if (std::string problem = not_cleaned_up(b.graph.optimized(level), level == OptLevel::O1 ? "O1" : "O2");
          !problem.empty())
        return problem;
    return std::string();
  });
  if (failures || seeds.second - seeds.first < kPlannedPrograms) return;
  EXPECT_GT(built_duplicates, 50u);  // the check had something to check
  EXPECT_GT(built_dead, 50u);
}

}  // namespace
}  // namespace baton::testing
