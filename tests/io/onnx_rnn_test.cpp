// ONNX LSTM, GRU and RNN (src/io/onnx/import_rnn.cpp) on hand-built models, checked
// against a plain reference loop in double written from the ONNX operator equations:
// directions, layouts, biases, initial states, peepholes, clip, input_forget,
// linear_before_reset, activations with alpha/beta, a symbolic batch, and the clear
// failures (a symbolic sequence length, partial sequence_lens, unknown activations).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "baton/baton.h"
#include "baton/onnx.h"
#include "io/onnx_model_builder.h"

namespace baton {
namespace {

using ::onnx::TensorProto;
using onnx_testing::add_float_attr;
using onnx_testing::add_floats_attr;
using onnx_testing::add_int_attr;
using onnx_testing::add_string_attr;
using onnx_testing::add_strings_attr;
using onnx_testing::ModelBuilder;

struct RnnCase {
  std::string op = "LSTM";  // LSTM, GRU or RNN
  int64_t seq = 3, batch = 2, input = 3, hidden = 2;
  std::string direction = "forward";
  int64_t layout = 0;
  bool bias = true, initial_h = true, initial_c = true, peepholes = true;
  float clip = 0;  // 0: no clip attribute
  bool input_forget = false, linear_before_reset = false;
  std::vector<std::string> activations;  // empty: the defaults (attribute left out)
  std::vector<float> alphas, betas;

  int64_t gates() const { return op == "LSTM" ? 4 : op == "GRU" ? 3 : 1; }
  int64_t num_dir() const { return direction == "bidirectional" ? 2 : 1; }
  bool lstm() const { return op == "LSTM"; }
};

// Deterministic values in (-scale, scale).
std::vector<float> values(size_t n, double seed, double scale) {
  std::vector<float> v(n);
  for (size_t k = 0; k < n; ++k) v[k] = float(scale * std::sin(0.91 * double(k) + seed));
  return v;
}

// The inputs of one case, every state in layout 0 ([dir, batch, H]) and X as [seq, batch, I].
struct RnnData {
  std::vector<float> x, w, r, b, h0, c0, p;
};

RnnData data_of(const RnnCase& k) {
  const auto nd = size_t(k.num_dir()), gh = size_t(k.gates() * k.hidden), h = size_t(k.hidden);
  const auto state = nd * size_t(k.batch) * h;
  return {values(size_t(k.seq * k.batch * k.input), 0.1, 1.5), values(nd * gh * size_t(k.input), 1.3, 0.8),
          values(nd * gh * h, 2.7, 0.8), values(nd * 2 * gh, 3.1, 0.5), values(state, 4.2, 0.7),
          values(state, 5.9, 0.9), values(nd * 3 * h, 6.4, 0.6)};
}

// [a][b][c] stored as [b][a][c] (the batch-first layout of X and the states).
std::vector<float> swap01(const std::vector<float>& v, int64_t a, int64_t b, int64_t c) {
  std::vector<float> out(v.size());
  for (int64_t i = 0; i < a; ++i)
    for (int64_t j = 0; j < b; ++j)
      for (int64_t l = 0; l < c; ++l) out[size_t((j * a + i) * c + l)] = v[size_t((i * b + j) * c + l)];
  return out;
}

ModelBuilder rnn_model(const RnnCase& k, const RnnData& d, const std::string& seq_param = "") {
  ModelBuilder m(14);
  const int64_t nd = k.num_dir(), gh = k.gates() * k.hidden;
  const bool bf = k.layout == 1;
  m.input("X", TensorProto::FLOAT, bf ? std::vector<int64_t>{k.batch, k.seq, k.input}
                                      : std::vector<int64_t>{k.seq, k.batch, k.input}, seq_param);
  m.floats("W", {nd, gh, k.input}, d.w);
  m.floats("R", {nd, gh, k.hidden}, d.r);
  std::vector<std::string> in{"X", "W", "R", "", "", "", "", ""};
  if (k.bias) m.floats("B", {nd, 2 * gh}, d.b), in[3] = "B";
  auto state = [&](const std::string& name, const std::vector<float>& v) {
    if (bf) m.floats(name, {k.batch, nd, k.hidden}, swap01(v, nd, k.batch, k.hidden));
    else m.floats(name, {nd, k.batch, k.hidden}, v);
  };
  if (k.initial_h) state("initial_h", d.h0), in[5] = "initial_h";
  if (k.lstm() && k.initial_c) state("initial_c", d.c0), in[6] = "initial_c";
  if (k.lstm() && k.peepholes) m.floats("P", {nd, 3 * k.hidden}, d.p), in[7] = "P";
  while (!in.empty() && in.back().empty()) in.pop_back();
  std::vector<std::string> out{"Y", "Y_h"};
  if (k.lstm()) out.push_back("Y_c");
  auto* n = m.node(k.op, in, out);
  add_int_attr(n, "hidden_size", k.hidden);
  add_string_attr(n, "direction", k.direction);
  if (k.layout) add_int_attr(n, "layout", k.layout);
  if (k.clip > 0) add_float_attr(n, "clip", k.clip);
  if (k.input_forget) add_int_attr(n, "input_forget", 1);
  if (k.linear_before_reset) add_int_attr(n, "linear_before_reset", 1);
  if (!k.activations.empty()) add_strings_attr(n, "activations", k.activations);
  if (!k.alphas.empty()) add_floats_attr(n, "activation_alpha", k.alphas);
  if (!k.betas.empty()) add_floats_attr(n, "activation_beta", k.betas);
  for (const auto& o : out) m.output(o);
  return m;
}

// --- the reference, in double, from the ONNX equations ---

struct Act {
  std::string name;
  double alpha = 0, beta = 0;
  double operator()(double x) const {
    if (name == "Sigmoid") return 1 / (1 + std::exp(-x));
    if (name == "Tanh") return std::tanh(x);
    if (name == "Relu") return std::max(0.0, x);
    if (name == "LeakyRelu") return x >= 0 ? x : alpha * x;
    if (name == "HardSigmoid") return std::clamp(alpha * x + beta, 0.0, 1.0);
    if (name == "Affine") return alpha * x + beta;
    ADD_FAILURE() << "no reference for " << name;
    return 0;
  }
};

std::vector<std::string> twice(const std::vector<std::string>& v) {
  std::vector<std::string> out = v;
  out.insert(out.end(), v.begin(), v.end());
  return out;
}

// The activations of direction `dir` (alpha/beta taken in order by those that read them).
std::vector<Act> acts_of(const RnnCase& k, int64_t dir) {
  std::vector<std::string> names = k.activations;
  if (names.empty())
    names = k.op == "LSTM" ? std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"}
            : k.op == "GRU" ? std::vector<std::string>{"Sigmoid", "Tanh"}
                            : std::vector<std::string>{"Tanh"};
  const size_t per_dir = size_t(k.gates() == 4 ? 3 : k.gates() == 3 ? 2 : 1);
  if (names.size() == per_dir && k.num_dir() == 2) names = twice(names);
  size_t na = 0, nb = 0;
  std::vector<Act> all;
  for (const auto& n : names) {
    Act a{n};
    if (n == "LeakyRelu") a.alpha = na < k.alphas.size() ? k.alphas[na++] : 0.01;
    if (n == "HardSigmoid" || n == "Affine") {
      a.alpha = na < k.alphas.size() ? k.alphas[na++] : (n == "Affine" ? 1.0 : 0.2);
      a.beta = nb < k.betas.size() ? k.betas[nb++] : (n == "Affine" ? 0.0 : 0.5);
    }
    all.push_back(a);
  }
  return {all.begin() + std::ptrdiff_t(size_t(dir) * per_dir), all.begin() + std::ptrdiff_t(size_t(dir + 1) * per_dir)};
}

struct Expected {
  std::vector<double> y, y_h, y_c;  // layout 0
};

Expected reference(const RnnCase& k, const RnnData& d) {
  const int64_t S = k.seq, N = k.batch, I = k.input, H = k.hidden, G = k.gates(), D = k.num_dir();
  Expected e{std::vector<double>(size_t(S * D * N * H)), std::vector<double>(size_t(D * N * H)),
             std::vector<double>(size_t(D * N * H))};
  auto clip = [&](double v) { return k.clip > 0 ? std::clamp(v, -double(k.clip), double(k.clip)) : v; };
  for (int64_t dir = 0; dir < D; ++dir) {
    const std::vector<Act> act = acts_of(k, dir);
    const bool reverse = k.direction == "reverse" || dir == 1;
    auto W = [&](int64_t row, int64_t i) { return double(d.w[size_t((dir * G * H + row) * I + i)]); };
    auto R = [&](int64_t row, int64_t j) { return double(d.r[size_t((dir * G * H + row) * H + j)]); };
    auto Wb = [&](int64_t row) { return k.bias ? double(d.b[size_t(dir * 2 * G * H + row)]) : 0.0; };
    auto Rb = [&](int64_t row) { return k.bias ? double(d.b[size_t(dir * 2 * G * H + G * H + row)]) : 0.0; };
    auto P = [&](int64_t g, int64_t j) { return k.peepholes ? double(d.p[size_t(dir * 3 * H + g * H + j)]) : 0.0; };
    for (int64_t b = 0; b < N; ++b) {
      std::vector<double> h(size_t(H), 0.0), c(size_t(H), 0.0);
      for (int64_t j = 0; j < H; ++j) {
        if (k.initial_h) h[size_t(j)] = d.h0[size_t((dir * N + b) * H + j)];
        if (k.lstm() && k.initial_c) c[size_t(j)] = d.c0[size_t((dir * N + b) * H + j)];
      }
      for (int64_t s = 0; s < S; ++s) {
        const int64_t t = reverse ? S - 1 - s : s;
        auto xw = [&](int64_t g, int64_t j) {  // x_t . W[g*H + j] + Wb
          double v = Wb(g * H + j);
          for (int64_t i = 0; i < I; ++i) v += W(g * H + j, i) * double(d.x[size_t((t * N + b) * I + i)]);
          return v;
        };
        auto rh = [&](int64_t g, int64_t j, const std::vector<double>& v) {  // v . R[g*H + j] + Rb
          double out = Rb(g * H + j);
          for (int64_t l = 0; l < H; ++l) out += R(g * H + j, l) * v[size_t(l)];
          return out;
        };
        std::vector<double> hn(h.size()), cn(h.size());
        if (k.op == "LSTM") {
          for (int64_t j = 0; j < H; ++j) {
            const auto J = size_t(j);
            const double i = act[0](clip(xw(0, j) + rh(0, j, h) + P(0, j) * c[J]));
            const double f = k.input_forget ? 1 - i : act[0](clip(xw(2, j) + rh(2, j, h) + P(2, j) * c[J]));
            const double g = act[1](clip(xw(3, j) + rh(3, j, h)));
            cn[J] = f * c[J] + i * g;
            const double o = act[0](clip(xw(1, j) + rh(1, j, h) + P(1, j) * cn[J]));
            hn[J] = o * act[2](cn[J]);
          }
        } else if (k.op == "GRU") {
          std::vector<double> z(h.size()), r(h.size()), rhv(h.size());
          for (int64_t j = 0; j < H; ++j) {
            z[size_t(j)] = act[0](clip(xw(0, j) + rh(0, j, h)));
            r[size_t(j)] = act[0](clip(xw(1, j) + rh(1, j, h)));
            rhv[size_t(j)] = r[size_t(j)] * h[size_t(j)];
          }
          for (int64_t j = 0; j < H; ++j) {
            const auto J = size_t(j);
            const double pre = k.linear_before_reset ? xw(2, j) + r[J] * rh(2, j, h) : xw(2, j) + rh(2, j, rhv);
            hn[J] = (1 - z[J]) * act[1](clip(pre)) + z[J] * h[J];
          }
        } else {
          for (int64_t j = 0; j < H; ++j) hn[size_t(j)] = act[0](clip(xw(0, j) + rh(0, j, h)));
        }
        h = hn, c = cn;
        for (int64_t j = 0; j < H; ++j) e.y[size_t(((t * D + dir) * N + b) * H + j)] = h[size_t(j)];
      }
      for (int64_t j = 0; j < H; ++j) {
        e.y_h[size_t((dir * N + b) * H + j)] = h[size_t(j)];
        e.y_c[size_t((dir * N + b) * H + j)] = c[size_t(j)];
      }
    }
  }
  return e;
}

void expect_near(const Tensor& got, const std::vector<double>& want, const std::string& what) {
  const std::vector<float> g = cast(got, DType::f32).contiguous().to_vector<float>();
  ASSERT_EQ(g.size(), want.size()) << what << " " << got.shape();
  for (size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(g[i], want[i], 2e-5) << what << "[" << i << "]";
}

// Loads the case's model, runs it, and compares every output with the reference.
void check(const RnnCase& k) {
  const RnnData d = data_of(k);
  onnx::Model m = rnn_model(k, d).load();
  const bool bf = k.layout == 1;
  Tensor x = tensor(bf ? swap01(d.x, k.seq, k.batch, k.input) : d.x,
                    bf ? Shape{k.batch, k.seq, k.input} : Shape{k.seq, k.batch, k.input});
  std::vector<Tensor> out = m.run({x});
  ASSERT_EQ(out.size(), k.lstm() ? 3u : 2u);
  const Expected e = reference(k, d);
  const int64_t D = k.num_dir();
  EXPECT_EQ(out[0].shape(), (bf ? Shape{k.batch, k.seq, D, k.hidden} : Shape{k.seq, D, k.batch, k.hidden}));
  EXPECT_EQ(out[1].shape(), (bf ? Shape{k.batch, D, k.hidden} : Shape{D, k.batch, k.hidden}));
  expect_near(bf ? permute(out[0], Shape{1, 2, 0, 3}) : out[0], e.y, "Y");
  expect_near(bf ? transpose(out[1], 0, 1) : out[1], e.y_h, "Y_h");
  if (k.lstm()) expect_near(bf ? transpose(out[2], 0, 1) : out[2], e.y_c, "Y_c");
}

// The message of the error loading `m` throws ("" when it loads).
std::string load_error(const ModelBuilder& m) {
  try {
    m.load();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(OnnxRnn, LstmWithEveryInput) { check({}); }

TEST(OnnxRnn, LstmDefaultsWithoutOptionalInputs) {
  check({.bias = false, .initial_h = false, .initial_c = false, .peepholes = false});
}

TEST(OnnxRnn, LstmReverseWithInitialHOnly) {
  check({.seq = 4, .direction = "reverse", .initial_c = false});
}

TEST(OnnxRnn, LstmBidirectionalBatchFirst) {
  check({.seq = 4, .batch = 3, .hidden = 3, .direction = "bidirectional", .layout = 1});
}

TEST(OnnxRnn, LstmClipAndInputForget) {
  check({.direction = "bidirectional", .clip = 0.4f, .input_forget = true});
}

TEST(OnnxRnn, LstmCustomActivations) {
  check({.activations = {"HardSigmoid", "LeakyRelu", "Affine"}, .alphas = {0.3f, 0.2f, 0.7f}, .betas = {0.4f, -0.1f}});
}

TEST(OnnxRnn, GruForwardAndLinearBeforeReset) {
  check({.op = "GRU"});
  check({.op = "GRU", .linear_before_reset = true});
}

TEST(OnnxRnn, GruBidirectionalBatchFirstWithClip) {
  check({.op = "GRU", .seq = 5, .direction = "bidirectional", .layout = 1, .clip = 0.5f, .linear_before_reset = true});
  check({.op = "GRU", .direction = "reverse", .bias = false, .initial_h = false});
}

TEST(OnnxRnn, GruWithoutInitialStateBeforeReset) {
  check({.op = "GRU", .initial_h = false, .linear_before_reset = true});
}

TEST(OnnxRnn, RnnDirectionsAndActivations) {
  check({.op = "RNN"});
  check({.op = "RNN", .direction = "bidirectional", .initial_h = false});
  check({.op = "RNN", .direction = "reverse", .layout = 1, .activations = {"Relu"}});
  check({.op = "RNN", .direction = "bidirectional", .activations = {"LeakyRelu", "Sigmoid"}, .alphas = {0.25f}});
}

TEST(OnnxRnn, SymbolicBatchRunsForEachBatchSize) {
  RnnCase k{.layout = 1, .initial_h = false, .initial_c = false};
  const RnnData d = data_of(k);
  onnx::Model m = rnn_model(k, d, "N").load();  // dim 0 of X (batch in layout 1) is "N"
  for (int64_t n : {2, 1}) {
    RnnCase kn = k;
    kn.batch = n;
    RnnData dn = d;
    dn.x.resize(size_t(k.seq * n * k.input));
    Tensor x = tensor(swap01(dn.x, k.seq, n, k.input), Shape{n, k.seq, k.input});
    std::vector<Tensor> out = m.run({x});
    const Expected e = reference(kn, dn);
    expect_near(permute(out[0], Shape{1, 2, 0, 3}), e.y, "Y");
    expect_near(transpose(out[1], 0, 1), e.y_h, "Y_h");
  }
}

TEST(OnnxRnn, SymbolicSequenceLengthFails) {
  RnnCase k;
  const std::string message = load_error(rnn_model(k, data_of(k), "T"));  // dim 0 of X (seq) is "T"
  EXPECT_NE(message.find("sequence length known when the model loads"), std::string::npos) << message;
}

// sequence_lens is accepted when every length is the full one.
TEST(OnnxRnn, SequenceLensMustBeTheFullLength) {
  for (int64_t len : {3, 2}) {
    RnnCase k{.op = "GRU"};
    ModelBuilder m = rnn_model(k, data_of(k));
    m.ints("lens", {len, 3});
    auto* n = m.g->mutable_node(0);
    while (n->input_size() < 5) n->add_input("");
    n->set_input(4, "lens");
    const std::string message = load_error(m);
    if (len == 3) EXPECT_EQ(message, "");
    else EXPECT_NE(message.find("sequence_lens holds 2"), std::string::npos) << message;
  }
}

TEST(OnnxRnn, UnknownActivationFails) {
  RnnCase k{.op = "RNN", .activations = {"Gelu"}};
  const std::string message = load_error(rnn_model(k, data_of(k)));
  EXPECT_NE(message.find("activation 'Gelu' is not one of"), std::string::npos) << message;
}

TEST(OnnxRnn, WrongActivationCountFails) {
  RnnCase k{.op = "GRU", .activations = {"Sigmoid", "Tanh", "Tanh"}};
  const std::string message = load_error(rnn_model(k, data_of(k)));
  EXPECT_NE(message.find("activations has 3 names"), std::string::npos) << message;
}

TEST(OnnxRnn, MismatchedWeightsFail) {
  RnnCase k;
  ModelBuilder m = rnn_model(k, data_of(k));
  m.g->mutable_node(0)->mutable_attribute(0)->set_i(3);  // hidden_size 3 against R's 2
  const std::string message = load_error(m);
  EXPECT_NE(message.find("W must be"), std::string::npos) << message;
}

// An initial state that would broadcast over the batch is refused, not broadcast.
TEST(OnnxRnn, MisshapedInitialStateFails) {
  RnnCase k{.op = "RNN"};
  ModelBuilder m = rnn_model(k, data_of(k));
  auto* h0 = m.g->mutable_initializer(m.g->initializer_size() - 1);
  ASSERT_EQ(h0->name(), "initial_h");
  h0->set_dims(1, 1);
  h0->mutable_float_data()->Truncate(int(k.hidden));
  const std::string message = load_error(m);
  EXPECT_NE(message.find("initial_h must be [1,2,2], got [1,1,2]"), std::string::npos) << message;
}

}  // namespace
}  // namespace baton
