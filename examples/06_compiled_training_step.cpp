// A whole training step (forward, loss, backward, SGD update) compiled into one graph.
// The model and optimizer are ordinary eager objects: the compiled step reads their
// tensors by reference and writes the updated parameters back after each call.
#include <baton/baton.h>

#include <cstdio>

using namespace baton;

int main() {
  manual_seed(0);
  auto model = nn::sequential({std::make_shared<nn::Linear>(4, 16), nn::ReLU(),
                               std::make_shared<nn::Linear>(16, 1)});
  optim::SGD opt(model->parameters(), {.lr = 0.05, .momentum = 0.5});
  Tensor true_w = tensor<float>({{1}, {-2}, {0.5f}, {3}});
  auto batch = [&](int64_t n) {  // inputs and targets of y = x . true_w
    Tensor x = randn({n, 4});
    return std::pair{x, matmul(x, true_w)};
  };

  // Exactly the eager training step; compile() traces it once and replays it.
  auto train_step = [&](Tensor x, Tensor y) {
    opt.zero_grad();
    Tensor loss = mse_loss(model->forward(x), y);
    loss.backward();
    opt.step();
    return loss;
  };
  auto step = compile(train_step);
  for (int i = 1; i <= 30; ++i) {
    auto [x, y] = batch(32);
    Tensor loss = step(x, y);
    if (i % 10 == 0) std::printf("step %2d  loss %.4f\n", i, loss.item<double>());
  }
  std::printf("traces after 30 steps: %zu\n", step.num_traces());

  // A batch of another size is another input shape: compile() traces the step again.
  auto [x16, y16] = batch(16);
  step(x16, y16);
  std::printf("batch 16: traces %zu, because:\n  %s\n", step.num_traces(), step.explain().c_str());

  // explain() names every input dim that changed (x and y). Declaring dim 0 of both
  // inputs dynamic (one symbol, "batch") gives one plan for every batch size.
  auto dynamic_step = compile(train_step, {.dynamic_dims = {{0, 0, "batch"}, {1, 0, "batch"}}});
  for (int64_t n : {32, 16, 8}) {
    auto [x, y] = batch(n);
    Tensor loss = dynamic_step(x, y);
    std::printf("dynamic, batch %2lld: loss %.4f, traces %zu\n", (long long)n, loss.item<double>(),
                dynamic_step.num_traces());
  }
  // Forward, backward and the four sgd_update nodes, all in one graph; %c are the
  // model's parameters and the optimizer's state, bound by reference.
  // Parameters enter the graph as inputs bound to the model's tensors; name them for reading.
  Graph graph = dynamic_step.graph();
  graph.name_inputs(model->named_parameters(), "model.");
  graph.name_inputs(opt.state_dict(), "opt.");  // momentum buffers and step counters
  std::cout << "\nthe dynamic training step's graph:\n" << graph;
  return dynamic_step.num_traces() == 1 ? 0 : 1;
}
