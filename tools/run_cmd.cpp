// `baton run`: runs an ONNX model on inputs from .npy files (--input NAME=FILE.npy) or from
// an ONNX test folder (--test-data DIR: input_K.pb in order), prints each output's dtype
// and shape, and with --test-data compares the outputs with output_K.pb. `baton info`
// prints what a model file declares. Inputs that do not fit the model (a name it lacks, a
// missing one, a wrong dtype or shape) are a bad command line, found before any run.
#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include <baton/baton.h>
#include <baton/npy.h>
#include <baton/onnx.h>

#include "cli_parse.h"

using baton::DType, baton::Profiler, baton::Shape, baton::SourceLoc, baton::Tensor, baton::str;
namespace fs = std::filesystem;
namespace npy = baton::npy;
namespace onnx = baton::onnx;

namespace {

// One line (names from the model or the command line may hold newlines).
[[noreturn]] void bad_usage(std::string message) {
  std::replace(message.begin(), message.end(), '\n', ' ');
  std::replace(message.begin(), message.end(), '\r', ' ');
  throw UsageError("run", message);
}

// "f32[3,4,5]"
std::string type_text(DType dtype, const Shape& shape) { return str(dtype, shape); }
std::string type_text(const Tensor& t) { return type_text(t.dtype(), t.shape()); }

std::string names(const std::vector<onnx::ValueInfo>& values) {
  std::string out;
  for (const onnx::ValueInfo& v : values) out += (out.empty() ? "" : ", ") + v.name;
  return out.empty() ? "none" : out;
}

// --test-data DIR: a test_data_set_* folder, or a test's folder holding test_data_set_0.
fs::path data_set_folder(const std::string& dir) {
  std::error_code ec;
  if (fs::exists(fs::path(dir) / "input_0.pb", ec) || fs::exists(fs::path(dir) / "output_0.pb", ec)) return dir;
  if (fs::is_directory(fs::path(dir) / "test_data_set_0", ec)) return fs::path(dir) / "test_data_set_0";
  bad_usage("--test-data: '" + dir + "' holds neither input_0.pb nor test_data_set_0");
}

// A .npy or .pb file meant for the model's input `v` must have its dtype and rank, and its
// size in every dim the model fixes (a symbolic dim takes any size).
void check_fits(const onnx::ValueInfo& v, const Tensor& t, const std::string& source) {
  if (!v.accepts(t))
    bad_usage(source + " is " + type_text(t) + ", the model's input " + v.name + " is " + type_text(v.dtype, v.shape));
}

// The model's inputs, in its order, from --input NAME=FILE.npy.
std::vector<Tensor> inputs_from_npy(const onnx::Model& m, const RunOptions& o) {
  const std::vector<onnx::ValueInfo>& wanted = m.inputs();
  std::vector<const std::string*> files(wanted.size(), nullptr);
  for (const auto& [name, file] : o.inputs) {
    auto it = std::find_if(wanted.begin(), wanted.end(), [&](const onnx::ValueInfo& v) { return v.name == name; });
    if (it == wanted.end())
      bad_usage("--input " + name + ": the model has no input " + name + " (its inputs: " + names(wanted) + ")");
    files[size_t(it - wanted.begin())] = &file;
  }
  std::string missing;
  for (size_t i = 0; i < wanted.size(); ++i)
    if (!files[i])
      missing += (missing.empty() ? "" : ", ") + wanted[i].name + " " + type_text(wanted[i].dtype, wanted[i].shape);
  if (!missing.empty()) bad_usage(o.model + " needs --input or --test-data for its input(s) " + missing);
  std::vector<Tensor> out;
  for (size_t i = 0; i < wanted.size(); ++i) {
    out.push_back(npy::load(*files[i]));
    check_fits(wanted[i], out.back(), "--input " + wanted[i].name + ": " + *files[i]);
  }
  return out;
}

// The tensors of a test data set (`baton run` feeds and compares tensors only: a sequence
// is a ValueError naming it).
std::vector<Tensor> tensors(const std::vector<onnx::Value>& values) {
  std::vector<Tensor> out;
  for (const onnx::Value& v : values) out.push_back(v.tensor());
  return out;
}

// The model's inputs from a test data set's input_0.pb, input_1.pb, ...
std::vector<Tensor> inputs_from_test_data(const onnx::Model& m, const fs::path& data_set) {
  const std::vector<onnx::ValueInfo>& wanted = m.inputs();
  std::vector<Tensor> given = tensors(onnx::load_test_data_set(data_set.string()).inputs);
  if (given.size() < wanted.size())
    bad_usage(str("--test-data: ", data_set.string(), " has no input_", given.size(), ".pb for the model's input ",
                  wanted[given.size()].name));
  if (given.size() > wanted.size())
    bad_usage(str("--test-data: ", data_set.string(), " has ", given.size(), " input_K.pb files, the model ",
                  wanted.size(), " input(s): ", names(wanted)));
  for (size_t i = 0; i < wanted.size(); ++i)
    check_fits(wanted[i], given[i], str("--test-data: ", (data_set / str("input_", i, ".pb")).string()));
  return given;
}

std::vector<Tensor> model_inputs(const onnx::Model& m, const RunOptions& o) {
  if (!o.test_data.empty()) return inputs_from_test_data(m, data_set_folder(o.test_data));
  return inputs_from_npy(m, o);
}

// The median of the wall times of `repeat` runs, in milliseconds.
double median_ms(onnx::Model& m, const std::vector<Tensor>& inputs, int repeat) {
  std::vector<double> ms;
  for (int i = 0; i < repeat; ++i) {
    const auto start = std::chrono::steady_clock::now();
    m.run(inputs);
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(ms.begin(), ms.end());
  const size_t n = ms.size();
  return n % 2 ? ms[n / 2] : (ms[n / 2 - 1] + ms[n / 2]) / 2;
}

// An output's name as a file name: characters other than [A-Za-z0-9_.-] become '_'.
std::string file_name(const std::string& name) {
  std::string out = name;
  for (char& c : out)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.' && c != '-') c = '_';
  return (out.empty() || out == "." || out == ".." ? "_" + out : out) + ".npy";
}

void write_outputs(const onnx::Model& m, const std::vector<Tensor>& outputs, const std::string& dir) {
  std::vector<std::string> written;
  for (size_t i = 0; i < outputs.size(); ++i) {
    const std::string file = file_name(m.outputs()[i].name);
    if (std::find(written.begin(), written.end(), file) != written.end())
      throw baton::IOError("run", "two outputs would both be written to " + file + " in " + dir, SourceLoc::current());
    npy::save((fs::path(dir) / file).string(), outputs[i]);
    written.push_back(file);
  }
}

// How far the outputs are from a test data set's: the largest |got - expected| over all
// outputs, and the first problem found ("" if none), judged as the ONNX suites judge (or,
// with of_scale, as whole models are judged).
struct Comparison {
  double max_abs_err = 0;
  std::string problem;
};

Comparison compare(const onnx::Model& m, const std::vector<Tensor>& outputs, const fs::path& data_set,
                   const onnx::Tolerance& tolerance) {
  const std::vector<Tensor> expected = tensors(onnx::load_test_data_set(data_set.string()).outputs);
  Comparison c;
  if (expected.size() != outputs.size())
    c.problem = str("the model has ", outputs.size(), " output(s), ", data_set.string(), " ", expected.size(),
                    " output_K.pb file(s)");
  for (size_t i = 0; i < std::min(expected.size(), outputs.size()); ++i) {
    const onnx::Comparison one = onnx::compare(outputs[i], expected[i], tolerance);
    c.max_abs_err = std::max(c.max_abs_err, one.max_abs_err);
    if (!one.ok() && c.problem.empty())
      c.problem = str("output ", m.outputs()[i].name, " ", one.problem, " (", (data_set / str("output_", i, ".pb")).string(), ")");
  }
  return c;
}

void print_profile(const Profiler& profiler, const RunOptions& o) {
  profiler.write_chrome_trace(o.profile);
  std::printf("\ntime per op (%d run(s), inclusive; Chrome trace in %s):\n%s", o.repeat + 1, o.profile.c_str(),
              profiler.table().c_str());
  const baton::MemoryStats s = baton::memory_stats();
  std::printf("peak memory in tensors while running: %.1f MiB\n\n", double(s.peak_bytes_in_use) / (1 << 20));
}

}  // namespace

// `o` comes from parse_command_line and check_paths: every value is in range, every file
// named exists.
int run_main(const RunOptions& o) {
  if (o.threads > 0) baton::set_num_threads(o.threads);
  onnx::Model m = onnx::load(o.model, {.level = o.level});
  const std::vector<Tensor> inputs = model_inputs(m, o);
  std::optional<Profiler> profiler;
  if (!o.profile.empty()) {
    profiler.emplace();
    baton::reset_peak_memory_stats();  // the runs' peak, not the loading's
  }
  const std::vector<Tensor> outputs = m.run(inputs);
  const double median = o.repeat > 0 ? median_ms(m, inputs, o.repeat) : 0;
  if (profiler) profiler->stop();
  for (size_t i = 0; i < outputs.size(); ++i)
    std::printf("output %s %s\n", m.outputs()[i].name.c_str(), type_text(outputs[i]).c_str());
  if (!o.output_dir.empty()) write_outputs(m, outputs, o.output_dir);
  if (o.repeat > 0) std::printf("median_ms %.3f\n", median);
  if (profiler) print_profile(*profiler, o);
  if (o.test_data.empty()) return 0;
  const Comparison c = compare(m, outputs, data_set_folder(o.test_data), {.of_scale = o.of_scale});
  std::printf("max_abs_err %g\n%s\n", c.max_abs_err, c.problem.empty() ? "ok" : "mismatch");
  if (!c.problem.empty()) throw baton::RuntimeError("run", c.problem, SourceLoc::current());
  return 0;
}

int info_main(const InfoOptions& o) {
  std::cout << onnx::load(o.model).info();
  return 0;
}
