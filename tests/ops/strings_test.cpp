// change_case, vocabulary_index and remove_words (src/ops/strings.cpp): values against strings written out
// in the test (ASCII, accented and Greek letters, invalid UTF-8 left alone), errors for
// other dtypes and shapes, remove_words in a graph. Text: no gradient, no f32 form.
#include <limits>

#include "harness/op_harness.h"

namespace baton::testing {
namespace {

Tensor words(std::vector<std::string> v) {
  const auto n = int64_t(v.size());
  return tensor(v, {n});
}

BATON_OP_CASES {
  OpCase upper;
  upper.name = "text.change_case/upper";
  upper.make_inputs = [] {
    return Inputs{tensor<std::string>({{"Monday", "straße", "ÉTÉ"}, {"αβγ", "", "x1-Y2"}})};
  };
  upper.fn = [](const Inputs& in) { return change_case(in[0], CaseChange::upper); };
  upper.reference = [](const Inputs&) {
    return tensor<std::string>({{"MONDAY", "STRAßE", "ÉTÉ"}, {"ΑΒΓ", "", "X1-Y2"}});  // ß has no one-letter capital
  };
  upper.check_grad = upper.check_f32 = false;
  OpCase lower = upper;
  lower.name = "text.change_case/lower";
  lower.fn = [](const Inputs& in) { return change_case(in[0], CaseChange::lower); };
  lower.reference = [](const Inputs&) {
    return tensor<std::string>({{"monday", "straße", "été"}, {"αβγ", "", "x1-y2"}});
  };
  OpCase index;
  index.name = "text.vocabulary_index/basic";
  index.make_inputs = [] {
    return Inputs{tensor<std::string>({{"b", "zz", "a"}, {"", "b", "c"}}), tensor<std::string>({"a", "b", "c", "b", ""})};
  };
  index.fn = [](const Inputs& in) { return vocabulary_index(in[0], in[1]); };
  index.reference = [](const Inputs&) { return tensor<int64_t>({{1, -1, 0}, {4, 1, 2}}); };  // a repeat keeps the first
  index.check_grad = index.check_f32 = false;
  // Number keys compare with ==: -0 finds 0, NaN finds nothing (ONNX's LabelEncoder).
  OpCase numbers = index;
  numbers.name = "text.vocabulary_index/numbers";
  numbers.make_inputs = [] {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    return Inputs{tensor<float>({{2.5f, -0.0f, nan}, {7.f, 2.5f, -1.f}}), tensor<float>({0.f, 2.5f, nan, 7.f, 2.5f})};
  };
  numbers.reference = [](const Inputs&) { return tensor<int64_t>({{1, 0, -1}, {3, 1, -1}}); };
  OpCase ids = index;
  ids.name = "text.vocabulary_index/int64";
  ids.make_inputs = [] { return Inputs{tensor<int64_t>({40, -3, 7, 40}), tensor<int64_t>({7, 40, 9})}; };
  ids.reference = [](const Inputs&) { return tensor<int64_t>({1, -1, 0, 1}); };
  // Ops that move whole elements take strings too (OpDef::strings).
  OpCase joined = upper;
  joined.name = "text.cat/strings";
  joined.make_inputs = [] { return Inputs{tensor<std::string>({{"a", "bc"}}), tensor<std::string>({{"", "déf"}})}; };
  joined.fn = [](const Inputs& in) { return cat({in[0], in[1]}, 0); };
  joined.reference = [](const Inputs&) { return tensor<std::string>({{"a", "bc"}, {"", "déf"}}); };
  OpCase picked = upper;
  picked.name = "text.index_select/strings";
  picked.make_inputs = [] {
    return Inputs{tensor<std::string>({{"a", "b", "c"}, {"d", "e", "f"}}), tensor<int64_t>({2, 0, 2})};
  };
  picked.fn = [](const Inputs& in) { return index_select(in[0], 1, in[1]); };
  picked.reference = [](const Inputs&) { return tensor<std::string>({{"c", "a", "c"}, {"f", "d", "f"}}); };
  OpCase chosen = upper;
  chosen.name = "text.where/strings_broadcast";
  chosen.make_inputs = [] {
    return Inputs{tensor<bool>({{true, false}, {false, true}}), tensor<std::string>({"yes", "oui"}),
                  tensor<std::string>({{"no"}, {"non"}})};
  };
  chosen.fn = [](const Inputs& in) { return where(in[0], in[1], in[2]); };
  chosen.reference = [](const Inputs&) { return tensor<std::string>({{"yes", "no"}, {"non", "oui"}}); };
  // As ONNX's StringNormalizer removes stopwords (keep_one_empty), which the round trip uses.
  OpCase removed = upper;
  removed.name = "text.remove_words/stopwords";
  removed.make_inputs = [] { return Inputs{tensor<std::string>({"the", "Cat", "THE", "hat"})}; };
  removed.fn = [](const Inputs& in) { return remove_words(in[0], {"the"}, false, true); };
  removed.reference = [](const Inputs&) { return tensor<std::string>({"Cat", "hat"}); };
  OpCase all_removed = removed;
  all_removed.name = "text.remove_words/all_of_them";
  all_removed.fn = [](const Inputs& in) { return remove_words(in[0], {"the", "cat", "hat"}, false, true); };
  all_removed.reference = [](const Inputs&) { return tensor<std::string>({""}); };
  return {upper, lower, index, numbers, ids, joined, picked, chosen, removed, all_removed};
}

TEST(Strings, BytesThatAreNotUtf8StayAsTheyAre) {
  const std::string bad = std::string("A\xff") + "b\xc3";  // a stray byte, a cut sequence
  Tensor out = change_case(words({bad}), CaseChange::lower);
  EXPECT_EQ(out.to_vector<std::string>()[0], std::string("a\xff") + "b\xc3");
}

TEST(Strings, ChangeCaseWorksOnViews) {
  Tensor x = tensor<std::string>({{"a", "b"}, {"c", "d"}}).transpose(0, 1);
  EXPECT_EQ(change_case(x, CaseChange::upper).to_vector<std::string>(), (std::vector<std::string>{"A", "C", "B", "D"}));
}

TEST(Strings, RemoveWordsKeepsTheOthersInOrder) {
  Tensor x = words({"Monday", "tuesday", "monday", "wednesday"});
  EXPECT_EQ(remove_words(x, {"monday"}, true).to_vector<std::string>(),
            (std::vector<std::string>{"Monday", "tuesday", "wednesday"}));
  EXPECT_EQ(remove_words(x, {"MONDAY"}, false).to_vector<std::string>(),
            (std::vector<std::string>{"tuesday", "wednesday"}));
  Tensor none = remove_words(words({"a", "a"}), {"a"});
  EXPECT_EQ(none.shape(), Shape({0}));
  EXPECT_EQ(remove_words(words({"a", "a"}), {"a"}, true, true).to_vector<std::string>(), std::vector<std::string>{""});
}

// In a graph how many strings remain is a symbol bound when the run removes the words
// (runtime/plan.h, "Stages"); the steps after it are sized per run.
TEST(Strings, RemoveWordsInAGraph) {
  Graph g;
  Tensor x = g.placeholder(DType::string, {"n"}, "x");
  Tensor kept = change_case(remove_words(x, {"a", "the"}, false), CaseChange::upper);
  EXPECT_TRUE(sym::is_symbol(kept.shape()[0]));
  Session session(g);
  EXPECT_EQ(session.run({kept}, {{x, words({"The", "cat", "a", "hat"})}})[0].to_vector<std::string>(),
            (std::vector<std::string>{"CAT", "HAT"}));
  EXPECT_EQ(session.run({kept}, {{x, words({"dog", "A"})}})[0].to_vector<std::string>(),
            std::vector<std::string>{"DOG"});
  EXPECT_EQ(session.run({kept}, {{x, words({"a"})}})[0].shape(), Shape({0}));
}

// Only ops that move whole elements take strings: arithmetic and value-reading ops refuse
// them before running, naming the op.
TEST(Strings, OtherOpsRefuseThem) {
  EXPECT_THROWS_WITH(DTypeError, words({"a"}) + words({"b"}), "add", "string");
  EXPECT_THROWS_WITH(DTypeError, gather(tensor<std::string>({{"a"}}), 0, tensor<int64_t>({{0}})), "gather", "string");
}

TEST(Strings, ErrorsNameTheOpAndTheInput) {
  EXPECT_THROWS_WITH(DTypeError, vocabulary_index(words({"a"}), tensor({1})), "vocabulary_index", "one dtype",
                     "string and i32");
  EXPECT_THROWS_WITH(DTypeError, vocabulary_index(tensor({true}), tensor({false})), "vocabulary_index", "bool");
  EXPECT_THROWS_WITH(ShapeError, vocabulary_index(words({"a"}), tensor<std::string>({{"a"}})), "vocabulary must be 1-D");
  EXPECT_THROWS_WITH(DTypeError, change_case(tensor({1.f}), CaseChange::upper), "change_case", "string tensor", "f32");
  EXPECT_THROWS_WITH(ShapeError, remove_words(tensor<std::string>({{"a"}}), {"a"}), "remove_words", "1-D", "[1,1]");
  EXPECT_THROWS_WITH(DTypeError, remove_words(tensor({1.f}), {"a"}), "remove_words", "string tensor", "f32");
}

}  // namespace
}  // namespace baton::testing
