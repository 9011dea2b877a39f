// f32 products too small for oneDNN's call to pay (kernels/cpu/matmul.h, small_product):
// an LSTM cell's 2x64 @ 64x256, attention's 16x32 @ 32x16 per head. oneDNN takes 4-7 us
// for any of them, most of it in the call; these loops take one thread and no setup.
//
// Each output is one sum over k in a fixed order (which depends on the operands' layouts,
// never on the run), then the bias, then, accumulating, the value already in out: what
// linear followed by a residual add computes.
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/copy.h"
#include "kernels/cpu/vec8.h"

namespace baton::kernels {
namespace {

// A matrix of floats: element (i, j) at p[i * rs + j * cs].
struct Mat {
  const float* p;
  int64_t rs, cs;
  const float* at(int64_t i, int64_t j) const { return p + i * rs + j * cs; }
};

using F32x4 = float __attribute__((vector_size(16)));

struct Out {
  float* p;
  int64_t rs, cs;
  const float* bias;  // [N] or nullptr
  bool accumulate;
  // out(i, j) = s (+ bias[j]) (+ out(i, j) where accumulating).
  void store(int64_t i, int64_t j, float s) const {
    if (bias) s += bias[j];
    float* o = p + i * rs + j * cs;
    *o = accumulate ? *o + s : s;
  }
  // The same for out(i, j ..) as many as vector s has lanes (8 or 4), one vector store where
  // out's rows are contiguous (load8 and store8 move a whole vector of either width).
  template <class V>
  void store_vector(int64_t i, int64_t j, V s) const {
    constexpr int lanes = int(sizeof(V) / sizeof(float));
    if (cs != 1) {
      for (int l = 0; l < lanes; ++l) store(i, j + l, s[l]);
      return;
    }
    if (bias) s += load8<V>(bias + j);
    float* o = p + i * rs + j;
    kernels::store8(o, accumulate ? load8<V>(o) + s : s);
  }
};

// Sets each accumulator to zero, one register each: `= {}` on the array becomes a
// `rep stos` of its bytes on the stack, which took a sixth of an LSTM's time.
template <int rows, int cols>
inline void zero(F32x8 (&acc)[rows][cols]) {
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) acc[r][c] = splat(0.0f);
}

// The sums of four vectors' lanes, each ((l0 + l4) + (l1 + l5)) + ((l2 + l6) + (l3 + l7)),
// in one vector: a few shuffles and adds where lane-by-lane sums take thirty.
inline F32x4 lane_sums(F32x8 v0, F32x8 v1, F32x8 v2, F32x8 v3) {
  auto halves = [](F32x8 v) {
    return F32x4(__builtin_shufflevector(v, v, 0, 1, 2, 3)) + F32x4(__builtin_shufflevector(v, v, 4, 5, 6, 7));
  };
  const F32x4 t0 = halves(v0), t1 = halves(v1), t2 = halves(v2), t3 = halves(v3);
  const F32x4 u01 = __builtin_shufflevector(t0, t1, 0, 2, 4, 6) + __builtin_shufflevector(t0, t1, 1, 3, 5, 7);
  const F32x4 u23 = __builtin_shufflevector(t2, t3, 0, 2, 4, 6) + __builtin_shufflevector(t2, t3, 1, 3, 5, 7);
  return __builtin_shufflevector(u01, u23, 0, 2, 4, 6) + __builtin_shufflevector(u01, u23, 1, 3, 5, 7);
}
// The same sum of one vector's lanes.
inline float lane_sum(F32x8 s) { return ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7])); }

// b's rows contiguous (b.cs == 1): a tile of `rows` rows by `vecs` vectors of 8 columns
// of out kept in registers while k runs (eight independent sums keep both FMA units
// busy; one waits on its last add), each sum in k order.
template <int rows, int vecs>
inline void row_tile(const Mat& a, const Mat& b, const Out& out, int64_t i, int64_t j, int64_t K) {
  F32x8 acc[rows][vecs];
  zero(acc);
  for (int64_t k = 0; k < K; ++k) {
    F32x8 bv[vecs];
    for (int v = 0; v < vecs; ++v) bv[v] = load8<F32x8>(b.at(k, j + 8 * v));
    for (int r = 0; r < rows; ++r) {
      const F32x8 av = splat(*a.at(i + r, k));
      for (int v = 0; v < vecs; ++v) acc[r][v] += av * bv[v];
    }
  }
  for (int r = 0; r < rows; ++r)
    for (int v = 0; v < vecs; ++v) out.store_vector(i + r, j + 8 * v, acc[r][v]);
}

// One output column past the last multiple of 8, for `rows` rows at once (their sums
// independent, each in k order).
template <int rows>
inline void column_tail(const Mat& a, const Mat& b, const Out& out, int64_t i, int64_t j, int64_t K) {
  float acc[rows] = {};
  for (int64_t k = 0; k < K; ++k) {
    const float bkj = *b.at(k, j);
    for (int r = 0; r < rows; ++r) acc[r] += *a.at(i + r, k) * bkj;
  }
  for (int r = 0; r < rows; ++r) out.store(i + r, j, acc[r]);
}

// `rows` rows of out: tiles of eight vectors' sums (4 rows x 2 vectors, 2 x 4 or 1 x 8),
// then single vectors, then the last columns.
template <int rows>
void row_block(const Mat& a, const Mat& b, const Out& out, int64_t i, int64_t N, int64_t K) {
  constexpr int wide = rows >= 4 ? 2 : 8 / rows;
  int64_t j = 0;
  for (; j + 8 * wide <= N; j += 8 * wide) row_tile<rows, wide>(a, b, out, i, j, K);
  for (; j + 8 <= N; j += 8) row_tile<rows, 1>(a, b, out, i, j, K);
  for (; j < N; ++j) column_tail<rows>(a, b, out, i, j, K);
}

void by_rows_of_b(const Mat& a, const Mat& b, const Out& out, int64_t M, int64_t N, int64_t K) {
  int64_t i = 0;
  for (; i + 4 <= M; i += 4) row_block<4>(a, b, out, i, N, K);
  if (i + 2 <= M) row_block<2>(a, b, out, i, N, K), i += 2;
  if (i < M) row_block<1>(a, b, out, i, N, K);
}

// b's columns and a's rows contiguous (b.rs == 1, a.cs == 1: linear's weight, read as its
// transpose): dot products of `rows` rows with `cols` (4 or 1) columns at once, each in 8
// lanes of consecutive k, the lanes added (lane_sums), then the k past the last multiple of 8.
template <int rows, int cols>
inline void dot_tile(const Mat& a, const Mat& b, const Out& out, int64_t i, int64_t j, int64_t K) {
  F32x8 acc[rows][cols];
  zero(acc);
  int64_t k = 0;
  for (; k + 8 <= K; k += 8) {
    F32x8 bv[cols];
    for (int c = 0; c < cols; ++c) bv[c] = load8<F32x8>(b.at(k, j + c));
    for (int r = 0; r < rows; ++r) {
      const F32x8 av = load8<F32x8>(a.at(i + r, k));
      for (int c = 0; c < cols; ++c) acc[r][c] += av * bv[c];
    }
  }
  for (int r = 0; r < rows; ++r) {
    if constexpr (cols == 4) {
      F32x4 sums = lane_sums(acc[r][0], acc[r][1], acc[r][2], acc[r][3]);
      for (int64_t t = k; t < K; ++t)
        for (int c = 0; c < 4; ++c) sums[c] += *a.at(i + r, t) * *b.at(t, j + c);
      out.store_vector(i + r, j, sums);
    } else {
      for (int c = 0; c < cols; ++c) {
        float sum = lane_sum(acc[r][c]);
        for (int64_t t = k; t < K; ++t) sum += *a.at(i + r, t) * *b.at(t, j + c);
        out.store(i + r, j + c, sum);
      }
    }
  }
}

template <int rows>
void dot_block(const Mat& a, const Mat& b, const Out& out, int64_t i, int64_t N, int64_t K) {
  int64_t j = 0;
  for (; j + 4 <= N; j += 4) dot_tile<rows, 4>(a, b, out, i, j, K);
  for (; j < N; ++j) dot_tile<rows, 1>(a, b, out, i, j, K);
}

void by_columns_of_b(const Mat& a, const Mat& b, const Out& out, int64_t M, int64_t N, int64_t K) {
  int64_t i = 0;
  for (; i + 2 <= M; i += 2) dot_block<2>(a, b, out, i, N, K);
  for (; i < M; ++i) dot_block<1>(a, b, out, i, N, K);
}

// Up to this many rows of a, dot products with b's contiguous columns (by_columns_of_b).
constexpr int64_t kDotRows = 4;

Mat last_two_dims(const Tensor& t, int64_t offset) {
  const int64_t r = t.dim();
  return {t.data<float>() + offset, t.strides()[size_t(r - 2)], t.strides()[size_t(r - 1)]};
}

}  // namespace

bool small_product(const Tensor& a, const Tensor& b, const Shape& out_shape) {
  const int64_t K = a.shape().back();
  const double macs = double(out_shape.numel()) * double(K);
  if (macs <= kSmallProductMacs) return true;
  const bool rows_of_a = a.strides().back() == 1 || K == 1;
  const bool columns_of_b = b.dim() >= 2 && (b.strides()[size_t(b.dim()) - 2] == 1 || K == 1);
  return macs <= kMatrixVectorMacs && out_shape.size() >= 2 && out_shape[out_shape.size() - 2] <= kMatrixVectorRows &&
         rows_of_a && columns_of_b;
}

void small_matmul_f32(const Tensor& a_in, const Tensor& b_in, const Tensor* bias, const Tensor& out, bool accumulate) {
  if (out.numel() == 0) return;
  const size_t rank = size_t(out.dim());
  const Tensor a = with_rank(a_in, rank);
  Tensor b = with_rank(b_in, rank);
  const int64_t M = out.shape()[rank - 2], N = out.shape()[rank - 1], K = a.shape()[rank - 1];
  // Dot products pay for a few rows of a (their lane sums cost as much as the arithmetic
  // at K = 64); for more rows, b copied row-major (a tiled transpose) and the row tiles.
  const bool rows_of_b = b.strides()[rank - 1] == 1 || N == 1;
  const bool by_dots = !rows_of_b && M <= kDotRows && (b.strides()[rank - 2] == 1 || K == 1) &&
                       (a.strides()[rank - 1] == 1 || K == 1);
  if (!rows_of_b && !by_dots) b = dense(b);
  const Tensor bias_values = bias ? dense(*bias) : Tensor();
  const int64_t batches = out.numel() / (M * N);
  for (int64_t index = 0; index < batches; ++index) {
    const Mat ma = last_two_dims(a, batch_offset(a, out.shape(), index));
    const Mat mb = last_two_dims(b, batch_offset(b, out.shape(), index));
    const Out mo{out.data<float>() + batch_offset(out, out.shape(), index), out.strides()[rank - 2],
                 out.strides()[rank - 1], bias ? bias_values.data<float>() : nullptr, accumulate};
    if (by_dots) by_columns_of_b(ma, mb, mo, M, N, K);
    else by_rows_of_b(ma, mb, mo, M, N, K);
  }
}

}  // namespace baton::kernels
