// baton's change_case written as ONNX StringNormalizer with no stopwords, remove_words as
// one with its constant words as the stopwords. Casts to and from string
// tensors are plain Cast nodes. StringNormalizer takes [C] or [1, C] only: other shapes
// are flattened around it and given back their shape (at most one symbolic dim, as -1).
// vocabulary_index with a constant vocabulary is ai.onnx.ml's LabelEncoder (i32 and f64
// elements through casts).
#include <algorithm>
#include <type_traits>
#include <unordered_set>

#include "baton/ops.h"
#include "io/onnx/export_compose.h"
#include "io/onnx/exporter.h"

namespace baton::onnx::detail {

BATON_ONNX_EXPORTER("change_case", [](ExportContext& c) {
  const graph::SymShape& shape = c.input_type(0).shape;
  const bool takes_it = shape.rank() == 1 || (shape.rank() == 2 && shape[0].is_static() && shape[0].value() == 1);
  const std::string in = takes_it ? c.input(0) : c.fresh("flat"), out = takes_it ? c.output() : c.fresh("changed");
  if (!takes_it) c.add("Reshape", {c.input(0), c.ints({-1}, "minus_one")}, {in});
  c.add("StringNormalizer", {in}, {out})
      .attr("case_change_action", std::string(c.attrs().s("to") == "upper" ? "UPPER" : "LOWER"))
      .attr("is_case_sensitive", int64_t(1));
  if (takes_it) return;
  std::vector<int64_t> dims;  // the shape back, one symbolic dim as -1
  for (size_t d = 0; d < shape.rank(); ++d) dims.push_back(shape[d].is_static() ? shape[d].value() : -1);
  if (std::count(dims.begin(), dims.end(), -1) > 1)
    c.fail(str("takes shape ", shape, ": StringNormalizer needs [C] or [1, C], and with more than one symbolic dim "
               "the shape cannot be restored after flattening"));
  c.add("Reshape", {out, c.ints(dims, "shape")}, {c.output()});
});

// StringNormalizer leaves one empty string where every string is a stopword, and holds
// its stopwords as an attribute: remove_words exports when it does the same
// (keep_one_empty) over constant words. Its count is read from its output's shape where a
// later dim needs it.
BATON_ONNX_EXPORTER("remove_words", [](ExportContext& c) {
  const Tensor* words = c.constant_input(1);
  if (!words) c.fail("removes words that are computed or fed; StringNormalizer holds its stopwords as an attribute");
  if (c.attrs().i("keep_one_empty") == 0)
    c.fail("gives no string where every one is removed, where StringNormalizer gives one empty string "
           "(keep_one_empty)");
  c.add("StringNormalizer", {c.input(0)}, {c.output()})
      .attr("stopwords", words->to_vector<std::string>())
      .attr("is_case_sensitive", c.attrs().i("case_sensitive"))
      .attr("case_change_action", std::string("NONE"));
  c.writer().add_shape_source(c.output(), c.output_type().shape.raw());
});

namespace {

// The vocabulary's distinct keys in order as LabelEncoder's `attr`, and in `positions`
// each one's first position (vocabulary_index finds a repeat there). NaN keys find
// nothing, so they are left out.
template <class T>
void set_keys(OnnxNode& node, const char* attr, const Tensor& vocabulary, std::vector<int64_t>& positions) {
  std::vector<T> keys;
  std::unordered_set<T> seen;  // compares with ==, as the op does: -0 is 0
  const std::vector<T> all = vocabulary.contiguous().to_vector<T>();
  for (size_t i = 0; i < all.size(); ++i) {
    if constexpr (std::is_floating_point_v<T>)
      if (all[i] != all[i]) continue;
    if (!seen.insert(all[i]).second) continue;
    keys.push_back(all[i]);
    positions.push_back(int64_t(i));
  }
  node.attr(attr, keys);
}

}  // namespace

namespace {

// f64 keys as LabelEncoder's float ones, where each is a float exactly (else there is no
// float key that only it matches).
Tensor float_keys(ExportContext& c, const Tensor& vocabulary) {
  const Tensor keys = cast(vocabulary, f32);
  const std::vector<double> wide = vocabulary.contiguous().to_vector<double>(),
                            back = cast(keys, DType::f64).contiguous().to_vector<double>();
  for (size_t i = 0; i < wide.size(); ++i)
    if (wide[i] == wide[i] && wide[i] != back[i])
      c.fail(str("has the f64 key ", wide[i], " at ", i, ", which no float equals: LabelEncoder (ai.onnx.ml opset 2) "
                 "holds float keys"));
  return keys;
}

}  // namespace

// Each key of the vocabulary maps to its first position, anything else to -1.
// LabelEncoder holds its keys as an attribute (strings, int64 or float at ai.onnx.ml
// opset 2), so the vocabulary must be a constant of the model. i32 elements are looked up
// as int64 (exact). f64 ones as float, where every key is a float: an element the cast to
// float changed is no key, so the lookup's result counts only where the cast gives the
// element back (Equal, Where).
BATON_ONNX_EXPORTER("vocabulary_index", [](ExportContext& c) {
  const Tensor* vocabulary = c.constant_input(1);
  if (!vocabulary)
    c.fail("needs a constant vocabulary: ai.onnx.ml's LabelEncoder, its ONNX form, holds the keys as an attribute");
  const DType dtype = vocabulary->dtype();
  const bool wide = dtype == DType::f64;
  std::string x = c.input(0);
  if (dtype == DType::i32) x = cast_to(c, x, dtype, DType::i64);
  if (wide) x = cast_to(c, x, dtype, f32);
  const std::string found = wide ? c.fresh("found") : c.output();
  OnnxNode node = c.add("LabelEncoder", {x}, {found});
  std::vector<int64_t> positions;
  if (dtype == DType::string) set_keys<std::string>(node, "keys_strings", *vocabulary, positions);
  else if (dtype == DType::i64 || dtype == DType::i32)
    set_keys<int64_t>(node, "keys_int64s", vocabulary->to(DType::i64), positions);
  else set_keys<float>(node, "keys_floats", wide ? float_keys(c, *vocabulary) : *vocabulary, positions);
  node.attr("values_int64s", positions).attr("default_int64", int64_t(-1)).proto()->set_domain(kMlDomain);
  if (!wide) return;
  const std::string exact = step(c, "Equal", {cast_to(c, x, f32, DType::f64), c.input(0)}).out;
  c.add("Where", {exact, found, c.constant(scalar_tensor<int64_t>(-1), "absent")}, {c.output()});
});

}  // namespace baton::onnx::detail
