#include "kernels/cpu/step_buffers.h"

#include <memory>

#include "core/tensor_impl.h"

namespace baton::kernels {
namespace {

Shape activation_strides(const Shape& nchw, int64_t block) {
  return block ? contiguous_strides(nchw) : channels_last_strides(nchw);
}

}  // namespace

Tensor activation_metadata(const Shape& nchw, int64_t block) {
  auto impl = std::make_shared<TensorImpl>();
  impl->dtype = f32;
  impl->shape = nchw;
  impl->strides = activation_strides(nchw, block);
  return Tensor(std::move(impl));
}

Tensor activation_over(const Shape& nchw, int64_t block, void* bytes) {
  const int64_t count = nchw.numel();
  const Tensor storage = bytes ? from_blob(bytes, f32, {count}) : empty({count}, f32);
  return make_view(storage, nchw, activation_strides(nchw, block), 0);
}

}  // namespace baton::kernels
