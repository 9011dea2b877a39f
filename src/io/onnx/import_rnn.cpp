// ONNX recurrent layers: LSTM, GRU and RNN (opsets 7-14), unrolled over a sequence length
// known when the model loads. The input projection of every step is one product,
// X @ W^T + (Wb + Rb), computed before the loop; each step then adds h @ R^T and applies
// the cell's gates with public element-wise ops. A state that starts at zero (no initial_h
// or initial_c) is left out of the first step instead of materialized, so a symbolic batch
// needs no zero tensor of its size.
//
// Gate order in W, R and B: LSTM i o f c (P holds i o f), GRU z r h, RNN one gate.
// Layout 0 is [seq, batch, ...] for X and Y, [num_directions, batch, hidden] for the
// states; layout 1 (opset 14) puts batch first in all of them.
#include <algorithm>
#include <cctype>
#include <functional>

#include "baton/ops.h"
#include "io/onnx/importer.h"

namespace baton::onnx::detail {
namespace {

constexpr int64_t kMaxUnrolledSteps = 4096;

// One entry of the `activations` attribute, with the alpha/beta it takes.
struct Activation {
  std::string name;  // lower case
  double alpha = 0, beta = 0;
};

// Defaults and the count of alpha/beta values each activation reads (those of the ONNX
// ops of the same names); false for a name that is not an RNN activation.
bool activation_defaults(const std::string& name, Activation& a, int& alphas, int& betas) {
  struct Known { const char* name; double alpha, beta; int alphas, betas; };
  static const Known known[] = {
      {"sigmoid", 0, 0, 0, 0},      {"tanh", 0, 0, 0, 0},       {"relu", 0, 0, 0, 0},
      {"softsign", 0, 0, 0, 0},     {"softplus", 0, 0, 0, 0},   {"leakyrelu", 0.01, 0, 1, 0},
      {"thresholdedrelu", 1, 0, 1, 0}, {"elu", 1, 0, 1, 0},     {"affine", 1, 0, 1, 1},
      {"scaledtanh", 1, 1, 1, 1},   {"hardsigmoid", 0.2, 0.5, 1, 1},
  };
  for (const Known& k : known)
    if (name == k.name) {
      a = {name, k.alpha, k.beta};
      alphas = k.alphas, betas = k.betas;
      return true;
    }
  return false;
}

Tensor apply(const Activation& a, const Tensor& x) {
  const std::string& n = a.name;
  if (n == "sigmoid") return sigmoid(x);
  if (n == "tanh") return tanh(x);
  if (n == "relu") return relu(x);
  if (n == "softsign") return x / (abs(x) + 1.0);
  if (n == "softplus") return softplus(x);
  if (n == "leakyrelu") return leaky_relu(x, a.alpha);
  if (n == "thresholdedrelu") return where(x >= a.alpha, x, zeros_like(x));  // ">=" as the RNN spec says
  if (n == "elu") return elu(x, a.alpha);
  if (n == "affine") return x * a.alpha + a.beta;
  if (n == "scaledtanh") return tanh(x * a.beta) * a.alpha;
  return clamp(x * a.alpha + a.beta, 0.0, 1.0);  // hardsigmoid
}

// v followed by a copy of itself (one list serving both directions).
std::vector<std::string> twice(const std::vector<std::string>& v) {
  std::vector<std::string> out = v;
  out.insert(out.end(), v.begin(), v.end());
  return out;
}

// The activations of every direction: `per_dir` of them each, from the attribute (given
// once per direction, or once for all) or `defaults`; alpha and beta values are taken in
// order by the activations that read them.
std::vector<std::vector<Activation>> activations_of(const NodeContext& c, std::vector<std::string> names,
                                                    size_t num_dir) {
  const size_t per_dir = names.size();
  std::vector<std::string> given = c.attr_strings("activations");
  if (!given.empty()) {
    if (given.size() == per_dir && num_dir == 2) given = twice(given);
    if (given.size() != per_dir * num_dir)
      c.fail(str("activations has ", given.size(), " names; ", per_dir, " per direction and ", num_dir,
                 " direction(s) need ", per_dir * num_dir));
    names = given;
  } else if (num_dir == 2) {
    names = twice(names);
  }
  std::vector<double> alphas, betas;
  if (c.has_attr("activation_alpha")) alphas = c.attr_floats("activation_alpha");
  if (c.has_attr("activation_beta")) betas = c.attr_floats("activation_beta");
  size_t next_alpha = 0, next_beta = 0;
  std::vector<std::vector<Activation>> out(num_dir);
  for (size_t i = 0; i < names.size(); ++i) {
    std::string lower = names[i];
    std::transform(lower.begin(), lower.end(), lower.begin(),
                   [](unsigned char ch) { return char(std::tolower(ch)); });
    Activation a;
    int n_alpha = 0, n_beta = 0;
    if (!activation_defaults(lower, a, n_alpha, n_beta))
      c.fail(str("activation '", names[i], "' is not one of Sigmoid, Tanh, Relu, LeakyRelu, ThresholdedRelu, "
                 "HardSigmoid, Elu, Softsign, Softplus, Affine, ScaledTanh"));
    if (n_alpha && next_alpha < alphas.size()) a.alpha = alphas[next_alpha++];
    if (n_beta && next_beta < betas.size()) a.beta = betas[next_beta++];
    out[i / per_dir].push_back(a);
  }
  return out;
}

// One direction's inputs: W [gates*H, I], R [gates*H, H], the bias added to the input
// projection, and the optional initial states and peepholes (undefined when absent).
struct Direction {
  Tensor w, r, wb, rb, h0, c0, p;
  std::vector<Activation> act;
  bool reverse = false;
};

// The state carried between steps; an undefined h or c is zero.
struct State {
  Tensor h, c;
};

// Everything the cells share.
struct Rnn {
  int64_t hidden = 0, seq = 0, num_dir = 1;
  bool batch_first = false;
  double clip = 0;  // 0: none
  Tensor clipped(const Tensor& x) const { return clip > 0 ? clamp(x, -clip, clip) : x; }
};

// gates[:, k*H : (k+1)*H].
Tensor gate(const Rnn& n, const Tensor& gates, int64_t k) {
  return slice(gates, -1, k * n.hidden, (k + 1) * n.hidden);
}

// A step: x_proj is this step's X @ W^T + bias [batch, gates*H]; updates the state.
using Step = std::function<void(const Rnn&, const Direction&, const Tensor& x_proj, State&)>;

// LSTM: i = f(.. + Pi*c), f = f(.. + Pf*c) (or 1 - i with input_forget), c' = f*c + i*g(..),
// o = f(.. + Po*c'), h' = o * h(c').
Step lstm_step(bool input_forget) {
  return [input_forget](const Rnn& n, const Direction& d, const Tensor& x_proj, State& s) {
    const Tensor g = s.h.defined() ? x_proj + linear(s.h, d.r) : x_proj;
    Tensor i = gate(n, g, 0), o = gate(n, g, 1), f = gate(n, g, 2), cand = gate(n, g, 3);
    if (d.p.defined() && s.c.defined()) {
      i = i + gate(n, d.p, 0) * s.c;
      f = f + gate(n, d.p, 2) * s.c;
    }
    i = apply(d.act[0], n.clipped(i));
    cand = apply(d.act[1], n.clipped(cand));
    Tensor c = i * cand;
    if (s.c.defined()) c = c + (input_forget ? 1.0 - i : apply(d.act[0], n.clipped(f))) * s.c;
    if (d.p.defined()) o = o + gate(n, d.p, 1) * c;
    s.h = apply(d.act[0], n.clipped(o)) * apply(d.act[2], c);
    s.c = c;
  };
}

// GRU: z, r = f(..), h~ = g(x Wh^T + (r*h) Rh^T + Rbh + Wbh), or with linear_before_reset
// g(x Wh^T + r*(h Rh^T + Rbh) + Wbh); h' = (1 - z)*h~ + z*h. Rbh is in d.rb for
// linear_before_reset, in the input projection otherwise.
Step gru_step(bool linear_before_reset) {
  return [linear_before_reset](const Rnn& n, const Direction& d, const Tensor& x_proj, State& s) {
    const int64_t hd = n.hidden;
    Tensor zr = slice(x_proj, -1, 0, 2 * hd);
    if (s.h.defined()) zr = zr + linear(s.h, slice(d.r, 0, 0, 2 * hd));
    const Tensor z = apply(d.act[0], n.clipped(gate(n, zr, 0)));
    const Tensor r = apply(d.act[0], n.clipped(gate(n, zr, 1)));
    const Tensor r_h = slice(d.r, 0, 2 * hd, 3 * hd);
    Tensor cand = gate(n, x_proj, 2);
    if (linear_before_reset) {
      if (s.h.defined()) cand = cand + r * linear(s.h, r_h, d.rb);
      else if (d.rb.defined()) cand = cand + r * d.rb;
    } else if (s.h.defined()) {
      cand = cand + linear(r * s.h, r_h);
    }
    cand = apply(d.act[1], n.clipped(cand));
    s.h = s.h.defined() ? (1.0 - z) * cand + z * s.h : (1.0 - z) * cand;
  };
}

// RNN: h' = f(x Wi^T + h Ri^T + Wbi + Rbi).
void rnn_step(const Rnn& n, const Direction& d, const Tensor& x_proj, State& s) {
  s.h = apply(d.act[0], n.clipped(s.h.defined() ? x_proj + linear(s.h, d.r) : x_proj));
}

// The per-step hidden states of one direction (in input order) and its final state.
struct Run {
  std::vector<Tensor> ys;
  State last;
};

Run run_direction(const Rnn& n, const Direction& d, const Tensor& x, const Step& step) {
  const Tensor proj = linear(x, d.w, d.wb);  // [seq, batch, gates*H]
  Run run{std::vector<Tensor>(size_t(n.seq)), {d.h0, d.c0}};
  for (int64_t k = 0; k < n.seq; ++k) {
    const int64_t t = d.reverse ? n.seq - 1 - k : k;
    step(n, d, squeeze(slice(proj, 0, t, t + 1), 0), run.last);
    run.ys[size_t(t)] = run.last.h;
  }
  return run;
}

// Input i for direction `dir` ([num_dir, ...] -> [...]), undefined when absent.
Tensor per_direction(const NodeContext& c, size_t i, int64_t dir) {
  if (!c.has_input(i)) return {};
  return squeeze(slice(c.input(i), 0, dir, dir + 1), 0);
}

// A state input ([num_dir, batch, H], or [batch, num_dir, H] in layout 1) for `dir`;
// `batch` is X's.
Tensor state_input(const NodeContext& c, const Rnn& n, size_t i, int64_t dir, int64_t batch) {
  if (!c.has_input(i)) return {};
  const Tensor& t = c.input(i);
  const int64_t axis = n.batch_first ? 1 : 0;
  const Shape want = n.batch_first ? Shape{batch, n.num_dir, n.hidden} : Shape{n.num_dir, batch, n.hidden};
  const bool batch_differs = t.dim() == 3 && !sym::is_symbol(batch) && !sym::is_symbol(t.shape()[1 - axis]) &&
                             t.shape()[1 - axis] != batch;
  if (t.dim() != 3 || t.shape()[axis] != n.num_dir || t.shape()[2] != n.hidden || batch_differs)
    c.fail(str(i == 5 ? "initial_h" : "initial_c", " must be ", want, ", got ", t.shape()));
  return squeeze(slice(t, axis, dir, dir + 1), axis);
}

// The static length of x [seq, batch, input]; sequence_lens, when given, must hold it for
// every batch entry (shorter sequences are not supported).
int64_t sequence_length(const NodeContext& c, const Tensor& x) {
  const int64_t seq = x.shape()[0];
  if (sym::is_symbol(seq))
    c.fail(str("needs a sequence length known when the model loads (it is unrolled), got X of shape ",
               c.input(0).shape()));
  if (seq < 1) c.fail("has an empty sequence");
  if (seq > kMaxUnrolledSteps) c.fail(str("sequence length ", seq, " is over ", kMaxUnrolledSteps, " steps"));
  if (c.has_input(4))
    for (int64_t len : c.ints_input(4))
      if (len != seq)
        c.fail(str("sequence_lens holds ", len, "; only sequences of the full length ", seq, " are supported"));
  return seq;
}

// Reads what LSTM, GRU and RNN share, checks the shapes, and returns the sequence as
// [seq, batch, input].
Tensor read_common(const NodeContext& c, Rnn& n, int64_t gates) {
  const std::string direction = c.attr_string("direction", "forward");
  if (direction != "forward" && direction != "reverse" && direction != "bidirectional")
    c.fail(str("direction '", direction, "' is not one of forward, reverse, bidirectional"));
  n.num_dir = direction == "bidirectional" ? 2 : 1;
  n.batch_first = c.attr_int("layout", 0) != 0;
  n.clip = c.has_attr("clip") ? c.attr_float("clip", 0) : 0;
  if (c.has_attr("clip") && n.clip <= 0) c.fail(str("clip must be positive, got ", n.clip));
  Tensor x = c.input(0);
  const Tensor &w = c.input(1), &r = c.input(2);
  if (x.dim() != 3) c.fail(str("X must have rank 3, got ", x.shape()));
  if (w.dim() != 3 || r.dim() != 3) c.fail(str("W and R must have rank 3, got ", w.shape(), " and ", r.shape()));
  if (n.batch_first) x = transpose(x, 0, 1);
  n.hidden = c.attr_int("hidden_size", r.shape()[2]);
  const int64_t input_size = x.shape()[2];
  if (w.shape() != Shape{n.num_dir, gates * n.hidden, input_size} ||
      r.shape() != Shape{n.num_dir, gates * n.hidden, n.hidden})
    c.fail(str("with ", n.num_dir, " direction(s), hidden_size ", n.hidden, " and input size ", input_size,
               ", W must be ", Shape{n.num_dir, gates * n.hidden, input_size}, " and R ",
               Shape{n.num_dir, gates * n.hidden, n.hidden}, ", got ", w.shape(), " and ", r.shape()));
  if (c.has_input(3) && c.input(3).shape() != Shape{n.num_dir, 2 * gates * n.hidden})
    c.fail(str("B must be ", Shape{n.num_dir, 2 * gates * n.hidden}, ", got ", c.input(3).shape()));
  n.seq = sequence_length(c, x);
  return x;
}

// The directions' weights (x: the sequence as [seq, batch, input]); `split_rb`: keep the
// last gate's Rb apart (GRU with linear_before_reset) instead of adding it to the input
// projection.
std::vector<Direction> directions_of(const NodeContext& c, const Rnn& n, const Tensor& x, int64_t gates,
                                     std::vector<std::string> default_activations, bool split_rb = false) {
  std::vector<std::vector<Activation>> acts = activations_of(c, std::move(default_activations), size_t(n.num_dir));
  const bool reverse_only = c.attr_string("direction", "forward") == "reverse";
  const int64_t gh = gates * n.hidden;
  std::vector<Direction> dirs(size_t(n.num_dir));
  for (int64_t k = 0; k < n.num_dir; ++k) {
    Direction& d = dirs[size_t(k)];
    d.w = per_direction(c, 1, k);
    d.r = per_direction(c, 2, k);
    if (Tensor b = per_direction(c, 3, k); b.defined()) {
      const Tensor wb = slice(b, 0, 0, gh), rb = slice(b, 0, gh, 2 * gh);
      if (split_rb) {
        const int64_t last = gh - n.hidden;
        d.wb = cat({slice(wb, 0, 0, last) + slice(rb, 0, 0, last), slice(wb, 0, last, gh)}, 0);
        d.rb = slice(rb, 0, last, gh);
      } else {
        d.wb = wb + rb;
      }
    }
    d.h0 = state_input(c, n, 5, k, x.shape()[1]);
    d.c0 = state_input(c, n, 6, k, x.shape()[1]);
    d.act = acts[size_t(k)];
    d.reverse = reverse_only || k == 1;
  }
  return dirs;
}

// Y [seq, num_dir, batch, H] (layout 1: [batch, seq, num_dir, H]), Y_h and Y_c
// [num_dir, batch, H] (layout 1: [batch, num_dir, H]); Y_c only for LSTM.
Outputs run_all(const Rnn& n, const std::vector<Direction>& dirs, const Tensor& x, const Step& step, bool with_c) {
  std::vector<Tensor> ys, hs, cs;
  for (const Direction& d : dirs) {
    Run run = run_direction(n, d, x, step);
    ys.push_back(stack(run.ys, 0));
    hs.push_back(run.last.h);
    if (with_c) cs.push_back(run.last.c);
  }
  Tensor y = stack(ys, 1), y_h = stack(hs, 0);
  if (n.batch_first) {
    y = permute(y, Shape{2, 0, 1, 3});
    y_h = transpose(y_h, 0, 1);
  }
  Outputs out{y, y_h};
  if (with_c) out.push_back(n.batch_first ? transpose(stack(cs, 0), 0, 1) : stack(cs, 0));
  return out;
}

Outputs import_lstm(NodeContext& c) {
  Rnn n;
  const Tensor x = read_common(c, n, 4);
  std::vector<Direction> dirs = directions_of(c, n, x, 4, {"Sigmoid", "Tanh", "Tanh"});
  if (c.has_input(7) && c.input(7).shape() != Shape{n.num_dir, 3 * n.hidden})
    c.fail(str("P must be ", Shape{n.num_dir, 3 * n.hidden}, ", got ", c.input(7).shape()));
  for (int64_t k = 0; k < n.num_dir; ++k) dirs[size_t(k)].p = per_direction(c, 7, k);
  return run_all(n, dirs, x, lstm_step(c.attr_int("input_forget", 0) != 0), true);
}

Outputs import_gru(NodeContext& c) {
  Rnn n;
  const Tensor x = read_common(c, n, 3);
  const bool linear_before_reset = c.attr_int("linear_before_reset", 0) != 0;
  std::vector<Direction> dirs = directions_of(c, n, x, 3, {"Sigmoid", "Tanh"}, linear_before_reset);
  return run_all(n, dirs, x, gru_step(linear_before_reset), false);
}

Outputs import_rnn(NodeContext& c) {
  Rnn n;
  const Tensor x = read_common(c, n, 1);
  std::vector<Direction> dirs = directions_of(c, n, x, 1, {"Tanh"});
  return run_all(n, dirs, x, rnn_step, false);
}

}  // namespace

BATON_ONNX_IMPORTER("LSTM", import_lstm);
BATON_ONNX_IMPORTER("GRU", import_gru);
BATON_ONNX_IMPORTER("RNN", import_rnn);

}  // namespace baton::onnx::detail
