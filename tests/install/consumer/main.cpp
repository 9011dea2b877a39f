// A user's program, built against an installed baton.
#include <baton/baton.h>

int main() {
  baton::Tensor x = baton::tensor({1.0f, 2.0f});
  baton::Tensor w = baton::tensor({0.5f, 0.5f}).requires_grad_();
  (x * w).sum().backward();
  std::vector<float> g = w.grad().to_vector<float>();
  std::cout << w.grad() << "\n";
  return g == std::vector<float>{1.0f, 2.0f} ? 0 : 1;
}
