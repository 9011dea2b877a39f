// What a Tensor handle points to. Internal to the library: users see Tensor's methods.
#pragma once
#include <cstddef>
#include <functional>
#include <memory>

#include "baton/tensor.h"

namespace baton {

namespace trace { struct SymbolicValue; }

// A block of memory from the caching allocator (or borrowed from the user).
class Storage {
 public:
  explicit Storage(size_t nbytes);  // from the caching allocator, 64-byte aligned
  Storage(void* data, size_t nbytes, std::function<void(void*)> deleter);  // borrowed
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  ~Storage();
  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  // Bumped by every in-place write; autograd checks that saved tensors were not modified.
  uint64_t version() const { return version_; }
  void bump_version() { ++version_; }

 private:
  void* data_;
  uint64_t version_ = 0;
  size_t nbytes_;
  std::function<void(void*)> deleter_;  // empty: return to the caching allocator
};

// Autograd keeps its per-tensor state (autograd::AutogradMeta) here. Core only owns it,
// through this base, so that it needs nothing from the autograd layer; what Tensor's
// methods in core read of it (requires_grad(), grad_fn_name()) it asks through these.
struct AutogradSlot {
  virtual ~AutogradSlot() = default;
  virtual bool wants_grad() const = 0;                 // Tensor::requires_grad()
  virtual std::string history_name() const = 0;       // Tensor::grad_fn_name(): "" for a leaf
};

// The state behind a Tensor handle. Internal: use Tensor's methods.
struct TensorImpl {
  // std::make_shared puts the handle's reference counts just before this object, and every
  // copy or drop of a Tensor handle writes them. These bytes keep the fields below off
  // the counts' cache line (the counts sit at most 8 bytes before the object): a handle
  // copied on one core then does not take from another core the lines that core's
  // kernels read. A plan's run binds its feeds on the calling thread while a helper
  // thread reads them: the gap made parallel_branches_speedup 9-12% higher in A/B runs
  // (docs/PERF.md, fourteenth session).
  std::byte counts_apart_[56];
  std::shared_ptr<Storage> storage;
  int64_t offset = 0;  // in elements
  Shape shape;
  Shape strides;       // in elements
  DType dtype = DType::f32;
  std::unique_ptr<AutogradSlot> autograd;  // null until autograd needs it
  // Set for a symbolic tensor: a value of a graph being built (no storage then).
  std::shared_ptr<trace::SymbolicValue> symbolic;

  TensorImpl();
  ~TensorImpl();
  void* data() const {
    return static_cast<char*>(storage->data()) + offset * int64_t(dtype_size(dtype));
  }
};

// Tensor::requires_grad() of a symbolic tensor: whether eagerly it would have history
// (trace/ registers the answer at start-up: grad mode on and a path, through ops recorded
// with grad mode on, from a tensor the graph binds that requires grad).
void set_symbolic_requires_grad(bool (*answer)(const Tensor& t));

// A view of x's storage with another shape, strides and offset (no copy).
Tensor make_view(const Tensor& x, Shape shape, Shape strides, int64_t offset);

}  // namespace baton
