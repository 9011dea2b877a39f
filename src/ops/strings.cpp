// Ops on string tensors (ONNX's StringNormalizer, the string pools of TfIdfVectorizer):
//   change_case(x, to)  a graph op: every string upper- or lower-cased;
//   vocabulary_index(x, vocabulary)  a graph op: each string's (or number's) position in
//       a vocabulary (its first), -1 where absent; i64 ids for ops on token ids
//       (ngram_counts), and ONNX's LabelEncoder;
//   remove_words(x, words, case_sensitive)  an eager function: the elements of a 1-D
//       tensor that are none of `words`. How many remain depends on the values, so, like
//       non_max_suppression, it runs on concrete tensors only.
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
  const bool upper = to_upper(c);
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

}  // namespace

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
    .cpu(kernel);

}  // namespace baton::ops

namespace baton {

Tensor change_case(const Tensor& x, CaseChange to, SourceLoc loc) {
  return ops::call(ops::change_case_op, {x}, {{"to", std::string(to == CaseChange::upper ? "upper" : "lower")}}, loc);
}

Tensor vocabulary_index(const Tensor& x, const Tensor& vocabulary, SourceLoc loc) {
  return ops::call(ops::vocabulary_index_op, {x, vocabulary}, {}, loc);
}

Tensor remove_words(const Tensor& x, const std::vector<std::string>& words, bool case_sensitive, SourceLoc loc) {
  if (!x.defined() || x.dtype() != DType::string || x.dim() != 1)
    throw ShapeError("remove_words", str("takes a 1-D string tensor, got ", x.defined() ? str(x.dtype(), x.shape()) : "none"),
                     loc);
  if (x.is_symbolic())
    throw GraphError("remove_words", "how many strings remain depends on their values, so it runs on concrete tensors "
                                     "only, not in a graph", loc);
  auto key = [&](const std::string& s) { return case_sensitive ? s : ops::changed_case(s, false); };
  std::unordered_set<std::string> stop;
  for (const std::string& w : words) stop.insert(key(w));
  std::vector<std::string> kept;
  for (const std::string& s : x.to_vector<std::string>(loc))
    if (!stop.count(key(s))) kept.push_back(s);
  const auto n = int64_t(kept.size());
  return tensor(kept, {n}, loc);
}

}  // namespace baton
