// Layer normalization written out as element-wise ops and sums, as every ONNX model
// exported below opset 17 holds it (ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div: the
// importer reads ReduceMean as a sum divided by the count) and as hand-written code
// computes it, over the last k dims of x:
//   m = sum(x) / N      d = x - m      v = sum(d^2) / N      y = d / sqrt(v + eps)
// (d^2 as pow(d, 2) or d * d; the last step also as d * rsqrt(v + eps)) becomes the first
// result of one layer_norm: one step reading each row twice while it is in cache, where
// the chain took six to nine, three of them over the whole tensor. An affine after it
// (mul by gamma, add beta) stays and fuses as any element-wise chain does.
//
// Values: layer_norm keeps the mean and variance in double, the chain rounds each step to
// x's type, so results differ by rounding (a few units in the last place where the mean
// is small against the spread; the chain loses digits where it is not). Only chains whose
// intermediates nothing else reads are taken (so never a chain a backward graph reads).
#include <unordered_set>

#include "passes/analysis.h"
#include "passes/fusion.h"
#include "passes/report.h"

namespace baton::passes {
namespace {

// The nodes of one written-out layer norm, in the order they run.
struct WrittenLayerNorm {
  graph::Value* x = nullptr;
  int64_t axes = 0;
  double eps = 0;
  std::vector<graph::Node*> nodes;  // the last one's result is the normalized x
};

class LayerNormFuser {
 public:
  LayerNormFuser(graph::Graph& g, Context& ctx, Effect& effect) : g_(g), ctx_(ctx), effect_(effect), vol_(g), describe_(g) {}

  bool run() {
    bool changed = false;
    for (graph::Node* n : node_list(g_)) {
      if (erased_.count(n)) continue;
      if (std::optional<WrittenLayerNorm> ln = match(n)) {
        on_node(*ln->nodes.back(), [&] { replace(*ln); });
        changed = true;
      }
    }
    return changed;
  }

 private:
  // The pattern starting at the mean's sum `s` over f32 or f64 (layer_norm's kernel
  // types); nullopt where any part differs.
  std::optional<WrittenLayerNorm> match(graph::Node* s) const {
    WrittenLayerNorm ln;
    ln.x = s->num_inputs() == 1 ? s->input(0) : nullptr;
    const bool kernel_type = ln.x && (ln.x->dtype() == DType::f32 || ln.x->dtype() == DType::f64);
    if (!kernel_type || !(ln.axes = trailing_axes(*s, *ln.x))) return std::nullopt;
    graph::Node* mean = mean_after(s, ln.x);
    graph::Node* sub = mean ? sole_reader(mean) : nullptr;
    if (!sub || sub->op_name() != "sub" || sub->num_inputs() != 2 || sub->input(0) != ln.x ||
        sub->input(1) != mean->output() || !same_type(sub, ln.x))
      return std::nullopt;
    graph::Value* d = sub->output();
    graph::Node *square = nullptr, *last = nullptr;
    if (!private_value(g_, vol_, d) || !split_readers_of_deviation(d, square, last)) return std::nullopt;
    graph::Node* var_sum = sole_reader(square);
    if (!var_sum || trailing_axes(*var_sum, *square->output()) != ln.axes) return std::nullopt;
    graph::Node* var = mean_after(var_sum, d);
    graph::Node* add = var ? sole_reader(var) : nullptr;
    const std::optional<double> eps =
        add && add->op_name() == "add" ? fixed_scalar(ctx_, vol_, other_operand(*add, var->output())) : std::nullopt;
    if (!eps || *eps < 0 || !same_type(add, var->output())) return std::nullopt;
    ln.eps = *eps;
    graph::Node* root = sole_reader(add);
    if (!root || !normalizes(root, last, d)) return std::nullopt;
    ln.nodes = {s, mean, sub, square, var_sum, var, add};
    if (root != last) ln.nodes.push_back(root);
    ln.nodes.push_back(last);
    return ln;
  }

  // k when `s` sums the last k dims of `x` keeping them (sum's dims are normalised and
  // sorted); 0 otherwise.
  static int64_t trailing_axes(const graph::Node& s, const graph::Value& x) {
    if (s.op_name() != "sum" || s.input(0) != &x || !s.attrs.has("dims") || s.attrs.i("keepdim") != 1) return 0;
    const std::vector<int64_t> dims = s.attrs.ints("dims");
    const int64_t rank = int64_t(x.shape().rank());
    if (dims.empty() || int64_t(dims.size()) > rank) return 0;
    for (size_t k = 0; k < dims.size(); ++k)
      if (dims[k] != rank - int64_t(dims.size()) + int64_t(k)) return 0;
    return int64_t(dims.size());
  }

  // The division of sum `s` over v's last dims by their element count (a mean): the
  // node, when it is the sum's only reader; else nullptr.
  graph::Node* mean_after(graph::Node* s, const graph::Value* v) const {
    graph::Node* div = sole_reader(s);
    if (!div || div->op_name() != "div" || div->input(0) != s->output() || !same_type(div, s->output())) return nullptr;
    const std::optional<double> n = fixed_scalar(ctx_, vol_, div->input(1));
    std::optional<double> count = 1;
    const auto& shape = v->shape();
    for (size_t d = shape.rank() - s->attrs.ints("dims").size(); d < shape.rank() && count; ++d)
      count = shape[d].is_static() ? std::optional<double>(*count * double(shape[d].raw())) : std::nullopt;
    return n && count && *n == *count ? div : nullptr;
  }

  // The deviation d is read by its square (pow(d, 2) or d * d) and by the step dividing
  // it by the deviation (d / s or d * r), and by nothing else.
  bool split_readers_of_deviation(graph::Value* d, graph::Node*& square, graph::Node*& last) const {
    for (const graph::Use& u : d->uses()) {
      graph::Node* n = u.user;
      if (is_square_of(n, d)) {
        if (square && square != n) return false;
        square = n;
      } else if (!last) {
        last = n;
      } else if (last != n) {
        return false;
      }
    }
    return square && last && last != square;
  }

  bool is_square_of(const graph::Node* n, const graph::Value* d) const {
    if (n->num_inputs() != 2 || !same_type(n, d)) return false;
    if (n->op_name() == "mul") return n->input(0) == d && n->input(1) == d;
    return n->op_name() == "pow" && n->input(0) == d && fixed_scalar(ctx_, vol_, n->input(1)) == 2.0;
  }

  // root, read from v + eps, makes `last` compute d / sqrt(v + eps): root = sqrt and
  // last = div(d, root), or root = rsqrt and last = mul(d, root) in either order.
  bool normalizes(const graph::Node* root, const graph::Node* last, const graph::Value* d) const {
    if (sole_reader(root) != last || !same_type(last, d) || last->num_inputs() != 2) return false;
    if (root->op_name() == "sqrt") return last->op_name() == "div" && last->input(0) == d;
    return root->op_name() == "rsqrt" && last->op_name() == "mul" && other_operand(*last, d) == root->output();
  }

  // n's only reader, where n has one result that nothing else sees; else nullptr.
  graph::Node* sole_reader(const graph::Node* n) const {
    if (n->num_outputs() != 1) return nullptr;
    const graph::Value* v = n->output();
    if (v->uses().size() != 1 || !private_value(g_, vol_, v)) return nullptr;
    return v->uses()[0].user;
  }

  static bool same_type(const graph::Node* n, const graph::Value* v) {
    return n->num_outputs() == 1 && n->output()->type == v->type;
  }

  void replace(const WrittenLayerNorm& ln) {
    graph::Node* last = ln.nodes.back();
    const graph::TensorType stats = ln.nodes[1]->output()->type;  // the mean's [..., 1, 1]
    graph::Node* fused = g_.add_node("layer_norm", {ln.x}, {last->output()->type, stats, stats},
                                     ops::Attrs{{"axes", ln.axes}, {"eps", ln.eps}}, last->loc);
    std::string from, text;
    for (graph::Node* n : ln.nodes) {
      from += str(from.empty() ? "" : " + ", fused_ops(*n));
      text += str(text.empty() ? "" : ", ", describe_.node(*n));
    }
    fused->fused_from = from;
    const std::string result = describe_.value(last->output());
    effect_.details.push_back(str("fused ", text, " into ", result, " = layer_norm(", describe_.value(ln.x),
                                  ") {axes=", ln.axes, ", eps=", ln.eps, "}"));
    g_.move_before(fused, last);
    g_.replace_all_uses(last->output(), fused->output(0));
    describe_.name(fused->output(0), result);
    for (auto it = ln.nodes.rbegin(); it != ln.nodes.rend(); ++it) {
      describe_.forget(**it);
      erased_.insert(*it);
      g_.erase_node(*it);
    }
  }

  graph::Graph& g_;
  Context& ctx_;
  Effect& effect_;
  VolatileValues vol_;
  Describer describe_;
  std::unordered_set<const graph::Node*> erased_;
};

}  // namespace

bool fuse_layer_norm(graph::Graph& g, Context& ctx, Effect& effect) { return LayerNormFuser(g, ctx, effect).run(); }

}  // namespace baton::passes
