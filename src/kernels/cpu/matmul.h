// The matrix-product kernel shared by matmul and linear.
#pragma once
#include <memory>
#include <string>

#include "baton/tensor.h"
#include "kernels/cpu/forced_choice.h"
#include "kernels/cpu/prepared.h"

namespace baton::kernels {

// An f32 product's oneDNN primitive, made once for a plan step from metadata: a, b and out
// as the kernel is handed them (shapes and strides, no data). `prepared` gets
// oneDNN's name for it.
struct MatmulPlan;
// accumulate: out += the product (oneDNN's sum post-op), f32 only.
std::shared_ptr<const MatmulPlan> prepare_matmul_f32(const Tensor& a, const Tensor& b, bool bias, const Tensor& out,
                                                     PreparedKernel& prepared, bool accumulate = false);

// out[..., M, N] = a[..., M, K] @ b[..., K, N] (+ bias[N]). a and b have out's
// rank or less (leading size-1 dims implied); their batch dims are out's or 1 (broadcast).
// Any strides. f32 runs on oneDNN, f64 on loops. With a plan made for these layouts no
// primitive is looked up. accumulate (f32 only): out += the product and bias, in the pass
// that computes them (oneDNN's sum post-op; the residual add of linear_fused).
void matmul_kernel(const Tensor& a, const Tensor& b, const Tensor* bias, const Tensor& out,
                   const MatmulPlan* plan = nullptr, bool accumulate = false);

// Whether a product out[M, N] = a @ b (+ bias) runs clearly faster with out stored
// column-major than row-major (kernels time both once per layout of a and b, on zeros):
// a layer's activations [batch, features] when the features outnumber the batch, since
// oneDNN then reads the weights in place as its A operand rather than packing them. f32
// rank-2 products large enough to be worth timing; false for others.
bool column_major_result_is_faster(const Tensor& a, const Tensor& b, bool bias, const Shape& out_shape);

// While one lives, column_major_result_is_faster answers `column_major` for every product
// it would time, without timing: tests of the plans either answer makes.
class ColumnMajorOverride : ForcedChoice::Scope {
 public:
  explicit ColumnMajorOverride(bool column_major);
};

// x with size-1 dims prepended up to `rank` (a view).
Tensor with_rank(const Tensor& x, size_t rank);

// Element offset of batch `index` (over out_shape's batch dims, all but the last two) in t,
// of out_shape's rank, its size-1 dims broadcast.
int64_t batch_offset(const Tensor& t, const Shape& out_shape, int64_t index);

// f32 products of at most this many multiply-adds run on baton's loops (matmul_small.cpp),
// eagerly and in plans alike: oneDNN's call costs 4-7 us on this machine whatever the
// size, and below this the loops finish first (docs/PERF.md, twenty-ninth session).
inline constexpr double kSmallProductMacs = 1 << 16;
// So do products of up to kMatrixVectorMacs whose a has at most kMatrixVectorRows rows, read
// along its rows, against b's contiguous columns (linear's weight at batch 1 or 2): the
// loops' dot products on one thread beat oneDNN's two there (1x512 @ 512x1000: 27-32 us
// against 45-67; with 3 or 4 rows oneDNN wins).
inline constexpr double kMatrixVectorMacs = 1 << 20;
inline constexpr int64_t kMatrixVectorRows = 2;
// Whether a product a @ b into out_shape (a and b as matmul_kernel takes them) is one of those.
bool small_product(const Tensor& a, const Tensor& b, const Shape& out_shape);
// out = a @ b (+ bias) (out += that, accumulating) on one thread, for f32 small products;
// operands as matmul_kernel takes them.
void small_matmul_f32(const Tensor& a, const Tensor& b, const Tensor* bias, const Tensor& out, bool accumulate);

}  // namespace baton::kernels
