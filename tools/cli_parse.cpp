// The `baton` command line through CLI11: one App per command, every value checked for
// its type and range while parsing, every CLI11 error turned into a one-line UsageError.
#include "cli_parse.h"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <system_error>
#include <type_traits>

namespace {

const std::vector<std::string> kCommands = {"train", "graph", "run", "info", "optimize"};
const std::vector<std::string> kModels = {"cnn", "mlp", "resnet18"};

// Bounds well past any sensible run, so that no value overflows what uses it.
constexpr int kMaxEpochs = 1'000'000;
constexpr int64_t kMaxBatch = int64_t(1) << 24;
constexpr int64_t kMaxLimit = int64_t(1) << 40;
constexpr int kMaxRepeat = 1'000'000;

// A decimal integer: digits after an optional sign ('-' only where `negative` may be
// given, to be range-checked; CLI11 would read "-1" as 2^64-1 for an unsigned option).
// CLI11 would also read "010" as octal and "0x10" as hex; this rejects the latter and
// strips leading zeros from the former.
CLI::Validator decimal_integer(bool negative) {
  return CLI::Validator(
      [negative](std::string& text) -> std::string {
        const char* expected = negative ? "expects an integer, got '" : "expects an integer >= 0, got '";
        size_t i = text.size() > 0 && ((negative && text[0] == '-') || text[0] == '+') ? 1 : 0;
        const size_t first_digit = i;
        for (; i < text.size(); ++i)
          if (text[i] < '0' || text[i] > '9') return expected + text + "'";
        if (first_digit == text.size()) return expected + text + "'";
        size_t zeros = first_digit;
        while (zeros + 1 < text.size() && text[zeros] == '0') ++zeros;
        text = text.substr(0, first_digit) + text.substr(zeros);
        // CLI11 would take strtoull's saturated 2^64-1 for anything larger.
        errno = 0;
        if (text[0] == '-') (void)std::strtoll(text.c_str(), nullptr, 10);
        else (void)std::strtoull(text.c_str(), nullptr, 10);
        if (errno == ERANGE) return "Value " + text + " is out of range";
        return "";
      },
      "");
}

// A number x with 0 < x < infinity.
CLI::Validator positive_finite() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        double v = 0;
        if (!CLI::detail::lexical_cast(text, v)) return "expects a number, got '" + text + "'";
        if (!std::isfinite(v) || !(v > 0)) return "expects a finite number > 0, got '" + text + "'";
        return "";
      },
      "");
}

CLI::Validator non_empty() {
  return CLI::Validator([](std::string& text) -> std::string { return text.empty() ? "expects a path, got ''" : ""; },
                        "");
}

// NAME=FILE: a name and a path, both non-empty (the first '=' ends the name).
CLI::Validator name_equals_path() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        const size_t eq = text.find('=');
        if (eq == std::string::npos || eq == 0 || eq + 1 == text.size())
          return "expects NAME=FILE.npy, got '" + text + "'";
        return "";
      },
      "");
}

// A member of `names`, described in the help as `a|b|c` by the option's type name.
CLI::Validator one_of(const std::vector<std::string>& names) { return CLI::IsMember(names).description(""); }

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : "|") + n;
  return out;
}

template <class T>
CLI::Option* integer_option(CLI::App& app, const std::string& name, T& value, T lo, T hi, const std::string& help) {
  return app.add_option(name, value, help)
      ->type_name("N")
      ->check(decimal_integer(std::is_signed_v<T>))
      ->check(CLI::Range(lo, hi).description(""));
}

void add_train(CLI::App& app, TrainOptions& o, std::string& mode) {
  CLI::App* t = app.add_subcommand("train", "train a model on Fashion-MNIST and report the test accuracy");
  t->footer(
      "Trains a model on Fashion-MNIST (Debian's dataset-fashion-mnist) and evaluates it on the\n"
      "10,000 test images. The last line printed is `test_accuracy 0.XXXX`.");
  t->add_option("--model", o.model,
                "the network (default cnn: two 3x3 convs with max pooling and two linear\n"
                "layers; mlp: 784-512-256-10; resnet18: torchvision's ResNet-18 on\n"
                "1-channel images)")
      ->type_name(joined(kModels))
      ->check(one_of(kModels));
  integer_option(*t, "--epochs", o.epochs, 1, kMaxEpochs, "passes over the training set (default 2)");
  integer_option(*t, "--batch", o.batch, int64_t(1), kMaxBatch, "examples per step (default 64)");
  t->add_option("--lr", o.lr, "learning rate (default 0.01; try 0.001 with adam)")
      ->type_name("X")
      ->check(positive_finite());
  t->add_option("--optimizer", o.optimizer, "SGD with momentum 0.9, or Adam (default sgd)")
      ->type_name("sgd|adam")
      ->check(one_of({"sgd", "adam"}));
  integer_option(*t, "--seed", o.seed, uint64_t(0), std::numeric_limits<uint64_t>::max(),
                 "seeds initialisation and shuffling (default 0)");
  integer_option(*t, "--threads", o.threads, kMinThreads, kMaxThreads,
                 "intra-op threads, 1 to 1024 (default: all cores)");
  t->add_option("--save", o.save,
                "write a checkpoint (model + optimizer) after each epoch; the folder\n"
                "must exist and be writable")
      ->type_name("PATH")
      ->check(non_empty());
  t->add_option("--export", o.export_onnx,
                "write the trained model (eval mode) as ONNX for `baton run`; the folder\n"
                "must exist and be writable")
      ->type_name("PATH")
      ->check(non_empty());
  t->add_option("--data", o.data, "the IDX files' folder (default /usr/share/datasets/fashion-mnist)")
      ->type_name("DIR")
      ->check(non_empty());
  integer_option(*t, "--limit", o.limit, int64_t(1), kMaxLimit,
                 "train on the first N training images only (quick runs)");
  t->add_option("--mode", mode,
                "how each step runs: op by op (default), as a static graph built once\n"
                "and run by a Session, or compile()d (traced on the first step, then\n"
                "replayed)")
      ->type_name(kModeNames)
      ->check(one_of({"eager", "graph", "compiled"}));
  t->add_option("--profile", o.profile,
                "write a Chrome trace of every op call and planned step to FILE (open it\n"
                "in Perfetto or chrome://tracing) and print where the time went (per op)\n"
                "and peak memory; the folder must exist and be writable")
      ->type_name("FILE")
      ->check(non_empty());
  t->add_flag("--detect-anomaly", o.detect_anomaly,
              "stop at the first NaN or infinity any op makes, forward or backward,\n"
              "naming the op and where it was called (slower)");
}

void add_graph(CLI::App& app, GraphOptions& o) {
  CLI::App* g = app.add_subcommand("graph", "print a model's graph (or a saved one) as text, DOT or SVG");
  g->footer("Prints the graph of a model (or of FILE: an ONNX model, or a graph in baton's text form).");
  g->add_option("file", o.file, "an ONNX model (.onnx) or a graph in baton's text form (default: trace --model)")
      ->type_name("FILE")
      ->check(non_empty());
  g->add_option("--model", o.model, "the model to trace with a symbolic batch (default mlp)")
      ->type_name(joined(kModels))
      ->check(one_of(kModels));
  g->add_flag("--train", o.train, "the whole training step (forward, backward, SGD update)");
  g->add_flag("--optimized", o.optimized,
              "the graph as a plan runs it at O2, fused steps drawn as groups (a --model forward in eval "
              "mode with its parameters frozen)");
  g->add_option("--format", o.format, "text form, Graphviz DOT, or SVG through Graphviz's dot")
      ->type_name("text|dot|svg")
      ->check(one_of({"text", "dot", "svg"}));
  g->add_option("-o,--output", o.output, "where to write (default: standard output; svg needs it)")
      ->type_name("FILE")
      ->check(non_empty());
}

void add_run(CLI::App& app, RunOptions& o, std::vector<std::string>& inputs, std::string& level) {
  CLI::App* r = app.add_subcommand("run", "run an ONNX model on .npy inputs or ONNX test data");
  r->footer(
      "Runs MODEL.onnx once (with --repeat, a warm-up run and N timed runs) and prints one line\n"
      "per output, `output NAME dtype[shape]`. With --test-data the outputs are compared with\n"
      "the folder's output_K.pb: `max_abs_err X`, then `ok`, or `mismatch` and exit status 1.");
  r->add_option("model", o.model, "the ONNX model file")->type_name("MODEL.onnx")->check(non_empty());
  CLI::Option* input = r->add_option("--input", inputs, "the model's input NAME, read from FILE.npy (once per input)");
  input->type_name("NAME=FILE.npy")
      ->allow_extra_args(false)  // one value per --input: `--input x=a.npy MODEL.onnx` leaves MODEL alone
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->check(name_equals_path());
  CLI::Option* test_data = r->add_option("--test-data", o.test_data,
                "the inputs from DIR's input_K.pb in order, the outputs compared with\n"
                "its output_K.pb (DIR: a test_data_set_* folder, or a test's folder\n"
                "holding test_data_set_0)")
      ->type_name("DIR")
      ->check(non_empty())
      ->excludes(input);
  r->add_option("--of-scale", o.of_scale,
                "with --test-data, judge each float output by its largest error\n"
                "relative to its largest magnitude (whole models: 1e-4; a deep model's\n"
                "near-zero outputs carry its rounding) instead of element by element\n"
                "as ONNX's backend runner does (rtol 1e-3, atol 1e-7)")
      ->type_name("X")
      ->check(CLI::PositiveNumber)
      ->needs(test_data);
  r->add_option("--output-dir", o.output_dir,
                "write each output as DIR/NAME.npy (characters of NAME other than\n"
                "A-Za-z0-9_.- replaced by _); the folder must exist and be writable")
      ->type_name("DIR")
      ->check(non_empty());
  integer_option(*r, "--repeat", o.repeat, 1, kMaxRepeat,
                 "after a warm-up run, run N more times and print `median_ms X`");
  integer_option(*r, "--threads", o.threads, kMinThreads, kMaxThreads,
                 "intra-op threads, 1 to 1024 (default: all cores)");
  r->add_option("-O", level, "optimization level of the graph's passes (default -O2)")
      ->type_name("0|1|2")
      ->check(one_of({"0", "1", "2"}));
  r->add_option("--profile", o.profile,
                "write a Chrome trace of the runs to FILE (open it in Perfetto or\n"
                "chrome://tracing) and print where the time went (per op); the folder\n"
                "must exist and be writable")
      ->type_name("FILE")
      ->check(non_empty());
}

void add_info(CLI::App& app, InfoOptions& o) {
  CLI::App* i = app.add_subcommand("info", "describe an ONNX model: inputs, outputs, opset, ops, parameters");
  i->footer("Prints the model's inputs and outputs (dtype and shape), producer, opset, node counts\n"
            "by op type and parameters.");
  i->add_option("model", o.model, "the ONNX model file")->type_name("MODEL.onnx")->check(non_empty());
}

void add_optimize(CLI::App& app, OptimizeOptions& o, std::string& level) {
  CLI::App* p = app.add_subcommand("optimize", "write an ONNX model as baton's plan runs it (fused steps in ai.baton)");
  p->footer("Runs the optimizer's passes on MODEL.onnx and writes the result: folded constants as\n"
            "initializers, fused steps as ops of the domain ai.baton (which baton reads back).");
  p->add_option("model", o.model, "the ONNX model file")->type_name("MODEL.onnx")->check(non_empty());
  p->add_option("-o,--output", o.output, "the optimized model to write")->type_name("OUT.onnx")->check(non_empty());
  p->add_flag("--report", o.report,
              "print what each pass did and the memory plan (of one run on zeros, symbolic dims 1)");
  p->add_option("-O", level, "optimization level of the graph's passes (default -O2)")
      ->type_name("0|1|2")
      ->check(one_of({"0", "1", "2"}));
}

// CLI11 reports an unexpected argument as "The following argument was not expected: X";
// ours names the first one.
std::string unexpected(const std::vector<std::string>& extras) {
  if (extras.empty()) return "unexpected argument";
  const std::string& a = extras.front();
  if (a.size() > 1 && a[0] == '-') return "unknown option " + a.substr(0, a.find('='));
  return "unexpected argument '" + a + "'";
}

// One line: CLI11 messages are one line already, but values may hold newlines.
std::string one_line(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  return s;
}

// --input's NAME=FILE values as (NAME, FILE), each NAME once.
std::vector<std::pair<std::string, std::string>> split_inputs(const std::vector<std::string>& inputs) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const std::string& text : inputs) {
    const size_t eq = text.find('=');
    std::string name = text.substr(0, eq);
    for (const auto& [other, file] : out)
      if (other == name) throw UsageError("run", "--input: " + one_line(name) + " given twice");
    out.emplace_back(std::move(name), text.substr(eq + 1));
  }
  return out;
}

// A command that reads MODEL.onnx, given none.
void require_model(const std::string& command, const std::string& model) {
  if (model.empty()) throw UsageError(command, "no model given: baton " + command + " MODEL.onnx");
}

}  // namespace

static baton::OptLevel opt_level(const std::string& level) {
  return level == "0" ? baton::OptLevel::O0 : level == "1" ? baton::OptLevel::O1 : baton::OptLevel::O2;
}

std::string top_level_usage() {
  return "usage: baton <command> [options]\n\n"
         "commands:\n"
         "  train    train a model on Fashion-MNIST and report the test accuracy\n"
         "  graph    print a model's graph (or a saved one) as text, DOT or SVG\n"
         "  run      run an ONNX model on .npy inputs or ONNX test data\n"
         "  info     describe an ONNX model: inputs, outputs, opset, ops, parameters\n"
         "  optimize write an ONNX model as baton's plan runs it (fused steps in ai.baton)\n\n"
         "`baton <command> --help` describes each command's options.\n";
}

ParsedCommand parse_command_line(const std::vector<std::string>& args) {
  ParsedCommand out;
  // The command is the first argument; anything else there is a top-level error.
  std::string command;
  if (!args.empty() && std::find(kCommands.begin(), kCommands.end(), args[0]) != kCommands.end())
    command = args[0];
  if (args.empty()) throw UsageError("", "no command given; `baton --help` lists the commands");
  if (command.empty()) {
    if (args[0] == "--help" || args[0] == "-h") {
      out.help = top_level_usage();
      return out;
    }
    if (!args[0].empty() && args[0][0] == '-') throw UsageError("", "unknown option " + one_line(args[0]));
    throw UsageError("", "unknown command '" + one_line(args[0]) + "' (the commands are train, graph, run, info and optimize)");
  }

  CLI::App app("baton", "baton");
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);  // --x 1 --x 2: 2
  app.allow_extras(true);  // reported below, as "unknown option --x"
  app.require_subcommand(1);
  TrainOptions train;
  GraphOptions graph;
  RunOptions run;
  InfoOptions info;
  OptimizeOptions optimize;
  std::string mode = "eager", level = "2";
  std::vector<std::string> inputs;
  add_train(app, train, mode);
  add_graph(app, graph);
  add_run(app, run, inputs, level);
  add_info(app, info);
  add_optimize(app, optimize, level);
  for (CLI::App* sub : app.get_subcommands({})) sub->allow_extras(true);

  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11's order
  try {
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    out.help = app.help();  // the command's, as "Usage: baton <command> [OPTIONS]"
    return out;
  } catch (const CLI::CallForAllHelp&) {
    out.help = app.help();
    return out;
  } catch (const CLI::ParseError& e) {
    throw UsageError(command, one_line(e.what()));
  } catch (const std::exception& e) {  // CLI11 should throw nothing else; still one line
    throw UsageError(command, one_line(e.what()));
  }
  std::vector<std::string> extras = app.get_subcommand(command)->remaining();
  for (const std::string& a : app.remaining()) extras.push_back(a);
  if (!extras.empty()) throw UsageError(command, one_line(unexpected(extras)));

  out.command = command;
  if (command == "train") {
    train.mode = parse_mode(mode).value_or(Mode::Eager);
    out.train = train;
  } else if (command == "graph") {
    if (graph.format == "svg" && graph.output.empty()) throw UsageError(command, "--format svg needs -o FILE");
    out.graph = graph;
  } else if (command == "run") {
    require_model(command, run.model);
    run.inputs = split_inputs(inputs);
    run.level = opt_level(level);
    out.run = run;
  } else if (command == "optimize") {
    require_model(command, optimize.model);
    if (optimize.output.empty()) throw UsageError(command, "needs -o OUT.onnx");
    optimize.level = opt_level(level);
    out.optimize = optimize;
  } else {
    require_model(command, info.model);
    out.info = info;
  }
  return out;
}

ParsedCommand parse_command_line(int argc, const char* const* argv) {
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) args.emplace_back(argv[i] ? argv[i] : "");
  return parse_command_line(args);
}

namespace {

namespace fs = std::filesystem;

// `flag`'s PATH will be written (through a temporary file beside it and a rename): its
// folder must exist and be writable, and PATH must not be a folder.
void check_output(const std::string& command, const std::string& flag, const std::string& path) {
  std::error_code ec;
  const fs::path p(path);
  if (fs::is_directory(p, ec)) throw UsageError(command, flag + ": '" + path + "' is a folder, not a file");
  fs::path folder = p.parent_path();
  if (folder.empty()) folder = ".";
  if (!fs::exists(folder, ec))
    throw UsageError(command, flag + ": cannot write '" + path + "': the folder '" + folder.string() +
                                  "' does not exist");
  if (!fs::is_directory(folder, ec))
    throw UsageError(command, flag + ": cannot write '" + path + "': '" + folder.string() + "' is not a folder");
  if (::access(folder.c_str(), W_OK | X_OK) != 0)
    throw UsageError(command, flag + ": cannot write '" + path + "': the folder '" + folder.string() +
                                  "' is not writable");
}

// `path` will be read: it must exist and be a readable file. `what` names it ("the model ").
void check_input(const std::string& command, const std::string& what, const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) throw UsageError(command, what + "'" + path + "' does not exist");
  if (fs::is_directory(path, ec)) throw UsageError(command, what + "'" + path + "' is a folder, not a file");
  if (::access(path.c_str(), R_OK) != 0) throw UsageError(command, what + "'" + path + "' is not readable");
}

// `flag`'s DIR will hold new files: an existing, writable folder.
void check_output_folder(const std::string& command, const std::string& flag, const std::string& path) {
  std::error_code ec;
  if (!fs::is_directory(path, ec)) throw UsageError(command, flag + ": the folder '" + path + "' does not exist");
  if (::access(path.c_str(), W_OK | X_OK) != 0)
    throw UsageError(command, flag + ": the folder '" + path + "' is not writable");
}

void check_run_paths(const RunOptions& o) {
  check_input("run", "the model ", o.model);
  for (const auto& [name, file] : o.inputs) check_input("run", "--input " + one_line(name) + ": ", file);
  std::error_code ec;
  if (!o.test_data.empty() && !fs::is_directory(o.test_data, ec))
    throw UsageError("run", "--test-data: the folder '" + o.test_data + "' does not exist");
  if (!o.output_dir.empty()) check_output_folder("run", "--output-dir", o.output_dir);
  if (!o.profile.empty()) check_output("run", "--profile", o.profile);
}

}  // namespace

void check_paths(const ParsedCommand& parsed) {
  if (parsed.command == "train") {
    const TrainOptions& o = parsed.train;
    if (!o.save.empty()) check_output("train", "--save", o.save);
    if (!o.export_onnx.empty()) check_output("train", "--export", o.export_onnx);
    if (!o.profile.empty()) check_output("train", "--profile", o.profile);
    std::error_code ec;
    if (!fs::is_directory(o.data, ec))
      throw UsageError("train", "--data: the folder '" + o.data + "' does not exist");
  } else if (parsed.command == "graph") {
    if (!parsed.graph.output.empty()) check_output("graph", "-o", parsed.graph.output);
  } else if (parsed.command == "run") {
    check_run_paths(parsed.run);
  } else if (parsed.command == "info") {
    check_input("info", "the model ", parsed.info.model);
  } else if (parsed.command == "optimize") {
    check_input("optimize", "the model ", parsed.optimize.model);
    check_output("optimize", "-o", parsed.optimize.output);
  }
}
