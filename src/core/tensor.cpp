#include "baton/tensor.h"

#include <algorithm>
#include <cstring>

#include "baton/autograd.h"
#include "core/allocator.h"
#include "core/tensor_impl.h"

namespace baton {

Storage::Storage(size_t nbytes) : data_(detail::allocate(nbytes)), nbytes_(nbytes) {}

Storage::Storage(void* data, size_t nbytes, std::function<void(void*)> deleter)
    : data_(data), nbytes_(nbytes), deleter_(std::move(deleter)) {
  if (!deleter_) deleter_ = [](void*) {};
}

Storage::~Storage() {
  if (deleter_) deleter_(data_);
  else detail::deallocate(data_, nbytes_);
}

TensorImpl::TensorImpl() = default;
TensorImpl::~TensorImpl() = default;

const TensorImpl& Tensor::checked() const {
  if (!impl_) [[unlikely]]
    throw ValueError("tensor", "this Tensor is undefined (default-constructed or moved-from): assign it a "
                     "value before using it", SourceLoc::current());
  return *impl_;
}

bool Tensor::is_symbolic() const { return checked().symbolic != nullptr; }

namespace {
bool (*symbolic_requires_grad)(const Tensor&) = nullptr;
}  // namespace

void set_symbolic_requires_grad(bool (*answer)(const Tensor&)) { symbolic_requires_grad = answer; }

bool Tensor::requires_grad() const {
  if (!impl_) return false;
  if (impl_->autograd && impl_->autograd->wants_grad()) return true;
  return impl_->symbolic && symbolic_requires_grad && symbolic_requires_grad(*this);
}

std::string Tensor::grad_fn_name() const {
  return impl_ && impl_->autograd ? impl_->autograd->history_name() : std::string();
}

// Whether ops record history: per thread, here in core so that every layer may ask
// (GradMode is declared with autograd's controls in baton/autograd.h).
namespace {
thread_local bool grad_mode_enabled = true;
}  // namespace

bool GradMode::enabled() { return grad_mode_enabled; }
void GradMode::set_enabled(bool on) { grad_mode_enabled = on; }
DType Tensor::dtype() const { return checked().dtype; }
const Shape& Tensor::shape() const { return checked().shape; }
const Shape& Tensor::strides() const { return checked().strides; }
int64_t Tensor::offset() const { return checked().offset; }
void* Tensor::raw_data() const { return checked().data(); }
bool Tensor::shares_storage_with(const Tensor& other) const {
  const TensorImpl& a = checked();
  const TensorImpl& b = other.checked();
  return a.storage && a.storage == b.storage;
}

int64_t Tensor::size(int64_t d) const {
  int64_t rank = dim();
  int64_t n = d < 0 ? d + rank : d;
  if (n < 0 || n >= rank)
    throw IndexError("size", str("dim ", d, " out of range for a tensor of shape ", shape()),
                     SourceLoc::current());
  return shape()[size_t(n)];
}

bool Tensor::is_contiguous() const {
  int64_t expected = 1;
  const Shape& s = shape();
  const Shape& st = strides();
  for (size_t i = s.size(); i-- > 0;) {
    if (s[i] == 1) continue;
    if (st[i] != expected) return false;
    expected = s[i] < 0 || expected < 0 ? sym::mul(expected, s[i]) : expected * s[i];
  }
  return true;
}

void Tensor::check_dtype(DType expected, const char* what) const {
  if (!impl_) throw ValueError(what, "the tensor is undefined", SourceLoc::current());
  if (is_symbolic())
    throw GraphError(what, str("the tensor is symbolic (", dtype(), shape(), "): it has no data until "
                               "its graph runs"), SourceLoc::current());
  if (dtype() != expected)
    throw DTypeError(what, str("asked for ", expected, " data of a ", dtype(), " tensor of shape ",
                               shape()),
                     SourceLoc::current());
}

size_t checked_nbytes(const Shape& shape, DType dtype, std::string_view op) {
  size_t bytes = 0;
  if (__builtin_mul_overflow(size_t(shape.numel()), dtype_size(dtype), &bytes))
    throw ShapeError(op, str("a ", dtype, " tensor of shape ", shape, " needs more bytes than a size_t can count"),
                     SourceLoc::current());
  return bytes;
}

Tensor empty(const Shape& shape, DType dtype) {
  for (int64_t d : shape)
    if (d < 0) {
      if (sym::is_symbol(d))
        throw GraphError("empty", str("shape ", shape, " is symbolic: a new tensor of a symbolic "
                                      "shape is made from one, e.g. zeros_like(x)"), SourceLoc::current());
      throw ValueError("empty", str("negative size in shape ", shape), SourceLoc::current());
    }
  auto impl = std::make_shared<TensorImpl>();
  const size_t nbytes = checked_nbytes(shape, dtype, "empty");
  if (dtype == DType::string)  // elements with a life of their own: constructed empty, destroyed with the storage
    impl->storage = std::make_shared<Storage>(new std::string[size_t(shape.numel())], nbytes,
                                              [](void* p) { delete[] static_cast<std::string*>(p); });
  else
    impl->storage = std::make_shared<Storage>(nbytes);
  impl->strides = contiguous_strides(shape);
  impl->shape = shape;
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

Tensor from_buffer(const void* data, DType dtype, const Shape& shape) {
  Tensor t = empty(shape, dtype);
  if (dtype == DType::string)
    std::copy_n(static_cast<const std::string*>(data), t.numel(), t.data<std::string>());
  else if (t.nbytes() > 0)
    std::memcpy(t.raw_data(), data, t.nbytes());  // data may be null when empty
  return t;
}

Tensor from_blob(void* data, DType dtype, const Shape& shape, std::function<void(void*)> deleter) {
  auto impl = std::make_shared<TensorImpl>();
  for (int64_t d : shape)
    if (d < 0) throw ValueError("from_blob", str("invalid size in shape ", shape), SourceLoc::current());
  impl->storage = std::make_shared<Storage>(data, checked_nbytes(shape, dtype, "from_blob"), std::move(deleter));
  impl->strides = contiguous_strides(shape);
  impl->shape = shape;
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

Tensor make_view(const Tensor& x, Shape shape, Shape strides, int64_t offset) {
  (void)shape.numel();  // a view of more elements than an int64 counts is a ShapeError now, not in a kernel
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = x.impl()->storage;
  impl->offset = offset;
  impl->shape = std::move(shape);
  impl->strides = std::move(strides);
  impl->dtype = x.dtype();
  return Tensor(std::move(impl));
}

}  // namespace baton
