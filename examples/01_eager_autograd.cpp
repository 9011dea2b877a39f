// Eager mode: every op runs when called, and autograd records it.
// y = x * w records a MulBackward; z = y.sum() a SumBackward; z.backward() walks them.
#include <baton/baton.h>
using namespace baton;

int main() {
  Tensor x = tensor({1.0f, 2.0f});
  Tensor w = tensor({0.5f, 0.5f}).requires_grad_();
  Tensor y = x * w;
  Tensor z = y.sum();
  std::cout << "y = " << y << "\n";
  std::cout << "z = " << z << "\n";
  z.backward();
  std::cout << "dz/dw = " << w.grad() << "   (equals x)\n";
}
