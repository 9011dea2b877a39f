// Fuzz target: the IDX reader (baton::data::read_idx), which reads plain and gzip files
// alike through zlib. The corpus holds both kinds.
//
// Expected: baton::Error. Findings: any other exception, a crash or sanitizer report.
#include <exception>
#include <string>

#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  baton::fuzz::init_once();
  static baton::fuzz::MemFile file("data.idx");
  try {
    file.write(data, size);
    baton::fuzz::touch(baton::data::read_idx(file.path()));
  } catch (const baton::Error& e) {
    // Expected: a corrupt, truncated or oversized file.
    baton::fuzz::note(std::string("baton::Error: ") + e.what());
  } catch (const std::exception& e) {
    baton::fuzz::finding(std::string("an exception that is not a baton::Error: ") + e.what());
  }
  return 0;
}
