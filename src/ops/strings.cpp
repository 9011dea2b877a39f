// Ops on string tensors (ONNX's StringNormalizer, the string pools of TfIdfVectorizer):
//   change_case(x, to)  a graph op: every string upper- or lower-cased;
//   vocabulary_index(x, vocabulary)  a graph op: each string's (or number's) position in
//       a vocabulary (its first), -1 where absent; i64 ids for ops on token ids
//       (ngram_counts), and ONNX's LabelEncoder;
//   remove_words(x, words, case_sensitive)  the elements of a 1-D tensor that are none of
//       `words`. How many remain depends on the values (OpDef::sized_by_values): in a
//       graph the count is a fresh symbol, as nonzero's.
//
// Strings are UTF-8. Case maps code point by code point with the simple (one to one)
// Unicode mappings of the C.UTF-8 locale; bytes that are not valid UTF-8 pass through
// unchanged. Text has no gradient.
#include <locale>
#include <unordered_map>
#include <unordered_set>

#include "baton/ops.h"
#include "core/utf8.h"
#include "kernels/cpu/copy.h"
#include "kernels/cpu/loops.h"
#include "ops/common.h"

namespace baton::ops {
namespace {

// The case tables: C.UTF-8's where the system has it (glibc builds it in), else the
// classic locale's, which map ASCII only.
const std::ctype<wchar_t>& case_table() {
  static const std::locale locale = [] {
    try {
      return std::locale("C.UTF-8");
    } catch (const std::runtime_error&) {
      return std::locale::classic();
    }
  }();
  return std::use_facet<std::ctype<wchar_t>>(locale);
}

std::string changed_case(std::string_view s, bool upper) {
  const std::ctype<wchar_t>& table = case_table();
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    auto [cp, n] = baton::detail::decode_utf8(s, i);
    if (n == 0) {
      out += s[i++];
      continue;
    }
    const wchar_t w = static_cast<wchar_t>(cp);
    const auto mapped = static_cast<char32_t>(upper ? table.toupper(w) : table.tolower(w));
    baton::detail::append_utf8(baton::detail::is_scalar_value(mapped) ? mapped : cp, out);
    i += n;
  }
  return out;
}

bool to_upper(const CallContext& c) {
  const std::string& to = c.attrs.s("to");
  if (to != "upper" && to != "lower") c.fail<ValueError>("'to' must be \"upper\" or \"lower\", got \"", to, "\"");
  return to == "upper";
}

void require_strings(const CallContext& c, const Tensor& x) {
  if (x.dtype() != DType::string) c.fail<DTypeError>("takes a string tensor, got ", x.dtype());
}

TensorMeta infer(const InferContext& c) {
  require_strings(c, c.input(0));
  to_upper(c);
  return TensorMeta{DType::string, c.input(0).shape()};
}

void kernel(const KernelContext& c) {
  const Tensor x = kernels::dense(c.input(0));
  const std::string* in = x.data<std::string>();
  std::string* out = c.output().data<std::string>();
  const bool upper = c.params<bool>();
  kernels::parallel_range(x.numel(), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) out[i] = changed_case(in[i], upper);
  }, kernels::grain_for(64));
}

bool is_key_dtype(DType t) { return t == DType::string || t == i32 || t == i64 || t == f32 || t == f64; }

TensorMeta infer_index(const InferContext& c) {
  const DType x = c.input(0).dtype(), words = c.input(1).dtype();
  if (!is_key_dtype(x) || x != words)
    c.template fail<DTypeError>("takes strings, or i32, i64, f32 or f64 numbers, of one dtype in x and the "
                                "vocabulary; got ", x, " and ", words);
  if (c.input(1).dim() != 1) c.fail("the vocabulary must be 1-D, got shape ", c.input(1).shape());
  return TensorMeta{i64, c.input(0).shape()};
}

// out[i] = the first position of x[i] among the keys, -1 where it is none: a hash map of
// K (string_view for strings; a number's hash and == make -0 find 0 and NaN find nothing).
template <class K, class T>
void look_up(const Tensor& x, const Tensor& vocabulary, const Tensor& result) {
  std::unordered_map<K, int64_t> position;
  const T* words = vocabulary.data<T>();
  for (int64_t i = 0; i < vocabulary.numel(); ++i) position.emplace(words[i], i);  // the first occurrence stays
  const T* in = x.data<T>();
  int64_t* out = result.data<int64_t>();
  kernels::parallel_range(x.numel(), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      auto it = position.find(in[i]);
      out[i] = it == position.end() ? -1 : it->second;
    }
  }, kernels::grain_for(16));
}

void index_kernel(const KernelContext& c) {
  const Tensor x = kernels::dense(c.input(0)), vocabulary = kernels::dense(c.input(1));
  switch (x.dtype()) {
    case DType::string: return look_up<std::string_view, std::string>(x, vocabulary, c.output());
    case DType::i32: return look_up<int32_t, int32_t>(x, vocabulary, c.output());
    case DType::i64: return look_up<int64_t, int64_t>(x, vocabulary, c.output());
    case DType::f32: return look_up<float, float>(x, vocabulary, c.output());
    default: return look_up<double, double>(x, vocabulary, c.output());  // f64 (infer_index)
  }
}

// remove_words: x [C] and the words [W], both strings.
void check_remove_operands(const CallContext& c) {
  for (size_t i = 0; i < 2; ++i) {
    require_strings(c, c.input(i));
    if (c.input(i).dim() != 1) c.fail("takes 1-D string tensors, got shape ", c.input(i).shape(), " for input ", i);
  }
}

TensorMeta infer_remove(const InferContext& c) {
  check_remove_operands(c);
  return TensorMeta{DType::string, Shape{count_attr(c)}};
}

// The strings that are no word, in order; with keep_one_empty, one empty string where
// none is left (ONNX's StringNormalizer).
std::vector<Tensor> remove(const CallContext& c) {
  check_remove_operands(c);
  const bool case_sensitive = c.attrs.i("case_sensitive") != 0;
  auto key = [&](const std::string& s) { return case_sensitive ? s : changed_case(s, false); };
  std::unordered_set<std::string> stop;
  for (const std::string& w : c.input(1).to_vector<std::string>(c.loc)) stop.insert(key(w));
  std::vector<std::string> kept;
  for (const std::string& s : c.input(0).to_vector<std::string>(c.loc))
    if (!stop.count(key(s))) kept.push_back(s);
  if (kept.empty() && c.attrs.i("keep_one_empty") != 0) kept.emplace_back();
  const auto n = int64_t(kept.size());
  return {tensor(kept, {n}, c.loc)};
}

}  // namespace

BATON_OP(remove_words_op, "remove_words")
    .inputs(2)
    .int_attr("case_sensitive")
    .int_attr("keep_one_empty")
    .int_attr("count", OpDef::optional)
    .storage_dtypes()
    .value_sized(remove)
    .infer(infer_remove);

BATON_OP(vocabulary_index_op, "vocabulary_index")
    .inputs(2)
    .storage_dtypes()
    .fusion(Fusion::Opaque)
    .infer(infer_index)
    .cpu(index_kernel);

BATON_OP(change_case_op, "change_case")
    .inputs(1)
    .string_attr("to")
    .storage_dtypes()
    .fusion(Fusion::Opaque)
    .infer(infer)
    .params(to_upper)  // the kernel's parameter: to upper case, or lower
    .cpu(kernel);

}  // namespace baton::ops

namespace baton {

Tensor change_case(const Tensor& x, CaseChange to, SourceLoc loc) {
  return ops::call(ops::change_case_op, {x}, {{"to", std::string(to == CaseChange::upper ? "upper" : "lower")}}, loc);
}

Tensor vocabulary_index(const Tensor& x, const Tensor& vocabulary, SourceLoc loc) {
  return ops::call(ops::vocabulary_index_op, {x, vocabulary}, {}, loc);
}

Tensor remove_words(const Tensor& x, const std::vector<std::string>& words, bool case_sensitive, bool keep_one_empty,
                    SourceLoc loc) {
  const Tensor operands[] = {x, tensor(words, {int64_t(words.size())}, loc)};
  const ops::Attrs attrs{{"case_sensitive", int64_t(case_sensitive)}, {"keep_one_empty", int64_t(keep_one_empty)}};
  return ops::call_many(ops::remove_words_op, operands, ops::with_count_symbol(attrs, operands, "kept"), loc)[0];
}

}  // namespace baton
