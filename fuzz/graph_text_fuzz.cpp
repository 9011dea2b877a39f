// Fuzz target: the graph text parser, then the verifier, the printer's round trip, and
// (for small graphs) a Session that plans and runs the graph on deterministic feeds.
//
// Expected: baton::Error for bad text, invalid graphs and failing ops. Findings: any
// other exception, a crash or sanitizer report, and a verified graph whose printed text
// does not parse back to the same text (docs/graph-ir.md promises the round trip).
#include <cstring>
#include <exception>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_util.h"
#include "graph/text.h"
#include "trace/verify.h"

namespace {

using namespace baton;

constexpr int64_t kMaxNumel = 4096;   // per graph input
constexpr int64_t kMaxValue = 1 << 16;  // per value the graph computes
constexpr size_t kMaxRank = 6;
constexpr int64_t kSymbolSize = 2;    // every plain symbol (batch, n...) in a run

bool is_plain_symbol(int64_t d) { return sym::is_symbol(d) && sym::to_string(d).find('*') == std::string::npos; }

// Numel of `s` under `b`, or nullopt when it is over `cap` or cannot be evaluated.
std::optional<int64_t> capped_numel(const Shape& s, const sym::Bindings& b, int64_t cap) {
  if (s.size() > kMaxRank) return std::nullopt;
  int64_t n = 1;
  for (int64_t d : s) {
    int64_t size = b.eval(d);  // ShapeError for a symbol with no size: the caller skips
    if (size < 0 || size > cap) return std::nullopt;
    n *= size;
    if (n > cap) return std::nullopt;
  }
  return n;
}

// The deterministic feed for one placeholder: a small repeating pattern (zeros for the
// storage dtypes; words of 0-2 letters for strings, which are objects, not bytes).
Tensor feed(DType dtype, const Shape& shape, int64_t numel) {
  if (dtype == DType::string) {
    std::vector<std::string> words(static_cast<size_t>(numel));
    for (int64_t i = 0; i < numel; ++i) words[size_t(i)] = std::string(size_t(i % 3), 'a');
    return from_buffer(words.data(), dtype, shape);
  }
  std::vector<unsigned char> bytes(size_t(numel) * dtype_size(dtype));
  for (int64_t i = 0; i < numel; ++i) {
    void* p = bytes.data() + size_t(i) * dtype_size(dtype);
    switch (dtype) {
      case DType::b8: { bool v = i % 2; std::memcpy(p, &v, sizeof v); break; }
      case DType::i32: { int32_t v = int32_t(i % 3); std::memcpy(p, &v, sizeof v); break; }
      case DType::i64: { int64_t v = i % 3; std::memcpy(p, &v, sizeof v); break; }
      case DType::f32: { float v = float(i % 7) * 0.5f - 1.5f; std::memcpy(p, &v, sizeof v); break; }
      case DType::f64: { double v = double(i % 7) * 0.5 - 1.5; std::memcpy(p, &v, sizeof v); break; }
      default: break;
    }
  }
  return from_buffer(bytes.data(), dtype, shape);
}

// Sizes every plain symbol of the inputs; false when the graph is too big to run.
bool small_enough(const graph::Graph& ir, sym::Bindings& b) {
  for (graph::Value* v : ir.inputs())
    for (int64_t d : v->shape().raw())
      if (is_plain_symbol(d)) b.bind(d, kSymbolSize);
  for (graph::Value* v : ir.inputs())
    if (!capped_numel(v->shape().raw(), b, kMaxNumel)) return false;
  for (auto& n : ir.nodes())
    for (graph::Value* v : n->outputs())
      if (!capped_numel(v->shape().raw(), b, kMaxValue)) return false;
  return true;
}

void run_small(const graph::Graph& ir, std::string_view text) {
  sym::Bindings b;
  if (!small_enough(ir, b)) return fuzz::note("verified; too big to run");
  Graph g = Graph::from_text(text);
  Session::Feeds feeds;
  for (const Tensor& in : g.inputs()) {
    Shape shape = b.eval(in.shape());
    feeds.emplace_back(in, feed(in.dtype(), shape, shape.numel()));
  }
  std::vector<Tensor> fetches = g.outputs();
  if (fetches.empty()) return fuzz::note("verified; no outputs to run");
  Session sess(g);
  for (const Tensor& t : sess.run(fetches, feeds)) fuzz::touch(t);
  // A second run replays the cached plan.
  for (const Tensor& t : sess.run(fetches, feeds)) fuzz::touch(t);
  fuzz::note("verified and ran");
}

void check_round_trip(const graph::Graph& ir) {
  graph::ExactFloatScope exact;
  const std::string printed = graph::to_text(ir);
  std::string reprinted;
  try {
    reprinted = graph::to_text(graph::parse_graph(printed));
  } catch (const Error& e) {
    fuzz::finding(str("the printed text of a verified graph does not parse: ", e.what(), "\n", printed));
  }
  if (reprinted != printed)
    fuzz::finding(str("the text form does not round-trip:\n", printed, "-- became --\n", reprinted));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  baton::fuzz::init_once();
  std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    graph::Graph ir = graph::parse_graph(text);
    trace::verify(ir);
    check_round_trip(ir);
    run_small(ir, text);
  } catch (const baton::Error& e) {
    // Expected: bad text, an invalid graph, a failing op.
    baton::fuzz::note(std::string("baton::Error: ") + e.what());
  } catch (const std::exception& e) {
    baton::fuzz::finding(std::string("an exception that is not a baton::Error: ") + e.what());
  }
  return 0;
}
