#include <baton/data.h>
#include <unistd.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>

#include "data/idx.h"

#include "harness/heap_count.h"
#include "harness/op_harness.h"

namespace baton::testing {
namespace {

namespace fs = std::filesystem;

// Writes an IDX file of unsigned bytes, gzip-compressed.
void write_idx(const std::string& path, const std::vector<uint32_t>& dims,
               const std::vector<unsigned char>& data, size_t cut = 0) {
  std::string bytes = {0, 0, 0x08, char(dims.size())};
  for (uint32_t d : dims)
    for (int s = 24; s >= 0; s -= 8) bytes += char((d >> s) & 0xff);
  bytes.append(data.begin(), data.end());
  bytes.resize(bytes.size() - cut);
  gzFile f = gzopen(path.c_str(), "wb");
  gzwrite(f, bytes.data(), unsigned(bytes.size()));
  gzclose(f);
}

class Idx : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = fs::temp_directory_path() / ("baton_idx_" + std::to_string(::getpid()));
    fs::create_directories(dir);
  }
  void TearDown() override { fs::remove_all(dir); }
  std::string file(const char* name) { return (dir / name).string(); }
  fs::path dir;
};

TEST_F(Idx, ReadsShapeAndValues) {
  write_idx(file("a.gz"), {2, 3}, {0, 1, 2, 253, 254, 255});
  Tensor t = data::read_idx(file("a.gz"));
  EXPECT_EQ(t.shape(), (Shape{2, 3}));
  EXPECT_EQ(t.to_vector<int32_t>(), (std::vector<int32_t>{0, 1, 2, 253, 254, 255}));
}

TEST_F(Idx, TruncatedFileNamesTheFile) {
  write_idx(file("short.gz"), {2, 3}, {0, 1, 2, 3, 4, 5}, /*cut=*/2);
  EXPECT_THROWS_WITH(IOError, data::read_idx(file("short.gz")), "short.gz", "truncated");
}

TEST_F(Idx, BadMagicNamesTheFile) {
  gzFile f = gzopen(file("bad.gz").c_str(), "wb");
  gzwrite(f, "hello world", 11);
  gzclose(f);
  EXPECT_THROWS_WITH(IOError, data::read_idx(file("bad.gz")), "bad.gz", "not an IDX file");
}

TEST_F(Idx, MissingFile) {
  EXPECT_THROWS_WITH(IOError, data::read_idx(file("none.gz")), "none.gz", "cannot open");
}

// An IDX header: type code, then dims (big-endian u32).
std::string idx_header(unsigned char type, const std::vector<uint32_t>& dims) {
  std::string bytes = {0, 0, char(type), char(dims.size())};
  for (uint32_t d : dims)
    for (int s = 24; s >= 0; s -= 8) bytes += char((d >> s) & 0xff);
  return bytes;
}

void write_gzip(const std::string& path, const std::string& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  gzwrite(f, bytes.data(), unsigned(bytes.size()));
  gzclose(f);
}

// The same bytes gzip-compressed in memory (what write_gzip puts in a file).
std::string gzip_bytes(const std::string& bytes) {
  z_stream z{};
  deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY);
  std::string out(deflateBound(&z, uLong(bytes.size())), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
  z.avail_in = uInt(bytes.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = uInt(out.size());
  deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

// Hostile headers fail, naming the file, without allocating what they promise: the data
// is read a chunk (1 MiB) at a time as the stream yields it, and no tensor is made.
void expect_cheap_io_error(const std::function<void()>& read, const std::vector<std::string>& parts) {
  const size_t in_use = memory_stats().bytes_in_use;
  reset_peak_memory_stats();
  const HeapUse heap = heap_use_during([&] { EXPECT_TRUE(throws_with<IOError>(read, parts)); });
  EXPECT_LT(heap.bytes, size_t(2) << 20);
  EXPECT_EQ(memory_stats().peak_bytes_in_use, in_use);
}

TEST_F(Idx, HugeFloat64PromiseIsTruncatedNotBadAlloc) {
  // 2^32-1 float64 values (32 GiB) promised by a 40-byte gzip.
  write_gzip(file("huge.gz"), idx_header(0x0E, {0xFFFFFFFFu}));
  EXPECT_LT(fs::file_size(file("huge.gz")), 64u);
  expect_cheap_io_error([&] { data::read_idx(file("huge.gz")); }, {"huge.gz", "truncated"});
}

TEST_F(Idx, FourGigabytePromiseAllocatesNothingLikeIt) {
  // 65536x256x256 bytes promised, 1000 present.
  write_gzip(file("big.gz"), idx_header(0x08, {65536, 256, 256}) + std::string(1000, '\x07'));
  expect_cheap_io_error([&] { data::read_idx(file("big.gz")); }, {"big.gz", "truncated", "found 1000"});
}

TEST_F(Idx, DimsWhoseProductOverflows) {
  const std::vector<uint32_t> dims(8, 0xFFFFFFFFu);  // (2^32-1)^8 overflows any integer
  write_gzip(file("overflow.gz"), idx_header(0x0E, dims));
  expect_cheap_io_error([&] { data::read_idx(file("overflow.gz")); }, {"overflow.gz", "implausible shape"});
  // 2^16 * 2^16 * 2^16 * 2^16 = 2^64: wraps to 0 in 64 bits.
  write_gzip(file("wrap.gz"), idx_header(0x08, {65536, 65536, 65536, 65536}));
  expect_cheap_io_error([&] { data::read_idx(file("wrap.gz")); }, {"wrap.gz", "implausible shape"});
}

TEST_F(Idx, ZeroDims) {
  write_gzip(file("empty.gz"), idx_header(0x08, {0, 28, 28}));
  Tensor t = data::read_idx(file("empty.gz"));
  EXPECT_EQ(t.shape(), (Shape{0, 28, 28}));
  EXPECT_EQ(t.numel(), 0);
  // Empty, but the other dims' product (its strides) overflows.
  write_gzip(file("empty_huge.gz"), idx_header(0x08, {0, 0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu}));
  expect_cheap_io_error([&] { data::read_idx(file("empty_huge.gz")); }, {"empty_huge.gz", "implausible shape"});
}

TEST_F(Idx, UnknownTypeAndBadRank) {
  write_gzip(file("type.gz"), idx_header(0x42, {1}) + "x");
  expect_cheap_io_error([&] { data::read_idx(file("type.gz")); }, {"type.gz", "unknown IDX element type 0x42"});
  write_gzip(file("rank0.gz"), idx_header(0x08, {}));
  expect_cheap_io_error([&] { data::read_idx(file("rank0.gz")); }, {"rank0.gz", "rank 0"});
  write_gzip(file("rank9.gz"), idx_header(0x08, std::vector<uint32_t>(9, 1)) + "x");
  expect_cheap_io_error([&] { data::read_idx(file("rank9.gz")); }, {"rank9.gz", "rank 9"});
  write_gzip(file("dims.gz"), idx_header(0x08, {2, 3}).substr(0, 9));
  expect_cheap_io_error([&] { data::read_idx(file("dims.gz")); }, {"dims.gz", "truncated", "the dims"});
}

TEST_F(Idx, TrailingBytes) {
  write_gzip(file("long.gz"), idx_header(0x08, {2}) + "abc");
  expect_cheap_io_error([&] { data::read_idx(file("long.gz")); }, {"long.gz", "trailing bytes"});
}

TEST_F(Idx, CorruptCompressionAndFolders) {
  std::string gz = gzip_bytes(idx_header(0x08, {4}) + "abcd");
  gz[gz.size() / 2] ^= 0x5a;
  gz[gz.size() / 2 + 1] ^= 0xa5;
  { std::ofstream(file("corrupt.gz"), std::ios::binary) << gz; }
  expect_cheap_io_error([&] { data::read_idx(file("corrupt.gz")); }, {"corrupt.gz"});
  expect_cheap_io_error([&] { data::read_idx(dir.string()); }, {"cannot open", "folder"});
}

TEST_F(Idx, PlainFilesAndEveryElementType) {
  // Not compressed: zlib reads it as it is. Values straddle the 1 MiB chunks.
  std::string bytes = idx_header(0x0B, {600000});
  for (int i = 0; i < 600000; ++i) {
    const int16_t v = int16_t(i * 7 - 30000);
    bytes += char(uint16_t(v) >> 8);
    bytes += char(uint16_t(v) & 0xff);
  }
  { std::ofstream(file("plain.idx"), std::ios::binary) << bytes; }
  Tensor t = data::read_idx(file("plain.idx"));
  ASSERT_EQ(t.shape(), (Shape{600000}));
  EXPECT_EQ(t.dtype(), i32);
  std::vector<int32_t> v = t.to_vector<int32_t>();
  EXPECT_EQ(v[0], -30000);
  EXPECT_EQ(v[599999], int16_t(599999 * 7 - 30000));

  const std::string b = idx_header(0x09, {2}) + "\xff\x05";
  EXPECT_EQ(data::read_idx_bytes(b.data(), b.size()).to_vector<int32_t>(), (std::vector<int32_t>{-1, 5}));
  const std::string i = idx_header(0x0C, {1}) + std::string("\xff\xff\xff\xfe", 4);
  EXPECT_EQ(data::read_idx_bytes(i.data(), i.size()).to_vector<int32_t>(), (std::vector<int32_t>{-2}));
  const std::string d = idx_header(0x0E, {1}) + std::string("\x3f\xf8\0\0\0\0\0\0", 8);
  Tensor t64 = data::read_idx_bytes(d.data(), d.size());
  EXPECT_EQ(t64.dtype(), f64);
  EXPECT_EQ(t64.to_vector<double>(), (std::vector<double>{1.5}));
}

TEST(IdxBytes, ReadsLikeAFile) {
  const std::string plain = idx_header(0x0D, {2}) + std::string("\x3f\xc0\x00\x00\xc0\x20\x00\x00", 8);
  for (const std::string& bytes : {plain, gzip_bytes(plain), gzip_bytes(plain.substr(0, 7)) + gzip_bytes(plain.substr(7))}) {
    Tensor t = data::read_idx_bytes(bytes.data(), bytes.size(), "mem");
    EXPECT_EQ(t.dtype(), f32);
    EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{1.5f, -2.5f}));
  }
  const std::string gz = gzip_bytes(idx_header(0x0E, {0xFFFFFFFFu}));
  EXPECT_THROWS_WITH(IOError, data::read_idx_bytes(gz.data(), gz.size(), "mem"), "mem", "truncated");
  const std::string cut = gzip_bytes(plain).substr(0, 15);
  EXPECT_THROWS_WITH(IOError, data::read_idx_bytes(cut.data(), cut.size(), "mem"), "mem");
  EXPECT_THROWS_WITH(IOError, data::read_idx_bytes("", 0, "mem"), "mem", "truncated", "the header");
  EXPECT_THROWS_WITH(IOError, data::read_idx_bytes(plain.data(), plain.size() - 1, "mem"), "mem", "truncated");
}

TEST(FashionMnist, LoadsTheDebianDataSet) {
  if (!fs::exists(data::kFashionMnistDir)) GTEST_SKIP() << "dataset-fashion-mnist not installed";
  auto test = data::FashionMNIST::load(data::kFashionMnistDir, /*train=*/false);
  EXPECT_EQ(test->inputs().shape(), (Shape{10000, 1, 28, 28}));
  EXPECT_EQ(test->targets().dtype(), i64);
  // Normalised with the training set's mean and std: the test set's mean is close to 0.
  EXPECT_NEAR(mean(test->inputs()).item<double>(), 0.0, 0.05);
  EXPECT_EQ(max(test->targets()).item<int64_t>(), 9);
}

TEST(DataLoader, BatchesShuffleAndDropLast) {
  auto ds = std::make_shared<data::TensorDataset>(arange(0, 10, 1, f32).reshape({10, 1}),
                                                  arange(0, 10, 1, i64));
  data::DataLoader plain(ds, {.batch_size = 4});
  EXPECT_EQ(plain.num_batches(), 3);
  std::vector<int64_t> seen;
  for (const data::Batch& b : plain)
    for (int64_t v : b.target.to_vector<int64_t>()) seen.push_back(v);
  EXPECT_EQ(seen, (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));

  data::DataLoader dropped(ds, {.batch_size = 4, .drop_last = true});
  EXPECT_EQ(dropped.num_batches(), 2);

  auto order = [&](uint64_t seed, int64_t epoch) {
    data::DataLoader l(ds, {.batch_size = 10, .shuffle = true, .seed = seed});
    l.set_epoch(epoch);
    return (*l.begin()).target.to_vector<int64_t>();
  };
  EXPECT_EQ(order(1, 0), order(1, 0));  // reproducible
  EXPECT_NE(order(1, 0), order(1, 1));  // a new order each epoch
  auto o = order(1, 0);
  std::sort(o.begin(), o.end());
  EXPECT_EQ(o, seen);  // a permutation
  auto first = (*data::DataLoader(ds, {.batch_size = 10, .shuffle = true, .seed = 1}).begin());
  EXPECT_EQ(first.input.reshape({10}).to(i64).to_vector<int64_t>(), first.target.to_vector<int64_t>());
}

}  // namespace
}  // namespace baton::testing
