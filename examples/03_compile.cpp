// compile(): write an ordinary C++ function of tensors; the first call traces it into a
// static graph, and later calls with the same input shapes replay that graph without
// running the C++ body again.
#include <baton/baton.h>
using namespace baton;

int main() {
  int body_runs = 0;  // counts how often the C++ body below actually executes
  auto compute = compile([&](Tensor x) {
    ++body_runs;
    return (x + 1.0f) * 2.0f;
  });

  Tensor x = tensor({1.0f, 2.0f, 3.0f});
  std::cout << "compute(x)     = " << compute(x) << "   (first call: traced)\n";
  std::cout << "compute(x * 2) = " << compute(x * 2.0f) << "   (replayed)\n";
  std::cout << "compute(x - 1) = " << compute(x - 1.0f) << "   (replayed)\n";
  std::cout << "the C++ body ran " << body_runs << " time(s) for 3 calls\n";
  std::cout << "why it traced: " << compute.explain() << "\n";

  // The traced graph: the x placeholder, an add and a mul, each with its source line.
  std::cout << "\nthe compiled graph:\n" << compute.graph() << "\n";
  return body_runs == 1 ? 0 : 1;
}
