#include "kernels/cpu/onednn.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <limits>

#include "kernels/cpu/copy.h"

namespace baton::kernels::onednn {
namespace {

struct ImplLog {
  std::mutex mu;
  std::vector<std::string> reference, created;
};
ImplLog& impl_log() {
  static ImplLog log;
  return log;
}

}  // namespace

dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

dnnl::stream& stream() {
  static dnnl::stream s(engine());
  return s;
}

Dims dims_of(const Shape& s) { return Dims(s.begin(), s.end()); }

memory::desc strided_desc(const Tensor& t) {
  return memory::desc(dims_of(t.shape()), memory::data_type::f32, dims_of(t.strides()));
}

memory::desc plain_desc(const Shape& shape) {
  return memory::desc(dims_of(shape), memory::data_type::f32, dims_of(contiguous_strides(shape)));
}

memory::desc plain_desc(const Dims& dims, memory::format_tag tag) {
  return memory::desc(dims, memory::data_type::f32, tag);
}

Tensor plain_or_channels_last(const Tensor& t) { return is_channels_last(t) ? t : dense(t); }

memory::format_tag activation_tag(const Tensor& t) {
  return is_channels_last(t) ? memory::format_tag::nhwc : memory::format_tag::nchw;
}

memory wrap(const memory::desc& md, const Tensor& t) { return memory(md, engine(), t.raw_data()); }

Tensor in_layout(const Tensor& t, memory::format_tag tag) {
  const bool strided_tag = tag == memory::format_tag::nchw || tag == memory::format_tag::nhwc;
  if (!strided_tag || (activation_tag(t) == tag && (tag == memory::format_tag::nhwc || t.is_contiguous()))) return t;
  Tensor copy = empty(t.shape(), f32);
  const memory::desc from = strided_desc(t), to = plain_desc(dims_of(t.shape()), tag);
  Reorder(from, to).into(wrap(from, t), wrap(to, copy));
  return copy;
}

memory buffer(const memory::desc& md, std::vector<Tensor>& keep) {
  size_t bytes = md.get_size();
  keep.push_back(empty({int64_t(bytes / sizeof(float)) + 1}, f32));
  return memory(md, engine(), keep.back().raw_data());
}

namespace {
std::atomic<const std::string*> forced_name{nullptr};
}  // namespace

ImplementationOverride::ImplementationOverride(std::string name)
    : name_(std::move(name)), previous_(forced_name.exchange(&name_)) {}
ImplementationOverride::~ImplementationOverride() { forced_name.store(previous_); }

const std::string* forced_implementation() { return forced_name.load(); }

bool is_reference(const dnnl::primitive_desc_base& pd) {
  return std::string_view(pd.impl_info_str()).starts_with("ref");
}

bool note_impl(const dnnl::primitive_desc_base& pd, const std::string& what) {
  std::string entry = what + " -> " + pd.impl_info_str();
  bool ref = is_reference(pd);
  ImplLog& log = impl_log();
  std::lock_guard<std::mutex> lock(log.mu);
  log.created.push_back(entry);
  if (ref) log.reference.push_back(entry);
  return ref;
}

std::vector<std::string> reference_impls() {
  std::lock_guard<std::mutex> lock(impl_log().mu);
  return impl_log().reference;
}

void clear_reference_impls() {
  std::lock_guard<std::mutex> lock(impl_log().mu);
  impl_log().reference.clear();
}

std::vector<std::string> created_impls() {
  std::lock_guard<std::mutex> lock(impl_log().mu);
  return impl_log().created;
}

dnnl::primitive_attr default_attr() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

void execute(const dnnl::primitive& p, std::unordered_map<int, memory> args,
             const memory::desc& scratch_md) {
  std::vector<Tensor> keep;
  const size_t scratch_bytes = scratch_md.get_size();
  if (void* lent_bytes = scratch_bytes > 0 ? lent_scratch(scratch_bytes) : nullptr)
    args.emplace(DNNL_ARG_SCRATCHPAD, memory(scratch_md, engine(), lent_bytes));
  else if (scratch_bytes > 0)
    args.emplace(DNNL_ARG_SCRATCHPAD, buffer(scratch_md, keep));
  p.execute(stream(), args);
  stream().wait();
}

namespace {

// Milliseconds of one run of each primitive (best_ms, three rounds), each on zero-filled
// arguments of the layouts its descriptor asks for.
std::vector<double> time_primitives(const std::vector<dnnl::primitive_desc>& pds) {
  constexpr int kArgs[] = {DNNL_ARG_SRC,      DNNL_ARG_WEIGHTS,      DNNL_ARG_BIAS,      DNNL_ARG_DST,
                           DNNL_ARG_DIFF_DST, DNNL_ARG_DIFF_SRC,     DNNL_ARG_DIFF_WEIGHTS, DNNL_ARG_DIFF_BIAS,
                           DNNL_ARG_WORKSPACE, DNNL_ARG_SCRATCHPAD};
  struct Trial {
    dnnl::primitive prim;
    std::unordered_map<int, memory> args;
  };
  std::vector<Tensor> keep;
  std::vector<Trial> trials;
  for (const dnnl::primitive_desc& pd : pds) {
    Trial t{dnnl::primitive(pd.get()), {}};
    for (int arg : kArgs) {
      const memory::desc md = pd.query_md(dnnl::query::exec_arg_md, arg);
      if (md.get_size() == 0) continue;
      keep.push_back(kernels::zeros({int64_t(md.get_size() / sizeof(float)) + 1}, f32));
      t.args.emplace(arg, memory(md, engine(), keep.back().raw_data()));
    }
    trials.push_back(std::move(t));
  }
  std::vector<std::function<void()>> runs;
  for (const Trial& t : trials)
    runs.push_back([&t] {
      t.prim.execute(stream(), t.args);
      stream().wait();
    });
  return best_ms(runs, 3);
}

}  // namespace

bool same_bytes(const memory::desc& a, const memory::desc& b) {
  if (a == b) return true;
  const dnnl_memory_desc_t &x = a.data, &y = b.data;
  if (x.ndims != y.ndims || x.data_type != y.data_type || x.offset0 != y.offset0 ||
      x.format_kind != dnnl_blocked || y.format_kind != dnnl_blocked || x.format_desc.blocking.inner_nblks != 0 ||
      y.format_desc.blocking.inner_nblks != 0)
    return false;
  for (int i = 0; i < x.ndims; ++i)
    if (x.dims[i] != y.dims[i] || x.padded_dims[i] != y.padded_dims[i] ||
        (x.dims[i] > 1 && x.format_desc.blocking.strides[i] != y.format_desc.blocking.strides[i]))
      return false;
  return true;
}

bool same_activation_layouts(const dnnl::primitive_desc& a, const dnnl::primitive_desc& b) {
  for (int arg : {DNNL_ARG_SRC, DNNL_ARG_DST, DNNL_ARG_DIFF_SRC, DNNL_ARG_DIFF_DST})
    if (!same_bytes(a.query_md(dnnl::query::exec_arg_md, arg), b.query_md(dnnl::query::exec_arg_md, arg)))
      return false;
  return true;
}

std::vector<double> best_ms(const std::vector<std::function<void()>>& ways, int rounds) {
  for (const auto& run : ways) run();
  std::vector<double> best(ways.size(), std::numeric_limits<double>::infinity());
  for (int round = 0; round < rounds; ++round)
    for (size_t i = 0; i < ways.size(); ++i) {
      const auto start = std::chrono::steady_clock::now();
      ways[i]();
      best[i] = std::min(best[i], std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    }
  return best;
}

size_t fastest_of(const std::vector<dnnl::primitive_desc>& candidates, std::string& times) {
  if (candidates.size() < 2) return 0;
  const std::vector<double> ms = time_primitives(candidates);
  for (size_t i = 0; i < ms.size(); ++i) times += str(i ? "; " : "", candidates[i].impl_info_str(), " ", ms[i], " ms");
  return clear_winner(ms);
}

size_t clear_winner(const std::vector<double>& ms) {
  const double fastest = *std::min_element(ms.begin(), ms.end());
  size_t way = 0;
  while (ms[way] * kClearWin > fastest) ++way;  // ends at the fastest at the latest
  return way;
}

Reorder::Reorder(const memory::desc& from_md, const memory::desc& to_md) : from(from_md), to(to_md) {
  if (from == to) return;
  dnnl::reorder::primitive_desc pd(engine(), from, engine(), to);
  note_impl(pd, "reorder");
  prim = dnnl::reorder(pd);
}

memory Reorder::apply(const memory& m, std::vector<Tensor>& keep) const {
  if (!prim) return m;
  memory out = buffer(to, keep);
  into(m, out);
  return out;
}

void Reorder::into(const memory& m, const memory& dst) const {
  if (!prim) return;
  prim->execute(stream(), {{DNNL_ARG_FROM, m}, {DNNL_ARG_TO, dst}});
  stream().wait();
}

memory::format_tag blocked_channels_tag() {
  const auto isa = unsigned(dnnl::get_effective_cpu_isa()), avx512 = unsigned(dnnl::cpu_isa::avx512_core);
  return (isa & avx512) == avx512 ? memory::format_tag::nChw16c : memory::format_tag::nChw8c;
}

namespace {

int64_t probe_channel_block() {
  using Tag = memory::format_tag;
  const memory::data_type f32 = memory::data_type::f32;
  const Dims act{1, 64, 56, 56};
  dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
                                    memory::desc(act, f32, Tag::any), memory::desc({64, 64, 3, 3}, f32, Tag::any),
                                    memory::desc(act, f32, Tag::any), {1, 1}, {1, 1}, {1, 1});
  const memory::desc src = dnnl::convolution_forward::primitive_desc(d, default_attr(), engine()).src_desc();
  for (int64_t block : {8, 16})
    if (src == plain_desc(act, channel_block_tag(block))) return block;
  return 0;
}

std::atomic<int64_t> block_override{-1};

}  // namespace

int64_t preferred_channel_block() {
  if (const int64_t forced = block_override.load(); forced >= 0) return forced;
  static const int64_t block = probe_channel_block();
  return block;
}

ChannelBlockOverride::ChannelBlockOverride(int64_t block) : previous_(block_override.exchange(block)) {}
ChannelBlockOverride::~ChannelBlockOverride() { block_override.store(previous_); }

memory::format_tag channel_block_tag(int64_t block) {
  return block == 16 ? memory::format_tag::nChw16c : memory::format_tag::nChw8c;
}

memory::format_tag planned_tag(const Tensor& t, int64_t block) {
  return block ? channel_block_tag(block) : activation_tag(t);
}

int64_t tag_code(memory::format_tag t) {
  using Tag = memory::format_tag;
  return t == Tag::nhwc ? 1 : t == Tag::nChw8c ? 2 : t == Tag::nChw16c ? 3 : 0;
}

}  // namespace baton::kernels::onednn
