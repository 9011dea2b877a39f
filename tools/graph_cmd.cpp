// `baton graph`: shows a model's graph (traced with a symbolic batch) or a graph saved in
// the text form, as text, Graphviz DOT, or SVG rendered by Graphviz's `dot`.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <baton/baton.h>

namespace {

struct GraphOptions {
  std::string file;            // a graph in the text form, or "" for --model
  std::string model = "mlp";
  bool train = false;          // the training step (forward, backward, update), not the forward
  std::string format = "text"; // text | dot | svg
  std::string output;          // "" = stdout (not for svg)
};

void usage(std::ostream& os) {
  os << "usage: baton graph [FILE] [options]\n\n"
        "Prints the graph of a model (or of FILE, a graph in baton's text form).\n\n"
        "  --model cnn|mlp|resnet18   the model to trace with a symbolic batch (default mlp)\n"
        "  --train                    the whole training step (forward, backward, SGD update)\n"
        "  --format text|dot|svg      text form, Graphviz DOT, or SVG through Graphviz's dot\n"
        "  -o, --output FILE          where to write (default: standard output; svg needs it)\n";
}

[[noreturn]] void bad_usage(const std::string& message) {
  throw baton::ValueError("graph", message, baton::SourceLoc::current());
}

GraphOptions parse(const std::vector<std::string>& args) {
  GraphOptions o;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&]() -> const std::string& {
      if (i + 1 >= args.size()) bad_usage(a + " needs a value");
      return args[++i];
    };
    if (a == "--model") o.model = value();
    else if (a == "--train") o.train = true;
    else if (a == "--format") o.format = value();
    else if (a == "-o" || a == "--output") o.output = value();
    else if (!a.empty() && a[0] != '-' && o.file.empty()) o.file = a;
    else bad_usage("unknown option " + a);
  }
  if (o.format != "text" && o.format != "dot" && o.format != "svg")
    bad_usage("--format expects text|dot|svg, got '" + o.format + "'");
  if (o.format == "svg" && o.output.empty()) bad_usage("--format svg needs -o FILE");
  return o;
}

std::shared_ptr<baton::nn::Module> make_model(const std::string& name, baton::Shape& input) {
  using namespace baton;
  if (name == "mlp") return input = {784}, nn::mnist_mlp();
  if (name == "cnn") return input = {1, 28, 28}, nn::mnist_cnn();
  if (name == "resnet18") return input = {1, 28, 28}, nn::resnet18(10, 1);
  bad_usage("--model expects cnn|mlp|resnet18, got '" + name + "'");
}

// The model's forward (or training step) on placeholders x[batch,...] and y[batch].
baton::Graph trace_model(const GraphOptions& o) {
  using namespace baton;
  Shape input;
  auto model = make_model(o.model, input);
  Graph g(o.model);
  std::vector<SymDim> dims{"batch"};
  for (int64_t d : input) dims.emplace_back(d);
  Tensor x = g.placeholder(f32, dims, "x");
  Tensor logits = model->forward(x);
  g.name_inputs(model->named_parameters(), o.model + ".");
  if (!o.train) {
    g.set_outputs({logits});
    return g;
  }
  Tensor y = g.placeholder(i64, {"batch"}, "y");
  optim::SGD opt(model->parameters(), {.lr = 0.1, .momentum = 0.9});
  Tensor loss = cross_entropy(logits, y);
  loss.backward();
  opt.step();
  opt.zero_grad();
  g.set_outputs({loss});
  return g;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw baton::IOError("graph", "cannot read " + path, baton::SourceLoc::current());
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Writes through a temporary file and a rename, so a failure leaves no half-written file.
void write_atomically(const std::string& path, const std::string& content) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary);
    out << content;
    if (!out.flush()) {
      std::filesystem::remove(tmp);
      throw baton::IOError("graph", "cannot write " + path, baton::SourceLoc::current());
    }
  }
  std::filesystem::rename(tmp, path);
}

// DOT -> SVG through Graphviz's `dot` (Debian package graphviz).
void render_svg(const std::string& dot, const std::string& path) {
  const std::string dot_file = path + ".dot.tmp", svg_tmp = path + ".tmp";
  write_atomically(dot_file, dot);
  const std::string command = "dot -Tsvg -o '" + svg_tmp + "' '" + dot_file + "'";
  const int status = std::system(command.c_str());
  std::filesystem::remove(dot_file);
  if (status != 0) {
    std::filesystem::remove(svg_tmp);
    throw baton::RuntimeError("graph", "Graphviz's dot failed (is the graphviz package installed?)",
                              baton::SourceLoc::current());
  }
  std::filesystem::rename(svg_tmp, path);
}

}  // namespace

int graph_main(const std::vector<std::string>& args) {
  for (const std::string& a : args)
    if (a == "--help" || a == "-h") return usage(std::cout), 0;
  const GraphOptions o = parse(args);
  baton::Graph g = o.file.empty() ? trace_model(o) : baton::Graph::from_text(read_file(o.file));
  if (o.format == "svg") {
    render_svg(g.to_dot(), o.output);
    return 0;
  }
  const std::string content = o.format == "dot" ? g.to_dot() : g.to_text();
  if (o.output.empty()) std::cout << content;
  else write_atomically(o.output, content);
  return 0;
}
