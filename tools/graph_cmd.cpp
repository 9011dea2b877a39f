// `baton graph`: shows a model's graph (traced with a symbolic batch), an ONNX model's, or a
// graph saved in the text form, as text, Graphviz DOT, or SVG rendered by Graphviz's `dot`; with
// --optimized, the graph its plan runs (fused steps drawn as groups in DOT and SVG).
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <baton/baton.h>
#include <baton/onnx.h>

#include "cli_parse.h"

namespace {

[[noreturn]] void bad_usage(const std::string& message) {
  throw baton::ValueError("graph", message, baton::SourceLoc::current());
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
  if (o.optimized && !o.train) model->eval();  // inference: batch norm folds
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

// FILE: an ONNX model (by its .onnx suffix; its initializers are the graph's constants) or a
// graph in the text form.
baton::Graph read_graph(const std::string& file) {
  if (std::filesystem::path(file).extension() == ".onnx") return baton::onnx::load(file).graph();
  return baton::Graph::from_text(read_file(file));
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

// `text` as one shell word, whatever it holds (quotes included).
std::string shell_quoted(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// DOT -> SVG through Graphviz's `dot` (Debian package graphviz).
void render_svg(const std::string& dot, const std::string& output) {
  const std::string path = output.starts_with('-') ? "./" + output : output;  // not an option of dot
  const std::string dot_file = path + ".dot.tmp", svg_tmp = path + ".tmp";
  write_atomically(dot_file, dot);
  const std::string command = "dot -Tsvg -o " + shell_quoted(svg_tmp) + " " + shell_quoted(dot_file);
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

// `o` comes from parse_command_line and check_paths.
int graph_main(const GraphOptions& o) {
  baton::Graph g = o.file.empty() ? trace_model(o) : read_graph(o.file);
  if (o.optimized) g = g.optimized(baton::OptLevel::O2, /*freeze=*/o.file.empty() && !o.train);
  if (o.format == "svg") {
    render_svg(g.to_dot(), o.output);
    return 0;
  }
  const std::string content = o.format == "dot" ? g.to_dot() : g.to_text();
  if (o.output.empty()) std::cout << content;
  else write_atomically(o.output, content);
  return 0;
}
