// baton: the command-line program. `baton train ...` trains on Fashion-MNIST; `baton
// graph ...` shows graphs; `baton run ...` runs an ONNX model and `baton info ...`
// describes one; `baton optimize ...` writes one as its plan runs it. Whatever goes wrong
// ends in one line on standard error, `baton <command>: <message>`, and a non-zero exit: 2
// for a bad command line (checked in full before any work starts), 1 for a failure while
// working.
#include <exception>
#include <iostream>
#include <string>

#include "cli_parse.h"

int train_main(const TrainOptions& options);
int graph_main(const GraphOptions& options);
int run_main(const RunOptions& options);
int info_main(const InfoOptions& options);
int optimize_main(const OptimizeOptions& options);

namespace {

int report(const std::string& command, const char* message, int status) {
  std::cout.flush();
  std::cerr << "baton" << (command.empty() ? "" : " ") << command << ": " << message << "\n";
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << top_level_usage();
    return 2;
  }
  std::string command;  // known once the command line is parsed
  try {
    const ParsedCommand parsed = parse_command_line(argc, argv);
    if (!parsed.help.empty()) {
      std::cout << parsed.help;
      return 0;
    }
    command = parsed.command;
    check_paths(parsed);
    if (command == "train") return train_main(parsed.train);
    if (command == "run") return run_main(parsed.run);
    if (command == "info") return info_main(parsed.info);
    if (command == "optimize") return optimize_main(parsed.optimize);
    return graph_main(parsed.graph);
  } catch (const UsageError& e) {
    return report(e.command(), e.what(), 2);
  } catch (const std::bad_alloc&) {
    return report(command, "out of memory", 1);
  } catch (const std::exception& e) {
    return report(command, e.what(), 1);
  } catch (...) {
    return report(command, "unexpected error (not a std::exception)", 1);
  }
}
