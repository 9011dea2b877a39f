// The `baton` command line, parsed without side effects: parse_command_line reads argv
// and returns what to do, or throws UsageError. It prints nothing, touches no file and
// starts no training, so a fuzzer can call it on any argv (tools/cli_parse.cpp has no
// dependency but baton's headers and CLI11). check_paths is the separate, read-only
// file-system check of the output flags, run before any work starts.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <baton/data.h>
#include <baton/error.h>
#include <baton/graph.h>

#include "modes.h"

// The range of --threads; baton::set_num_threads accepts the same.
inline constexpr int kMinThreads = 1;
inline constexpr int kMaxThreads = 1024;

struct TrainOptions {
  std::string model = "cnn";  // cnn | mlp | resnet18
  int epochs = 2;
  int64_t batch = 64;
  double lr = 0.01;
  std::string optimizer = "sgd";  // sgd | adam
  uint64_t seed = 0;
  int threads = 0;  // 0: not given, all cores
  std::string save;
  std::string export_onnx;  // the trained model as ONNX, in eval mode ("": none)
  std::string data = baton::data::kFashionMnistDir;
  int64_t limit = 0;  // train on the first N examples only (0: not given, all)
  std::string profile;  // the Chrome trace's path ("": no profile)
  bool detect_anomaly = false;
  Mode mode = Mode::Eager;
};

struct GraphOptions {
  std::string file;             // a graph in the text form, or "" for --model
  std::string model = "mlp";    // cnn | mlp | resnet18
  bool train = false;           // the training step (forward, backward, update), not the forward
  bool optimized = false;       // after the O2 passes (a --model forward: eval mode, frozen)
  std::string format = "text";  // text | dot | svg
  std::string output;           // "" = stdout (not for svg)
};

struct RunOptions {
  std::string model;  // the .onnx file
  std::vector<std::pair<std::string, std::string>> inputs;  // --input NAME=FILE.npy: (NAME, FILE.npy)
  std::string test_data;   // a test_data_set_* folder, or a folder holding test_data_set_0 ("": none)
  std::string output_dir;  // write each output there as NAME.npy ("": write nothing)
  int repeat = 0;          // timed runs after a warm-up run (0: not given, run once)
  int threads = 0;         // 0: not given, all cores
  baton::OptLevel level = baton::OptLevel::O2;
  std::string profile;     // the Chrome trace's path ("": no profile)
  double of_scale = 0;     // --of-scale: judge outputs by scale (onnx::Tolerance::of_scale); 0: per element
};

struct InfoOptions {
  std::string model;  // the .onnx file
};

struct OptimizeOptions {
  std::string model;   // the .onnx file
  std::string output;  // -o: the optimized model
  bool report = false;  // print what each pass did and the memory plan (of a run on zeros)
  baton::OptLevel level = baton::OptLevel::O2;
};

struct ParsedCommand {
  std::string command;  // "train", "graph", "run", "info" or "optimize"; "" when only help was asked for
  std::string help;     // non-empty: print this on standard output and exit 0
  TrainOptions train;   // when command == "train"
  GraphOptions graph;   // when command == "graph"
  RunOptions run;       // when command == "run"
  InfoOptions info;     // when command == "info"
  OptimizeOptions optimize;  // when command == "optimize"
};

// A bad command line. what() is one line without the "baton <command>: " prefix, which
// command() supplies ("" for the top level: print "baton: ...").
class UsageError : public baton::ValueError {
 public:
  UsageError(std::string command, const std::string& message)
      : baton::ValueError(message), command_(std::move(command)) {}
  const std::string& command() const { return command_; }

 private:
  std::string command_;
};

// argv[0] is the program name. Throws UsageError for any bad input, including unknown
// commands and options, missing or malformed values, values out of range.
ParsedCommand parse_command_line(int argc, const char* const* argv);
// The same, on the arguments after the program name.
ParsedCommand parse_command_line(const std::vector<std::string>& args);

// Output flags (train --save and --profile, graph -o, run --profile) must name a file in an
// existing, writable folder, and not a folder; run --output-dir an existing, writable folder.
// The files read (run and info's MODEL, run --input's files) must be readable files, and
// run --test-data a folder. Throws UsageError. Reads the file system, writes nothing.
void check_paths(const ParsedCommand& parsed);

// The top-level usage text (commands and what they do).
std::string top_level_usage();
