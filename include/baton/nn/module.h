// nn::Module: a tree of modules holding named parameters and buffers.
//
//   struct Net : nn::Module {
//     std::shared_ptr<nn::Linear> fc = register_module("fc", std::make_shared<nn::Linear>(4, 2));
//     Tensor forward(const Tensor& x) override { return relu(fc->forward(x)); }
//   };
//
// Parameters are registered by address: the module keeps a pointer to the member
// tensor, so to(dtype) and load_state_dict update what forward() uses. Modules are
// therefore neither copyable nor movable; hold them through std::shared_ptr.
#pragma once
#include <atomic>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "baton/tensor.h"

namespace baton::trace {
class WatchedSlots;
}

namespace baton::nn {

// Named tensors in registration order (parameters, then buffers, depth first).
using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

class Module {
 public:
  Module();
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;
  virtual ~Module();

  virtual Tensor forward(const Tensor& x) = 0;
  Tensor operator()(const Tensor& x) { return forward(x); }
  // A short description for printing, e.g. "Linear(in=784, out=512)".
  virtual std::string describe() const;

  std::vector<Tensor> parameters() const;
  NamedTensors named_parameters() const;
  NamedTensors named_buffers() const;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_children() const {
    return children_;
  }

  void train(bool on = true);
  void eval() { train(false); }
  // Read while compile() traces, the flag becomes a condition of the plan: a call after
  // train()/eval() changed it traces again (docs/graph-mode.md, "Guards").
  bool is_training() const;
  void zero_grad(SourceLoc loc = SourceLoc::current());

  // Parameters and buffers by dotted name ("layer1.0.conv1.weight").
  NamedTensors state_dict() const;
  // Copies values in. strict: missing or unexpected names are errors; a shape or dtype
  // mismatch always is. Every problem is listed in one ValueError.
  void load_state_dict(const NamedTensors& state, bool strict = true);
  // The checks of load_state_dict without loading: throws its ValueError, changes nothing.
  void check_state_dict(const NamedTensors& state, bool strict = true) const;
  // Converts every floating parameter and buffer to dtype (keeps requires_grad).
  void to(DType dtype);

 protected:
  // Registers *slot (a member of the derived module) under name and returns t. A compiled
  // plan that read the slot's tensor serves a call only while the slot holds it.
  Tensor& register_parameter(const std::string& name, Tensor& slot, Tensor t);
  Tensor& register_buffer(const std::string& name, Tensor& slot, Tensor t);
  template <class M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> m) {
    children_.emplace_back(name, m);
    return m;
  }

 private:
  void collect(const std::string& prefix, bool params, bool buffers, NamedTensors& out) const;
  std::vector<std::pair<std::string, Tensor*>> params_, buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  // Shared with the guards of compiled plans that read it, which may outlive the module.
  std::shared_ptr<std::atomic<bool>> training_ = std::make_shared<std::atomic<bool>>(true);
  // The slots of params_ and buffers_, as compile()'s guards see them.
  std::shared_ptr<trace::WatchedSlots> watched_;
};

// Prints the module tree, one module per line, indented like PyTorch.
std::ostream& operator<<(std::ostream& os, const Module& m);

}  // namespace baton::nn
