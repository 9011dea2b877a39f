// NumPy .npy reading and writing (baton/npy.h): round trips, hand-written files of every
// header version, Fortran order and byte order, and hostile bytes.
#include <baton/baton.h>
#include <baton/npy.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "harness/failing_disk.h"
#include "harness/op_harness.h"

namespace baton::testing {
namespace {

namespace fs = std::filesystem;

// --- hand-made files ---

// magic | major.0 | header length (u16 for version 1, u32 otherwise) | header | data
std::string npy_file(int major, std::string_view header, std::string_view data) {
  std::string out("\x93NUMPY", 6);
  out += char(major);
  out += char(0);
  for (int i = 0; i < (major == 1 ? 2 : 4); ++i) out += char((header.size() >> (8 * i)) & 0xff);
  out += header;
  out += data;
  return out;
}

std::string dict(std::string_view descr, std::string_view shape, bool fortran = false) {
  return str("{'descr': '", descr, "', 'fortran_order': ", fortran ? "True" : "False", ", 'shape': ", shape,
             ", }\n");
}

template <class T> std::string le(const std::vector<T>& values) {
  std::string out(values.size() * sizeof(T), '\0');
  if (!values.empty()) std::memcpy(out.data(), values.data(), out.size());
  return out;
}

template <class T> std::string be(const std::vector<T>& values) {
  std::string out = le(values);
  for (size_t i = 0; i < out.size(); i += sizeof(T)) std::reverse(out.begin() + i, out.begin() + i + sizeof(T));
  return out;
}

// Same dtype, shape and bytes.
::testing::AssertionResult same(const Tensor& actual, const Tensor& expected) {
  if (actual.dtype() != expected.dtype() || !(actual.shape() == expected.shape()))
    return ::testing::AssertionFailure() << "got " << actual.dtype() << actual.shape() << ", expected "
                                         << expected.dtype() << expected.shape();
  Tensor a = actual.contiguous(), e = expected.contiguous();
  if (a.nbytes() > 0 && std::memcmp(a.raw_data(), e.raw_data(), a.nbytes()) != 0)
    return ::testing::AssertionFailure() << "values differ: " << actual << " vs " << expected;
  return ::testing::AssertionSuccess();
}

Tensor sample(const Shape& shape, DType dtype) {
  return (arange(0, double(shape.numel()), 1, f64) * 1.25 - 3.0).to(dtype).reshape(shape);
}

class Npy : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = fs::temp_directory_path() / ("baton_npy_" + std::to_string(::getpid()));
    fs::create_directories(dir);
  }
  void TearDown() override {
    fs::permissions(dir, fs::perms::owner_all, fs::perm_options::add);
    fs::remove_all(dir);
  }
  std::string file(const std::string& name) const { return (dir / name).string(); }
  std::string write(const std::string& name, const std::string& bytes) const {
    std::ofstream(file(name), std::ios::binary) << bytes;
    return file(name);
  }
  std::vector<std::string> files_in(const fs::path& folder) const {
    std::vector<std::string> names;
    for (auto& e : fs::directory_iterator(folder)) names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }
  // `bytes` are an E through parse() and through load() of a file, with a message that
  // names the source and holds `part`.
  template <class E> void rejects(const std::string& bytes, const std::string& part) const {
    SCOPED_TRACE(part);
    EXPECT_THROWS_WITH(E, npy::parse(bytes, "bytes.npy"), "[npy::parse] bytes.npy: ", part);
    const std::string path = write("bad.npy", bytes);
    EXPECT_THROWS_WITH(E, npy::load(path), "[npy::load] " + path + ": ", part, "npy_test.cpp");
  }
  fs::path dir;
};

// --- round trips ---

TEST_F(Npy, RoundTripsEveryDtypeAndShape) {
  const std::vector<Shape> shapes{{}, {0}, {5}, {2, 3}, {2, 0, 4}, {2, 3, 4}, {1, 1, 1, 1, 1, 1, 1, 2}};
  const std::string path = file("t.npy");
  for (DType dtype : {b8, i32, i64, f32, f64, u8, i8, i16, u16, u32, u64, f16})
    for (const Shape& shape : shapes) {
      SCOPED_TRACE(str(dtype, shape));
      Tensor t = sample(shape, dtype);
      EXPECT_TRUE(same(npy::parse(npy::to_bytes(t), "mem.npy"), t));
      npy::save(path, t);
      EXPECT_TRUE(same(npy::load(path), t));
    }
  EXPECT_EQ(files_in(dir), std::vector<std::string>{"t.npy"});
}

TEST_F(Npy, RoundTripsExtremeValuesBitForBit) {
  Tensor l = tensor<int64_t>({INT64_MIN, INT64_MAX, -1, 0});
  Tensor i = tensor<int32_t>({INT32_MIN, INT32_MAX});
  Tensor f = tensor({std::numeric_limits<float>::quiet_NaN(), -0.0f, std::numeric_limits<float>::infinity(),
                     std::numeric_limits<float>::denorm_min()});
  Tensor d = tensor({std::numeric_limits<double>::lowest(), -0.0, std::numeric_limits<double>::epsilon()});
  for (const Tensor& t : {l, i, f, d}) EXPECT_TRUE(same(npy::parse(npy::to_bytes(t), "x.npy"), t));
}

// Strings are NumPy unicode arrays: UTF-32 code units, as many per element as the longest
// string has code points, zero-padded; read back as UTF-8 in either byte order.
TEST_F(Npy, StringTensorsAreUnicodeArrays) {
  const std::vector<std::string> texts{"été", "", "a\xF0\x9F\x98\x80" "b", "plain"};  // an emoji: one code point
  Tensor t = tensor(texts, {2, 2});
  const std::string bytes = npy::to_bytes(t);
  EXPECT_NE(bytes.find("{'descr': '<U5', 'fortran_order': False, 'shape': (2, 2), }"), std::string::npos);
  EXPECT_EQ(npy::parse(bytes, "s.npy").to_vector<std::string>(), texts);
  npy::save(file("s.npy"), t.t());
  EXPECT_EQ(npy::load(file("s.npy")).to_vector<std::string>(), (std::vector<std::string>{"été", "a\xF0\x9F\x98\x80" "b", "", "plain"}));
  const std::u32string units(U"hi\0\0ok\0\0", 8);  // two elements of 4 units; trailing NULs pad
  std::string data(reinterpret_cast<const char*>(units.data()), units.size() * 4);
  EXPECT_EQ(npy::parse(npy_file(1, dict("<U4", "(2,)"), data), "u.npy").to_vector<std::string>(),
            (std::vector<std::string>{"hi", "ok"}));
  EXPECT_EQ(npy::parse(npy_file(1, dict(">U4", "(2,)"), be(std::vector<char32_t>(units.begin(), units.end()))), "u.npy")
                .to_vector<std::string>(),
            (std::vector<std::string>{"hi", "ok"}));
  EXPECT_EQ(npy::parse(npy_file(1, dict("<U4", "(2,)", true), data), "u.npy").shape(), Shape({2}));
  EXPECT_EQ(npy::parse(npy_file(1, dict("<U0", "(3,)"), ""), "e.npy").to_vector<std::string>(),
            std::vector<std::string>(3));
}

TEST_F(Npy, BadTextIsAnError) {
  rejects<IOError>(npy_file(1, dict("<U1", "(1,)"), le<uint32_t>({0xD800})), "holds the code 55296, which is no Unicode");
  rejects<IOError>(npy_file(1, dict("<U2", "(2,)"), le<uint32_t>({65, 0})), "needs 16 data bytes, 8 present");
  rejects<IOError>(npy_file(1, dict("<U0", "(1099511627776,)"), ""), "over 2^20 empty strings");
  EXPECT_THROWS_WITH(ValueError, npy::to_bytes(tensor<std::string>({"ok", "bad\xff"})), "string element 1 is not valid UTF-8");
}

TEST_F(Npy, NonContiguousInputIsWrittenInCOrder) {
  Tensor t = sample({3, 4}, f32).t();
  ASSERT_FALSE(t.is_contiguous());
  const std::string bytes = npy::to_bytes(t);
  EXPECT_NE(bytes.find("'fortran_order': False, 'shape': (4, 3), }"), std::string::npos);
  EXPECT_TRUE(same(npy::parse(bytes, "t.npy"), t.contiguous()));
  Tensor expanded = sample({3}, i64).expand({2, 3});
  npy::save(file("e.npy"), expanded);
  EXPECT_TRUE(same(npy::load(file("e.npy")), expanded.contiguous()));
}

// --- the bytes written ---

TEST_F(Npy, WritesVersionOneWithNumpysHeader) {
  const std::string bytes = npy::to_bytes(tensor({1.5f, -2.0f, 3.0f}));
  const std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }";
  ASSERT_EQ(bytes.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  const size_t len = size_t(uint8_t(bytes[8])) | size_t(uint8_t(bytes[9])) << 8;
  EXPECT_EQ((10 + len) % 64, 0u) << "the data is 64-byte aligned";
  EXPECT_EQ(bytes.substr(10, header.size()), header);
  EXPECT_EQ(bytes.substr(10 + header.size(), len - header.size() - 1), std::string(len - header.size() - 1, ' '));
  EXPECT_EQ(bytes[10 + len - 1], '\n');
  EXPECT_EQ(bytes.substr(10 + len), le<float>({1.5f, -2.0f, 3.0f}));

  const auto header_of = [](const Tensor& t) {
    std::string b = npy::to_bytes(t);
    return b.substr(10, b.find('}') - 9);
  };
  EXPECT_EQ(header_of(scalar_tensor<int64_t>(7)), "{'descr': '<i8', 'fortran_order': False, 'shape': (), }");
  EXPECT_EQ(header_of(tensor({true, false})), "{'descr': '|b1', 'fortran_order': False, 'shape': (2,), }");
  EXPECT_EQ(header_of(zeros({2, 3}, i32)), "{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3), }");
  EXPECT_EQ(header_of(zeros({0, 5}, f64)), "{'descr': '<f8', 'fortran_order': False, 'shape': (0, 5), }");
  const std::string b = npy::to_bytes(tensor({true, false, true}));
  EXPECT_EQ(b.substr(b.size() - 3), std::string("\x01\x00\x01", 3));
}

// --- hand-written files ---

TEST_F(Npy, ReadsVersionOneTwoAndThreeHeaders) {
  const std::string data = le<int32_t>({1, 2, 3, 4});
  const Tensor expected = tensor<int32_t>({{1, 2}, {3, 4}});
  for (int major : {1, 2, 3}) {
    EXPECT_TRUE(same(npy::parse(npy_file(major, dict("<i4", "(2, 2)"), data), "v.npy"), expected)) << major;
    EXPECT_TRUE(same(npy::load(write("v.npy", npy_file(major, dict("<i4", "(2, 2)"), data))), expected)) << major;
  }
  // Keys in any order, spaces, double quotes, a trailing comma in the shape, Python 2
  // longs, no trailing comma or newline, a descr without byte order.
  for (std::string h : {"{'shape': (2, 2), 'fortran_order': False, 'descr': '<i4'}",
                        "{ \"descr\" : \"<i4\" ,\n'fortran_order':False,'shape':(2,2,)    }      \n",
                        "{'descr': '<i4', 'fortran_order': False, 'shape': (2L, 2L), }\n",
                        "  {'fortran_order': False, 'shape': ( 2 , 2 ), 'descr': 'i4',}\t\r\n"})
    EXPECT_TRUE(same(npy::parse(npy_file(1, h, data), "v.npy"), expected)) << h;
  EXPECT_TRUE(same(npy::parse(npy_file(1, dict("<f8", "()"), le<double>({2.5})), "s.npy"), scalar_tensor(2.5)));
  EXPECT_TRUE(same(npy::parse(npy_file(2, dict("<f4", "(0, 3)"), ""), "e.npy"), zeros({0, 3})));
}

TEST_F(Npy, ReadsFortranOrderAsARowMajorTensor) {
  // a[i][j] = 10 i + j, stored column by column.
  Tensor a = npy::parse(npy_file(1, dict("<i8", "(2, 3)", true), le<int64_t>({0, 10, 1, 11, 2, 12})), "f.npy");
  EXPECT_TRUE(a.is_contiguous());
  EXPECT_TRUE(same(a, tensor<int64_t>({{0, 1, 2}, {10, 11, 12}})));
  // 3-d: element (i, j, k) is at i + 2 j + 6 k.
  std::vector<float> column_major(24), row_major(24);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k) column_major[i + 2 * j + 6 * k] = row_major[i * 12 + j * 4 + k] = 100.f * i + 10.f * j + k;
  const std::string f3 = npy_file(1, dict("<f4", "(2, 3, 4)", true), le(column_major));
  EXPECT_TRUE(same(npy::parse(f3, "f3.npy"), tensor(row_major, {2, 3, 4})));
  EXPECT_TRUE(same(npy::load(write("f3.npy", f3)), tensor(row_major, {2, 3, 4})));
  // Rank 0 and 1 read the same either way; big-endian and empty Fortran arrays.
  EXPECT_TRUE(same(npy::parse(npy_file(1, dict(">i4", "(3,)", true), be<int32_t>({1, 2, 3})), "f1.npy"),
                   tensor<int32_t>({1, 2, 3})));
  EXPECT_TRUE(same(npy::parse(npy_file(1, dict("<f8", "()", true), le<double>({4})), "f0.npy"), scalar_tensor(4.0)));
  EXPECT_TRUE(same(npy::parse(npy_file(1, dict("<f4", "(0, 2)", true), ""), "fe.npy"), zeros({0, 2})));
}

TEST_F(Npy, ReadsBigEndianData) {
  EXPECT_TRUE(same(npy::parse(npy_file(1, dict(">f4", "(3,)"), be<float>({1.5f, -2.f, 1e30f})), "be.npy"),
                   tensor({1.5f, -2.f, 1e30f})));
  EXPECT_TRUE(same(npy::parse(npy_file(1, dict(">f8", "(2,)"), be<double>({0.1, -1e300})), "be.npy"),
                   tensor({0.1, -1e300})));
  EXPECT_TRUE(same(npy::parse(npy_file(1, dict(">i4", "(2,)"), be<int32_t>({-5, 70000})), "be.npy"),
                   tensor<int32_t>({-5, 70000})));
  EXPECT_TRUE(same(npy::parse(npy_file(1, dict(">i8", "(2,)"), be<int64_t>({INT64_MIN, 1})), "be.npy"),
                   tensor<int64_t>({INT64_MIN, 1})));
  const std::string be_file = npy_file(3, dict(">f4", "(2, 2)"), be<float>({1, 2, 3, 4}));
  EXPECT_TRUE(same(npy::load(write("be.npy", be_file)), tensor<float>({{1, 2}, {3, 4}})));
}

TEST_F(Npy, ReadsBoolAndNormalizesItsBytes) {
  const std::string bytes = npy_file(1, dict("|b1", "(2, 2)"), std::string("\x00\x01\x02\xff", 4));
  for (const Tensor& b : {npy::parse(bytes, "b.npy"), npy::load(write("b.npy", bytes))}) {
    EXPECT_EQ(b.dtype(), b8);
    EXPECT_EQ(b.shape(), (Shape{2, 2}));
    EXPECT_EQ(std::string(static_cast<const char*>(b.raw_data()), 4), std::string("\x00\x01\x01\x01", 4));
  }
  EXPECT_TRUE(same(npy::parse(npy_file(1, dict(">b1", "(1,)"), "\x01"), "b.npy"), tensor({true})));
}

// --- hostile bytes ---

TEST_F(Npy, BadMagicAndVersionsAreIOErrors) {
  const std::string data = le<float>({1, 2});
  rejects<IOError>("", "is empty");
  rejects<IOError>("PK\x03\x04 a zip file, not an npy file", "bad magic number");
  std::string b = npy_file(1, dict("<f4", "(2,)"), data);
  b[3] = 'X';
  rejects<IOError>(b, "bad magic number");
  for (auto [major, minor] : {std::pair{4, 0}, {1, 1}, {0, 0}, {255, 255}}) {
    b = npy_file(1, dict("<f4", "(2,)"), data);
    b[6] = char(major);
    b[7] = char(minor);
    rejects<IOError>(b, str("format version ", major, ".", minor, " is not supported"));
  }
}

TEST_F(Npy, EveryTruncationIsAnIOError) {
  const std::string full = npy::to_bytes(sample({2, 3}, f32));
  for (size_t cut = 0; cut < full.size(); ++cut) {
    SCOPED_TRACE(cut);
    const std::string part = full.substr(0, cut);
    EXPECT_THROWS_WITH(IOError, npy::parse(part, "cut.npy"), "cut.npy",
                       cut == 0 ? "empty" : cut < 6 ? "bad magic" : "truncated");
    EXPECT_THROWS_WITH(IOError, npy::load(write("cut.npy", part)), "cut.npy");
  }
}

TEST_F(Npy, HeaderLengthBeyondTheFileIsAnIOError) {
  const std::string header = dict("<f4", "(2,)"), data = le<float>({1, 2});
  std::string b = npy_file(1, header, data);
  b[8] = b[9] = '\xff';  // 65535 bytes
  rejects<IOError>(b, "the header of 65535 bytes goes past the end");
  b = npy_file(2, header, data);
  b[8] = b[9] = b[10] = b[11] = '\xff';  // 4 GiB
  rejects<IOError>(b, "the header of 4294967295 bytes goes past the end");
  // Within the file but past any sensible size: refused before it is parsed.
  b = npy_file(2, std::string(size_t(3) << 20, ' '), "");
  rejects<IOError>(b, "implausible header length 3145728");
}

TEST_F(Npy, MalformedHeadersAreIOErrors) {
  const std::string data = le<float>({1, 2});
  const std::string deep = std::string(20, '(') + "2" + std::string(20, ')');
  std::string rank65 = "(";
  for (int i = 0; i < 65; ++i) rank65 += "1, ";
  rank65 += ")";
  const std::vector<std::pair<std::string, std::string>> cases{
      {"", "malformed header: expected '{' at byte 0, found the end"},
      {"[1, 2]", "malformed header: expected '{'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,)", "expected ',' or '}'"},
      {"{'descr': '<f4' 'fortran_order': False, 'shape': (2,)}", "expected ',' or '}' at byte 16"},
      {"{'descr': '<f4, 'fortran_order': False, 'shape': (2,)}", "malformed header"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2", "expected ',' or ')'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,", "expected a value"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,)} x", "expected the end of the header"},
      {"{descr: '<f4', 'fortran_order': False, 'shape': (2,)}", "expected a quoted key"},
      {"{'descr': '<f4', 'fortran_order': false, 'shape': (2,)}", "expected a value"},
      {std::string("{'descr': '<f4', 'fortran_order': False, 'shape': (2,)}") + '\0', "found \"\\x00\""},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (--2,)}", "expected a digit"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': " + deep + "}", "nested more than 16 deep"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}",
       "header number 99999999999999999999 does not fit in 64 bits"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'extra': 1}", "unexpected key 'extra'"},
      {"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,)}", "duplicate key 'descr'"},
      {"{'descr': '<f4', 'fortran_order': False}", "the header lacks 'shape'"},
      {"{'descr': '<f4', 'shape': (2,)}", "the header lacks 'fortran_order'"},
      {"{'fortran_order': False, 'shape': (2,)}", "the header lacks 'descr'"},
      {"{'descr': '<f4', 'fortran_order': 0, 'shape': (2,)}", "'fortran_order' is not True or False"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': [2]}", "'shape' is not a tuple"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2)}", "'shape' is not a tuple"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': ('2',)}", "other than integers"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': " + rank65 + "}", "65 dims, more than NumPy's 64"},
      {"{'descr': 4, 'fortran_order': False, 'shape': (2,)}", "'descr' is not a string"},
  };
  for (auto& [header, message] : cases) rejects<IOError>(npy_file(1, header, data), message);
  std::string many = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'pad': [";
  for (int i = 0; i < 5000; ++i) many += "0,";
  rejects<IOError>(npy_file(2, many + "]}", data), "more than 4096 values");
}

TEST_F(Npy, NegativeAndOverflowingDimsAreIOErrors) {
  rejects<IOError>(npy_file(1, dict("<f4", "(-1, 2)"), le<float>({1, 2})), "negative dim in shape (-1, 2)");
  rejects<IOError>(npy_file(1, dict("<f4", "(2, -3)"), ""), "negative dim in shape (2, -3)");
  rejects<IOError>(npy_file(1, dict("<f4", "(4611686018427387904, 4)"), ""),
                   "shape (4611686018427387904, 4) of '<f4' has more elements or bytes than 64 bits count");
  // No elements, but strides that overflow.
  rejects<IOError>(npy_file(1, dict("<f4", "(0, 4611686018427387904, 4611686018427387904)"), ""), "64 bits");
  // Elements that fit, bytes that do not.
  rejects<IOError>(npy_file(1, dict("<f4", "(2305843009213693952,)"), ""), "64 bits");
  // A byte count that fits but is not there: refused before anything is allocated.
  rejects<IOError>(npy_file(1, dict("|b1", "(9223372036854775807,)"), "\x01"),
                   "truncated: shape (9223372036854775807,) of '|b1' needs 9223372036854775807 data bytes, 1 present");
}

TEST_F(Npy, DataOfTheWrongLengthIsAnIOError) {
  rejects<IOError>(npy_file(1, dict("<f4", "(2, 3)"), std::string(20, '\0')),
                   "truncated: shape (2, 3) of '<f4' needs 24 data bytes, 20 present");
  rejects<IOError>(npy_file(1, dict("<f4", "(2, 3)"), std::string(28, '\0')),
                   "4 unexpected bytes after the data (shape (2, 3) of '<f4' needs 24)");
  rejects<IOError>(npy_file(1, dict("<f8", "(0,)"), "x"), "1 unexpected bytes after the data");
  rejects<IOError>(npy_file(2, dict("<i8", "()"), std::string(7, '\0')), "needs 8 data bytes, 7 present");
}

TEST_F(Npy, ReadsTheStorageDtypesInEitherByteOrder) {
  Tensor u = npy::parse(npy_file(1, dict("|u1", "(2,)"), "\x01\xff"), "u.npy");
  EXPECT_EQ(u.dtype(), u8);
  EXPECT_EQ(u.to_vector<int64_t>(), (std::vector<int64_t>{1, 255}));
  Tensor h = npy::parse(npy_file(1, dict(">f2", "(2,)"), std::string("\x3c\x00\xc0\x00", 4)), "h.npy");
  EXPECT_EQ(h.dtype(), f16);
  EXPECT_EQ(h.to_vector<double>(), (std::vector<double>{1.0, -2.0}));
  Tensor w = npy::parse(npy_file(1, dict(">u4", "(1,)"), std::string("\xff\xff\xff\xfe", 4)), "w.npy");
  EXPECT_EQ(w.to_vector<int64_t>(), (std::vector<int64_t>{4294967294}));
}

TEST_F(Npy, BFloat16HasNoNumpyDtype) {
  EXPECT_THROWS_WITH(DTypeError, npy::to_bytes(tensor({1.f, 2.f}).to(bf16)), "NumPy has no bfloat16");
}

TEST_F(Npy, UnsupportedNumpyDtypesAreDTypeErrors) {
  for (auto [descr, name] : std::vector<std::pair<std::string, std::string>>{
           {"<f16", "float128"}, {"<c8", "complex64"}, {">c16", "complex128"},
           {"|O", "object"}, {"|S5", "bytes"}, {"|V8", "void"}, {"<M8[ns]", "datetime64"},
           {"<m8", "timedelta64"}})
    rejects<DTypeError>(npy_file(1, dict(descr, "(2,)"), ""), "baton has no " + name + " tensors (descr '" + descr + "')");
  rejects<DTypeError>(npy_file(1, "{'descr': [('a', '<f4'), ('b', '<i4')], 'fortran_order': False, 'shape': (2,)}", ""),
                      "structured");
}

TEST_F(Npy, UnknownDescrsAreIOErrors) {
  for (std::string descr : {"<f3", "<x4", "", "float32", "<i4 ", "<<f4", "b1x", "<M8[", "\x01\x02"})
    rejects<IOError>(npy_file(1, dict(descr, "(2,)"), le<float>({1, 2})), "unknown descr");
  rejects<IOError>(npy_file(1, dict("\x01\x02", "(2,)"), le<float>({1, 2})), "unknown descr '\\x01\\x02'");
}

// Any byte of a valid file changed to anything: a tensor or a baton::Error, never a crash.
TEST_F(Npy, CorruptedBytesNeverCrash) {
  for (const std::string& valid : {npy::to_bytes(sample({2, 3}, f32)),
                                   npy_file(1, dict(">i8", "(2, 1)", true), be<int64_t>({1, 2}))}) {
    int tensors = 0, errors = 0;
    for (size_t i = 0; i < valid.size(); ++i)
      for (int value : {0x00, 0x01, 0x20, 0x28, 0x2c, 0x7f, 0x80, 0xff, uint8_t(valid[i]) ^ 0x10}) {
        std::string b = valid;
        b[i] = char(value);
        try {
          npy::parse(b, "fuzz.npy");
          ++tensors;
        } catch (const Error& e) {
          ++errors;
          EXPECT_NE(std::string(e.what()).find("fuzz.npy"), std::string::npos) << e.what();
        }
      }
    EXPECT_GT(tensors, 0);
    EXPECT_GT(errors, 0);
  }
}

TEST_F(Npy, UnreadablePathsAreIOErrors) {
  EXPECT_THROWS_WITH(IOError, npy::load(file("nope.npy")), "nope.npy", "cannot open");
  EXPECT_THROWS_WITH(IOError, npy::load(dir.string()), dir.string(), "is a directory");
  EXPECT_THROWS_WITH(IOError, npy::load("/dev/null"), "/dev/null", "not a regular file");
}

// --- saving ---

TEST_F(Npy, FailedSavesLeaveNothingBehind) {
  const std::string missing = file("missing/x.npy");
  EXPECT_THROWS_WITH(IOError, npy::save(missing, ones({2})), "[npy::save] " + missing, "cannot create");
  EXPECT_THROWS_WITH(IOError, npy::save(dir.string(), ones({2})), dir.string());
  EXPECT_EQ(files_in(dir), std::vector<std::string>{});

  if (::geteuid() != 0) {  // root writes into read-only folders
    fs::create_directories(dir / "ro");
    fs::permissions(dir / "ro", fs::perms::owner_read | fs::perms::owner_exec);
    EXPECT_THROWS_WITH(IOError, npy::save(file("ro/x.npy"), ones({2})), "ro/x.npy");
    EXPECT_EQ(files_in(dir / "ro"), std::vector<std::string>{});
    fs::permissions(dir / "ro", fs::perms::owner_all);
  }

  // A disk that fills up midway keeps the previous file and leaves no temporary file.
  const std::string path = file("x.npy");
  npy::save(path, ones({4}));
  EXPECT_TRUE(write_fails_with_io_error_past_size_limit([&] { npy::save(path, ones({100000})); }));
  EXPECT_TRUE(same(npy::load(path), ones({4})));
  npy::save(path, full({3}, 2.0, i32));
  EXPECT_TRUE(same(npy::load(path), full({3}, 2.0, i32)));
  EXPECT_EQ(files_in(dir), std::vector<std::string>{"x.npy"});
}

TEST_F(Npy, SymbolicAndUndefinedTensorsAreValueErrors) {
  Graph g;
  Tensor a = g.placeholder(f32, {2, 3}, "a");
  const std::string path = file("s.npy");
  EXPECT_THROWS_WITH(ValueError, npy::save(path, a), "[npy::save] " + path, "symbolic", "npy_test.cpp");
  EXPECT_THROWS_WITH(ValueError, npy::save(path, relu(a)), "symbolic");
  EXPECT_THROWS_WITH(ValueError, npy::to_bytes(a), "symbolic");
  EXPECT_THROWS_WITH(ValueError, npy::save(path, Tensor()), "undefined");
  EXPECT_EQ(files_in(dir), std::vector<std::string>{});
}

}  // namespace
}  // namespace baton::testing
