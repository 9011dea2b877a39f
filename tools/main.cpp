// baton: the command-line program. `baton train ...` trains on Fashion-MNIST; `baton
// graph ...` shows graphs.
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "baton/error.h"

int train_main(const std::vector<std::string>& args);
int graph_main(const std::vector<std::string>& args);

namespace {

void usage(std::ostream& os) {
  os << "usage: baton <command> [options]\n\n"
        "commands:\n"
        "  train    train a model on Fashion-MNIST and report the test accuracy\n"
        "  graph    print a model's graph (or a saved one) as text, DOT or SVG\n\n"
        "`baton <command> --help` describes each command's options.\n";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    usage(argc < 2 ? std::cerr : std::cout);
    return argc < 2 ? 2 : 0;
  }
  std::string command = argv[1];
  std::vector<std::string> args(argv + 2, argv + argc);
  try {
    if (command == "train") return train_main(args);
    if (command == "graph") return graph_main(args);
    std::cerr << "baton: unknown command '" << command << "'\n\n";
    usage(std::cerr);
    return 2;
  } catch (const baton::Error& e) {
    std::cerr << "baton " << command << ": " << e.what() << "\n";
    return 1;
  }
}
