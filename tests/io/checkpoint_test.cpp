#include <baton/checkpoint.h>
#include <baton/nn.h>
#include <baton/optim.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>

#include "harness/op_harness.h"

namespace baton::testing {
namespace {

namespace fs = std::filesystem;

class Checkpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = fs::temp_directory_path() / ("baton_ckpt_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    path = (dir / "model.ckpt").string();
  }
  void TearDown() override { fs::remove_all(dir); }
  std::string read_bytes() {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), {}};
  }
  void write_bytes(const std::string& b) { std::ofstream(path, std::ios::binary) << b; }
  fs::path dir;
  std::string path;
};

TEST_F(Checkpoint, TensorsRoundTripEveryDtype) {
  nn::NamedTensors in{{"f", randn({2, 3})}, {"d", randn({4}, f64)}, {"i", tensor({1, 2})},
                      {"l", tensor<int64_t>({7})}, {"b", tensor({true, false})},
                      {"scalar", scalar_tensor(2.5f)}, {"strided", randn({3, 4}).t()}};
  io::save_tensors(path, in);
  nn::NamedTensors out = io::load_tensors(path);
  ASSERT_EQ(out.size(), in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    EXPECT_EQ(out[i].first, in[i].first);
    EXPECT_EQ(out[i].second.dtype(), in[i].second.dtype());
    EXPECT_TRUE(all_close(out[i].second, in[i].second, 0, 0)) << in[i].first;
  }
}

TEST_F(Checkpoint, ModelAndOptimizerRoundTrip) {
  auto model = nn::mnist_mlp();
  optim::SGD opt(model->parameters(), {.lr = 0.1, .momentum = 0.9});
  Tensor x = randn({4, 1, 28, 28});
  cross_entropy(model->forward(x), tensor<int64_t>({1, 2, 3, 4})).backward();
  opt.step();
  io::save_checkpoint(path, *model, &opt, /*epoch=*/3);

  auto restored = nn::mnist_mlp();
  optim::SGD opt2(restored->parameters(), {.lr = 0.1, .momentum = 0.9});
  EXPECT_EQ(io::load_checkpoint(path, *restored, &opt2), 3);
  EXPECT_TRUE(all_close(restored->forward(x), model->forward(x), 0, 0));
  auto s1 = opt.state_dict(), s2 = opt2.state_dict();
  ASSERT_EQ(s1.size(), s2.size());
  for (size_t i = 0; i < s1.size(); ++i) EXPECT_TRUE(all_close(s1[i].second, s2[i].second, 0, 0));
}

TEST_F(Checkpoint, CorruptByteIsDetected) {
  io::save_tensors(path, {{"w", randn({16})}});
  std::string b = read_bytes();
  b[b.size() / 2] ^= 0x40;
  write_bytes(b);
  EXPECT_THROWS_WITH(IOError, io::load_tensors(path), "model.ckpt", "CRC");
}

TEST_F(Checkpoint, TruncatedFileIsDetected) {
  io::save_tensors(path, {{"w", randn({16})}});
  std::string b = read_bytes();
  write_bytes(b.substr(0, b.size() - 9));
  EXPECT_THROWS_WITH(IOError, io::load_tensors(path), "model.ckpt");
  write_bytes("");
  EXPECT_THROWS_WITH(IOError, io::load_tensors(path), "bad magic");
}

TEST_F(Checkpoint, MissingFileIsAnIOError) {
  EXPECT_THROWS_WITH(IOError, io::load_tensors((dir / "nope.ckpt").string()), "nope.ckpt", "cannot open");
}

TEST_F(Checkpoint, OtherArchitectureIsAValueErrorAndChangesNothing) {
  auto mlp = nn::mnist_mlp();
  io::save_checkpoint(path, *mlp);
  auto cnn = nn::mnist_cnn();
  Tensor before = cnn->parameters()[0].clone();
  EXPECT_THROWS_WITH(ValueError, io::load_checkpoint(path, *cnn), "missing entry", "unexpected entry");
  EXPECT_TRUE(all_close(cnn->parameters()[0], before, 0, 0));
}

TEST_F(Checkpoint, UnwritableFolderIsAnIOError) {
  EXPECT_THROWS_WITH(IOError, io::save_tensors((dir / "missing" / "x.ckpt").string(), {{"w", zeros({1})}}),
                     "cannot create");
}

// A full disk in the middle of a save (simulated with a file-size limit in a child
// process) leaves the previous checkpoint intact and no temporary file behind.
TEST_F(Checkpoint, FailedWriteKeepsThePreviousFile) {
  io::save_tensors(path, {{"w", ones({4})}});
  std::string good = read_bytes();
  pid_t child = ::fork();
  if (child == 0) {
    std::signal(SIGXFSZ, SIG_IGN);
    rlimit limit{4096, 4096};
    ::setrlimit(RLIMIT_FSIZE, &limit);
    try {
      io::save_tensors(path, {{"w", ones({100000})}});
    } catch (const IOError&) {
      ::_exit(0);  // the expected outcome
    }
    ::_exit(1);
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_EQ(read_bytes(), good);
  int files = 0;
  for (auto& e : fs::directory_iterator(dir)) files += e.is_regular_file();
  EXPECT_EQ(files, 1);
}

}  // namespace
}  // namespace baton::testing
