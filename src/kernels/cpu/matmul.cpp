// matmul_kernel: oneDNN's matmul primitive for f32 (small products: matmul_small.cpp),
// blocked loops for f64.
#include "kernels/cpu/matmul.h"

#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

#include "core/tensor_impl.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/finite.h"
#include "kernels/cpu/loops.h"
#include "kernels/cpu/onednn.h"
#include "kernels/cpu/threads.h"

namespace baton::kernels {

Tensor with_rank(const Tensor& x, size_t rank) {
  if (size_t(x.dim()) >= rank) return x;
  Shape shape(rank - size_t(x.dim()), 1), strides(rank - size_t(x.dim()), x.numel());
  for (size_t d = 0; d < size_t(x.dim()); ++d) {
    shape.push_back(x.shape()[d]);
    strides.push_back(x.strides()[d]);
  }
  return make_view(x, shape, strides, x.offset());
}

int64_t batch_offset(const Tensor& t, const Shape& out_shape, int64_t index) {
  int64_t off = 0;
  for (size_t d = out_shape.size() - 2; d-- > 0;) {
    int64_t i = index % out_shape[d];
    index /= out_shape[d];
    if (t.shape()[d] != 1) off += i * t.strides()[d];
  }
  return off;
}

namespace {

namespace dnn = onednn;

// Whether, taking t's dims from the smallest stride up, each dim's stride is at least the
// extent of the dims inside it, as oneDNN requires of a strided descriptor. A stepped slice
// of a batch dim ([2,3,2,3] sliced 0::2 along dim 1: strides [18,12,3,1]) breaks it without
// any element overlapping: dim 1 (stride 12, size 2) reaches past dim 0's stride of 18.
bool nested(const Tensor& t) {
  std::vector<std::pair<int64_t, int64_t>> dims;  // (stride, size) of dims that move
  for (int64_t d = 0; d < t.dim(); ++d)
    if (t.shape()[size_t(d)] > 1) dims.emplace_back(t.strides()[size_t(d)], t.shape()[size_t(d)]);
  std::sort(dims.begin(), dims.end());
  for (size_t i = 1; i < dims.size(); ++i)
    if (dims[i].first < dims[i - 1].first * dims[i - 1].second) return false;
  return true;
}

// oneDNN's fast kernels take row-major or transposed matrices with plain batch strides;
// an expanded (stride 0) or otherwise odd operand is made dense first.
bool strides_ok(const Tensor& t) {
  const int64_t r = t.dim();
  for (int64_t d = 0; d < r; ++d)
    if (t.strides()[size_t(d)] == 0 && t.shape()[size_t(d)] > 1) return false;
  if (!nested(t)) return false;
  const int64_t s_row = t.strides()[size_t(r - 2)], s_col = t.strides()[size_t(r - 1)];
  const int64_t rows = t.shape()[size_t(r - 2)], cols = t.shape()[size_t(r - 1)];
  return (s_col == 1 && s_row >= cols) || (s_row == 1 && s_col >= rows);
}

struct MatmulEntry {
  dnnl::matmul prim;
  dnn::memory::desc a_md, b_md, bias_md, out_md, scratch_md;
  bool dense = false;  // the strided form fell back to a ref kernel: copy inputs first
};

// At most a sum post-op (accumulate: dst += product + bias): linear_fused applies its
// activation over the result after the product (ops/linear.cpp). With `measured`, the
// fastest of oneDNN's implementations, their times written there.
dnnl::matmul::primitive_desc matmul_pd(const dnn::memory::desc& a, const dnn::memory::desc& b,
                                       const dnn::memory::desc& bias, const dnn::memory::desc& out, bool accumulate,
                                       std::string* measured) {
  dnnl::matmul::desc d(a, b, bias, out);
  dnnl::primitive_attr attr = dnn::default_attr();
  if (accumulate) {
    dnnl::post_ops ops;
    ops.append_sum(1.f);
    attr.set_post_ops(ops);
  }
  dnnl::matmul::primitive_desc pd(d, attr, dnn::engine());
  return measured ? dnn::fastest_implementation(pd, *measured) : pd;
}

MatmulEntry make_entry(const Tensor& a, const Tensor& b, bool bias, const Tensor& out, bool accumulate,
                       std::string* measured, std::string& impl) {
  MatmulEntry e;
  e.out_md = dnn::strided_desc(out);
  if (bias) {
    dnn::Dims bd(size_t(out.dim()), 1);
    bd.back() = out.shape().back();
    e.bias_md = dnn::memory::desc(bd, dnn::memory::data_type::f32,
                                  dnn::dims_of(contiguous_strides(Shape(bd))));
  }
  e.a_md = dnn::strided_desc(a);
  e.b_md = dnn::strided_desc(b);
  auto pd = matmul_pd(e.a_md, e.b_md, e.bias_md, e.out_md, accumulate, measured);
  std::string what = str("matmul ", a.shape(), " @ ", b.shape());
  if (dnn::is_reference(pd) && !(a.is_contiguous() && b.is_contiguous())) {
    e.dense = true;
    e.a_md = dnn::plain_desc(a.shape());
    e.b_md = dnn::plain_desc(b.shape());
    pd = matmul_pd(e.a_md, e.b_md, e.bias_md, e.out_md, accumulate, measured);
  }
  dnn::note_impl(pd, what);
  impl = pd.impl_info_str();
  e.scratch_md = pd.scratchpad_desc();
  e.prim = dnnl::matmul(pd);
  return e;
}

// A size-1 dim's stride never moves a pointer, so views carry any value there (a stepped
// slice, a transpose), and dense() keeps such a view as it is. oneDNN checks those strides
// all the same: a [5,1] view with strides [1,2] reads as a column-major matrix whose leading
// dimension (2) is shorter than its 5 rows, and fails to execute. Such a dim gets the
// stride a contiguous layout would give it.
Tensor with_plain_unit_strides(const Tensor& t) {
  Shape strides = t.strides();
  bool changed = false;
  int64_t next = 1;  // the stride of a size-1 dim here
  for (size_t d = size_t(t.dim()); d-- > 0;) {
    if (t.shape()[d] == 1 && strides[d] != next) {
      strides[d] = next;
      changed = true;
    }
    next = strides[d] * t.shape()[d];
  }
  return changed ? make_view(t, t.shape(), strides, t.offset()) : t;
}

// Whether out is a column-major matrix (rank 2, its rows' elements adjacent: the layout a
// plan may give a product's output, runtime/specialize.cpp) that is not also row-major.
bool column_major(const Tensor& out) {
  return out.dim() == 2 && out.shape()[0] > 1 && out.shape()[1] > 1 && out.strides()[0] == 1 &&
         out.strides()[1] == out.shape()[0];
}

// The operands as the primitive reads them: out's rank, plain unit strides, and an operand
// oneDNN cannot read through its strides made dense (`copy` does that: a real copy for a
// run, a contiguous layout of the metadata when preparing). A column-major out is computed
// as its transpose, out^T = b^T @ a^T, which is row-major (`swapped`): oneDNN writes only
// row-major results at speed, and reads the large b (a layer's weights) as its A operand
// in place rather than packing it on every run. oneDNN takes no bias along the rows of
// out^T, so the kernel adds it after the product.
struct Operands {
  Tensor a, b, out;
  bool swapped = false;
  template <class Copy>
  Operands(const Tensor& a_in, const Tensor& b_in, const Tensor& out_in, Copy copy)
      : a(with_plain_unit_strides(with_rank(a_in, size_t(out_in.dim())))),
        b(with_plain_unit_strides(with_rank(b_in, size_t(out_in.dim())))),
        out(with_plain_unit_strides(out_in)) {
    if (column_major(out)) {
      swapped = true;
      std::swap(a, b);
      a = kernels::permuted(a, {1, 0});
      b = kernels::permuted(b, {1, 0});
      out = kernels::permuted(out, {1, 0});
    }
    if (!strides_ok(a)) a = copy(a);
    if (!strides_ok(b)) b = copy(b);
  }
  // Whether the primitive adds the bias (else the kernel does, after it).
  bool primitive_bias(bool bias) const { return bias && !swapped; }
  std::string key(bool bias, bool accumulate) const {
    return dnn::key("mm", a.shape(), a.strides(), b.shape(), b.strides(), out.shape(), out.strides(),
                    int(primitive_bias(bias)) + 2 * int(accumulate));
  }
};

Tensor contiguous_meta(const Tensor& t) { return make_view(t, t.shape(), contiguous_strides(t.shape()), 0); }

// Below this many multiply-adds a product runs on one thread: oneDNN's fork and join on two,
// and fetching the other core's share of the operands and result, cost more than halving the
// arithmetic. Alone, 64x256 @ 256x10 and its two gradient products took 4.4, 2.3 and 2.8 us
// on one thread against 4.4, 6.7 and 8.0 on two; in the MLP training step the forward one
// took 8.4 us against 13.5 (docs/PERF.md, thirteenth session).
constexpr double kOneThreadMacs = 1 << 18;

// The multiply-adds of a product of a (its last dim summed over) into out_shape.
double macs(const Tensor& a, const Shape& out_shape) {
  return double(out_shape.numel()) * double(a.shape()[size_t(a.dim()) - 1]);
}

bool on_one_thread(const Tensor& a, const Tensor& out) { return macs(a, out.shape()) < kOneThreadMacs; }

struct CachedEntry {
  MatmulEntry entry;
  std::string impl;
};

// Below this many multiply-adds a product is not worth timing twice.
constexpr double kMinTimedMacs = 1 << 20;

// `timed` (plans' products of at least kMinTimedMacs): the fastest of oneDNN's
// implementations, not its first pick. For the MLP's input gradient 64x256 @ 256x512
// (computed column-major) oneDNN picks brg:avx512_core, 72-77 us on two threads, where its
// gemm:jit takes 50-57 (docs/PERF.md, eighteenth session). Eager calls take the first pick:
// they have no plan to time it in.
const CachedEntry& cached_entry(const Operands& o, bool bias, bool accumulate, bool timed = false) {
  return dnn::cached<CachedEntry>(o.key(bias, accumulate) + (timed ? "/timed" : ""), [&] {
    CachedEntry c;
    std::string measured;
    c.entry = make_entry(o.a, o.b, o.primitive_bias(bias), o.out, accumulate, timed ? &measured : nullptr, c.impl);
    if (o.swapped) c.impl += " (computing the column-major result's transpose)";
    if (!measured.empty()) c.impl += " (measured: " + measured + ")";
    return c;
  });
}

}  // namespace

// Cached entries are never removed, so a plan may point at one; it serves while the
// operands' layouts and the thread count it was made for hold.
struct MatmulPlan {
  const MatmulEntry* entry;
  Shape a_shape, a_strides, b_shape, b_strides, out_shape, out_strides;
  bool bias, accumulate;
  int threads;
  bool serves(const Operands& o, bool with_bias, bool accumulating) const {
    return with_bias == bias && accumulating == accumulate && threads == kernels::max_threads() &&
           o.a.strides() == a_strides && o.b.strides() == b_strides && o.out.strides() == out_strides &&
           o.a.shape() == a_shape && o.b.shape() == b_shape && o.out.shape() == out_shape;
  }
};

std::shared_ptr<const MatmulPlan> prepare_matmul_f32(const Tensor& a, const Tensor& b, bool bias, const Tensor& out,
                                                     PreparedKernel& prepared, bool accumulate) {
  if (out.numel() == 0 || a.shape()[size_t(a.dim()) - 1] == 0) return nullptr;
  if (small_product(a, b, out.shape())) {
    prepared.implementation = "baton loops (small product)";
    return nullptr;
  }
  const ThreadsScope threads(on_one_thread(a, out) ? 1 : 0);  // the primitive is made for the threads it runs on
  const Operands o(a, b, out, contiguous_meta);
  const CachedEntry& c = cached_entry(o, bias, accumulate, macs(a, out.shape()) >= kMinTimedMacs);
  prepared.implementation = c.impl;
  prepared.scratch_bytes = c.entry.scratch_md.get_size();
  return std::make_shared<const MatmulPlan>(MatmulPlan{&c.entry, o.a.shape(), o.a.strides(), o.b.shape(),
                                                       o.b.strides(), o.out.shape(), o.out.strides(), bias,
                                                       accumulate, kernels::max_threads()});
}

namespace {

// out[j, :] += bias[j]: the bias of a column-major result, added to its transpose.
void add_row_bias(const Tensor& out_t, const Tensor& bias) {
  const int64_t rows = out_t.shape()[0], cols = out_t.shape()[1], ld = out_t.strides()[0];
  float* po = out_t.data<float>();
  const float* pb = bias.data<float>();
  kernels::parallel_range(rows, [&](int64_t begin, int64_t end) {
    for (int64_t j = begin; j < end; ++j)
      for (int64_t i = 0; i < cols; ++i) po[j * ld + i] += pb[j];
  }, kernels::grain_for(cols));
}

void matmul_f32(const Tensor& a_in, const Tensor& b_in, const Tensor* bias, const Tensor& out_in,
                const MatmulPlan* plan, bool accumulate) {
  const ThreadsScope threads(on_one_thread(a_in, out_in) ? 1 : 0);
  Operands o(a_in, b_in, out_in, [](const Tensor& t) { return dnn::dense(t); });
  const bool with_bias = bias != nullptr;
  const MatmulEntry& e = plan && plan->serves(o, with_bias, accumulate) ? *plan->entry
                                                                        : cached_entry(o, with_bias, accumulate).entry;
  Tensor a = e.dense ? dnn::dense(o.a) : o.a, b = e.dense ? dnn::dense(o.b) : o.b;
  std::unordered_map<int, dnn::memory> args{{DNNL_ARG_SRC, dnn::wrap(e.a_md, a)},
                                            {DNNL_ARG_WEIGHTS, dnn::wrap(e.b_md, b)},
                                            {DNNL_ARG_DST, dnn::wrap(e.out_md, o.out)}};
  if (o.primitive_bias(with_bias)) args.emplace(DNNL_ARG_BIAS, dnn::wrap(e.bias_md, dnn::dense(*bias)));
  dnn::execute(e.prim, std::move(args), e.scratch_md);
  if (with_bias && !o.primitive_bias(with_bias)) add_row_bias(o.out, dnn::dense(*bias));
}

// Row i of one product: out_row = bias + sum_k a[i,k] * b[k,:], k in blocks for the cache.
template <class T>
void matmul_loops(const Tensor& a_in, const Tensor& b_in, const Tensor* bias, const Tensor& out) {
  Tensor a = dnn::dense(a_in), b = dnn::dense(b_in);
  const Shape& os = out.shape();
  const int64_t r = int64_t(os.size()), M = os[size_t(r - 2)], N = os[size_t(r - 1)];
  const int64_t K = a.shape()[size_t(r - 1)];
  const int64_t batches = M == 0 || N == 0 ? 0 : out.numel() / (M * N);
  const T* pa = a.data<T>();
  const T* pb = b.data<T>();
  const T* pbias = bias ? dnn::dense(*bias).data<T>() : nullptr;
  T* po = out.data<T>();
  kernels::parallel_range(batches * M, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const int64_t bi = row / M, i = row % M;
      const T* arow = pa + batch_offset(a, os, bi) + i * K;
      const T* bmat = pb + batch_offset(b, os, bi);
      T* orow = po + row * N;
      for (int64_t j = 0; j < N; ++j) orow[j] = pbias ? pbias[j] : T(0);
      for (int64_t k = 0; k < K; ++k) {
        const T aik = arow[k];
        const T* brow = bmat + k * N;
        for (int64_t j = 0; j < N; ++j) orow[j] += aik * brow[j];
      }
    }
  }, kernels::grain_for(K * N));
}

ForcedChoice column_major_choice;

}  // namespace

ColumnMajorOverride::ColumnMajorOverride(bool column_major) : Scope(column_major_choice, column_major) {}

bool column_major_result_is_faster(const Tensor& a, const Tensor& b, bool bias, const Shape& out_shape) {
  if (a.dtype() != f32 || out_shape.size() != 2 || out_shape[0] < 2 || out_shape[1] < 2 || a.dim() != 2 ||
      b.dim() != 2)
    return false;
  if (const std::optional<bool> forced = column_major_choice.forced()) return *forced;
  if (macs(a, out_shape) < kMinTimedMacs) return false;
  const Tensor row_out = make_view(a, out_shape, contiguous_strides(out_shape), 0);
  const Tensor column_out = make_view(a, out_shape, {1, out_shape[0]}, 0);
  const Operands o(a, b, column_out, contiguous_meta);
  return dnn::cached<bool>(o.key(bias, false) + "/column-major?", [&] {
    const Tensor x = kernels::zeros_laid_out_as(a), y = kernels::zeros_laid_out_as(b),
                 row = kernels::zeros_laid_out_as(row_out), column = kernels::zeros_laid_out_as(column_out);
    const Tensor bias_values = kernels::zeros({out_shape[1]}, f32);
    const Tensor* with_bias = bias ? &bias_values : nullptr;
    const std::vector<double> ms = dnn::best_ms({[&] { matmul_f32(x, y, with_bias, row, nullptr, false); },
                                                 [&] { matmul_f32(x, y, with_bias, column, nullptr, false); }});
    return dnn::clear_winner(ms) == 1;
  });
}

void matmul_kernel(const Tensor& a, const Tensor& b, const Tensor* bias, const Tensor& out,
                   const MatmulPlan* plan, bool accumulate) {
  if (out.numel() == 0) return;
  if (accumulate && out.dtype() != f32)
    throw RuntimeError("matmul", str("accumulates into f32 results only, not ", out.dtype()), SourceLoc::current());
  if (a.shape()[size_t(a.dim()) - 1] == 0) {  // K = 0: the sum over nothing
    kernels::visit_float(out.dtype(), "matmul", [&](auto tag) {
      using T = typename decltype(tag)::type;
      T* p = out.data<T>();
      const T* pb = bias ? dnn::dense(*bias).data<T>() : nullptr;
      const int64_t n = out.shape().back();
      for (int64_t i = 0; i < out.numel(); ++i) {
        const T v = pb ? pb[i % n] : T(0);
        p[i] = accumulate ? p[i] + v : v;
      }
    });
    return;
  }
  if (out.dtype() == f32 && small_product(a, b, out.shape())) small_matmul_f32(a, b, bias, out, accumulate);
  else if (out.dtype() == f32) matmul_f32(a, b, bias, out, plan, accumulate);
  else matmul_loops<double>(with_rank(a, size_t(out.dim())), with_rank(b, size_t(out.dim())), bias, out);
}

}  // namespace baton::kernels
