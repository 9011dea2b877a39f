// String tensors: they hold text as objects (constructed, copied and destroyed with their
// storage), print, view and copy; cast converts them to and from every other dtype by
// ONNX's rules; graphs carry them in buffers of their own; arithmetic and checkpoints refuse
// them with a DTypeError (.npy files hold them: tests/io/npy_test.cpp).
#include <cmath>
#include <filesystem>
#include <limits>
#include <sstream>

#include "harness/op_harness.h"

namespace baton::testing {
namespace {

using Strings = std::vector<std::string>;

TEST(StringTensors, HoldTextAndShowIt) {
  EXPECT_EQ(dtype_name(DType::string), "string");
  EXPECT_TRUE(is_storage_only(DType::string));
  Tensor x = tensor<std::string>({{"a", "it's"}, {"", std::string(100, 'z')}});
  EXPECT_EQ(x.dtype(), DType::string);
  EXPECT_EQ(x.shape(), Shape({2, 2}));
  EXPECT_EQ(x.to_vector<std::string>()[3], std::string(100, 'z'));  // beyond the short-string buffer
  std::ostringstream printed;
  printed << tensor<std::string>({"a", "it's"});
  EXPECT_EQ(printed.str(), "tensor(['a', 'it\\'s'], dtype=string)");
  Tensor e = empty({3}, DType::string);
  EXPECT_EQ(e.to_vector<std::string>(), Strings(3));  // constructed empty, never garbage
}

TEST(StringTensors, ViewsAndCopiesCopyTheText) {
  Tensor x = tensor<std::string>({{"a", "b", "c"}, {"d", "e", "f"}});
  Tensor t = x.t();
  EXPECT_FALSE(t.is_contiguous());
  EXPECT_EQ(t.contiguous().to_vector<std::string>(), (Strings{"a", "d", "b", "e", "c", "f"}));
  Tensor c = x.clone();
  c.data<std::string>()[0] = "changed";
  EXPECT_EQ(x.to_vector<std::string>()[0], "a");  // a copy, not shared text
  EXPECT_EQ(x.reshape({6}).to_vector<std::string>()[4], "e");
  EXPECT_EQ(slice(x, 1, 1, 3).contiguous().to_vector<std::string>(), (Strings{"b", "c", "e", "f"}));
}

TEST(StringTensors, NumbersBecomeTheirShortestText) {
  EXPECT_EQ(cast(tensor({0.1f, 0.9767611f, 1e20f, -0.0f}), DType::string).to_vector<std::string>(),
            (Strings{"0.1", "0.9767611", "1e+20", "-0"}));
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(cast(tensor({0.1, std::nan(""), inf, -inf}), DType::string).to_vector<std::string>(),
            (Strings{"0.1", "NaN", "INF", "-INF"}));
  EXPECT_EQ(cast(tensor<int64_t>({-5, 9007199254740993}), DType::string).to_vector<std::string>(),
            (Strings{"-5", "9007199254740993"}));
  EXPECT_EQ(cast(tensor({true, false}), DType::string).to_vector<std::string>(), (Strings{"True", "False"}));
  EXPECT_EQ(cast(cast(tensor({0.1f, 65504.f}), f16), DType::string).to_vector<std::string>(), (Strings{"0.1", "65500"}));  // 3 digits tell f16 values apart here
  EXPECT_EQ(cast(tensor({100000.f, 1.5e-5f, 1e16f, 123456789.f}), DType::string).to_vector<std::string>(),
            (Strings{"100000", "1.5e-05", "1e+16", "123456790"}));  // positional from 1e-4 to 1e16
  EXPECT_EQ(cast(cast(tensor({250}), u8), DType::string).to_vector<std::string>(), (Strings{"250"}));
}

TEST(StringTensors, TextBecomesNumbers) {
  Tensor s = tensor<std::string>({"0.47892547", "1E8", "-2.5e-3", "NaN", "inf", "+INF", "-Inf", "1e50", "-1e-50"});
  std::vector<float> f = cast(s, f32).to_vector<float>();
  EXPECT_EQ(f[0], 0.47892547f);
  EXPECT_EQ(f[1], 1e8f);
  EXPECT_EQ(f[2], -2.5e-3f);
  EXPECT_TRUE(std::isnan(f[3]));
  EXPECT_EQ(f[4], INFINITY);
  EXPECT_EQ(f[5], INFINITY);
  EXPECT_EQ(f[6], -INFINITY);
  EXPECT_EQ(f[7], INFINITY);  // beyond f32: an infinity; below its smallest step: a zero
  EXPECT_EQ(f[8], 0.f);
  EXPECT_TRUE(std::signbit(f[8]));
  EXPECT_EQ(cast(tensor<std::string>({"100.5", "-7", "+12", "1e3", "99999999999"}), i32).to_vector<int32_t>(),
            (std::vector<int32_t>{100, -7, 12, 1000, std::numeric_limits<int32_t>::max()}));
  EXPECT_EQ(cast(tensor<std::string>({"9223372036854775807"}), i64).item<int64_t>(), 9223372036854775807);
  EXPECT_EQ(cast(tensor<std::string>({"True", "false", "0", "2.5"}), b8).to_vector<bool>(),
            (std::vector<bool>{true, false, false, true}));
  EXPECT_EQ(cast(tensor<std::string>({"300", "-1"}), u8).to_vector<uint8_t>(), (std::vector<uint8_t>{255, 0}));  // saturated
}

TEST(StringTensors, TextRoundTripsThroughEveryDtype) {
  for (DType t : {f32, f64, i32, i64, u8, i8, i16, u16, u32, u64, f16, bf16}) {
    Tensor x = cast(tensor({1.0, 2.0, 100.0}), t);
    Tensor back = cast(cast(x, DType::string), t);
    EXPECT_EQ(cast(back, f64).to_vector<double>(), cast(x, f64).to_vector<double>()) << t;
  }
}

TEST(StringTensors, UnreadableTextIsAValueErrorNamingIt) {
  EXPECT_THROWS_WITH(ValueError, cast(tensor<std::string>({"1", "Hello World!"}), f32), "[cast]",
                     "\"Hello World!\"", "f32");
  EXPECT_THROWS_WITH(ValueError, cast(tensor<std::string>({"12abc"}), i64), "\"12abc\"", "i64");
  EXPECT_THROWS_WITH(ValueError, cast(tensor<std::string>({""}), f64), "\"\"");
}

TEST(StringTensors, ArithmeticAndFilesRefuseThem) {
  Tensor x = tensor<std::string>({"1", "2"});
  EXPECT_THROWS_WITH(DTypeError, x + x, "[add]", "string tensors hold text");
  EXPECT_THROWS_WITH(DTypeError, exp(x), "[exp]", "string tensors hold text");  // no silent parsing
  EXPECT_THROWS_WITH(DTypeError, x + tensor({1.f, 2.f}), "string and f32");
  EXPECT_THROWS_WITH(DTypeError, sum(x), "string tensors hold text");
  const std::string path = (std::filesystem::temp_directory_path() / "baton_string_ckpt.bin").string();
  EXPECT_THROWS_WITH(DTypeError, io::save_tensors(path, {{"x", x}}), "entry 'x' is a string tensor");
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(StringTensors, GraphsCarryThemInBuffersOfTheirOwn) {
  Graph g;
  Tensor p = g.placeholder(f32, {"n"}, "p");
  Tensor text = cast(p * 2.f, DType::string);
  Tensor upper = change_case(cast(cast(text, f64), DType::string), CaseChange::upper);
  Session s(g);
  for (int run = 0; run < 2; ++run) {  // a replay reuses the plan: the strings must be fresh each time
    std::vector<Tensor> out = s.run({text, upper}, {{p, tensor({0.25f, INFINITY, 1.5f})}});
    EXPECT_EQ(out[0].to_vector<std::string>(), (Strings{"0.5", "INF", "3"}));
    EXPECT_EQ(out[1].to_vector<std::string>(), (Strings{"0.5", "INF", "3"}));
  }
  CompiledFunction compiled({.name = "to_text"});
  CompiledFunction::Fn fn = [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{change_case(in[0], CaseChange::lower)};
  };
  for (int call = 0; call < 2; ++call)
    EXPECT_EQ(compiled.call({tensor<std::string>({"AbC"})}, fn, SourceLoc::current())[0].to_vector<std::string>(),
              (Strings{"abc"}));
}

}  // namespace
}  // namespace baton::testing
