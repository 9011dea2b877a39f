// ONNX text ops: TfIdfVectorizer over integer token ids. baton's ngram_counts counts the
// pool's n-grams per row; the mode weighs the counts: TF keeps them, IDF turns each count
// above zero into its weight (1 without weights), TFIDF multiplies counts by the weights.
// Weights are read per output coordinate, as the ONNX reference does. String pools are not
// supported (baton has no string tensors).
#include "baton/ops.h"
#include "io/onnx/importer.h"

namespace baton::onnx::detail {

BATON_ONNX_IMPORTER("TfIdfVectorizer", [](NodeContext& c) -> Outputs {
  if (c.has_attr("pool_strings")) c.fail("string pools are not supported (baton has no string tensors)");
  if (!c.has_attr("pool_int64s")) c.fail("needs the attribute pool_int64s");
  const std::string mode = c.attr_string("mode", "");
  if (mode != "TF" && mode != "IDF" && mode != "TFIDF") c.fail(str("mode '", mode, "' is not TF, IDF or TFIDF"));
  NgramPool pool{c.attr_ints("pool_int64s"), c.attr_ints("ngram_counts"), c.attr_ints("ngram_indexes"),
                 c.attr_int("min_gram_length"), c.attr_int("max_gram_length"), c.attr_int("max_skip_count")};
  const Tensor counts = ngram_counts(c.input(0), pool);
  if (mode == "TF") return {counts};
  Tensor weights;
  if (c.has_attr("weights")) {
    const std::vector<double> w = c.attr_floats("weights");
    const int64_t width = counts.shape()[size_t(counts.dim() - 1)];
    if (int64_t(w.size()) < width)
      c.fail(str("has ", w.size(), " weights for an output of ", width, " coordinates"));
    weights = cast(tensor(std::vector<double>(w.begin(), w.begin() + width), Shape{width}), DType::f32);
  }
  if (mode == "IDF") {
    const Tensor seen = counts > 0.0;
    return {weights.defined() ? where(seen, weights, zeros_like(counts)) : cast(seen, DType::f32)};
  }
  return {weights.defined() ? counts * weights : counts};
});

}  // namespace baton::onnx::detail
