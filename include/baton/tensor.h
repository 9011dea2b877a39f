// Tensor: a cheap, shared handle to an n-dimensional array (a strided view of storage).
#pragma once
#include <cstring>
#include <functional>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "baton/dtype.h"
#include "baton/error.h"
#include "baton/shape.h"

namespace baton {

class Tensor;

// The state behind a Tensor handle (storage, offset, shape, strides, dtype, autograd and
// graph-building state) is internal to the library: src/core/tensor_impl.h.
struct TensorImpl;

// A number used as an operand: `x * 2.0f`, `x + 1`.
class Scalar {
 public:
  Scalar(double v) : value_(v), integral_(false) {}
  Scalar(float v) : value_(v), integral_(false) {}
  Scalar(int v) : value_(v), integral_(true) {}
  Scalar(int64_t v) : value_(double(v)), integral_(true) {}
  Scalar(bool v) : value_(v), integral_(true), boolean_(true) {}
  double value() const { return value_; }
  bool is_integral() const { return integral_; }
  bool is_bool() const { return boolean_; }

 private:
  double value_;
  bool integral_;
  bool boolean_ = false;
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  bool defined() const { return impl_ != nullptr; }
  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  bool same(const Tensor& o) const { return impl_ == o.impl_; }
  // A value of a graph being built (Graph::placeholder, compile()) rather than data.
  bool is_symbolic() const;

  // --- metadata ---
  DType dtype() const;
  const Shape& shape() const;
  const Shape& strides() const;
  int64_t offset() const;  // in elements
  int64_t dim() const { return int64_t(shape().size()); }
  int64_t size(int64_t d) const;  // negative d counts from the end
  int64_t numel() const { return shape().numel(); }
  bool is_contiguous() const;
  size_t nbytes() const { return size_t(numel()) * dtype_size(dtype()); }
  // True when both tensors view the same block of memory (a view and its base).
  bool shares_storage_with(const Tensor& other) const;

  // --- data access (concrete tensors) ---
  void* raw_data() const;
  template <class T> T* data() const {
    check_dtype(dtype_v<T>, "data");
    return static_cast<T*>(raw_data());
  }
  // The single element, converted to T. A symbolic tensor has no value yet: GraphError.
  template <class T> T item(SourceLoc loc = SourceLoc::current()) const;
  // All elements in row-major order.
  template <class T> std::vector<T> to_vector(SourceLoc loc = SourceLoc::current()) const;

  // --- autograd ---
  bool requires_grad() const;
  Tensor& requires_grad_(bool on = true, SourceLoc loc = SourceLoc::current());
  bool is_leaf() const;
  // Undefined when no gradient has been accumulated. (`loc`: inside a branch of cond or
  // while_loop, a compiled function may read gradients, not change them.)
  Tensor grad(SourceLoc loc = SourceLoc::current()) const;
  void set_grad(const Tensor& g, SourceLoc loc = SourceLoc::current()) const;
  void zero_grad(SourceLoc loc = SourceLoc::current()) const;  // drops the accumulated gradient
  std::string grad_fn_name() const;  // "MulBackward", or "" for leaves
  // Gradients of this tensor w.r.t. the leaves that require grad, accumulated into .grad().
  void backward(const Tensor& gradient = {}, bool retain_graph = false, bool create_graph = false,
                SourceLoc loc = SourceLoc::current()) const;
  Tensor detach() const;          // same storage, no history

  // --- conversions and copies ---
  Tensor contiguous(SourceLoc loc = SourceLoc::current()) const;
  Tensor clone(SourceLoc loc = SourceLoc::current()) const;
  Tensor to(DType t, SourceLoc loc = SourceLoc::current()) const;

  // --- views (no copy) ---
  Tensor reshape(const Shape& shape, SourceLoc loc = SourceLoc::current()) const;
  Tensor view(const Shape& shape, SourceLoc loc = SourceLoc::current()) const;
  Tensor transpose(int64_t d0, int64_t d1, SourceLoc loc = SourceLoc::current()) const;
  Tensor permute(const Shape& dims, SourceLoc loc = SourceLoc::current()) const;
  Tensor t(SourceLoc loc = SourceLoc::current()) const;  // transpose of a matrix
  Tensor squeeze(int64_t dim, SourceLoc loc = SourceLoc::current()) const;
  Tensor unsqueeze(int64_t dim, SourceLoc loc = SourceLoc::current()) const;
  Tensor expand(const Shape& shape, SourceLoc loc = SourceLoc::current()) const;
  Tensor flatten(int64_t start = 0, int64_t end = -1, SourceLoc loc = SourceLoc::current()) const;

  // --- common reductions as methods ---
  Tensor sum(SourceLoc loc = SourceLoc::current()) const;
  Tensor mean(SourceLoc loc = SourceLoc::current()) const;

  // --- in-place updates (no autograd history; for optimizers and initialisers) ---
  Tensor& copy_(const Tensor& src, SourceLoc loc = SourceLoc::current());
  Tensor& fill_(Scalar value, SourceLoc loc = SourceLoc::current());

 private:
  void check_dtype(DType expected, const char* what) const;
  // The impl, or a ValueError for an undefined (default-constructed or moved-from) tensor:
  // every accessor goes through it, so misuse is an error rather than a null dereference.
  const TensorImpl& checked() const;
  std::shared_ptr<TensorImpl> impl_;
};

std::ostream& operator<<(std::ostream& os, const Tensor& t);

// --- creation ---
// From nested initializer lists: tensor({1.f, 2.f}), tensor({{1, 2}, {3, 4}}).
template <class T> using List1 = std::initializer_list<T>;
template <class T> using List2 = std::initializer_list<List1<T>>;
template <class T> using List3 = std::initializer_list<List2<T>>;
template <class T> using List4 = std::initializer_list<List3<T>>;
Tensor from_buffer(const void* data, DType dtype, const Shape& shape);  // copies
// Wraps memory the caller keeps alive; deleter (optional) runs when the last view dies.
Tensor from_blob(void* data, DType dtype, const Shape& shape,
                 std::function<void(void*)> deleter = [](void*) {});
// A ragged list or a size mismatch is a ShapeError naming the caller's line.
template <class T> Tensor tensor(List1<T> v, SourceLoc loc = SourceLoc::current());
template <class T> Tensor tensor(List2<T> v, SourceLoc loc = SourceLoc::current());
template <class T> Tensor tensor(List3<T> v, SourceLoc loc = SourceLoc::current());
template <class T> Tensor tensor(List4<T> v, SourceLoc loc = SourceLoc::current());
template <class T>
Tensor tensor(const std::vector<T>& v, const Shape& shape, SourceLoc loc = SourceLoc::current());
template <class T> Tensor scalar_tensor(T v) { return from_buffer(&v, dtype_v<T>, {}); }
Tensor scalar_tensor(Scalar v, DType dtype);

// shape.numel() * dtype_size(dtype) with overflow checked: a ShapeError naming `op` when it
// does not fit, so no caller allocates a wrapped-around size.
size_t checked_nbytes(const Shape& shape, DType dtype, std::string_view op);

Tensor empty(const Shape& shape, DType dtype = f32);
Tensor zeros(const Shape& shape, DType dtype = f32);
Tensor ones(const Shape& shape, DType dtype = f32);
Tensor full(const Shape& shape, Scalar value, DType dtype = f32);
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
Tensor arange(double start, double end, double step = 1, DType dtype = f32);
inline Tensor arange(int64_t end, DType dtype = i64) { return arange(0, double(end), 1, dtype); }
// Random tensors from the global generator (manual_seed makes them reproducible). In a
// compiled function they draw anew on each call; the _like forms take x's shape and dtype
// (symbolic ones too, so a static Graph draws on each run).
Tensor randn(const Shape& shape, DType dtype = f32, SourceLoc loc = SourceLoc::current());
Tensor rand(const Shape& shape, DType dtype = f32, SourceLoc loc = SourceLoc::current());  // uniform in [0, 1)
Tensor randint(int64_t low, int64_t high, const Shape& shape, DType dtype = i64,
               SourceLoc loc = SourceLoc::current());
Tensor randn_like(const Tensor& x, SourceLoc loc = SourceLoc::current());
Tensor rand_like(const Tensor& x, SourceLoc loc = SourceLoc::current());
Tensor randint_like(const Tensor& x, int64_t low, int64_t high, SourceLoc loc = SourceLoc::current());
void manual_seed(uint64_t seed);

}  // namespace baton
