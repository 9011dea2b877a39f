#include <baton/data.h>
#include <unistd.h>
#include <zlib.h>

#include <filesystem>

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
