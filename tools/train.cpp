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
#include <baton/onnx.h>
#include <baton/optim.h>

#include "cli_parse.h"
#include "modes.h"
#include "progress.h"

using namespace baton;

namespace {

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

// `o` comes from parse_command_line and check_paths: every value is in range.
// The model in eval mode as an ONNX graph of one input ([batch] + an example's dims), its
// initializers named after the parameters.
void export_onnx(nn::Module& model, const Tensor& example, const std::string& path) {
  model.eval();
  Graph g("model");
  std::vector<SymDim> dims{"batch"};
  for (int64_t d = 1; d < example.dim(); ++d) dims.emplace_back(example.size(d));
  Tensor x = g.placeholder(example.dtype(), dims, "input");
  Tensor y = model.forward(x);
  g.name_inputs(model.named_parameters());
  g.name_inputs(model.named_buffers());
  g.set_outputs({y});
  onnx::save(g, path);
  std::printf("exported the model to %s (input %s)\n", path.c_str(), str(x.dtype(), x.shape()).c_str());
}

int train_main(const TrainOptions& o) {
  if (o.threads > 0) set_num_threads(o.threads);
  if (o.detect_anomaly) detect_anomaly(true);
  manual_seed(o.seed);
  auto train_set = data::FashionMNIST::load(o.data, /*train=*/true);
  auto test_set = data::FashionMNIST::load(o.data, /*train=*/false);
  if (o.limit > 0) train_set = std::make_shared<data::TensorDataset>(train_set->head(o.limit));
  auto model = make_model(o.model);
  auto opt = make_optimizer(o, *model);
  data::DataLoader loader(train_set, {.batch_size = o.batch, .shuffle = true, .seed = o.seed});
  data::Batch example = train_set->get({0});
  ModeFunction train_step = make_train_step(o.mode, *model, *opt, example.input, example.target);
  std::optional<Profiler> profiler;
  if (!o.profile.empty()) {
    profiler.emplace();
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
  if (profiler) {
    profiler->stop();
    profiler->write_chrome_trace(o.profile);
    std::printf("\ntime per op (training, inclusive; Chrome trace in %s):\n%s", o.profile.c_str(),
                profiler->table().c_str());
    MemoryStats m = memory_stats();
    std::printf("peak memory in tensors while training: %.1f MiB (data set included); "
                "allocator cache hits %.1f%%\n\n", double(m.peak_bytes_in_use) / (1 << 20),
                100.0 * double(m.cache_hits) / double(std::max<uint64_t>(m.allocations, 1)));
  }
  const double accuracy = evaluate(o.mode, *model, test_set);
  if (!o.export_onnx.empty()) export_onnx(*model, example.input, o.export_onnx);
  std::printf("test_accuracy %.4f\n", accuracy);
  return 0;
}
