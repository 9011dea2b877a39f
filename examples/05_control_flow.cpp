// Control flow that works eagerly and in graphs. A C++ `if` on a tensor's value cannot
// be traced (the value is unknown while tracing), so use cond() and while_loop(): eagerly
// they just run, and in a graph they record If and Loop nodes with subgraphs.
#include <baton/baton.h>
using namespace baton;

// relu(x) if x sums to a positive number, else sigmoid(x).
Tensor relu_or_sigmoid(Tensor x) {
  return cond(x.sum() > 0, [&] { return relu(x); }, [&] { return sigmoid(x); });
}

// Doubles x until its sum exceeds 100; returns the result and the number of doublings.
std::vector<Tensor> double_until_100(Tensor x) {
  return while_loop([](const std::vector<Tensor>& v) { return le(v[0].sum(), 100); },
                    [](const std::vector<Tensor>& v) {
                      return std::vector<Tensor>{v[0] * 2.0f, v[1] + 1};
                    },
                    {x, scalar_tensor<int64_t>(0)});
}

int main() {
  Tensor pos = tensor({1.0f, -2.0f, 3.0f});   // sum 2 > 0: takes the relu branch
  Tensor neg = tensor({-1.0f, -2.0f, 0.5f});  // sum -2.5: takes the sigmoid branch

  std::cout << "eager:    pos -> " << relu_or_sigmoid(pos) << "\n";
  std::cout << "eager:    neg -> " << relu_or_sigmoid(neg) << "\n";

  auto f = compile(relu_or_sigmoid);
  std::cout << "compiled: pos -> " << f(pos) << "\n";
  std::cout << "compiled: neg -> " << f(neg) << "   (same plan, other branch)\n";
  std::cout << "traces: " << f.num_traces() << "\n";
  std::cout << "\nthe If node, with its then and else subgraphs:\n" << f.graph() << "\n";

  std::vector<Tensor> eager = double_until_100(tensor({1.0f, 2.0f}));
  std::cout << "eager while_loop:    " << eager[0] << " after " << eager[1].item<int64_t>()
            << " doublings\n";
  auto g = compile(double_until_100);
  std::vector<Tensor> out = g(tensor({1.0f, 2.0f}));
  std::cout << "compiled while_loop: " << out[0] << " after " << out[1].item<int64_t>()
            << " doublings\n";
  std::cout << "\nthe Loop node, with its body subgraph:\n" << g.graph() << "\n";
  return out[1].item<int64_t>() == 6 ? 0 : 1;
}
