// Specializing a plan for one binding of its symbolic dims: resolve attributes, run each
// step's shape rule once on metadata, decide where every value lives, lay out the arena.
#include <algorithm>
#include <numeric>

#include "core/tensor_impl.h"
#include "runtime/plan.h"

namespace baton::runtime {
namespace {

ops::Attrs resolve(const ops::Attrs& attrs, const sym::Bindings& bindings) {
  ops::Attrs out = attrs;
  for (auto& [name, value] : attrs.items()) {
    if (auto* i = std::get_if<int64_t>(&value); i && sym::is_symbol(*i)) out.set(name, bindings.eval(*i));
    if (auto* v = std::get_if<std::vector<int64_t>>(&value)) {
      std::vector<int64_t> dims = *v;
      for (int64_t& d : dims)
        if (sym::is_symbol(d)) d = bindings.eval(d);
      out.set(name, std::move(dims));
    }
  }
  return out;
}

// A tensor with metadata and no storage: what shape rules read.
Tensor meta_tensor(const ValueInfo& v) {
  auto impl = std::make_shared<TensorImpl>();
  impl->dtype = v.dtype;
  impl->shape = v.shape;
  impl->strides = v.strides;
  return Tensor(std::move(impl));
}

ValueInfo contiguous_info(DType dtype, Shape shape, Placement placement) {
  ValueInfo v;
  v.dtype = dtype;
  v.strides = contiguous_strides(shape);
  v.shape = std::move(shape);
  v.placement = placement;
  v.bytes = checked_nbytes(v.shape, dtype, "plan");
  return v;
}

// Shape rules trusted some symbolic sizes to match (broadcasting, matmul's inner size):
// a binding where they do not would make the graph's types wrong, so check each output.
void check_declared_type(const graph::Node& n, size_t i, const ValueInfo& got, const sym::Bindings& bindings) {
  const Shape declared = n.output(i)->shape().raw();
  const Shape expected = sym::is_static(declared) ? declared : bindings.eval(declared);
  if (!(expected == got.shape))
    throw ShapeError(str("[", n.op_name(), "] produces shape ", got.shape, " where the graph says ", declared,
                         " = ", expected, " in this run; in ", describe(n)));
}

class Specializer {
 public:
  Specializer(const Plan& plan, const sym::Bindings& bindings) : plan_(plan), spec_(std::make_shared<Specialization>()) {
    spec_->bindings = bindings;
    for (int64_t s : plan.symbols) spec_->key.push_back(bindings.eval(s));
    spec_->values.resize(size_t(plan.num_slots));
    root_.resize(size_t(plan.num_slots));
    std::iota(root_.begin(), root_.end(), 0);
  }

  std::shared_ptr<const Specialization> build() {
    bind_inputs();
    for (size_t i = 0; i < plan_.steps.size(); ++i) infer_step(plan_.steps[i]);
    place_fetches();
    plan_lifetimes();
    lay_out_arena();
    return spec_;
  }

 private:
  ValueInfo& value(int slot) { return spec_->values[size_t(slot)]; }

  void bind_inputs() {
    for (auto& [v, slot] : plan_.inputs)
      value(slot) = contiguous_info(v->dtype(), spec_->bindings.eval(v->shape().raw()), Placement::Input);
    for (auto& [t, slot] : plan_.constants) value(slot) = contiguous_info(t.dtype(), t.shape(), Placement::Input);
  }

  void infer_step(const Step& step) {
    const graph::Node& n = *step.node;
    const ops::OpDef* op = n.op();
    if (!op) throw GraphError(str("no op named '", n.op_name(), "' is registered; in ", describe(n)));
    SpecializedStep s;
    s.attrs = n.attrs.holds_symbols() ? resolve(n.attrs, spec_->bindings) : n.attrs;
    std::vector<Tensor> in;
    for (int slot : step.inputs) in.push_back(meta_tensor(value(slot)));
    ops::CallContext ctx{*op, in, s.attrs, SourceLoc::current()};
    try {
      if (!step.subplans.empty()) {
        s.kind = SpecializedStep::Kind::ControlFlow;
        for (size_t i = 0; i < step.outputs.size(); ++i)
          value(step.outputs[i]) = contiguous_info(n.output(i)->dtype(), spec_->bindings.eval(n.output(i)->shape().raw()),
                                                   Placement::Fresh);
      } else if (op->view_rule) {
        s.kind = SpecializedStep::Kind::View;
        Tensor v = op->view_rule(ctx);
        ValueInfo& out = value(step.outputs[0]);
        out = ValueInfo{v.dtype(), v.shape(), v.strides(), Placement::View, 0, 0};
        root_[size_t(step.outputs[0])] = root_[size_t(step.inputs[0])];
      } else {
        s.kind = SpecializedStep::Kind::Kernel;
        std::vector<ops::TensorMeta> metas = op->infer_outputs(ctx);
        for (size_t i = 0; i < metas.size(); ++i)
          value(step.outputs[i]) = contiguous_info(metas[i].dtype, metas[i].shape, Placement::Arena);
      }
    } catch (const Error& e) {
      rethrow_with_node(e, n);
    }
    for (size_t i = 0; i < step.outputs.size(); ++i) check_declared_type(n, i, value(step.outputs[i]), spec_->bindings);
    spec_->steps.push_back(std::move(s));
  }

  // Fetched values go back to the caller, so they get buffers of their own, and so does
  // the value a fetched view aliases.
  void place_fetches() {
    for (int f : plan_.fetches) {
      ValueInfo& base = value(root_[size_t(f)]);
      if (base.placement == Placement::Arena) base.placement = Placement::Fresh;
    }
  }

  // Liveness of arena buffers (a value and the views of it), with in-place reuse: an
  // elementwise step whose input dies there writes its output over that input.
  void plan_lifetimes() {
    const int n = plan_.num_slots;
    std::vector<int> last(size_t(n), -1);
    for (size_t i = 0; i < plan_.steps.size(); ++i) {
      for (int s : plan_.steps[i].inputs) last[size_t(root_[size_t(s)])] = std::max(last[size_t(root_[size_t(s)])], int(i));
      for (int s : plan_.steps[i].outputs) last[size_t(s)] = std::max(last[size_t(s)], int(i));
    }
    buffer_of_.assign(size_t(n), -1);
    for (size_t i = 0; i < plan_.steps.size(); ++i) {
      const Step& step = plan_.steps[i];
      for (int o : step.outputs) {
        if (value(o).placement != Placement::Arena) continue;
        int reuse = in_place_candidate(step, int(i), o, last);
        if (reuse >= 0) {
          buffer_of_[size_t(o)] = buffer_of_[size_t(reuse)];
          buffers_[size_t(buffer_of_[size_t(o)])].last = last[size_t(o)];
        } else {
          buffer_of_[size_t(o)] = int(buffers_.size());
          buffers_.push_back({value(o).bytes, int(i), last[size_t(o)]});
        }
      }
    }
    // Release lists: values with their own per-run handle, after their last reader.
    for (int s = 0; s < n; ++s) {
      const Placement p = value(s).placement;
      if ((p != Placement::Fresh && p != Placement::View) || last[size_t(root_[size_t(s)])] < 0) continue;
      if (std::find(plan_.fetches.begin(), plan_.fetches.end(), s) != plan_.fetches.end()) continue;
      int reader = -1;
      for (size_t i = 0; i < plan_.steps.size(); ++i)
        for (int in : plan_.steps[i].inputs)
          if (in == s) reader = int(i);
      for (size_t i = 0; i < plan_.steps.size(); ++i)
        for (int out : plan_.steps[i].outputs)
          if (out == s) reader = std::max(reader, int(i));
      if (reader >= 0) spec_->steps[size_t(reader)].release.push_back(s);
    }
  }

  // The input of `step` whose arena buffer its output `o` may take, or -1.
  int in_place_candidate(const Step& step, int index, int o, const std::vector<int>& last) {
    const ops::OpDef& op = *step.node->op();
    const bool pointwise = op.fusion_kind == ops::Fusion::Elementwise || op.fusion_kind == ops::Fusion::Broadcast;
    if (!pointwise || !op.mutated_inputs.empty() || step.outputs.size() != 1) return -1;
    for (int s : step.inputs) {
      const ValueInfo& in = value(s);
      const bool own_buffer = in.placement == Placement::Arena && root_[size_t(s)] == s;
      if (own_buffer && last[size_t(s)] == index && buffers_[size_t(buffer_of_[size_t(s)])].last == index &&
          in.dtype == value(o).dtype && in.shape == value(o).shape)
        return s;
    }
    return -1;
  }

  void lay_out_arena() {
    spec_->arena = plan_arena(buffers_);
    // Without a plan every intermediate would have a buffer of its own, in-place ones too.
    spec_->arena.naive_bytes = 0;
    for (const ValueInfo& v : spec_->values)
      if (v.placement == Placement::Arena) spec_->arena.naive_bytes += align_up(v.bytes);
    for (int s = 0; s < plan_.num_slots; ++s)
      if (value(s).placement == Placement::Arena) value(s).offset = spec_->arena.offsets[size_t(buffer_of_[size_t(s)])];
  }

  const Plan& plan_;
  std::shared_ptr<Specialization> spec_;
  std::vector<int> root_;       // per slot: the slot whose buffer it uses (itself unless a view)
  std::vector<int> buffer_of_;  // per arena slot: its buffer
  std::vector<Lifetime> buffers_;
};

}  // namespace

std::shared_ptr<const Specialization> build_specialization(const Plan& plan, const sym::Bindings& bindings) {
  return Specializer(plan, bindings).build();
}

}  // namespace baton::runtime
