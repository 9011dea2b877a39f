// baton-conformance: runs the ONNX project's backend tests (Debian libonnx-testdata, or any
// folder in their layout: model.onnx plus test_data_set_*/input_*.pb and output_*.pb).
//
//   baton-conformance /usr/share/libonnx-testdata/data/node/test_abs
//   baton-conformance --expected expected_passes.txt --skip skipped.txt DATA/node DATA/simple
//
// One line per test (PASS, FAIL with the reason, SKIP with the reason), then
// "N passed, M failed, K skipped". --of-scale X judges each output by its largest error
// relative to its largest magnitude (whole models). With --expected, exits 1 when a listed test does not
// pass (a regression) and names the tests that pass but are not listed.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "baton/baton.h"
#include "baton/onnx.h"

namespace fs = std::filesystem;
using baton::DType;
using baton::Tensor;

namespace {

using baton::onnx::Tolerance;

// Test folders under each argument: the folder itself when it holds model.onnx, else its
// subfolders that do (one or two levels: a suite, or a folder of suites).
void collect_tests(const fs::path& dir, int depth, std::vector<fs::path>& out) {
  if (fs::exists(dir / "model.onnx")) {
    out.push_back(dir);
    return;
  }
  if (depth == 0 || !fs::is_directory(dir)) return;
  std::vector<fs::path> children;
  for (const fs::directory_entry& e : fs::directory_iterator(dir))
    if (e.is_directory()) children.push_back(e.path());
  std::sort(children.begin(), children.end());
  for (const fs::path& c : children) collect_tests(c, depth - 1, out);
}

// "suite/test": the test's folder and its parent.
std::string test_name(const fs::path& dir) {
  return (dir.parent_path().filename() / dir.filename()).string();
}

// Runs one test folder; empty on success, else why not.
std::string run_test(const fs::path& dir, const Tolerance& tol) {
  baton::onnx::Model model = baton::onnx::load((dir / "model.onnx").string());
  std::vector<fs::path> sets;
  for (const fs::directory_entry& e : fs::directory_iterator(dir))
    if (e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0) sets.push_back(e.path());
  std::sort(sets.begin(), sets.end());
  if (sets.empty()) return "no test_data_set_* folder";
  for (const fs::path& set : sets) {
    baton::onnx::TestDataSet data = baton::onnx::load_test_data_set(set.string(), model);
    std::vector<baton::onnx::Value> outputs = model.run_values(data.inputs);
    if (outputs.size() != data.outputs.size())
      return baton::str(outputs.size(), " outputs, expected ", data.outputs.size());
    for (size_t i = 0; i < outputs.size(); ++i)
      if (baton::onnx::Comparison c = baton::onnx::compare(outputs[i], data.outputs[i], tol); !c.ok())
        return baton::str(set.filename().string(), " output ", i, ": ", c.problem);
  }
  return "";
}

// "name reason..." lines; '#' starts a comment.
std::map<std::string, std::string> read_list(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw baton::IOError("baton-conformance", baton::str(path, ": cannot open"), baton::SourceLoc::current());
  std::map<std::string, std::string> list;
  for (std::string line; std::getline(in, line);) {
    line = line.substr(0, line.find('#'));
    std::istringstream words(line);
    std::string name, reason;
    if (!(words >> name)) continue;
    std::getline(words, reason);
    list[name] = reason.empty() ? "" : reason.substr(reason.find_first_not_of(' '));
  }
  return list;
}

}  // namespace

int main(int argc, char** argv) {
  const char* usage = "usage: baton-conformance [--expected FILE] [--skip FILE] [--of-scale X] DIR...\n";
  std::vector<std::string> dirs;
  std::string expected_path, skip_path;
  Tolerance tolerance;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if ((arg == "--expected" || arg == "--skip") && i + 1 < argc) (arg == "--expected" ? expected_path : skip_path) = argv[++i];
    else if (arg == "--of-scale" && i + 1 < argc) tolerance.of_scale = std::atof(argv[++i]);
    else if (!arg.empty() && arg[0] == '-') {
      std::cerr << usage;
      return 2;
    } else dirs.push_back(arg);
  }
  if (dirs.empty()) {
    std::cerr << usage;
    return 2;
  }
  try {
    std::map<std::string, std::string> expected, skipped;
    if (!expected_path.empty()) expected = read_list(expected_path);
    if (!skip_path.empty()) skipped = read_list(skip_path);
    std::vector<fs::path> tests;
    for (const std::string& d : dirs) collect_tests(d, 2, tests);
    int passed = 0, failed = 0, skips = 0;
    std::vector<std::string> regressions, unlisted;
    for (const fs::path& dir : tests) {
      const std::string name = test_name(dir);
      if (auto s = skipped.find(name); s != skipped.end()) {
        std::cout << "SKIP " << name << ": " << s->second << "\n";
        ++skips;
        continue;
      }
      std::string why;
      try {
        why = run_test(dir, tolerance);
      } catch (const std::exception& e) {
        why = e.what();
      }
      std::replace(why.begin(), why.end(), '\n', ' ');
      if (why.empty()) {
        std::cout << "PASS " << name << "\n";
        ++passed;
        if (!expected_path.empty() && !expected.count(name)) unlisted.push_back(name);
      } else {
        std::cout << "FAIL " << name << ": " << why << "\n";
        ++failed;
        if (expected.count(name)) regressions.push_back(name);
      }
      std::cout.flush();
    }
    for (const std::string& n : unlisted) std::cout << "passes but is not in " << expected_path << ": " << n << "\n";
    for (const std::string& n : regressions) std::cout << "REGRESSION (listed as passing): " << n << "\n";
    std::cout << passed << " passed, " << failed << " failed, " << skips << " skipped\n";
    return regressions.empty() ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "baton-conformance: " << e.what() << "\n";
    return 1;
  }
}
