// Static graphs (define-and-run, like TensorFlow 1): first build a graph of symbolic
// tensors, then run it as many times as you like with a Session, feeding the inputs.
#include <baton/baton.h>
using namespace baton;

int main() {
  Graph g("add");
  // Placeholders are the graph's inputs: a dtype and a shape ({} is a scalar), no data yet.
  Tensor a = g.placeholder(f32, {}, "a");
  Tensor b = g.placeholder(f32, {}, "b");
  // The same operators as in eager mode; with symbolic inputs they add graph nodes.
  Tensor c = a + b;
  std::cout << "c is symbolic: " << std::boolalpha << c.is_symbolic() << "\n";
  std::cout << "the graph (text form, with the source line of each node):\n" << g << "\n";

  // A Session runs the graph: fetch c, feeding a = 1 and b = 2.
  Session sess(g);
  std::vector<Tensor> out = sess.run({c}, {{a, scalar_tensor(1.0f)}, {b, scalar_tensor(2.0f)}});
  std::cout << "a + b with a = 1, b = 2: " << out[0] << "\n";
  // The graph is built once and reused: run it again with other feeds.
  out = sess.run({c}, {{a, scalar_tensor(10.0f)}, {b, scalar_tensor(-4.0f)}});
  std::cout << "a + b with a = 10, b = -4: " << out[0] << "\n";
  return out[0].item<float>() == 6.0f ? 0 : 1;
}
