// oneDNN glue: one engine and stream, memory descriptors from Tensors, a primitive cache
// keyed by op kind + shapes + attributes, and a watch on reference implementations.
//
// oneDNN falls back to `ref:` kernels (20-100x slower) when it has no optimized one for a
// layout combination; every primitive descriptor we create goes through note_impl(), which
// records such fallbacks so tests can assert our common shapes never hit them.
#pragma once
#include <oneapi/dnnl/dnnl.hpp>

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "baton/tensor.h"
#include "kernels/cpu/copy.h"
#include "kernels/cpu/layout.h"
#include "kernels/cpu/step_scratch.h"

namespace baton::kernels {
int max_threads();  // omp_get_max_threads(), from loops.cpp
}

namespace baton::kernels::onednn {

using dnnl::memory;
using Dims = memory::dims;

dnnl::engine& engine();
dnnl::stream& stream();

Dims dims_of(const Shape& s);
// f32 descriptor with the tensor's own strides (views pass through without a copy).
memory::desc strided_desc(const Tensor& t);
// f32 descriptor with dims `shape`, row-major.
memory::desc plain_desc(const Shape& shape);
memory::desc plain_desc(const Dims& dims, memory::format_tag tag);
// A memory object over the tensor's data (no copy).
memory wrap(const memory::desc& md, const Tensor& t);
// A memory object of layout md over a fresh buffer from baton's caching allocator; `keep`
// holds the buffer alive until the primitive has run.
memory buffer(const memory::desc& md, std::vector<Tensor>& keep);
using kernels::dense;  // oneDNN wrappers hand it plain layouts (copy.h)

// Rank-4 activations come plain (NCHW) or, between the steps of a plan that keeps them so,
// channels-last (NHWC): both are layouts oneDNN reads directly.
using kernels::is_channels_last;
// t itself when plain or channels-last, else a plain copy.
Tensor plain_or_channels_last(const Tensor& t);
// nhwc for a channels-last tensor, nchw otherwise.
memory::format_tag activation_tag(const Tensor& t);
// An f32 rank-4 activation with its bytes in the order of `tag` (nchw, nhwc, or a channel
// block) for a primitive prepared so: t itself when it is laid out so already (a plan's
// channel-blocked tensors always are), else a copy with t's shape and contiguous strides
// whatever its byte order, to be handed only to that primitive.
Tensor in_layout(const Tensor& t, memory::format_tag tag);

// Records the implementation a primitive descriptor picked; true when it is a
// reference (slow) kernel. `what` names the op and shapes for the record.
bool note_impl(const dnnl::primitive_desc_base& pd, const std::string& what);
bool is_reference(const dnnl::primitive_desc_base& pd);
// Every "what: impl" recorded with a ref implementation since the last clear.
std::vector<std::string> reference_impls();
void clear_reference_impls();
// "what -> impl" of every primitive created since start (for tests and diagnostics).
std::vector<std::string> created_impls();

// Attributes every primitive uses: user-managed scratchpad (a plan's arena, or the
// caching allocator).
dnnl::primitive_attr default_attr();

// The step's lent bytes (kernels/cpu/step_scratch.h): primitives' scratchpads that fit
// come from there instead of the allocator.
using kernels::lent_scratch;
using kernels::StepScratch;

// oneDNN's first implementation for a descriptor is not always its fastest for the shape:
// on a Zen 4 machine its first pick for the CNN's 1-channel convolution (brgconv) ran 2x
// slower than its jit kernel, and for ResNet's layers the same two were within 5%. Plans
// therefore take the fastest of a descriptor's first kImplCandidates optimized (not `ref:`)
// implementations, each timed on zero-filled arguments in its own layouts. Candidates keep
// the first one's activation layouts (they may differ in the weights', which a plan packs
// once): another would add reorders in and out on every run, which the timing does not see
// (a ResNet layer's jit kernel wanting nChw8c cost a 25 MiB buffer per run). `times` gets
// the measurements for the plan's record ("brgconv:avx512_core 0.4 ms; jit:avx512_core
// 0.2 ms"), and stays empty when there was nothing to choose from. Call it where the
// operation descriptor, attributes and hint that pd was made from still live: its iterator
// reads them for the next implementations.
constexpr size_t kImplCandidates = 3;
// Each way's best time (ms) over `rounds` rounds that run every way once in turn, after a
// warm-up of each (first touch of buffers, oneDNN's JIT): taking turns, the ways see the
// same moments of a shared, noisy machine.
std::vector<double> best_ms(const std::vector<std::function<void()>>& ways, int rounds = 5);
// Which of several ways timed in turns to take, ms in order of preference (the default,
// oneDNN's first pick, first; then the ways that hold less memory): the first within
// kClearWin of the fastest. Closer times are within this machine's noise, and the
// alternatives tend to hold more memory (baton's Winograd lends itself megabytes of
// scratch), so a near tie would trade memory for nothing and flip from one plan to the next.
constexpr double kClearWin = 0.95;
size_t clear_winner(const std::vector<double>& ms);
size_t fastest_of(const std::vector<dnnl::primitive_desc>& candidates, std::string& times);
// Whether a and b put every element at the same byte: equal, or plain (unblocked) layouts
// whose strides differ only along dims of size 1 (a 1-channel image is nchw and nhwc alike).
bool same_bytes(const memory::desc& a, const memory::desc& b);
// Whether a and b read and write their activations (src, dst and their gradients) with the
// same bytes in the same places.
bool same_activation_layouts(const dnnl::primitive_desc& a, const dnnl::primitive_desc& b);

// While one lives, plans take the first of a descriptor's implementations (any of them,
// with the first one's activation layouts) whose name holds `name`, where there is one:
// tests of what a plan does with a kernel this machine would not choose. Primitives made
// meanwhile are cached apart (cached()).
class ImplementationOverride {
 public:
  explicit ImplementationOverride(std::string name);
  ~ImplementationOverride();
  ImplementationOverride(const ImplementationOverride&) = delete;
  ImplementationOverride& operator=(const ImplementationOverride&) = delete;

 private:
  std::string name_;
  const std::string* previous_;
};
// The living override's name, or null.
const std::string* forced_implementation();

template <class Pd>
Pd fastest_implementation(Pd pd, std::string& times) {
  const Pd first = pd;
  const std::string* forced = forced_implementation();
  std::vector<Pd> candidates;
  for (bool more = true; more && (forced || candidates.size() < kImplCandidates); more = pd.next_impl()) {
    if (is_reference(pd) || (!candidates.empty() && !same_activation_layouts(pd, candidates[0]))) continue;
    if (forced && std::string_view(pd.impl_info_str()).find(*forced) != std::string_view::npos) {
      times = std::string(pd.impl_info_str()) + " (forced)";
      return pd;
    }
    if (candidates.size() < kImplCandidates) candidates.push_back(pd);  // a copy keeps this implementation
  }
  if (candidates.empty()) return first;
  return candidates[fastest_of(std::vector<dnnl::primitive_desc>(candidates.begin(), candidates.end()), times)];
}

// Runs `p` with args (plus a scratchpad of scratch_md, when not empty) and waits.
void execute(const dnnl::primitive& p, std::unordered_map<int, memory> args,
             const memory::desc& scratch_md);

// Key builder: key("matmul", dims, strides, ...).
template <class... Parts>
std::string key(const Parts&... parts) {
  std::string s;
  auto add = [&s](const auto& p) {
    if constexpr (std::is_convertible_v<decltype(p), std::string_view>) {
      s += p;
    } else if constexpr (std::is_integral_v<std::decay_t<decltype(p)>>) {
      s += std::to_string(p);
    } else {
      for (auto v : p) s += std::to_string(v) + ",";
    }
    s += ';';
  };
  (add(parts), ...);
  return s;
}

// The cached entry for `k`, made by make() on first use. One map per entry type and
// thread count: a primitive fixes its thread count when made, so after set_num_threads
// (or in a forked child, which runs on one thread and would wait forever for the parent's
// workers) primitives are made anew.
template <class Entry, class Make>
Entry& cached(const std::string& k, Make&& make) {
  static std::mutex mu;
  static std::unordered_map<int, std::unordered_map<std::string, std::unique_ptr<Entry>>> caches;
  const std::string* forced = forced_implementation();
  const std::string forced_key = forced ? k + "forced " + *forced + ";" : std::string();
  const std::string& key = forced ? forced_key : k;
  std::lock_guard<std::mutex> lock(mu);
  auto& cache = caches[kernels::max_threads()];
  auto it = cache.find(key);
  if (it == cache.end()) it = cache.emplace(key, std::make_unique<Entry>(make())).first;
  return *it->second;
}

// A layout change prepared once: identity when the layouts already agree.
struct Reorder {
  memory::desc from, to;
  std::optional<dnnl::reorder> prim;
  Reorder() = default;
  Reorder(const memory::desc& from, const memory::desc& to);
  bool needed() const { return prim.has_value(); }
  // Source memory in `to`'s layout: m itself, or a reordered copy kept alive by `keep`.
  memory apply(const memory& m, std::vector<Tensor>& keep) const;
  // Copies m (in `from`'s layout) into dst (in `to`'s layout).
  void into(const memory& m, const memory& dst) const;
};

// The channel-blocked layout oneDNN's optimized (jit) pooling and batch-norm kernels use on
// this CPU: nChw16c with AVX-512, else nChw8c. Plain nchw gets only slow C++ kernels.
memory::format_tag blocked_channels_tag();

// nChw8c or nChw16c for a block of 8 or 16 channels.
memory::format_tag channel_block_tag(int64_t block);
// The layout of an activation a plan stores with `block` channels per block, or, for 0,
// the one its strides tell (activation_tag).
memory::format_tag planned_tag(const Tensor& t, int64_t block);
// 0 to 3 for nchw, nhwc, nChw8c, nChw16c: an activation layout in a cache key.
int64_t tag_code(memory::format_tag t);

}  // namespace baton::kernels::onednn
