// ONNX text ops: StringNormalizer on string tensors, TfIdfVectorizer over token ids or
// strings, ai.onnx.ml's LabelEncoder (string or number keys). baton's ngram_counts counts
// the pool's n-grams per row; a string pool is first made ids (each distinct pool string
// an id, its position in a vocabulary; input strings become ids by vocabulary_index, -1
// for a word outside the pool, which no n-gram holds).
// The mode weighs the counts: TF keeps them, IDF turns each count above zero into its weight
// (1 without weights), TFIDF multiplies counts by the weights. Weights are read per output
// coordinate, as the ONNX reference does.
#include <unordered_map>

#include "baton/ops.h"
#include "io/onnx/importer.h"

namespace baton::onnx::detail {

// StringNormalizer: stopwords removed (compared ignoring case unless is_case_sensitive),
// then the case changed. Input [C] or [1, C]; when every string is a stopword the output
// is one empty string, as ONNX specifies. Removing words makes the output's size depend on
// the values: a fresh symbol bound when the model runs (remove_words). The locale
// attribute is not read: case maps by Unicode's simple mappings whatever the language.
BATON_ONNX_IMPORTER("StringNormalizer", [](NodeContext& c) -> Outputs {
  const std::string action = c.attr_string("case_change_action", "NONE");
  if (action != "NONE" && action != "LOWER" && action != "UPPER")
    c.fail(str("case_change_action '", action, "' is not NONE, LOWER or UPPER"));
  Tensor x = c.input(0);
  if (x.dtype() != DType::string) c.fail(str("takes a string tensor, got ", x.dtype()));
  const bool row = x.dim() == 2;
  if (x.dim() != 1 && !(row && x.shape()[0] == 1)) c.fail(str("takes strings of shape [C] or [1, C], got ", x.shape()));
  if (const std::vector<std::string> stopwords = c.attr_strings("stopwords"); !stopwords.empty()) {
    const Tensor words = row ? squeeze(x, 0) : x;
    const Tensor kept = remove_words(words, stopwords, c.attr_int("is_case_sensitive", 0) != 0, true);
    x = row ? unsqueeze(kept, 0) : kept;
  }
  if (action != "NONE") x = change_case(x, action == "UPPER" ? CaseChange::upper : CaseChange::lower);
  return {x};
});

BATON_ONNX_IMPORTER("TfIdfVectorizer", [](NodeContext& c) -> Outputs {
  const bool strings = c.has_attr("pool_strings");
  if (strings == c.has_attr("pool_int64s")) c.fail("needs one of the attributes pool_int64s and pool_strings");
  const std::string mode = c.attr_string("mode", "");
  if (mode != "TF" && mode != "IDF" && mode != "TFIDF") c.fail(str("mode '", mode, "' is not TF, IDF or TFIDF"));
  NgramPool pool{{}, c.attr_ints("ngram_counts"), c.attr_ints("ngram_indexes"),
                 c.attr_int("min_gram_length"), c.attr_int("max_gram_length"), c.attr_int("max_skip_count")};
  Tensor ids = c.input(0);
  if (strings) {
    if (ids.dtype() != DType::string) c.fail(str("has a string pool but ", ids.dtype(), " input"));
    std::vector<std::string> vocabulary;
    std::unordered_map<std::string, int64_t> id_of;
    for (const std::string& word : c.attr_strings("pool_strings")) {
      auto [it, added] = id_of.emplace(word, int64_t(vocabulary.size()));
      if (added) vocabulary.push_back(word);
      pool.tokens.push_back(it->second);
    }
    const auto size = int64_t(vocabulary.size());
    ids = vocabulary_index(ids, tensor(vocabulary, {size}));
  } else {
    pool.tokens = c.attr_ints("pool_int64s");
  }
  const Tensor counts = ngram_counts(ids, pool);
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

// A LabelEncoder's keys (ai.onnx.ml opsets 2 and 3: keys_strings, keys_int64s or
// keys_floats; opset 4: keys_tensor, of any of those or of doubles), 1-D.
Tensor label_keys(const NodeContext& c) {
  if (c.has_attr("keys_strings")) {
    const std::vector<std::string> v = c.attr_strings("keys_strings");
    return tensor(v, {int64_t(v.size())});
  }
  if (c.has_attr("keys_int64s")) {
    const std::vector<int64_t> v = c.attr_ints("keys_int64s");
    return tensor(v, {int64_t(v.size())});
  }
  if (c.has_attr("keys_floats")) {
    std::vector<float> v;
    for (double f : c.attr_floats("keys_floats")) v.push_back(float(f));
    return tensor(v, {int64_t(v.size())});
  }
  if (c.has_attr("keys_tensor")) return reshape(c.attr_tensor("keys_tensor"), Shape{-1});
  c.fail("needs keys: keys_strings, keys_int64s, keys_floats or keys_tensor");
}

// Its values and default: values_int64s, values_floats or values_strings with the
// matching default_* attribute (opsets 2 and 3), or values_tensor and default_tensor
// (opset 4; without it the default of the values' type: -1, -0.0 or "_Unused").
std::pair<Tensor, Tensor> label_values(const NodeContext& c) {
  if (c.has_attr("values_int64s")) {
    const std::vector<int64_t> v = c.attr_ints("values_int64s");
    return {tensor(v, {int64_t(v.size())}), full({}, c.attr_int("default_int64", -1), DType::i64)};
  }
  if (c.has_attr("values_floats")) {
    std::vector<float> v;
    for (double f : c.attr_floats("values_floats")) v.push_back(float(f));
    return {tensor(v, {int64_t(v.size())}), full({}, c.attr_float("default_float", -0.0), f32)};
  }
  if (c.has_attr("values_strings")) {
    const std::vector<std::string> v = c.attr_strings("values_strings");
    return {tensor(v, {int64_t(v.size())}), tensor(std::vector<std::string>{c.attr_string("default_string", "_Unused")}, {})};
  }
  if (c.has_attr("values_tensor")) {
    const Tensor values = reshape(c.attr_tensor("values_tensor"), Shape{-1});
    if (c.has_attr("default_tensor")) {
      const Tensor fallback = c.attr_tensor("default_tensor");
      if (fallback.numel() != 1 || fallback.dtype() != values.dtype())
        c.fail(str("has a default_tensor of ", fallback.dtype(), fallback.shape(), "; it must be one value of the "
                   "values' type ", values.dtype()));
      return {values, reshape(fallback, Shape{})};
    }
    if (values.dtype() == DType::string) return {values, tensor(std::vector<std::string>{"_Unused"}, {})};
    const DType compute = compute_dtype(values.dtype());  // full() computes; cast stores
    return {values, cast(full({}, is_floating(compute) ? -0.0 : -1.0, compute), values.dtype())};
  }
  c.fail("needs values: values_int64s, values_floats, values_strings or values_tensor");
}

// ai.onnx.ml's LabelEncoder: each element's value, or the default where it is no key
// (vocabulary_index finds it; a repeated key maps as its first occurrence). Keys of
// strings or numbers; number keys compare with == (NaN finds nothing).
BATON_ONNX_IMPORTER("ai.onnx.ml.LabelEncoder", [](NodeContext& c) -> Outputs {
  const Tensor& x = c.input(0);
  const Tensor keys = label_keys(c);
  if (x.dtype() != keys.dtype())
    c.fail(str("maps ", x.dtype(), " elements with keys of ", keys.dtype(), "; they must be of one type"));
  auto [values, fallback] = label_values(c);
  if (keys.numel() == 0 || values.numel() != keys.numel())
    c.fail(str("has ", keys.numel(), " keys and ", values.numel(), " values; it needs as many of each, at least one"));
  // Values of a storage dtype (f16, u8...) are picked in their compute dtype, then stored.
  const DType stored = values.dtype(), compute = stored == DType::string ? stored : compute_dtype(stored);
  if (compute != stored) values = cast(values, compute), fallback = cast(fallback, compute);
  const Tensor index = vocabulary_index(x, keys);
  const Tensor found = index >= int64_t(0);
  const Tensor picked = index_select(values, 0, reshape(where(found, index, zeros_like(index)), Shape{-1}));
  const Tensor result = where(found, reshape(picked, x.shape()), fallback);
  return {compute != stored ? cast(result, stored) : result};
});

}  // namespace baton::onnx::detail
