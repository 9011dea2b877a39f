// `baton train`: the main job. Trains a model on Fashion-MNIST, evaluates it on the test
// set, and ends with the line `test_accuracy 0.XXXX`.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <baton/baton.h>
#include <baton/checkpoint.h>
#include <baton/data.h>
#include <baton/nn.h>
#include <baton/optim.h>

#include "modes.h"
#include "progress.h"

using namespace baton;

namespace {

struct TrainOptions {
  std::string model = "cnn";
  int epochs = 2;
  int64_t batch = 64;
  double lr = 0.01;
  std::string optimizer = "sgd";
  uint64_t seed = 0;
  int threads = 0;  // 0: all cores
  std::string save;
  std::string data = data::kFashionMnistDir;
  int64_t limit = 0;  // train on the first N examples only (0: all)
  bool profile = false;
  Mode mode = Mode::Eager;
};

const char* kHelp =
    "usage: baton train [options]\n\n"
    "Trains a model on Fashion-MNIST (Debian's dataset-fashion-mnist) and evaluates it on the\n"
    "10,000 test images. The last line printed is `test_accuracy 0.XXXX`.\n\n"
    "options:\n"
    "  --model cnn|mlp|resnet18  the network (default cnn: two 3x3 convs with max pooling and\n"
    "                            two linear layers; mlp: 784-512-256-10; resnet18: torchvision's\n"
    "                            ResNet-18 on 1-channel images)\n"
    "  --epochs N                passes over the training set (default 2)\n"
    "  --batch N                 examples per step (default 64)\n"
    "  --lr X                    learning rate (default 0.01; try 0.001 with adam)\n"
    "  --optimizer sgd|adam      SGD with momentum 0.9, or Adam (default sgd)\n"
    "  --seed N                  seeds initialisation and shuffling (default 0)\n"
    "  --threads N               intra-op threads (default: all cores)\n"
    "  --save PATH               write a checkpoint (model + optimizer) after each epoch\n"
    "  --data DIR                the IDX files' folder (default " "/usr/share/datasets/fashion-mnist)\n"
    "  --limit N                 train on the first N training images only (quick runs)\n"
    "  --mode eager|graph|compiled\n"
    "                            how each step runs: op by op (default), as a static graph\n"
    "                            built once and run by a Session, or compile()d (traced on the\n"
    "                            first step, then replayed)\n"
    "  --profile                 print where the time went (per op) and peak memory\n"
    "  --help                    this text\n";

[[noreturn]] void bad_usage(const std::string& why) {
  std::cerr << "baton train: " << why << "\n\n" << kHelp;
  std::exit(2);
}

template <class T>
T parse_number(const std::string& flag, const std::string& text) {
  try {
    size_t used = 0;
    T v;
    if constexpr (std::is_floating_point_v<T>) v = T(std::stod(text, &used));
    else v = T(std::stoll(text, &used));
    if (used != text.size()) throw std::invalid_argument(text);
    return v;
  } catch (const std::exception&) {
    bad_usage(flag + " expects a number, got '" + text + "'");
  }
}

Mode parse_mode_flag(const std::string& text) {
  std::optional<Mode> mode = parse_mode(text);
  if (!mode) bad_usage(std::string("--mode expects ") + kModeNames + ", got '" + text + "'");
  return *mode;
}

TrainOptions parse(const std::vector<std::string>& args) {
  TrainOptions o;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") {
      std::cout << kHelp;
      std::exit(0);
    }
    if (a == "--profile") {
      o.profile = true;
      continue;
    }
    if (i + 1 >= args.size()) bad_usage("unknown option or missing value: " + a);
    const std::string& v = args[++i];
    if (a == "--model") o.model = v;
    else if (a == "--epochs") o.epochs = parse_number<int>(a, v);
    else if (a == "--batch") o.batch = parse_number<int64_t>(a, v);
    else if (a == "--lr") o.lr = parse_number<double>(a, v);
    else if (a == "--optimizer") o.optimizer = v;
    else if (a == "--seed") o.seed = parse_number<uint64_t>(a, v);
    else if (a == "--threads") o.threads = parse_number<int>(a, v);
    else if (a == "--save") o.save = v;
    else if (a == "--data") o.data = v;
    else if (a == "--limit") o.limit = parse_number<int64_t>(a, v);
    else if (a == "--mode") o.mode = parse_mode_flag(v);
    else bad_usage("unknown option " + a);
  }
  if (o.model != "cnn" && o.model != "mlp" && o.model != "resnet18") bad_usage("unknown model " + o.model);
  if (o.optimizer != "sgd" && o.optimizer != "adam") bad_usage("unknown optimizer " + o.optimizer);
  if (o.epochs < 1 || o.batch < 1 || !(o.lr > 0)) bad_usage("epochs, batch and lr must be positive");
  return o;
}

std::shared_ptr<nn::Module> make_model(const std::string& name) {
  if (name == "mlp") return nn::mnist_mlp();
  if (name == "resnet18") return nn::resnet18(10, /*in_channels=*/1);
  return nn::mnist_cnn();
}

std::unique_ptr<optim::Optimizer> make_optimizer(const TrainOptions& o, const nn::Module& model) {
  if (o.optimizer == "adam") return std::make_unique<optim::Adam>(model.parameters(), optim::AdamOptions{.lr = o.lr});
  return std::make_unique<optim::SGD>(model.parameters(), optim::SGDOptions{.lr = o.lr, .momentum = 0.9});
}

// The test-set accuracy. The forward is built (graph) or traced (compiled) in eval mode:
// a separate function from the training step, whose trace saw train mode.
double evaluate(Mode mode, nn::Module& model, const std::shared_ptr<data::TensorDataset>& test) {
  model.eval();
  NoGradGuard no_grad;
  ModeFunction forward = make_forward(mode, model, test->get({0}).input);
  int64_t correct = 0;
  for (const data::Batch& b : data::DataLoader(test, {.batch_size = 1000})) {
    Tensor predicted = argmax(forward({b.input}), 1);
    correct += sum(eq(predicted, b.target)).item<int64_t>();
  }
  model.train();
  return double(correct) / double(test->size());
}

}  // namespace

int train_main(const std::vector<std::string>& args) {
  TrainOptions o = parse(args);
  if (o.threads > 0) set_num_threads(o.threads);
  manual_seed(o.seed);
  auto train_set = data::FashionMNIST::load(o.data, /*train=*/true);
  auto test_set = data::FashionMNIST::load(o.data, /*train=*/false);
  if (o.limit > 0) train_set = std::make_shared<data::TensorDataset>(train_set->head(o.limit));
  auto model = make_model(o.model);
  auto opt = make_optimizer(o, *model);
  data::DataLoader loader(train_set, {.batch_size = o.batch, .shuffle = true, .seed = o.seed});
  data::Batch example = train_set->get({0});
  ModeFunction train_step = make_train_step(o.mode, *model, *opt, example.input, example.target);
  if (o.profile) {
    profiler::enable();
    reset_peak_memory_stats();  // the training peak, not the data set's loading
  }
  std::printf("training %s on %lld Fashion-MNIST images, %d epoch(s), batch %lld, %s lr %g, %d threads, "
              "%s mode\n", o.model.c_str(), (long long)train_set->size(), o.epochs, (long long)o.batch,
              o.optimizer.c_str(), o.lr, get_num_threads(), mode_name(o.mode));
  for (int epoch = 1; epoch <= o.epochs; ++epoch) {
    loader.set_epoch(epoch - 1);
    Progress progress(epoch, o.epochs, loader.num_batches(), o.batch);
    double total = 0;
    int64_t step = 0;
    for (const data::Batch& b : loader) {
      Tensor loss = train_step({b.input, b.target});
      double l = loss.item<double>();
      if (!std::isfinite(l))
        throw ValueError("train", str("the loss became ", l, " at epoch ", epoch, ", batch ", step + 1,
                                      ": training diverged; try a lower --lr (now ", o.lr, ")"),
                         SourceLoc::current());
      total += l;
      progress.update(++step, l);
    }
    progress.finish(total / double(step));
    if (!o.save.empty()) io::save_checkpoint(o.save, *model, opt.get(), epoch);
  }
  if (o.profile) {
    profiler::enable(false);
    std::printf("\ntime per op (training, inclusive):\n%s", profiler::table().c_str());
    MemoryStats m = memory_stats();
    std::printf("peak memory in tensors while training: %.1f MiB (data set included); "
                "allocator cache hits %.1f%%\n\n", double(m.peak_bytes_in_use) / (1 << 20),
                100.0 * double(m.cache_hits) / double(std::max<uint64_t>(m.allocations, 1)));
  }
  std::printf("test_accuracy %.4f\n", evaluate(o.mode, *model, test_set));
  return 0;
}
