// The pieces of the oneDNN convolutions that the forward (conv_onednn.cpp) and the
// backward (conv_backward_onednn.cpp) share: descriptors of a geometry, a prepared
// primitive and how one runs.
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "kernels/cpu/conv.h"
#include "kernels/cpu/conv_winograd.h"
#include "kernels/cpu/onednn.h"

namespace baton::kernels::conv_detail {

namespace dnn = onednn;
using dnn::memory;
using Tag = memory::format_tag;

// The cache key of a geometry's primitive of `kind`, with `extra` telling variants apart.
std::string geom_key(const char* kind, const ConvGeom& g, int64_t extra);
// "[n,c,h,w] * [o,c,kh,kw] groups ...", for the record of implementations.
std::string shapes(const ConvGeom& g);

// The descriptors of one geometry: `any` (for the primitive) and plain (for tensors).
struct ConvDescs {
  memory::desc src_any, w_any, dst_any, bias, src, w, dst;
  dnn::Dims strides, dilates, pad_l, pad_r;
  explicit ConvDescs(const ConvGeom& g, Tag src_tag = Tag::nchw, Tag dst_tag = Tag::nchw) {
    auto f32 = memory::data_type::f32;
    dnn::Dims wd = g.groups == 1 ? dnn::Dims{g.o, g.c, g.kh, g.kw}
                                 : dnn::Dims{g.groups, g.og(), g.cg(), g.kh, g.kw};
    src_any = memory::desc({g.n, g.c, g.h, g.w}, f32, Tag::any);
    w_any = memory::desc(wd, f32, Tag::any);
    dst_any = memory::desc({g.n, g.o, g.oh, g.ow}, f32, Tag::any);
    bias = memory::desc({g.o}, f32, Tag::x);
    src = memory::desc({g.n, g.c, g.h, g.w}, f32, src_tag);
    w = memory::desc(wd, f32, g.groups == 1 ? Tag::oihw : Tag::goihw);
    dst = memory::desc({g.n, g.o, g.oh, g.ow}, f32, dst_tag);
    strides = {g.sh, g.sw};
    dilates = {g.dh - 1, g.dw - 1};  // oneDNN counts the gaps
    pad_l = {g.ph, g.pw};
    // Right padding that makes oneDNN's output size equal ours (floor division).
    pad_r = {(g.oh - 1) * g.sh + (g.kh - 1) * g.dh + 1 - g.h - g.ph,
             (g.ow - 1) * g.sw + (g.kw - 1) * g.dw + 1 - g.w - g.pw};
  }
};

// The 8-channel vectors of an activation in `tag` (conv_winograd.h), where it has them.
std::optional<VectorLayout> vectors_of(Tag tag, const Shape& nchw);

// Whether a plan step takes baton's Winograd kernel or oneDNN's (named `impl`), and why.
struct WinogradChoice {
  bool own;
  std::string record;  // for explain(): both kernels and their times
  int64_t block_bytes = kWinogradLargeBlock;  // baton's: its blocks (conv_winograd.h)
  size_t kernel = 0;  // baton's: which of the kernels timed (their names' index)
};
// baton's one Winograd kernel for a forward or weight gradient, named in records.
inline const std::vector<std::string> kWinogradKernel = {"F(4x4,3x3)"};
// The choice a WinogradOverride forces, if one lives: baton's kernel number `kernel` of
// `names`.
std::optional<WinogradChoice> forced_winograd_choice(const std::string& impl, size_t kernel = 0,
                                                     const std::vector<std::string>& names = kWinogradKernel);
// oneDNN's kernel (`direct`) or one of baton's Winograd kernels (`names`) with small or
// large blocks (`own(kernel, block bytes)`), timed in turns (dnn::best_ms) with
// `scratch_bytes` lent as a plan lends its steps their scratchpad, and taken as
// dnn::clear_winner says (large blocks as keep_large_blocks_only_where_clearly_faster for g).
WinogradChoice timed_winograd_choice(const ConvGeom& g, const std::string& impl, size_t scratch_bytes,
                                     const std::function<void()>& direct,
                                     const std::function<void(size_t, int64_t)>& own,
                                     const std::vector<std::string>& names = kWinogradKernel);

// One prepared primitive with two inputs and one output, and the reorders around it.
struct Prepared {
  dnnl::primitive prim;
  dnn::Reorder in0, in1, out;
  memory::desc scratch;
  int arg0, arg1, arg_out;
  dnn::Reorder residual = {};  // plain destination -> the primitive's (forward with a residual)
  std::string impl = {};       // oneDNN's implementation ("brgconv:avx512_core")
  // For a plan's primitive: the times its implementation was chosen by
  // (dnn::fastest_implementation), else empty.
  std::string measured = {};
  // impl, with the times it was chosen by.
  std::string record() const { return measured.empty() ? impl : impl + " (measured: " + measured + ")"; }
};

// Whether p's oneDNN implementation computes by im2col and a GEMM ("gemm:jit",
// "x64:gemm:jit"). It multiplies the padding's zeros by the other operand: an infinity
// there gives NaN where a direct kernel, which skips the padding, gives none.
bool is_im2col(const Prepared& p);

// t0, t1 and result in the layouts p was prepared for (plain or channels-last); bias (of
// [o], contiguous) is read as DNNL_ARG_BIAS, or written as DNNL_ARG_DIFF_BIAS.
void run(const Prepared& p, const Tensor& t0, const Tensor& t1, const Tensor* bias, const Tensor& result,
         int bias_arg = DNNL_ARG_BIAS);

}  // namespace baton::kernels::conv_detail
