// Fuzz target: the checkpoint loader (baton::io::load_tensors and load_checkpoint).
//
// The format ends with a CRC-32 of everything before it, which random mutations almost
// never match, so the target loads each input twice: as given (the CRC check must reject
// it cleanly) and with its last 4 bytes replaced by the right CRC, which lets mutations
// reach the entry parser, model.load_state_dict and optimizer.load_state_dict. A loaded
// model and optimizer then take one training step. Corpus files are therefore
// checkpoints whose CRC may be stale.
//
// Expected: baton::Error. Findings: any other exception, a crash or sanitizer report.
#include <zlib.h>

#include <cstring>
#include <exception>
#include <memory>
#include <string>

#include "fuzz_util.h"

namespace {

using namespace baton;

// The small model the seeds were saved from (fuzz/make_seeds.cpp builds the same one):
// parameters and buffers (running mean, variance and the batch count).
std::shared_ptr<nn::Module> make_model() {
  return nn::sequential({std::make_shared<nn::Linear>(3, 2), std::make_shared<nn::BatchNorm1d>(2)});
}

void train_one_step(nn::Module& model, optim::Optimizer& opt) {
  const float x[] = {0.5f, -1.f, 2.f, 1.5f, 0.f, -0.5f, 1.f, 1.f, -2.f, 0.25f, 3.f, -1.f};
  Tensor loss = sum(model(from_buffer(x, f32, {4, 3})));
  opt.zero_grad();
  loss.backward();
  opt.step();
  for (const Tensor& p : model.parameters()) fuzz::touch(p);
}

void load_into_model(const std::string& path, bool adam) {
  std::shared_ptr<nn::Module> model = make_model();
  std::unique_ptr<optim::Optimizer> opt;
  if (adam) opt = std::make_unique<optim::Adam>(model->parameters());
  else opt = std::make_unique<optim::SGD>(model->parameters(), optim::SGDOptions{.lr = 0.1, .momentum = 0.9});
  try {
    io::load_checkpoint(path, *model, opt.get());
    train_one_step(*model, *opt);
    fuzz::note(str("loaded into the model (", adam ? "Adam" : "SGD", ") and trained a step"));
  } catch (const Error& e) {
    fuzz::note(str("load_checkpoint (", adam ? "Adam" : "SGD", "): ", e.what()));
  }
}

void load(const std::string& path, bool into_model) {
  try {
    size_t n = 0;
    for (auto& [name, t] : io::load_tensors(path)) n += (fuzz::touch(t), 1);
    fuzz::note(str("load_tensors: ", n, " tensors"));
  } catch (const Error& e) {
    // load_checkpoint starts with load_tensors: it would fail the same way.
    return fuzz::note(str("load_tensors: ", e.what()));
  }
  if (!into_model) return;
  load_into_model(path, /*adam=*/false);
  load_into_model(path, /*adam=*/true);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  baton::fuzz::init_once();
  static baton::fuzz::MemFile file("checkpoint.bin");
  try {
    file.write(data, size);
    load(file.path(), /*into_model=*/false);
    if (size >= 4) {
      std::string fixed(reinterpret_cast<const char*>(data), size);
      uint32_t crc = uint32_t(crc32(0, reinterpret_cast<const Bytef*>(fixed.data()), uInt(size - 4)));
      std::memcpy(fixed.data() + size - 4, &crc, 4);
      file.write(fixed.data(), fixed.size());
      load(file.path(), /*into_model=*/true);
    }
  } catch (const std::exception& e) {
    baton::fuzz::finding(std::string("an exception that is not a baton::Error: ") + e.what());
  }
  return 0;
}
