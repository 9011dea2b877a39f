// A training loop in eager mode: fit y = 3x - 1 (plus noise) with one Linear layer and
// Adam, then save a checkpoint and load it into a fresh model.
#include <baton/baton.h>

#include <cstdio>
#include <filesystem>

using namespace baton;

int main() {
  manual_seed(0);
  Tensor x = rand({256, 1}) * 4.0 - 2.0;
  Tensor y = x * 3.0 - 1.0 + randn({256, 1}) * 0.1;

  auto model = std::make_shared<nn::Linear>(1, 1);
  optim::Adam opt(model->parameters(), {.lr = 0.1});
  for (int step = 1; step <= 200; ++step) {
    opt.zero_grad();
    Tensor loss = mse_loss(model->forward(x), y);
    loss.backward();
    opt.step();
    if (step % 50 == 0) std::printf("step %3d  loss %.5f\n", step, loss.item<double>());
  }
  std::printf("learned y = %.3f x + %.3f   (true: 3x - 1)\n", model->weight.item<double>(),
              model->bias.item<double>());

  std::string path = (std::filesystem::temp_directory_path() / "baton_regression.ckpt").string();
  io::save_checkpoint(path, *model, &opt);
  auto restored = std::make_shared<nn::Linear>(1, 1);
  io::load_checkpoint(path, *restored);
  std::filesystem::remove(path);
  std::printf("restored from checkpoint: weight %.3f bias %.3f\n", restored->weight.item<double>(),
              restored->bias.item<double>());
  double w = restored->weight.item<double>(), b = restored->bias.item<double>();
  return std::abs(w - 3) < 0.05 && std::abs(b + 1) < 0.05 ? 0 : 1;
}
