// Specializing a plan for one binding of its symbolic dims: resolve attributes, run each
// step's shape rule once on metadata, decide where every value lives, lay out the arena.
#include <algorithm>
#include <map>
#include <numeric>
#include <optional>
#include <unordered_map>
#include <utility>

#include "baton/memory.h"
#include "baton/runtime.h"
#include "core/tensor_impl.h"
#include "kernels/cpu/layout.h"
#include "passes/analysis.h"
#include "runtime/ordering_edges.h"
#include "runtime/plan.h"
#include "runtime/step_assignment.h"

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
  Specializer(const Plan& plan, const sym::Bindings& bindings, bool side_by_side, const Specialization* before)
      : plan_(plan),
        spec_(std::make_shared<Specialization>()),
        side_by_side_(side_by_side && !plan.staged),
        before_(before),
        begin_(before ? before->end : 0) {
    spec_->bindings = bindings;
    spec_->key = specialization_key(plan, bindings, begin_);
    spec_->begin = begin_;
    spec_->steps.resize(plan.steps.size());
    spec_->values.resize(size_t(plan.num_slots));
    producer_.assign(size_t(plan.num_slots), -1);
    for (size_t i = 0; i < plan.steps.size(); ++i)
      for (int o : plan.steps[i].outputs) producer_[size_t(o)] = int(i);
    root_.resize(size_t(plan.num_slots));
    std::iota(root_.begin(), root_.end(), 0);
  }

  std::shared_ptr<Specialization> build() {
    bind_inputs();
    bind_earlier_stages();
    end_ = begin_;
    while (end_ < plan_.steps.size()) {
      const size_t i = end_++;
      infer_step(i);
      if (spec_->steps[i].kind == SpecializedStep::Kind::Sized) break;  // the stage ends
    }
    spec_->end = end_;
    hand_on();
    place_fetches();
    check_memory_limit();
    if (plan_.plan_layouts) choose_layouts();
    prepare_kernels();
    if (side_by_side_ && plan_.inter_op_threads > 1) order_steps();
    plan_lifetimes();
    lay_out_arena();
    if (parallel_) finish_schedule();
    spec_->root = root_;
    note_fresh_outputs();
    return spec_;
  }

 private:
  ValueInfo& value(int slot) { return spec_->values[size_t(slot)]; }
  const ValueInfo& value(int slot) const { return spec_->values[size_t(slot)]; }

  void bind_inputs() {
    for (auto& [v, slot] : plan_.inputs)
      value(slot) = contiguous_info(v->dtype(), spec_->bindings.eval(v->shape().raw()), Placement::Input);
    for (auto& [t, slot] : plan_.constants) value(slot) = contiguous_info(t.dtype(), t.shape(), Placement::Input);
  }

  // Which steps' runs allocate an output (SpecializedStep::fresh_outputs).
  void note_fresh_outputs() {
    for (size_t i = begin_; i < end_; ++i)
      for (int o : plan_.steps[i].outputs) spec_->steps[i].fresh_outputs |= value(o).placement == Placement::Fresh;
  }

  // Slots that steps before this stage computed: bound per run to what they handed on
  // (Specialization::handed_on), as the earlier stage laid them out. The outputs of the
  // step that ended it are sized now that the run bound their symbols.
  void bind_earlier_stages() {
    for (size_t i = 0; i < begin_; ++i) {
      const Step& step = plan_.steps[i];
      for (size_t k = 0; k < step.outputs.size(); ++k) {
        ValueInfo v = before_->values[size_t(step.outputs[k])];
        if (i + 1 == begin_) {
          const graph::Value& out = *step.node->output(k);
          v = contiguous_info(out.dtype(), spec_->bindings.eval(out.shape().raw()), Placement::Input);
        }
        v.placement = Placement::Input;
        value(step.outputs[k]) = v;
      }
    }
  }

  // A step sized by its values runs on outputs its infer rule sizes from the values, and
  // ends the stage: the steps after it wait for the run to bind its outputs' symbols.
  void infer_sized_step(const Step& step, SpecializedStep& s) {
    s.kind = SpecializedStep::Kind::Sized;
    s.attrs = step.node->attrs;  // its symbols are bound by its run
    for (size_t k = 0; k < step.outputs.size(); ++k) {
      ValueInfo& v = value(step.outputs[k]);
      v = ValueInfo{};
      v.dtype = step.node->output(k)->dtype();
      v.placement = Placement::Fresh;
    }
  }

  // A value larger than set_memory_limit allows can never be made: say so before any kernel
  // is prepared (oneDNN may allocate gigabytes of its own for a huge convolution's primitive).
  void check_memory_limit() {
    const size_t cap = memory_limit();
    if (cap == 0) return;
    for (size_t i = begin_; i < end_; ++i)
      for (int slot : plan_.steps[i].outputs) {
        const ValueInfo& v = value(slot);
        double bytes = double(dtype_size(v.dtype));
        for (int64_t d : v.shape) bytes *= double(d);
        if (bytes <= double(cap)) continue;
        const graph::Node& n = *plan_.steps[i].node;
        rethrow_with_node(OutOfMemoryError(n.op_name(), str("its output ", v.dtype, v.shape, " needs ", bytes,
                                                            " bytes, more than the ", cap, " set_memory_limit allows"),
                                           SourceLoc::current()),
                          n);
      }
  }

  void infer_step(size_t index) {
    const Step& step = plan_.steps[index];
    const graph::Node& n = *step.node;
    const ops::OpDef* op = n.op();
    if (!op) throw GraphError(str("no op named '", n.op_name(), "' is registered; in ", describe(n)));
    SpecializedStep& s = spec_->steps[index];
    s.op = op;
    if (op->sized_by_values) return infer_sized_step(step, s);
    s.attrs = n.attrs.holds_symbols() ? resolve(n.attrs, spec_->bindings) : n.attrs;
    std::vector<Tensor> in = metas(step.inputs);
    ops::CallContext ctx{*op, in, s.attrs, SourceLoc::current()};
    try {
      if (op->make_params) {
        auto storage = std::make_shared<ops::ParamsStorage>();
        ctx.made_params = op->make_params(ctx, *storage);
        s.params = std::move(storage);
      }
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
        // String elements are objects with a life of their own, not bytes an arena can lend.
        for (size_t i = 0; i < metas.size(); ++i)
          value(step.outputs[i]) = contiguous_info(metas[i].dtype, metas[i].shape,
                                                   metas[i].dtype == DType::string ? Placement::Fresh : Placement::Arena);
      }
    } catch (const Error& e) {
      rethrow_with_node(e, n);
    }
    for (size_t i = 0; i < step.outputs.size(); ++i) check_declared_type(n, i, value(step.outputs[i]), spec_->bindings);
  }

  // Fetched values go back to the caller, so they get buffers of their own, and so does
  // the value a fetched view aliases; so do values a later stage reads.
  void place_fetches() {
    auto own_buffer = [&](int slot) {
      ValueInfo& base = value(root_[size_t(slot)]);
      if (base.placement == Placement::Arena) base.placement = Placement::Fresh;
    };
    for (int f : plan_.fetches) own_buffer(f);
    for (int s : spec_->handed_on) own_buffer(s);
  }

  // Whether a step before this stage's end computes `slot` (not a graph input or constant).
  bool computed_before_end(int slot) const { return producer_[size_t(slot)] >= 0 && size_t(producer_[size_t(slot)]) < end_; }

  // The slots a run of a stage that is not the last hands on (Specialization::handed_on).
  void hand_on() {
    if (end_ == plan_.steps.size()) return;
    std::vector<char> wanted(size_t(plan_.num_slots), 0);
    for (int f : plan_.fetches) wanted[size_t(f)] = 1;
    for (size_t i = end_; i < plan_.steps.size(); ++i)
      for (int in : plan_.steps[i].inputs) wanted[size_t(in)] = 1;
    for (int s = 0; s < plan_.num_slots; ++s)
      if (wanted[size_t(s)] && computed_before_end(s)) spec_->handed_on.push_back(s);
  }

  // --- the order steps must keep when they run side by side ---

  // The storages a slot may use: its root, and for the results of control flow (which may
  // hand back one of their operands) the roots of the step's operands too.
  std::vector<int> storages_of(int slot) const {
    const int r = root_[size_t(slot)];
    std::vector<int> out{r};
    if (auto it = may_alias_.find(r); it != may_alias_.end()) out.insert(out.end(), it->second.begin(), it->second.end());
    return out;
  }

  // Edges that keep what a run computes the same as in plan order (runtime/ordering_edges.h)
  // over the storages of slots, views and control flow's aliasing included; a step waits
  // for the steps whose outputs it reads; control flow is a barrier.
  void order_steps() {
    const size_t n = plan_.steps.size();
    preds_.assign(n, {});
    std::vector<int> producer(size_t(plan_.num_slots), -1);
    std::vector<char> has_successor(n, 0);
    int barrier = -1;
    auto wait_for = [&](size_t i, int p) {
      if (p < 0 || size_t(p) == i) return;
      preds_[i].push_back(p);
      has_successor[size_t(p)] = 1;
    };
    OrderingEdges<int> edges(wait_for);
    for (size_t i = 0; i < n; ++i) {
      const Step& step = plan_.steps[i];
      const ops::OpDef& op = *step.node->op();
      const bool control_flow = !step.subplans.empty();
      wait_for(i, barrier);
      if (control_flow)
        for (size_t j = size_t(barrier + 1); j < i; ++j)
          if (!has_successor[j]) wait_for(i, int(j));
      if (passes::is_random(*step.node)) edges.draws_random(i);
      for (int s : step.inputs) {
        wait_for(i, producer[size_t(s)]);
        for (int r : storages_of(s)) edges.reads(i, r);
      }
      for (int m : op.mutated_inputs) {
        if (size_t(m) >= step.inputs.size()) continue;  // an optional trailing input
        for (int r : storages_of(step.inputs[size_t(m)])) {
          edges.writes_in_place(i, r);
          if (value(r).placement == Placement::Input) written_inputs_.push_back(r);
        }
      }
      for (int o : step.outputs) {
        producer[size_t(o)] = int(i);
        if (root_[size_t(o)] == o) edges.makes(i, o);
        if (control_flow)
          for (int s : step.inputs)
            for (int r : storages_of(s)) may_alias_[o].push_back(r);
      }
      if (control_flow) barrier = int(i);
    }
    stage_ = StepGraph::from_preds(preds_).stage;
    std::vector<int> width(n + 1, 0);
    for (int st : stage_)
      if (++width[size_t(st)] > 1) parallel_ = true;  // some steps can run side by side
    if (!parallel_) return;
    accessors_.assign(size_t(plan_.num_slots), {});
    for (size_t i = 0; i < n; ++i) {
      for (int s : plan_.steps[i].inputs) note_access(root_[size_t(s)], int(i));
      for (int s : plan_.steps[i].outputs) note_access(root_[size_t(s)], int(i));
    }
  }

  void note_access(int root, int step) {
    std::vector<int>& a = accessors_[size_t(root)];
    if (a.empty() || a.back() != step) a.push_back(step);
  }

  // When a value's lifetime starts and ends: the step's index in plan order, or with
  // steps side by side, its stage (every step of a stage may run at the same time).
  int time_of(size_t step) const { return parallel_ ? stage_[step] : int(step); }

  // Liveness of arena buffers (a value and the views of it), with in-place reuse: an
  // elementwise step whose input dies there writes its output over that input.
  void plan_lifetimes() {
    const int n = plan_.num_slots;
    std::vector<int> last(size_t(n), -1);
    for (size_t i = begin_; i < end_; ++i) {
      const int t = time_of(i);
      for (int s : plan_.steps[i].inputs) last[size_t(root_[size_t(s)])] = std::max(last[size_t(root_[size_t(s)])], t);
      for (int s : plan_.steps[i].outputs) last[size_t(s)] = std::max(last[size_t(s)], t);
    }
    buffer_of_.assign(size_t(n), -1);
    for (size_t i = begin_; i < end_; ++i) {
      const Step& step = plan_.steps[i];
      for (int o : step.outputs) {
        if (value(o).placement != Placement::Arena) continue;
        int reuse = in_place_candidate(step, i, o, last);
        if (reuse >= 0) {
          buffer_of_[size_t(o)] = buffer_of_[size_t(reuse)];
          buffers_[size_t(buffer_of_[size_t(o)])].last = last[size_t(o)];
        } else {
          buffer_of_[size_t(o)] = int(buffers_.size());
          buffers_.push_back({value(o).bytes, time_of(i), last[size_t(o)]});
        }
      }
    }
    if (!parallel_) {
      plan_scratch();
      plan_releases(last);
    }
  }

  // A step's scratchpad is an arena buffer alive during that step alone. (With steps side
  // by side their kernels allocate their own: the bytes a stage shares would need ordering.)
  void plan_scratch() {
    for (size_t i = begin_; i < end_; ++i) {
      const size_t bytes = spec_->steps[i].prepared.scratch_bytes;
      if (bytes == 0 || spec_->steps[i].kind != SpecializedStep::Kind::Kernel) continue;
      scratch_buffer_.emplace_back(i, buffers_.size());
      buffers_.push_back({bytes, time_of(i), time_of(i)});
    }
  }

  // Release lists: values with their own per-run handle, after the last step that reads
  // or writes that very slot.
  void plan_releases(const std::vector<int>& last) {
    std::vector<int> last_touch(size_t(plan_.num_slots), -1);
    for (size_t i = begin_; i < end_; ++i) {
      for (int in : plan_.steps[i].inputs) last_touch[size_t(in)] = int(i);
      for (int out : plan_.steps[i].outputs) last_touch[size_t(out)] = std::max(last_touch[size_t(out)], int(i));
    }
    for (int s = 0; s < plan_.num_slots; ++s) {
      const Placement p = value(s).placement;
      if ((p != Placement::Fresh && p != Placement::View) || last[size_t(root_[size_t(s)])] < 0) continue;
      if (std::find(plan_.fetches.begin(), plan_.fetches.end(), s) != plan_.fetches.end()) continue;
      const std::vector<int>& handed_on = spec_->handed_on;
      if (std::find(handed_on.begin(), handed_on.end(), s) != handed_on.end()) continue;
      if (last_touch[size_t(s)] >= 0) spec_->steps[size_t(last_touch[size_t(s)])].release.push_back(s);
    }
  }


  // Layout planning. Where oneDNN's convolutions want channel-blocked activations
  // (nChw8c with AVX2: kernels::onednn::preferred_channel_block()), an f32 rank-4 value
  // whose channels fill whole blocks (or a pooling's i32 window offsets) is stored so when
  // its producer writes it and every step reading it reads it (OpDef::channel_blocked:
  // convolutions, poolings and their backward ops), so that a chain of them, forward and
  // backward, reorders nothing. Its tensors keep plain strides; only those steps' prepared
  // kernels, told by CallContext::channel_blocks, read it.
  //
  // Otherwise an f32 rank-4 value is stored channels-last (NHWC) when every step reading it
  // takes that layout (OpDef::channels_last_inputs, or an element-wise kernel that follows
  // its inputs' layout) and its producer writes it: a convolution or pooling
  // (OpDef::channels_last_output, and then its other rank-4 outputs of any dtype too), or
  // an element-wise op whose inputs of its shape are all channels-last (relu_backward
  // between poolings and convolutions in a training step).
  // Chains of convolutions, poolings and their backward ops then reorder only at their
  // edges; values that views, other ops or the caller read stay plain.
  void choose_layouts() {
    if (const int64_t block = kernels::onednn::preferred_channel_block(); block > 0) choose_blocked(block);
    std::vector<char> readers_take_it = readers_accepting([&](const ops::OpDef& op, int k, size_t i) {
      return is(i, SpecializedStep::Kind::Kernel) && (op.keeps_layout || lists(op.channels_last_inputs, k));
    });
    std::vector<char> last(size_t(plan_.num_slots), 0);
    for (size_t i = begin_; i < end_; ++i) {
      const Step& step = plan_.steps[i];
      const ops::OpDef& op = *step.node->op();
      if (spec_->steps[i].kind != SpecializedStep::Kind::Kernel || step.outputs.empty()) continue;
      const int o = step.outputs[0];
      ValueInfo& v = value(o);
      if (v.placement != Placement::Arena || v.dtype != DType::f32 || v.shape.size() != 4 || !readers_take_it[size_t(o)] ||
          v.channel_block)
        continue;
      if (op.channels_last_output || (op.keeps_layout && inputs_in_layout(step, v.shape, last))) {
        v.strides = channels_last_strides(v.shape);
        last[size_t(o)] = 1;
        if (op.channels_last_output) follow_first_output(step, readers_take_it);
      }
    }
    choose_column_major();
  }

  // Rank-2 layout planning. A matrix product's f32 output is stored column-major where its
  // kernel writes it clearly faster so (OpDef::prefers_column_major, measured: a layer's
  // [batch, features] activations when the features outnumber the batch) and every step
  // reading it reads that layout at speed (OpDef::column_major_inputs: products, a
  // transposing view, a bias gradient's sum; or an element-wise kernel, whose output then
  // follows: relu's backward). The views of such values are made again from it. Where a
  // view further down cannot be made from the new layout (a column sliced out of the
  // transpose of a column-major product and viewed as a vector: no longer contiguous), the
  // value it comes from stays row-major and the choice starts again.
  void choose_column_major() {
    std::vector<Shape> strides_before;
    for (const ValueInfo& v : spec_->values) strides_before.push_back(v.strides);
    std::vector<char> refused(size_t(plan_.num_slots), 0);
    while (const std::optional<int> root = try_column_major(refused)) {
      for (size_t slot = 0; slot < strides_before.size(); ++slot) spec_->values[slot].strides = strides_before[slot];
      refused[size_t(*root)] = 1;
    }
  }

  // choose_column_major's choice, no value `refused` marks made column-major; the
  // column-major value a view that cannot be made again comes from, else nullopt.
  std::optional<int> try_column_major(const std::vector<char>& refused) {
    const std::vector<char> readers_take_it = readers_accepting([&](const ops::OpDef& op, int k, size_t i) {
      if (is(i, SpecializedStep::Kind::Kernel)) return op.keeps_layout || lists(op.column_major_inputs, k);
      return is(i, SpecializedStep::Kind::View) && lists(op.column_major_inputs, k) && transposes(plan_.steps[i], i);
    });
    std::vector<char> column(size_t(plan_.num_slots), 0);
    for (size_t i = begin_; i < end_; ++i) {
      const Step& step = plan_.steps[i];
      const SpecializedStep& s = spec_->steps[i];
      const ops::OpDef& op = *step.node->op();
      if (s.kind == SpecializedStep::Kind::View) {
        if (!remake_view(step, s)) return column_major_source(step, column);
        continue;
      }
      if (s.kind != SpecializedStep::Kind::Kernel || step.outputs.empty()) continue;
      const int o = step.outputs[0];
      ValueInfo& v = value(o);
      if (v.placement != Placement::Arena || v.dtype != DType::f32 || v.shape.size() != 2 ||
          !readers_take_it[size_t(o)] || refused[size_t(o)])
        continue;
      if ((op.keeps_layout && inputs_in_layout(step, v.shape, column)) ||
          (op.prefers_column_major && (meets_column_major(o, column) || prefers_column_major(step, s)))) {
        v.strides = {1, v.shape[0]};
        column[size_t(o)] = 1;
      }
    }
    return std::nullopt;
  }

  // The column-major value the view `step` reads, through the views before it. (Its
  // view was made in the graph's own layouts, so one of them is.)
  int column_major_source(const Step& step, const std::vector<char>& column) const {
    int slot = step.inputs[0];
    while (!column[size_t(slot)]) {
      const int p = producer_[size_t(slot)];
      if (p < 0 || !is(size_t(p), SpecializedStep::Kind::View))  // not expected: the graph's own layouts allowed it
        throw GraphError(str("[", step.node->op_name(), "] cannot view its input as planned; in ", describe(*step.node)));
      slot = plan_.steps[size_t(p)].inputs[0];
    }
    return slot;
  }

  // Whether an element-wise step reads `slot` beside a column-major value of its shape
  // (relu's backward: a gradient beside the activation). Its product then writes it
  // column-major too, whatever that costs the product: an element-wise loop over mixed
  // layouts walks one of them across its rows.
  bool meets_column_major(int slot, const std::vector<char>& column) const {
    for (size_t i = begin_; i < end_; ++i) {
      const Step& step = plan_.steps[i];
      if (!step.node->op()->keeps_layout || std::find(step.inputs.begin(), step.inputs.end(), slot) == step.inputs.end())
        continue;
      for (int in : step.inputs)
        if (column[size_t(in)] && value(in).shape == value(slot).shape) return true;
    }
    return false;
  }

  // Whether a view step over a column-major matrix shows it row-major (a transpose): its
  // readers then need no say in the layout.
  bool transposes(const Step& step, size_t index) const {
    if (step.inputs.size() != 1 || value(step.inputs[0]).shape.size() != 2) return false;
    ValueInfo column = value(step.inputs[0]);
    column.strides = {1, column.shape[0]};
    const SpecializedStep& s = spec_->steps[index];
    const std::vector<Tensor> in{meta_tensor(column)};
    return s.op->view_rule(context(s, in)).is_contiguous();
  }

  bool prefers_column_major(const Step& step, const SpecializedStep& s) {
    const std::vector<Tensor> in = metas(step.inputs), out = metas(step.outputs);
    try {
      return s.op->prefers_column_major(context(s, in), out);
    } catch (const Error& e) {
      rethrow_with_node(e, *step.node);
    }
  }

  // A view step's output made again from its input's layout as planned now; false where
  // that layout does not allow it.
  bool remake_view(const Step& step, const SpecializedStep& s) {
    const std::vector<Tensor> in = metas(step.inputs);
    try {
      value(step.outputs[0]).strides = s.op->view_rule(context(s, in)).strides();
    } catch (const Error&) {
      return false;
    }
    return true;
  }

  // What a step's op reads of its inputs `in` (which must outlive it) before its kernel is
  // prepared: their metadata, its attributes and parameters.
  static ops::CallContext context(const SpecializedStep& s, const std::vector<Tensor>& in) {
    return ops::CallContext{*s.op, in, s.attrs, SourceLoc::current(), {}, {}, s.made_params()};
  }

  // The metadata of these slots' values as planned so far.
  std::vector<Tensor> metas(const std::vector<int>& slots) const {
    std::vector<Tensor> out;
    for (int slot : slots) out.push_back(meta_tensor(value(slot)));
    return out;
  }

  bool is(size_t step, SpecializedStep::Kind kind) const { return spec_->steps[step].kind == kind; }
  static bool lists(const std::vector<int>& operands, int k) {
    return std::find(operands.begin(), operands.end(), k) != operands.end();
  }

  // Per slot: whether every step reading it is a step i of this stage for which
  // accepts(op, k, i) holds of the operand k it is read as.
  template <class Accepts>
  std::vector<char> readers_accepting(Accepts accepts) const {
    std::vector<char> ok(size_t(plan_.num_slots), 1);
    for (size_t i = 0; i < plan_.steps.size(); ++i) {
      const Step& step = plan_.steps[i];
      const bool in_stage = i >= begin_ && i < end_;
      for (size_t k = 0; k < step.inputs.size(); ++k)
        if (!in_stage || !accepts(*step.node->op(), int(k), i)) ok[size_t(step.inputs[k])] = 0;
    }
    return ok;
  }

  void choose_blocked(int64_t block) {
    const std::vector<char> readers_take_it = readers_accepting([&](const ops::OpDef& op, int k, size_t i) {
      return is(i, SpecializedStep::Kind::Kernel) && lists(op.blocked_inputs, k);
    });
    for (size_t i = begin_; i < end_; ++i) {
      const Step& step = plan_.steps[i];
      if (spec_->steps[i].kind != SpecializedStep::Kind::Kernel) continue;
      for (int j : step.node->op()->blocked_outputs) {
        // Activations (f32) and what a pooling keeps beside them (i32 window offsets).
        ValueInfo& v = value(step.outputs[size_t(j)]);
        if (v.placement == Placement::Arena && (v.dtype == DType::f32 || v.dtype == DType::i32) &&
            v.shape.size() == 4 && v.shape[1] % block == 0 && v.numel() > 0 &&
            readers_take_it[size_t(step.outputs[size_t(j)])])
          v.channel_block = block;
      }
    }
  }

  // The other rank-4 outputs of a step whose first output is channels-last (max pooling's
  // window offsets) take that layout too where their readers do.
  void follow_first_output(const Step& step, const std::vector<char>& readers_take_it) {
    for (size_t j = 1; j < step.outputs.size(); ++j) {
      ValueInfo& v = value(step.outputs[j]);
      if (v.placement == Placement::Arena && v.shape.size() == 4 && readers_take_it[size_t(step.outputs[j])])
        v.strides = channels_last_strides(v.shape);
    }
  }

  // Whether the inputs of `step` of this shape are all in the layout `chosen` marks, and
  // there is one.
  bool inputs_in_layout(const Step& step, const Shape& shape, const std::vector<char>& chosen) {
    bool any = false;
    for (int in : step.inputs) {
      // Other shapes (a broadcast bias) are read through their strides either way.
      if (!(value(in).shape == shape)) continue;
      if (!chosen[size_t(in)]) return false;
      any = true;
    }
    return any;
  }

  // Once the layouts are known, each op with a prepare hook does its per-plan work (oneDNN
  // primitives and reorders) here rather than on every run.
  void prepare_kernels() {
    for (size_t i = begin_; i < end_; ++i) {
      const Step& step = plan_.steps[i];
      SpecializedStep& s = spec_->steps[i];
      const ops::OpDef& op = *step.node->op();
      if (!op.prepare || s.kind != SpecializedStep::Kind::Kernel) continue;
      std::vector<Tensor> in = metas(step.inputs), out = metas(step.outputs), constants;
      std::vector<int64_t> blocks;
      for (int slot : step.inputs) blocks.push_back(value(slot).channel_block);
      for (int slot : step.outputs) blocks.push_back(value(slot).channel_block);
      for (int slot : step.inputs) constants.push_back(constant_value(slot));
      try {
        s.prepared = op.prepare(
            ops::CallContext{op, in, s.attrs, SourceLoc::current(), blocks, constants, s.made_params()}, out);
      } catch (const Error& e) {
        rethrow_with_node(e, *step.node);
      }
      // Without its state the kernel would read blocked bytes as plain ones.
      if (!s.prepared.state && std::any_of(blocks.begin(), blocks.end(), [](int64_t b) { return b > 0; }))
        throw GraphError(str("[", step.node->op_name(), "] could not prepare its kernel for channel-blocked values; in ",
                             describe(*step.node)));
    }
    note_adopted_constants();
  }

  // The plan's constant in `slot` (its value, made again once if released), or an
  // undefined tensor for other slots.
  Tensor constant_value(int slot) {
    for (auto& [t, s] : plan_.constants) {
      if (s != slot) continue;
      if (t.impl()->storage) return t;
      auto it = remade_.find(slot);
      if (it == remade_.end()) it = remade_.emplace(slot, plan_.constant_value(slot)).first;
      return it->second;
    }
    return {};
  }

  // Constants every reader adopted (PreparedKernel::adopted) and nothing fetches: their
  // runs need no data from them (Specialization::adopted_constants).
  void note_adopted_constants() {
    for (auto& [t, slot] : plan_.constants) {
      bool all_adopted = std::find(plan_.fetches.begin(), plan_.fetches.end(), slot) == plan_.fetches.end();
      std::function<Tensor()> value;
      for (size_t i = 0; i < plan_.steps.size() && all_adopted; ++i) {
        const Step& step = plan_.steps[i];
        for (size_t k = 0; k < step.inputs.size(); ++k) {
          if (step.inputs[k] != slot) continue;
          const auto& adopted = spec_->steps[i].prepared.adopted;
          auto it = std::find_if(adopted.begin(), adopted.end(), [&](auto& a) { return a.input == int(k); });
          if (it == adopted.end()) all_adopted = false;
          else if (!value) value = it->value;
        }
      }
      if (value && all_adopted) spec_->adopted_constants.emplace_back(slot, std::move(value));
      // Released by the first specialization, read as data by a step of this one (whose
      // kernel packed nothing): its runs bind the value made again.
      else if (auto it = remade_.find(slot); it != remade_.end()) spec_->bound_constants.emplace_back(it->second, slot);
    }
  }

  // The input of `step` whose arena buffer its output `o` may take, or -1: any input of an
  // element-wise op (or of one whose first output is: OpDef::pointwise_first_output), or
  // the one the op names (OpDef::output_may_overwrite).
  int in_place_candidate(const Step& step, size_t index, int o, const std::vector<int>& last) {
    const ops::OpDef& op = *step.node->op();
    const bool pointwise = op.pointwise_first_output || ((op.fusion_kind == ops::Fusion::Elementwise ||
                                                           op.fusion_kind == ops::Fusion::Broadcast) &&
                                                          step.outputs.size() == 1);
    if (!op.mutated_inputs.empty() || o != step.outputs[0]) return -1;
    if (!pointwise && (op.output_may_overwrite < 0 || size_t(op.output_may_overwrite) >= step.inputs.size())) return -1;
    const int t = time_of(index);
    for (size_t k = 0; k < step.inputs.size(); ++k) {
      if (!pointwise && int(k) != op.output_may_overwrite) continue;
      const int s = step.inputs[k];
      const ValueInfo& in = value(s);
      const bool own_buffer = in.placement == Placement::Arena && root_[size_t(s)] == s;
      if (own_buffer && last[size_t(s)] == t && buffers_[size_t(buffer_of_[size_t(s)])].last == t &&
          in.dtype == value(o).dtype && in.shape == value(o).shape && in.strides == value(o).strides &&
          in.channel_block == value(o).channel_block &&
          only_access_in_its_stage(s, index) && !read_by_another_operand(step, k, pointwise))
        return s;
    }
    return -1;
  }

  // Whether another operand of `step` reads the storage of input `k`: through a view (a
  // transpose, a slice), or, unless the step is element-wise (which reads each element
  // before writing the same one), as the same value (a convolution of p with residual p).
  // Writing the output over input k would change what that operand reads.
  bool read_by_another_operand(const Step& step, size_t k, bool pointwise) const {
    const int slot = step.inputs[k];
    for (size_t j = 0; j < step.inputs.size(); ++j) {
      const int other = step.inputs[j];
      if (j != k && root_[size_t(other)] == slot && (other != slot || !pointwise)) return true;
    }
    return false;
  }

  // Whether `step` is the only step of its stage reading or writing the storage of `slot`
  // (always, when steps run one at a time).
  bool only_access_in_its_stage(int slot, size_t step) const {
    if (!parallel_) return true;
    for (int a : accessors_[size_t(slot)])
      if (size_t(a) != step && stage_[size_t(a)] == stage_[step]) return false;
    return true;
  }

  void lay_out_arena() {
    spec_->arena = plan_arena(buffers_);
    // Without a plan every intermediate would have a buffer of its own, in-place ones too
    // (and each scratchpad, added below).
    spec_->arena.naive_bytes = 0;
    for (const ValueInfo& v : spec_->values)
      if (v.placement == Placement::Arena) spec_->arena.naive_bytes += align_up(v.bytes);
    for (int s = 0; s < plan_.num_slots; ++s)
      if (value(s).placement == Placement::Arena) value(s).offset = spec_->arena.offsets[size_t(buffer_of_[size_t(s)])];
    for (auto [step, buffer] : scratch_buffer_) {
      spec_->steps[step].scratch_offset = int64_t(spec_->arena.offsets[buffer]);
      spec_->arena.naive_bytes += align_up(buffers_[buffer].bytes);
    }
  }

  // --- what running side by side adds once the arena is laid out ---

  void finish_schedule() {
    wait_for_reused_bytes();
    auto schedule = std::make_unique<ParallelSchedule>();
    schedule->graph = StepGraph::from_preds(std::move(preds_));
    const CoreCosts costs = core_costs();
    const std::vector<StepEstimate> estimates = estimated_steps(costs);
    const std::vector<DataEdge> edges = data_edges();
    const int threads = plan_.kernel_threads(plan_.inter_op_threads);
    const WorkerAssignment a =
        assign_workers(schedule->graph, estimates, edges, plan_.inter_op_threads, threads, costs);
    schedule->lists = StepLists::make(schedule->graph, a.order, a.worker, plan_.inter_op_threads);
    std::vector<std::vector<DataEdge>> edges_from(plan_.steps.size());
    for (const DataEdge& e : edges) edges_from[size_t(e.from)].push_back(e);
    schedule->lists.find_segments(schedule->graph, [&](std::span<const int> steps) {
      return worth_stealing(steps, estimates, edges_from, threads, costs);
    });
    schedule->workers = std::max<size_t>(schedule->lists.non_empty(), 1);
    schedule->estimated_us = a.estimated_us;
    schedule->sequential_us = a.sequential_us;
    schedule->spread_us = a.spread_us;
    schedule->strategy = a.strategy;
    count_uses(*schedule);
    std::sort(written_inputs_.begin(), written_inputs_.end());
    written_inputs_.erase(std::unique(written_inputs_.begin(), written_inputs_.end()), written_inputs_.end());
    schedule->written_inputs = std::move(written_inputs_);
    spec_->parallel = std::move(schedule);
  }

  // Whether a run of steps saves its list's thread more time than handing its results
  // over to that thread costs, by half again (the model's margin): a thief runs it only
  // when it has nothing else to do.
  static bool worth_stealing(std::span<const int> steps, const std::vector<StepEstimate>& estimates,
                             const std::vector<std::vector<DataEdge>>& edges_from, int threads,
                             const CoreCosts& costs) {
    std::vector<int> sorted(steps.begin(), steps.end());
    std::sort(sorted.begin(), sorted.end());
    double us = 0, handed_over = 0;
    for (int s : steps) {
      us += estimates[size_t(s)].on(threads, costs);
      for (const DataEdge& e : edges_from[size_t(s)])
        if (!std::binary_search(sorted.begin(), sorted.end(), e.to)) handed_over += e.bytes;
    }
    return us >= 1.5 * (costs.handoff_us + handed_over / costs.remote_bytes_per_us);
  }

  // The bytes of a value a step reads or writes (a view's: those it shows).
  double data_bytes(int slot) const {
    const ValueInfo& v = value(slot);
    return double(v.numel()) * double(dtype_size(v.dtype));
  }

  // Each step's estimate by the cost model (runtime/step_assignment.h): its bytes (a view
  // step moves none), and its FLOPs where its op has a cost rule.
  std::vector<StepEstimate> estimated_steps(const CoreCosts& costs) const {
    std::vector<StepEstimate> out(plan_.steps.size());
    for (size_t i = 0; i < plan_.steps.size(); ++i) {
      const Step& step = plan_.steps[i];
      const SpecializedStep& s = spec_->steps[i];
      double bytes = 0, flops = 0;
      if (s.kind != SpecializedStep::Kind::View) {
        for (int slot : step.inputs) bytes += data_bytes(slot);
        for (int slot : step.outputs) bytes += data_bytes(slot);
      }
      if (s.kind == SpecializedStep::Kind::Kernel && s.op->cost_rule) flops = step_flops(step, s);
      out[i] = estimate_step(flops, bytes, costs);
    }
    return out;
  }

  double step_flops(const Step& step, const SpecializedStep& s) const {
    const std::vector<Tensor> in = metas(step.inputs);
    std::vector<ops::TensorMeta> out;
    for (int slot : step.outputs) out.push_back({value(slot).dtype, value(slot).shape});
    return ops::rule_flops(ops::CallContext{*s.op, in, s.attrs, SourceLoc::current()}, out);
  }

  // What each step reads of the values other steps made, through views to the step that
  // wrote the bytes.
  std::vector<DataEdge> data_edges() const {
    std::vector<DataEdge> out;
    for (size_t i = 0; i < plan_.steps.size(); ++i)
      for (int slot : plan_.steps[i].inputs) {
        const int from = producer_[size_t(root_[size_t(slot)])];
        if (from >= 0 && size_t(from) != i) out.push_back({from, int(i), data_bytes(slot)});
      }
    return out;
  }

  // Two values whose bytes overlap never live in the same stage, but the steps of
  // different stages are not ordered by themselves: the producer of a value waits for
  // every step that reads or writes the value that held those bytes before it. Values are
  // visited in stage order, keeping which value last held each byte range; an earlier
  // holder is ordered before the last one, so the last one's steps are enough.
  void wait_for_reused_bytes() {
    std::vector<int> producer(size_t(plan_.num_slots), -1);
    for (size_t i = 0; i < plan_.steps.size(); ++i)
      for (int o : plan_.steps[i].outputs) producer[size_t(o)] = int(i);
    std::vector<int> arena_values;
    for (int s = 0; s < plan_.num_slots; ++s)
      if (value(s).placement == Placement::Arena && value(s).bytes > 0) arena_values.push_back(s);
    std::stable_sort(arena_values.begin(), arena_values.end(),
                     [&](int a, int b) { return stage_[size_t(producer[size_t(a)])] < stage_[size_t(producer[size_t(b)])]; });
    ByteHolders holders;
    for (int v : arena_values) {
      const size_t begin = value(v).offset, end = begin + align_up(value(v).bytes);
      const int p = producer[size_t(v)];
      for (int previous : holders.take(begin, end, v))
        for (int a : accessors_[size_t(previous)])
          if (a != p) preds_[size_t(p)].push_back(a);
    }
  }

  // Which value last held each byte of the arena.
  class ByteHolders {
   public:
    // Gives [begin, end) to `value`; returns the values that held parts of it, each once.
    std::vector<int> take(size_t begin, size_t end, int value) {
      split_at(begin);
      split_at(end);
      std::vector<int> previous;
      auto first = holder_.lower_bound(begin), last = holder_.lower_bound(end);
      for (auto it = first; it != last; ++it)
        if (it->second >= 0 && std::find(previous.begin(), previous.end(), it->second) == previous.end())
          previous.push_back(it->second);
      holder_.erase(first, last);
      holder_[begin] = value;
      return previous;
    }

   private:
    // Makes `at` the start of a range (holding what held the byte before).
    void split_at(size_t at) {
      auto it = holder_.upper_bound(at);
      const int held = it == holder_.begin() ? -1 : std::prev(it)->second;
      holder_.emplace(at, held);
    }
    std::map<size_t, int> holder_;  // range start -> value (-1: nobody), up to the next start
  };

  // Per-run handles of fresh values and views are dropped when their last step is done.
  void count_uses(ParallelSchedule& schedule) {
    std::vector<char> fetched(size_t(plan_.num_slots), 0);
    for (int f : plan_.fetches) fetched[size_t(f)] = 1;
    schedule.uses.assign(size_t(plan_.num_slots), 0);
    std::vector<std::vector<int>> touched(plan_.steps.size());
    for (size_t i = 0; i < plan_.steps.size(); ++i) {
      std::vector<int>& t = touched[i];
      for (const std::vector<int>* slots : {&plan_.steps[i].inputs, &plan_.steps[i].outputs})
        for (int s : *slots) {
          const Placement p = value(s).placement;
          if ((p == Placement::Fresh || p == Placement::View) && !fetched[size_t(s)] &&
              std::find(t.begin(), t.end(), s) == t.end())
            t.push_back(s);
        }
      for (int s : t) ++schedule.uses[size_t(s)];
    }
    flatten(touched, schedule.touched_offsets, schedule.touched);
  }

  const Plan& plan_;
  std::shared_ptr<Specialization> spec_;
  const bool side_by_side_;
  const Specialization* before_;  // the stage before this one, if any
  const size_t begin_;            // this stage's steps: [begin_, end_)
  size_t end_ = 0;
  std::vector<int> producer_;     // per slot: the step computing it, -1 for inputs and constants
  std::vector<int> root_;       // per slot: the slot whose buffer it uses (itself unless a view)
  std::vector<int> buffer_of_;  // per arena slot: its buffer
  std::vector<Lifetime> buffers_;
  std::vector<std::pair<size_t, size_t>> scratch_buffer_;  // (step, its scratchpad's buffer)
  // Only when steps run side by side:
  bool parallel_ = false;
  std::vector<std::vector<int>> preds_;               // per step: the steps it waits for
  std::vector<int> stage_;                            // per step
  std::unordered_map<int, std::vector<int>> may_alias_;  // control-flow results: operands' storages
  std::unordered_map<int, Tensor> remade_;            // released constants made again (constant_value)
  std::vector<std::vector<int>> accessors_;           // per root slot: steps reading or writing it
  std::vector<int> written_inputs_;                   // input slots written in place
};

}  // namespace

std::shared_ptr<const Specialization> build_specialization(const Plan& plan, const sym::Bindings& bindings,
                                                           bool side_by_side, const Specialization* before) {
  std::shared_ptr<Specialization> spec = Specializer(plan, bindings, side_by_side, before).build();
  spec->plan_ = &plan;
  return spec;
}

std::shared_ptr<const Specialization> Specialization::in_plan_order() const {
  if (!parallel) return nullptr;
  std::call_once(in_plan_order_once_, [&] { in_plan_order_ = build_specialization(*plan_, bindings, false); });
  return in_plan_order_;
}

}  // namespace baton::runtime
