// baton's ngram_counts written as ONNX TfIdfVectorizer (opset 17) in mode TF: the pool's
// tokens (held by the op as 32-bit halves), the start of each n-gram level, the output
// coordinate of each n-gram, the lengths and the skip.
#include "io/onnx/export_compose.h"

namespace baton::onnx::detail {
namespace {

// The token ids from the op's "tokens" attribute: (high, low) 32-bit halves.
std::vector<int64_t> joined_tokens(const std::vector<int64_t>& halves) {
  std::vector<int64_t> tokens;
  for (size_t i = 0; i + 1 < halves.size(); i += 2)
    tokens.push_back(int64_t((uint64_t(halves[i]) << 32) | (uint64_t(halves[i + 1]) & 0xFFFFFFFFu)));
  return tokens;
}

}  // namespace

BATON_ONNX_EXPORTER("ngram_counts", [](ExportContext& c) {
  const ops::Attrs& a = c.attrs();
  c.add("TfIdfVectorizer", {c.input(0)}, {c.output()})
      .attr("mode", std::string("TF"))
      .attr("pool_int64s", joined_tokens(a.ints("tokens")))
      .attr("ngram_counts", a.ints("level_starts"))
      .attr("ngram_indexes", a.ints("coordinates"))
      .attr("min_gram_length", a.i("min_length"))
      .attr("max_gram_length", a.i("max_length"))
      .attr("max_skip_count", a.i("max_skip"));
});

}  // namespace baton::onnx::detail
