// Fuzz target: the command line's parser (parse_command_line in tools/cli_parse.h), which
// has no side effects. The input is split on NUL and newline bytes into arguments after
// the program name, so corpus files are readable: one argument per line.
//
// Expected: UsageError (a baton::Error). Findings: any other exception, a crash or
// sanitizer report.
#include <exception>
#include <string>
#include <vector>

#include "cli_parse.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 4096) return 0;
  std::vector<std::string> args;
  std::string cur;
  for (size_t i = 0; i < size; ++i) {
    char ch = char(data[i]);
    if (ch == '\0' || ch == '\n') {
      args.push_back(cur);
      cur.clear();
    } else {
      cur += ch;
    }
  }
  if (!cur.empty()) args.push_back(cur);
  std::vector<const char*> argv{"baton"};
  for (const std::string& a : args) argv.push_back(a.c_str());
  argv.push_back(nullptr);
  try {
    ParsedCommand parsed = parse_command_line(int(argv.size() - 1), argv.data());
    baton::fuzz::note("parsed: command '" + parsed.command + "'");
  } catch (const baton::Error& e) {
    // Expected: a bad command line.
    baton::fuzz::note(std::string("baton::Error: ") + e.what());
  } catch (const std::exception& e) {
    baton::fuzz::finding(std::string("an exception that is not a baton::Error: ") + e.what());
  }
  return 0;
}
