#include <baton/checkpoint.h>
#include <baton/nn.h>
#include <baton/optim.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include "harness/failing_disk.h"
#include "harness/op_harness.h"

namespace baton::testing {
namespace {

namespace fs = std::filesystem;


// --- helpers for hand-made files and before/after comparisons ---

uint32_t crc32_of(const std::string& b) {  // the standard CRC-32 (zlib's), bit by bit
  uint32_t crc = 0xFFFFFFFFu;
  for (unsigned char c : b) {
    crc ^= c;
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
  }
  return ~crc;
}

template <class T> void put(std::string& out, T v) { out.append(reinterpret_cast<const char*>(&v), sizeof v); }

struct RawEntry {
  std::string name;
  uint8_t dtype;
  std::vector<int64_t> dims;
  uint64_t nbytes;
  std::string data;
};

// A file in format `version` (1: no metadata) with a correct CRC-32.
std::string make_file(uint32_t version, const std::vector<RawEntry>& entries,
                      const std::vector<std::pair<std::string, std::string>>& meta = {}) {
  std::string out = "BATONCKP";
  put(out, version);
  if (version >= 2) {
    put(out, uint64_t(meta.size()));
    for (auto& [k, v] : meta) {
      put(out, uint32_t(k.size()));
      out += k;
      put(out, uint32_t(v.size()));
      out += v;
    }
  }
  put(out, uint64_t(entries.size()));
  for (auto& e : entries) {
    put(out, uint32_t(e.name.size()));
    out += e.name;
    put(out, e.dtype);
    put(out, uint32_t(e.dims.size()));
    for (int64_t d : e.dims) put(out, d);
    put(out, e.nbytes);
    out += e.data;
  }
  put(out, crc32_of(out));
  return out;
}

RawEntry raw(const std::string& name, const Tensor& t) {
  Tensor c = t.contiguous();
  return {name, uint8_t(c.dtype()), c.shape().vec(), uint64_t(c.nbytes()),
          std::string(static_cast<const char*>(c.raw_data()), c.nbytes())};
}

// Every parameter, buffer and optimizer state entry, copied.
using Snapshot = std::vector<std::pair<std::string, Tensor>>;
Snapshot snapshot(const nn::Module& model, const optim::Optimizer* opt) {
  Snapshot s;
  for (auto& [n, t] : model.state_dict()) s.emplace_back("model." + n, t.clone());
  if (opt)
    for (auto& [n, t] : opt->state_dict()) s.emplace_back("optimizer." + n, t.clone());
  return s;
}

::testing::AssertionResult same(const Snapshot& a, const Snapshot& b) {
  if (a.size() != b.size()) return ::testing::AssertionFailure() << a.size() << " vs " << b.size() << " entries";
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].first != b[i].first) return ::testing::AssertionFailure() << a[i].first << " vs " << b[i].first;
    if (a[i].second.dtype() != b[i].second.dtype() || !(a[i].second.shape() == b[i].second.shape()) ||
        std::memcmp(a[i].second.raw_data(), b[i].second.raw_data(), a[i].second.nbytes()) != 0)
      return ::testing::AssertionFailure() << a[i].first << " changed";
  }
  return ::testing::AssertionSuccess();
}

std::shared_ptr<nn::Sequential> tiny_model() {
  return std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(3, 4), std::make_shared<nn::Linear>(4, 2)});
}

void train_step(nn::Module& model, optim::Optimizer& opt) {
  opt.zero_grad();
  model.forward(randn({5, 3})).sum().backward();
  opt.step();
}

std::vector<std::string> folder_files(const fs::path& dir) {
  std::vector<std::string> names;
  for (auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

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
  EXPECT_TRUE(testing::write_fails_with_io_error_past_size_limit([&] { io::save_tensors(path, {{"w", ones({100000})}}); }));
  EXPECT_EQ(read_bytes(), good);
  int files = 0;
  for (auto& e : fs::directory_iterator(dir)) files += e.is_regular_file();
  EXPECT_EQ(files, 1);
}

// A file with a valid CRC whose shape's element or byte count overflows: 2^62 * 4 floats
// wrap to 0 bytes. An IOError naming the file, the entry and the shape.
TEST_F(Checkpoint, OverflowingShapeWithValidCrcIsAnIOError) {
  const int64_t big = int64_t(1) << 62;
  for (uint32_t version : {1u, 2u}) {
    write_bytes(make_file(version, {{"w", uint8_t(f32), {big, 4}, 0, ""}}));
    EXPECT_THROWS_WITH(IOError, io::load_tensors(path), "model.ckpt", "'w'", "[4611686018427387904,4]",
                       "overflows");
  }
  // Zero elements, but strides that overflow; a byte count past INT64_MAX; negative dims.
  for (auto& e : std::vector<RawEntry>{{"z", uint8_t(f32), {0, big, big}, 0, ""},
                                       {"b", uint8_t(f64), {big}, 0, ""},
                                       {"n", uint8_t(f32), {-1, -4}, 16, std::string(16, '\0')},
                                       {"d", 42, {1}, 4, std::string(4, '\0')},
                                       {"r", uint8_t(f32), std::vector<int64_t>(65, 1), 4, std::string(4, '\0')},
                                       {"s", uint8_t(f32), {3}, 8, std::string(8, '\0')}}) {
    write_bytes(make_file(2, {e}));
    EXPECT_THROWS_WITH(IOError, io::load_tensors(path), "model.ckpt", "'" + e.name + "'");
  }
  // Implausible counts, duplicates and trailing bytes.
  std::string f = make_file(2, {});
  f.replace(20, 8, std::string("\xff\xff\xff\xff\xff\xff\xff\x7f", 8));
  f.resize(f.size() - 4);
  put(f, crc32_of(f));
  write_bytes(f);
  EXPECT_THROWS_WITH(IOError, io::load_tensors(path), "entry count");
  write_bytes(make_file(2, {raw("w", ones({2})), raw("w", ones({2}))}));
  EXPECT_THROWS_WITH(IOError, io::load_tensors(path), "duplicate entry 'w'");
  write_bytes(make_file(2, {raw("w", ones({2}))}, {{"k", "1"}, {"k", "2"}}));
  EXPECT_THROWS_WITH(IOError, io::load_tensors(path), "duplicate metadata 'k'");
  write_bytes(make_file(7, {}));
  EXPECT_THROWS_WITH(IOError, io::load_tensors(path), "version 7");
}

TEST_F(Checkpoint, DirectoryIsAnIOError) {
  auto model = tiny_model();
  EXPECT_THROWS_WITH(IOError, io::load_tensors(dir.string()), dir.string(), "directory");
  EXPECT_THROWS_WITH(IOError, io::load_checkpoint(dir.string(), *model), "directory");
  EXPECT_THROWS_WITH(IOError, io::save_tensors(dir.string(), {{"w", ones({1})}}), dir.string());
  EXPECT_THROWS_WITH(IOError, io::save_tensors(dir.string() + "/", {{"w", ones({1})}}), "not a file path");
  EXPECT_THROWS_WITH(IOError, io::load_tensors("/dev/null"), "not a regular file");
  EXPECT_EQ(folder_files(dir), std::vector<std::string>{});
}

TEST_F(Checkpoint, SaveRejectsDuplicateAndUndefinedEntries) {
  EXPECT_THROWS_WITH(ValueError, io::save_tensors(path, {{"w", ones({1})}, {"w", ones({1})}}), "duplicate");
  EXPECT_THROWS_WITH(ValueError, io::save_tensors(path, {{"w", Tensor()}}), "'w'", "undefined");
  EXPECT_FALSE(fs::exists(path));
}

// The model's entries fit, the optimizer's do not: nothing may change, the model included.
TEST_F(Checkpoint, OptimizerStateFailureLeavesTheModelUnchanged) {
  auto saved = tiny_model();
  optim::SGD saved_opt(saved->parameters(), {.lr = 0.1, .momentum = 0.9});
  train_step(*saved, saved_opt);
  io::save_checkpoint(path, *saved, &saved_opt, 4);

  auto model = tiny_model();
  auto params = model->parameters();
  // An optimizer over only some of the parameters: "2.momentum_buffer" matches none.
  optim::SGD opt({params[0], params[1]}, {.lr = 0.1, .momentum = 0.9});
  train_step(*model, opt);
  Snapshot before = snapshot(*model, &opt);
  EXPECT_THROWS_WITH(ValueError, io::load_checkpoint(path, *model, &opt), "matches no parameter");
  EXPECT_TRUE(same(snapshot(*model, &opt), before));

  // A checkpoint without optimizer state, loaded with an optimizer.
  io::save_checkpoint(path, *saved);
  optim::SGD full(model->parameters(), {.lr = 0.1, .momentum = 0.9});
  before = snapshot(*model, &full);
  EXPECT_THROWS_WITH(ValueError, io::load_checkpoint(path, *model, &full), "no optimizer state");
  EXPECT_TRUE(same(snapshot(*model, &full), before));
}

TEST_F(Checkpoint, OtherKindOfOptimizerIsAValueErrorAndChangesNothing) {
  auto saved = tiny_model();
  optim::SGD sgd(saved->parameters(), {.lr = 0.1, .momentum = 0.9});
  train_step(*saved, sgd);
  io::save_checkpoint(path, *saved, &sgd);

  auto model = tiny_model();
  optim::Adam adam(model->parameters());
  train_step(*model, adam);
  Snapshot before = snapshot(*model, &adam);
  EXPECT_THROWS_WITH(ValueError, io::load_checkpoint(path, *model, &adam), "sgd", "adam");
  EXPECT_TRUE(same(snapshot(*model, &adam), before));

  io::save_checkpoint(path, *model, &adam);
  before = snapshot(*saved, &sgd);
  EXPECT_THROWS_WITH(ValueError, io::load_checkpoint(path, *saved, &sgd), "adam", "sgd");
  EXPECT_TRUE(same(snapshot(*saved, &sgd), before));
  optim::AdamW adamw(saved->parameters());
  EXPECT_THROWS_WITH(ValueError, io::load_checkpoint(path, *saved, &adamw), "adam", "adamw");
  // The same kind loads.
  optim::Adam adam2(saved->parameters());
  EXPECT_NO_THROW(io::load_checkpoint(path, *saved, &adam2));
  EXPECT_TRUE(same(snapshot(*saved, &adam2), snapshot(*model, &adam)));
}

// Version 1 files have no optimizer kind: they load when the state is exactly this kind's.
TEST_F(Checkpoint, VersionOneFilesLoadWhenTheStateFits) {
  auto saved = tiny_model();
  optim::SGD sgd(saved->parameters(), {.lr = 0.1, .momentum = 0.9});
  train_step(*saved, sgd);
  std::vector<RawEntry> entries;
  for (auto& [n, t] : saved->state_dict()) entries.push_back(raw("model." + n, t));
  for (auto& [n, t] : sgd.state_dict()) entries.push_back(raw("optimizer." + n, t));
  entries.push_back(raw("meta.epoch", scalar_tensor<int64_t>(6)));
  write_bytes(make_file(1, entries));

  auto model = tiny_model();
  optim::SGD opt(model->parameters(), {.lr = 0.1, .momentum = 0.9});
  EXPECT_EQ(io::load_checkpoint(path, *model, &opt), 6);
  EXPECT_TRUE(same(snapshot(*model, &opt), snapshot(*saved, &sgd)));

  auto other = tiny_model();
  optim::Adam adam(other->parameters());
  train_step(*other, adam);
  Snapshot before = snapshot(*other, &adam);
  EXPECT_THROWS_WITH(ValueError, io::load_checkpoint(path, *other, &adam), "momentum_buffer", "adam");
  EXPECT_TRUE(same(snapshot(*other, &adam), before));
  optim::SGD plain(other->parameters(), {.lr = 0.1});
  EXPECT_THROWS_WITH(ValueError, io::load_checkpoint(path, *other, &plain), "momentum_buffer", "sgd");
}

TEST_F(Checkpoint, UnknownEntriesAndKindsAreErrors) {
  auto model = tiny_model();
  optim::SGD opt(model->parameters(), {.lr = 0.1});
  std::vector<RawEntry> entries;
  for (auto& [n, t] : model->state_dict()) entries.push_back(raw("model." + n, t * 2));
  for (auto& [n, t] : opt.state_dict()) entries.push_back(raw("optimizer." + n, t));
  Snapshot before = snapshot(*model, &opt);
  auto with = [&](RawEntry e) {
    auto all = entries;
    all.push_back(std::move(e));
    return all;
  };
  write_bytes(make_file(2, with(raw("stray", ones({1}))), {{"optimizer.kind", "sgd"}}));
  EXPECT_THROWS_WITH(ValueError, io::load_checkpoint(path, *model, &opt), "unexpected entry 'stray'");
  write_bytes(make_file(2, with(raw("meta.epoch", ones({2}))), {{"optimizer.kind", "sgd"}}));
  EXPECT_THROWS_WITH(ValueError, io::load_checkpoint(path, *model, &opt), "meta.epoch");
  write_bytes(make_file(2, entries, {{"optimizer.kind", "sgd"}, {"colour", "red"}}));
  EXPECT_THROWS_WITH(ValueError, io::load_checkpoint(path, *model, &opt), "unknown metadata 'colour'");
  write_bytes(make_file(2, with(raw("optimizer.step", scalar_tensor<int64_t>(1))), {{"optimizer.kind", "sgd"}}));
  EXPECT_THROWS_WITH(IOError, io::load_checkpoint(path, *model, &opt), "duplicate entry 'optimizer.step'");
  write_bytes(make_file(2, with(raw("optimizer.0.momentum_buffer", ones({4, 3}))), {{"optimizer.kind", "sgd"}}));
  EXPECT_THROWS_WITH(ValueError, io::load_checkpoint(path, *model, &opt), "0.momentum_buffer");
  EXPECT_TRUE(same(snapshot(*model, &opt), before));
  // And the untouched file loads, changing the model.
  write_bytes(make_file(2, entries, {{"optimizer.kind", "sgd"}}));
  EXPECT_NO_THROW(io::load_checkpoint(path, *model, &opt));
  EXPECT_FALSE(same(snapshot(*model, &opt), before));
}

// Threads saving different tensors to one path: the file is always exactly one of them,
// and no temporary file remains.
TEST_F(Checkpoint, ConcurrentSavesNeverCollide) {
  constexpr int kThreads = 8, kSaves = 6;
  std::vector<nn::NamedTensors> contents;
  for (int i = 0; i < kThreads; ++i)
    contents.push_back({{"w", full({1 << 16}, double(i), f32)}, {"id", scalar_tensor<int64_t>(i)}});
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i)
    threads.emplace_back([&, i] {
      for (int k = 0; k < kSaves; ++k) try {
          io::save_tensors(path, contents[size_t(i)]);
        } catch (const std::exception&) {
          ++errors;
        }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(errors.load(), 0);
  nn::NamedTensors loaded = io::load_tensors(path);
  ASSERT_EQ(loaded.size(), 2u);
  int64_t id = loaded[1].second.item<int64_t>();
  ASSERT_TRUE(id >= 0 && id < kThreads);
  EXPECT_TRUE(all_close(loaded[0].second, contents[size_t(id)][0].second, 0, 0));
  EXPECT_EQ(folder_files(dir), std::vector<std::string>{"model.ckpt"});

  // Whole checkpoints, too.
  std::vector<std::shared_ptr<nn::Sequential>> models;
  for (int i = 0; i < kThreads; ++i) models.push_back(tiny_model());
  threads.clear();
  for (int i = 0; i < kThreads; ++i)
    threads.emplace_back([&, i] {
      try {
        io::save_checkpoint(path, *models[size_t(i)], nullptr, i);
      } catch (const std::exception&) {
        ++errors;
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(errors.load(), 0);
  auto restored = tiny_model();
  int64_t epoch = io::load_checkpoint(path, *restored);
  ASSERT_TRUE(epoch >= 0 && epoch < kThreads);
  EXPECT_TRUE(same(snapshot(*restored, nullptr), snapshot(*models[size_t(epoch)], nullptr)));
  EXPECT_EQ(folder_files(dir), std::vector<std::string>{"model.ckpt"});
}

// What a killed save leaves (a named temporary file of a dead process) is removed by the
// next save; temporary files of live processes and unrelated files are not.
TEST_F(Checkpoint, NextSaveRemovesTheTempFilesOfKilledSaves) {
  pid_t dead = ::fork();
  if (dead == 0) ::_exit(0);
  ::waitpid(dead, nullptr, 0);
  const std::string d = std::to_string(dead), self = std::to_string(::getpid());
  for (const std::string& name : std::vector<std::string>{"model.ckpt.tmp." + d + ".123.0", "model.ckpt.tmp." + d,
                                  "model.ckpt.tmp." + self + ".1.2", "model.ckpt.tmp.notes",
                                  "model.ckpt.tmp." + d + ".x.1", "other.ckpt.tmp." + d + ".1.1"})
    std::ofstream(dir / name) << "partial";
  io::save_tensors(path, {{"w", ones({3})}});
  EXPECT_EQ(folder_files(dir),
            (std::vector<std::string>{"model.ckpt", "model.ckpt.tmp." + self + ".1.2", "model.ckpt.tmp." + d + ".x.1",
                                      "model.ckpt.tmp.notes", "other.ckpt.tmp." + d + ".1.1"}));
}

// Saves killed (SIGKILL) at random points: the target is always the previous or a
// complete new file, and after the next save no temporary file is left.
TEST_F(Checkpoint, KilledSavesLeaveACompleteFileAndNoTempFiles) {
  const nn::NamedTensors old_contents{{"w", full({1 << 20}, 1.0, f32)}};
  const nn::NamedTensors new_contents{{"w", full({1 << 20}, 2.0, f32)}};
  io::save_tensors(path, old_contents);
  for (int round = 0; round < 6; ++round) {
    pid_t child = ::fork();
    if (child == 0) {
      for (;;) io::save_tensors(path, new_contents);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(3 + 7 * round));
    ::kill(child, SIGKILL);
    ::waitpid(child, nullptr, 0);
    nn::NamedTensors loaded = io::load_tensors(path);
    ASSERT_EQ(loaded.size(), 1u);
    const float v = loaded[0].second.data<float>()[0];
    EXPECT_TRUE(v == 1.0f || v == 2.0f);
    EXPECT_TRUE(all_close(loaded[0].second, v == 1.0f ? old_contents[0].second : new_contents[0].second, 0, 0));
  }
  io::save_tensors(path, old_contents);
  EXPECT_EQ(folder_files(dir), std::vector<std::string>{"model.ckpt"});
}

// Every truncation and every single bit flip of a checkpoint is an IOError, and leaves the
// model and optimizer as they were.
TEST_F(Checkpoint, EveryTruncationAndBitFlipIsAnIOErrorAndChangesNothing) {
  auto saved = tiny_model();
  optim::Adam saved_opt(saved->parameters());
  train_step(*saved, saved_opt);
  io::save_checkpoint(path, *saved, &saved_opt, 2);
  const std::string good = read_bytes();
  ASSERT_LT(good.size(), 4096u);

  auto model = tiny_model();
  optim::Adam opt(model->parameters());
  train_step(*model, opt);
  const Snapshot before = snapshot(*model, &opt);
  for (size_t len = 0; len < good.size(); ++len) {
    write_bytes(good.substr(0, len));
    EXPECT_THROWS_WITH(IOError, io::load_checkpoint(path, *model, &opt), "model.ckpt") << len;
    EXPECT_THROWS_WITH(IOError, io::load_tensors(path), "model.ckpt") << len;
  }
  // One bit per byte, a different one in each byte of eight (all bits would take long).
  for (size_t i = 0; i < good.size(); ++i) {
    const size_t bit = i * 8 + (i * 5 + 3) % 8;
    std::string b = good;
    b[bit / 8] = char(b[bit / 8] ^ (1 << (bit % 8)));
    write_bytes(b);
    EXPECT_THROWS_WITH(IOError, io::load_checkpoint(path, *model, &opt), "model.ckpt") << bit;
  }
  EXPECT_TRUE(same(snapshot(*model, &opt), before));
  write_bytes(good);
  EXPECT_EQ(io::load_checkpoint(path, *model, &opt), 2);
  EXPECT_TRUE(same(snapshot(*model, &opt), snapshot(*saved, &saved_opt)));
}

// Bytes changed with the CRC fixed up (what a crafted file does): each load either works
// or is a baton::Error, and a failed one changes nothing.
TEST_F(Checkpoint, CraftedBytesWithValidCrcNeverCrash) {
  auto saved = tiny_model();
  optim::SGD saved_opt(saved->parameters(), {.lr = 0.1, .momentum = 0.9});
  train_step(*saved, saved_opt);
  io::save_checkpoint(path, *saved, &saved_opt, 2);
  std::string good = read_bytes();
  good.resize(good.size() - 4);

  auto model = tiny_model();
  optim::SGD opt(model->parameters(), {.lr = 0.1, .momentum = 0.9});
  train_step(*model, opt);
  int failures = 0;
  for (size_t i = 0; i < good.size(); ++i)
    for (int change = 0; change < 3; ++change) {
      std::string b = good;
      const unsigned char v = change == 0 ? 0x00 : change == 1 ? 0xff : (uint8_t(b[i]) ^ 0x80);
      if (b[i] == char(v)) continue;
      b[i] = char(v);
      put(b, crc32_of(b));
      write_bytes(b);
      const Snapshot before = snapshot(*model, &opt);
      try {
        io::load_tensors(path);
        io::load_checkpoint(path, *model, &opt);
      } catch (const Error&) {
        ++failures;
        EXPECT_TRUE(same(snapshot(*model, &opt), before)) << "byte " << i << " = " << int(v);
      } catch (const std::exception& e) {
        ADD_FAILURE() << "byte " << i << " = " << int(v) << ": " << e.what();
      }
    }
  EXPECT_GT(failures, 0);
}

}  // namespace
}  // namespace baton::testing
